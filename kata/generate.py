"""Make ``exercises/`` from ``solutions/`` by stripping the marked solution regions.

In a solution file::

    # BEGIN SOLUTION          lines the student must write: removed from the exercise
    # END SOLUTION
    # BEGIN SKELETON          commented-out lines that stand in for the solution in the
    # # hi = N                exercise: uncommented there, so the skeleton still runs
    # END SKELETON

Everything else is copied as is, TODO comments included. ``python -m kata.generate`` writes the
exercises; ``--check`` only reports which committed exercises differ from what it would write.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from kata.catalogue import ALL_EXERCISES, EXERCISES, SOLUTIONS

MARKER = re.compile(r"^\s*# (BEGIN|END) (SOLUTION|SKELETON)\s*$")


class MarkerError(ValueError):
    pass


def strip(source: str, name: str = "<solution>") -> str:
    """The exercise text for one solution file."""
    out: list[str] = []
    region: str | None = None
    for lineno, line in enumerate(source.splitlines(keepends=True), 1):
        marker = MARKER.match(line)
        if marker:
            edge, kind = marker.groups()
            if edge == "BEGIN" and region is None:
                region = kind
            elif edge == "END" and region == kind:
                region = None
            else:
                raise MarkerError(f"{name}:{lineno}: unexpected '# {edge} {kind}'")
            continue
        if region == "SOLUTION":
            continue
        if region == "SKELETON":
            indent = line[: len(line) - len(line.lstrip())]
            body = line.lstrip()
            if body.rstrip("\r\n") in ("", "#"):  # a blank line inside the skeleton
                out.append("\n")
                continue
            if not body.startswith("# "):
                raise MarkerError(f"{name}:{lineno}: skeleton lines must be commented out")
            line = indent + body[2:]
        out.append(line)
    if region is not None:
        raise MarkerError(f"{name}: '# BEGIN {region}' is never closed")
    text = "".join(out)
    ast.parse(text, filename=name)  # a skeleton must at least be valid Python
    return text


def expected() -> dict[Path, str]:
    """Every exercise path and the text the generator makes for it."""
    return {
        EXERCISES / ex.filename: strip((SOLUTIONS / ex.filename).read_text(), ex.filename)
        for ex in ALL_EXERCISES
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kata.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="report drift, write nothing")
    args = parser.parse_args(argv)
    stale = [p for p, text in expected().items() if not p.exists() or p.read_text() != text]
    if args.check:
        for path in stale:
            print(
                f"{path.relative_to(EXERCISES.parent)} differs from its solution; run `nox -s generate`"
            )
        return 1 if stale else 0
    EXERCISES.mkdir(exist_ok=True)
    for path, text in expected().items():
        path.write_text(text)
        print(f"wrote {path.relative_to(EXERCISES.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
