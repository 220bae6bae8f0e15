"""Gradescope entry point, called by the autograder bundle's ``run_autograder``.

    python -m grader.autograder [--root /autograder]

Finds the student's files under ROOT/submission (at the top level or in one subfolder, as
uploads from a zip often are), grades them, and writes ROOT/results/results.json in Gradescope's
format (plus the full score report beside it). If grading itself cannot run, it still writes a
results.json that says why, so the student sees a reason instead of a blank failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from grader.run import discover
from kata.catalogue import EXERCISE_LIST


def find_submission(folder: Path) -> Path:
    """The folder (the submission itself or one below it) holding the most exercise files."""
    return discover.exercise_folder(folder) or folder


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m grader.autograder")
    p.add_argument(
        "--root", type=Path, default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    )
    p.add_argument("--device", choices=("auto", "cuda", "interpreter"), default="auto")
    args = p.parse_args(argv)
    results = args.root / "results"
    results.mkdir(parents=True, exist_ok=True)
    target = find_submission(args.root / "submission")
    found = discover.locate(target, results / "unzipped")
    if found.folder is None:  # the student's to fix: say what the upload holds, in their words
        names = ", ".join(ex.filename for ex in EXERCISE_LIST)
        renames = "".join(discover.rename_hint(target, ex, below=True) for ex in EXERCISE_LIST)
        refused = "".join(f"; {p}" for p in found.problems)
        print(f"grader: {found.why_not(target)}", file=sys.stderr)
        upload = {
            "score": 0,
            "output": f"No exercise file was found in your upload, which holds {found.holds}"
            f"{refused}{renames}. Upload your exercise files ({names}), named exactly so, at the "
            "top of your upload or in one folder, and submit again.",
            "tests": [],
        }
        (results / "results.json").write_text(json.dumps(upload, indent=2))
        return 0

    from grader import cli

    code = cli.main(
        [
            "--target",
            str(target),
            "--report",
            str(results / "score.json"),
            "--gradescope",
            str(results / "results.json"),
            "--device",
            args.device,
            "--no-advice",
            "--no-html",
        ]
    )
    if code != 0 or not (results / "results.json").exists():
        failure = {
            "score": 0,
            "output": "The autograder could not grade this submission (see the log above). "
            "Please tell your instructor.",
            "tests": [],
        }
        (results / "results.json").write_text(json.dumps(failure, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
