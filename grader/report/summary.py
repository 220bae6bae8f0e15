"""What ``nox -s grade`` prints: each exercise's checks as it finishes, then a summary table.

Sized to the terminal (80 columns in a pipe); colour only on a terminal and never with NO_COLOR
set. Every command it suggests is spelled as the student can paste it (kata.commands).
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
import threading
import time
from pathlib import Path

from grader.judge import errors
from grader.kinds import TRAPS
from grader.report import cards
from grader.report.records import ExerciseResult, Report, edits_outside
from kata import commands, terminal
from kata.catalogue import EXERCISES, TRACKS
from kata.student import progress

WIDTH = 80  # in a pipe or file; a terminal gets its own width (kata.terminal)
MARKS = {"passed": "PASS", "failed": "FAIL", "blocked": "WAIT", "error": "ERR "}
COLOURS = {"passed": "32", "failed": "31", "blocked": "33", "error": "33"}


def compiler_words(message: str) -> str:
    """A compile error for the summary: where, and the compiler's words, whole (the case it
    came from and the plain words are said above). Any other message as it is."""
    at = message.find(errors.DOES_NOT_COMPILE)
    if at < 0:
        return message
    return message[at:].split(" In plain words: ")[0]


def ticks(limit: float | None) -> tuple[float, float]:
    """(seconds to the first "still running" line, then between lines) under a time limit
    (None: no limit): the first within 9 s, so that a hang never looks like a dead terminal,
    and several before a short limit ends."""
    if not limit:
        return 9.0, 15.0
    return min(9.0, 0.4 * limit), min(15.0, 0.4 * limit)


def waiting_for(message: str) -> str:
    """What a blocked check waits for (``TODO(dest-slot)``), from its message; the whole message
    where it names nothing."""
    found = re.match(r"cannot be judged until (.+?) works", message)
    return found.group(1) if found else message


def score_line(report: Report) -> str:
    """``Score: 75/100``, the chapter's; a track outside it says so, so that its total is never
    read as the chapter's: ``Extensions track score: 25/25 (not part of the chapter's 100)``."""
    tracks = {ex.track for ex in report.exercises}
    if len(tracks) != 1 or tracks == {"core"}:
        return f"Score: {report.score}/{report.max_score}"
    (track,) = tracks
    chapter = sum(todo.points for ex in TRACKS["core"] for todo in ex.todos)
    return (
        f"{track.capitalize()} track score: {report.score}/{report.max_score} "
        f"(not part of the chapter's {chapter})"
    )


class Printer:
    def __init__(self, quiet: bool = False, stream=sys.stdout, advice: bool = True, clock=None):
        self.quiet, self.stream, self.advice = quiet, stream, advice
        # The "still running" lines' clock: a test passes its own, to tick without waiting.
        self.clock = clock or time.monotonic
        self.colour = stream.isatty() and not os.environ.get("NO_COLOR")
        self.width = terminal.width() if stream.isatty() else WIDTH
        self._lock = threading.RLock()
        self._order: list[str] = []  # the exercises' blocks print in this order
        self._done: dict[str, ExerciseResult] = {}
        self._limits: dict[str, float | None] = {}
        self._running: dict[str, list[float]] = {}  # stem -> [start, next tick]
        self._stop = threading.Event()

    def _paint(self, text: str, status: str) -> str:
        return f"\033[{COLOURS[status]}m{text}\033[0m" if self.colour else text

    def _print(self, line: str = "") -> None:
        if not self.quiet:
            with self._lock:  # exercises finish on worker threads
                self.stream.write(line + "\n")
                self.stream.flush()

    def _wrapped(self, text: str, indent: int) -> None:
        for line in textwrap.wrap(text, self.width - indent, break_on_hyphens=False):
            self._print(" " * indent + line)

    def start(self, target: Path, device: str, exercises, limits: dict | None = None) -> None:
        """``limits``: each exercise's time limit in seconds (None: none), by stem, for the
        "still running" lines."""
        self._order = [ex.stem for ex in exercises]
        self._limits = dict(limits or {})
        self._print(f"Grading {len(exercises)} exercise(s) in {target} on {device}")
        if not self.quiet:
            threading.Thread(target=self._ticker, name="kata-progress", daemon=True).start()

    def exercise_started(self, ex) -> None:
        """Progress: graded exercises run at once; say which are under way."""
        with self._lock:
            now = self.clock()
            self._running[ex.stem] = [now, now + ticks(self._limits.get(ex.stem))[0]]
        self._print(f"  ... {ex.stem}: running its kernel on the checks' inputs")

    def _ticker(self) -> None:
        """A line for each exercise still running, now and then: a kernel that never finishes
        would otherwise leave the terminal silent until its time limit."""
        while not self._stop.wait(0.25):
            self.tick()

    def tick(self) -> None:
        """The "still running" line of each exercise whose next one is due by the clock."""
        now = self.clock()
        with self._lock:
            for stem, times in self._running.items():
                if now < times[1]:
                    continue
                limit = self._limits.get(stem)
                times[1] = now + ticks(limit)[1]
                of = f" of {limit:.0f} s" if limit else ", no time limit"
                self._print(f"  ... {stem}: still running ({now - times[0]:.0f} s{of})")

    def exercise_done(self, ex: ExerciseResult) -> None:
        """Every check of one exercise; a trap's explanation only the first time it appears.
        Blocks print in the order the exercises were given, whichever finishes first."""
        with self._lock:  # one exercise's block is never split by another's
            self._running.pop(ex.id, None)
            if ex.id not in self._order:
                self._exercise_block(ex)
                return
            self._done[ex.id] = ex
            while self._order and self._order[0] in self._done:
                self._exercise_block(self._done.pop(self._order.pop(0)))

    def _exercise_block(self, ex: ExerciseResult) -> None:
        self._print()
        self._print(f"{ex.id}  {ex.score}/{ex.max_score}  ({ex.duration_s:.1f} s)")
        said = {ex.error} if ex.error else set()
        if ex.error:  # nothing could be judged: say why once
            self._wrapped(ex.error, 4)
        explained: set[str] = set()
        waits: set[str] = set()  # what blocked checks wait for, said in full once
        # The id column is as wide as this exercise's longest id, within what the terminal allows.
        id_width = min(max((len(c.id) for c in ex.checks), default=0), max(10, self.width - 14))
        for c in ex.checks:
            mark = self._paint(MARKS[c.status], c.status)
            points = " note" if c.note else f"{c.points:>2}/{c.max_points:<2}"
            line = f"  {mark} {c.id:<{id_width}} {points}"
            trap = f"[{c.trap}]" if c.trap else ""
            if trap and 7 + id_width + 6 + 1 + len(trap) > self.width:  # too wide: its own line
                self._print(line.rstrip())
                self._print(" " * 9 + trap)
            else:
                self._print(f"{line} {trap}".rstrip())
            if c.status == "passed" or not c.message or c.message in said:
                continue
            if c.status == "blocked":  # the first check waiting on a TODO says why; the rest
                wait = waiting_for(c.message)  # are their WAIT line alone
                if wait in waits:
                    continue
                waits.add(wait)
            if c.trap and c.trap in explained:
                continue
            explained.add(c.trap or c.id)
            said.add(c.message)  # identical messages are said once per exercise
            self._wrapped(self._with_todo(ex, c), 9)
        if ex.integrity and not ex.integrity["ok"]:
            self._wrapped(f"! {edits_outside(ex)} (the report's integrity entry has the diff)", 2)
        for warning in ex.warnings:
            self._wrapped(f"! {warning}", 2)

    @staticmethod
    def revisit(ex: ExerciseResult, todo: str) -> str:
        """``TODO(rescale-acc) (line 88)``: where a failed check sends the student (as the HTML
        card does); without the line where the file has no such TODO comment."""
        line = cards.todo_line(ex.file, todo)
        return f"TODO({todo})" + (f" (line {line})" if line else "")

    def _with_todo(self, ex: ExerciseResult, c) -> str:
        """A failed or blocked check's message, saying which TODO to revisit and its line: each
        TODO the message names gets its line (a trap's own, the one a blocked check waits for),
        and a failure that names none ends with its own."""
        if c.status not in ("failed", "blocked") or not c.todo:
            return c.message
        named = dict.fromkeys(re.findall(r"TODO\(([\w-]+)\)", c.message))
        text = c.message
        for todo in named:
            text = text.replace(f"TODO({todo})", self.revisit(ex, todo), 1)
        if c.status == "failed" and c.todo not in named:
            text = f"{text.rstrip('.')}. Revisit {self.revisit(ex, c.todo)}."
        return text

    def _performance(self, report: Report) -> None:
        """The performance track's timings, separate from the score."""
        timed = [ex for ex in report.exercises if ex.performance is not None]
        if not timed:
            return
        if not any(ex.performance["timed"] for ex in timed):  # the interpreter: no points to show
            reasons = dict.fromkeys(ex.performance["reason"] for ex in timed)
            self._wrapped(f"Performance: not timed ({'; '.join(reasons)})", 0)
            return
        total = sum(ex.performance["points"] for ex in timed)
        top = sum(ex.performance["max_points"] for ex in timed)
        self._print(f"Performance: {total}/{top} points (separate from the score)")
        for ex in timed:
            perf = ex.performance
            if not perf["timed"]:
                self._wrapped(f"{ex.id[:2]} timing skipped: {perf['reason']}", 4)
                continue
            # Each shape: the kernel's time, its speedup over torch and the range of speedups
            # its timing rounds allow; then the points and the range the noise allows.
            for row in perf["shapes"]:
                spread = row.get("speedup_range")
                self._wrapped(
                    f"{ex.id[:2]} {row['shape']:<36} {row['kernel_ms']:7.3f} ms  "
                    f"x{row['speedup']:.2f}"
                    + (f" ({spread[0]:.2f}-{spread[1]:.2f})" if spread else ""),
                    4,
                )
            if perf.get("correct"):
                low, high = perf.get("points_range", (perf["points"],) * 2)
                noise = f"; {low}-{high} within the timing's spread" if low != high else ""
                self._wrapped(
                    f"{ex.id[:2]} {perf['points']}/{perf['max_points']} points at "
                    f"x{perf['geomean_speedup']:.2f} vs torch (geomean){noise}",
                    4,
                )
            if perf.get("reason"):
                self._wrapped(f"{ex.id[:2]} {perf['reason']}", 4)

    def finish(
        self, report: Report, path: Path, gradescope: Path | None, html: Path | None = None
    ) -> None:
        self._stop.set()
        if self.quiet:
            print(f"{report.score}/{report.max_score}", file=self.stream)
            return
        self._print()
        self._print("-" * self.width)
        for ex in report.exercises:
            status = "passed" if ex.score == ex.max_score else "failed" if ex.score else "error"
            score = self._paint(f"{ex.score:>3}/{ex.max_score:<3}", status)
            self._print(f"{ex.id:<30} {score}".rstrip())
            failing = [c for c in ex.checks if c.status != "passed" and not c.note]
            notes = []
            for c in failing:
                if c.trap:
                    notes.append(f"{c.trap}: {TRAPS[c.trap].hint}")
                elif ex.error:
                    notes.append(compiler_words(ex.error))
                elif c.status == "error":
                    notes.append(f"{c.id}: {compiler_words(c.message)}")
                elif c.status == "blocked":
                    notes.append(f"{c.id}: not judged yet (another TODO first, see above)")
                else:  # evidence, said in full above: the check and where to look
                    notes.append(f"{c.id}: wrong output; revisit {self.revisit(ex, c.todo)}")
            for note in dict.fromkeys(notes):
                if note.split(":")[0] in TRAPS:  # a trap's hint is short: wrap it, never cut it
                    for line in textwrap.wrap(
                        note,
                        self.width,
                        initial_indent="    ",
                        subsequent_indent="      ",
                        break_on_hyphens=False,
                    ):
                        self._print(line)
                else:  # an error or a check without a trap, said in full above: in short
                    for line in textwrap.wrap(
                        " ".join(note.split()),
                        self.width,
                        initial_indent="    ",
                        subsequent_indent="      ",
                        # The compiler's words are the cause: never cut.
                        max_lines=None if errors.DOES_NOT_COMPILE in note else 2,
                        placeholder=" ...",
                    ):
                        self._print(line)
        self._print("-" * self.width)
        where = f"({report.device}, {report.duration_s:.0f} s)"
        total = score_line(report)
        if len(total) + 3 + len(where) <= self.width:
            self._print(f"{total}   {where}")
        else:  # a track's longer total: where it ran goes below it
            self._print(total)
            self._print(f"  {where}")
        self._performance(report)
        self._print(f"Report: {path}" + (f"   Gradescope: {gradescope}" if gradescope else ""))
        if html:  # a file:// address, which terminals make clickable
            self._print(f"Open in a browser: {Path(html).resolve().as_uri()}")
        next_step = self.next_step(report)
        if next_step:
            self._wrapped(next_step, 0)
        if report.checkset == "public":
            self._print("These are the public checks; your instructor grades with hidden ones.")

    def next_step(self, report: Report) -> str | None:
        """One line of advice for the first unfinished exercise, only where it helps: a hint
        for a wrong answer; `reset` for a missing exercise file; nothing after an error the
        message above already explains (a syntax error, a crash), nor in a Gradescope log."""
        if not self.advice:
            return None
        unfinished = [ex for ex in report.exercises if ex.score < ex.max_score]
        if not unfinished:  # all done: what comes after the chapter, or after these exercises
            done = [ex.id for ex in report.exercises]
            session = "watch" if os.environ.get("KATA_SESSION") == "watch" else "grade"
            return progress.what_next(set(done)) or progress.next_exercise(done, session)
        ex = unfinished[0]
        if ex.error:
            missing = not Path(ex.file).exists()
            if missing and Path(report.target).resolve() == EXERCISES.resolve():
                return f"`{commands.nox('reset', ex.id[:2])}` puts the skeleton of {ex.id}.py back."
            return None
        if any(c.status in ("failed", "blocked") for c in ex.checks):
            return f"Stuck? `{commands.nox('hint', ex.id[:2])}` shows a hint."
        return None
