"""Make ``exercises/`` from ``solutions/`` by stripping the marked solution regions
(``kata.regions`` says how they are marked).

``python -m kata.authoring.generate`` writes the exercises and ``kata/skeletons.json``, the
grader's frozen copy of every skeleton with its regions (it does not depend on ``solutions/``
staying the kata's own, and ships in the student handout); ``--check`` only reports what would
change.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import asdict
from pathlib import Path

from kata.catalogue import ALL_EXERCISES, EXERCISES, ROOT, SOLUTIONS
from kata.regions import SKELETONS, skeleton


def frozen() -> dict[str, dict]:
    """What ``kata/skeletons.json`` holds: every skeleton, its regions and comment blocks."""
    found = {}
    for ex in ALL_EXERCISES:
        sk = skeleton((SOLUTIONS / ex.filename).read_text(), ex.filename)
        found[ex.stem] = {
            "sha256": hashlib.sha256(sk.text.encode()).hexdigest(),
            "regions": [asdict(r) for r in sk.regions],
            "comments": [list(c) for c in sk.comments],
            "text": sk.text,
        }
    return found


def expected() -> dict[Path, str]:
    """Every generated path and the text the generator makes for it."""
    skeletons = frozen()
    files = {EXERCISES / f"{stem}.py": entry["text"] for stem, entry in skeletons.items()}
    files[SKELETONS] = json.dumps(skeletons, indent=1) + "\n"
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kata.authoring.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="report drift, write nothing")
    args = parser.parse_args(argv)
    files = expected()
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} differs from the solutions; run `nox -s generate`")
        return 1 if stale else 0
    EXERCISES.mkdir(exist_ok=True)
    for path in stale:  # only what changed: an unchanged file said "wrote" alarms its author
        path.write_text(files[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
