"""What ``nox -s grade`` prints: a line per check as exercises finish, then the totals."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from grader.report import ExerciseResult, Report

WIDTH = 80
MARKS = {"passed": "PASS", "failed": "FAIL", "error": "ERR "}
COLOURS = {"passed": "32", "failed": "31", "error": "33"}


class Printer:
    def __init__(self, quiet: bool = False, stream=sys.stdout):
        self.quiet, self.stream = quiet, stream
        self.colour = stream.isatty() and not os.environ.get("NO_COLOR")

    def _paint(self, text: str, status: str) -> str:
        return f"\033[{COLOURS[status]}m{text}\033[0m" if self.colour else text

    def _print(self, line: str = "") -> None:
        if not self.quiet:
            print(line, file=self.stream, flush=True)

    def start(self, target: Path, device: str, exercises) -> None:
        self._print(f"Grading {len(exercises)} exercise(s) in {target} on {device}")

    def exercise_done(self, ex: ExerciseResult) -> None:
        self._print()
        self._print(f"{ex.id}  {ex.score}/{ex.max_score}  ({ex.duration_s:.1f} s)")
        if ex.error:  # nothing could be judged: say why once
            for line in textwrap.wrap(ex.error, WIDTH - 4):
                self._print(f"    {line}")
        for c in ex.checks:
            mark = self._paint(MARKS[c.status], c.status)
            trap = f"  [{c.trap}]" if c.trap else ""
            self._print(f"  {mark} {c.id:<38} {c.points:>2}/{c.max_points:<2}{trap}")
            if c.status != "passed" and c.message and c.message != ex.error:
                for line in textwrap.wrap(c.message, WIDTH - 9):
                    self._print(f"         {line}")

    def finish(self, report: Report, path: Path, gradescope: Path | None) -> None:
        traps = ", ".join(report.traps) or "none"
        if not self.quiet:
            self._print()
            self._print(f"Score: {report.score}/{report.max_score}   traps found: {traps}")
            self._print(f"Report: {path}" + (f"   Gradescope: {gradescope}" if gradescope else ""))
        else:
            print(f"{report.score}/{report.max_score}", file=self.stream)
