"""``nox -s run -- 02``: run exercise files' worked examples (no argument: the chapter's).

``--solutions`` runs the reference kernels instead (a full checkout only). Exits 1 when an
example does not behave as the chapter says, 2 for an unknown exercise.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from kata import commands
from kata.catalogue import EXERCISE_LIST, EXERCISES, SOLUTIONS, find_or_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=commands.prog("run", "kata.student.run"), description=__doc__.split("\n")[0]
    )
    parser.add_argument("exercises", nargs="*", help="exercise numbers or stems")
    parser.add_argument("--solutions", action="store_true", help="run the reference kernels")
    args = parser.parse_args(argv)
    folder = SOLUTIONS if args.solutions else EXERCISES
    if not folder.is_dir():
        print(
            "this copy has no solutions/ (a student handout): run your exercises instead",
            file=sys.stderr,
        )
        return 2
    chosen = [find_or_report(name) for name in args.exercises] or list(EXERCISE_LIST)
    if None in chosen:
        return 2
    worst = 0
    for ex in chosen:
        worst = max(worst, subprocess.run([sys.executable, str(folder / ex.filename)]).returncode)
    return worst


if __name__ == "__main__":
    sys.exit(main())
