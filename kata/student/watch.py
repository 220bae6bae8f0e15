"""``nox -s watch [-- 02]``: regrade an exercise every time its file is saved.

Without an argument it starts with the first exercise not yet at full marks and moves on to the
next one when that reaches full marks, like rustlings' watch mode. With one, it stops when that
exercise reaches full marks and says which comes next. Stop with Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kata import commands
from kata.catalogue import EXERCISE_LIST, EXERCISES, ROOT, Exercise, find_or_report
from kata.student import progress

REPORT = ROOT / "reports" / "watch.json"


class CannotGrade(Exception):
    """The grader could not grade at all (it said why): watching would only repeat it."""


def grade(ex: Exercise, target: Path, extra: list[str]) -> tuple[int, int]:
    """Grade one exercise in a fresh process; returns (score, max_score)."""
    cmd = [
        sys.executable,
        "-m",
        "grader",
        ex.number,
        "--target",
        str(target),
        "--report",
        str(REPORT),
        *extra,
    ]
    if subprocess.run(cmd, cwd=ROOT, check=False).returncode == 2:
        raise CannotGrade
    try:
        data = json.loads(REPORT.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return 0, 1
    return data["score"], data["max_score"]


def first_unfinished(target: Path, extra: list[str]) -> Exercise | None:
    """Grade the chapter's exercises once, say where the student stands, and pick the first
    exercise below full marks."""
    print(
        f"Grading {', '.join(e.number for e in EXERCISE_LIST)} to find where you are ...",
        flush=True,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            "--target",
            str(target),
            "--report",
            str(REPORT),
            "--quiet",
            *extra,
        ],
        cwd=ROOT,
        check=False,
        stdout=subprocess.DEVNULL,
    )
    try:
        data = json.loads(REPORT.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return EXERCISE_LIST[0]  # the grader said why on stderr; watch the first one anyway
    scores = ", ".join(f"{e['id'][:2]} {e['score']}/{e['max_score']}" for e in data["exercises"])
    print(f"Score so far: {data['score']}/{data['max_score']} ({scores})")
    return progress.unfinished_in(data)


def _what_next() -> None:
    """After the chapter: the other tracks and the self-check questions."""
    step = progress.what_next({ex.stem for ex in EXERCISE_LIST})
    if step:
        print(step)


def _stamp(path: Path) -> float | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=commands.prog("watch", "kata.student.watch"), description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "exercise", nargs="?", help="exercise number or stem (default: first unfinished)"
    )
    parser.add_argument("--target", type=Path, default=EXERCISES)
    parser.add_argument("--device", choices=("auto", "cuda", "interpreter"))
    parser.add_argument("--max-runs", type=int, help="stop after this many gradings (for tests)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between file checks")
    args = parser.parse_args(argv)
    from kata import runtime

    # The backend once, here: its notice ("no CUDA GPU found") is printed once, not by every
    # grading, and the gradings it starts make the same choice (KATA_DEVICE, TRITON_INTERPRET).
    try:
        runtime.configure(args.device)
    except runtime.BackendError as exc:
        print(f"watch: cannot choose a backend: {exc}", file=sys.stderr)
        return 2
    extra = ["--device", args.device] if args.device else []
    # The gradings spell their "next" line as this session's command (`nox -s watch -- 03`).
    os.environ["KATA_SESSION"] = "watch"
    follow = args.exercise is None
    if args.exercise:
        ex = find_or_report(args.exercise)
        if ex is None:
            return 2
    else:
        ex = first_unfinished(args.target, extra)
    if ex is None:
        print("Every exercise is at full marks. Well done!")
        _what_next()
        return 0
    runs = 0
    try:
        while True:
            path = args.target / ex.filename
            print(f"\n=== watching {path} (Ctrl-C to stop) ===", flush=True)
            score, top = grade(ex, args.target, extra)
            runs += 1
            if args.max_runs and runs >= args.max_runs:
                return 0
            if not follow and score == top:  # done: the grader said what comes next
                return 0
            if follow and score == top:
                index = [e.stem for e in EXERCISE_LIST].index(ex.stem)
                later = [e for e in EXERCISE_LIST[index + 1 :]]
                if not later:
                    print("\nThat was the last exercise. Well done!")
                    _what_next()
                    return 0
                ex = later[0]
                print(f"\n{EXERCISE_LIST[index].stem} is done; moving on to {ex.stem}")
                continue
            stamp = _stamp(path)
            while _stamp(path) == stamp:
                time.sleep(args.interval)
    except CannotGrade:  # the grader said why
        return 2
    except KeyboardInterrupt:
        print()
        return 0


if __name__ == "__main__":
    sys.exit(main())
