"""``python -m grader.validate`` / ``nox -s validate``: prove the grader right before trusting it.

Grades, each exercise in its own process as ``python -m grader`` would:

* ``solutions/``: every exercise must get full marks, with no trap named;
* the untouched skeletons in ``exercises/``: every exercise must score 0 and name exactly its
  skeleton's traps (if ``exercises/`` has been edited, the skeletons are regenerated from the
  solutions into a scratch folder and graded there instead);
* every known-wrong kernel of ``grader.gallery``: must lose points, name exactly its expected
  trap (or none), and fail the checks where its mistake is meant to show;
* every correct-but-different kernel of the gallery: must get full marks.

No check of any of them may end in ``error`` (that would be the grader failing, not judging).
Prints one row per graded file and exits 1 on any miss (2 when it cannot run at all).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from grader import gallery
from kata.catalogue import ALL_EXERCISES, EXERCISES, PERFORMANCE_LIST, SOLUTIONS, Exercise, find

# The traps each untouched skeleton must be diagnosed with (and no others).
SKELETON_TRAPS = {
    "01_flash_attention_core": ("acc-not-rescaled",),
    "02_causal_flash_attention": ("causal-mask-missing",),
    "03_moe_gating": ("top2-not-masked", "weights-not-renormalized"),
    # The performance track: untouched, 04 computes with the wrong exponent base and 05 writes
    # one token per tile; neither matches a named trap, both must score 0.
    "04_fast_attention": (),
    "05_fast_gating": (),
}

WIDTH = 80


@dataclass(frozen=True)
class Expectation:
    """What one graded file must score. ``score``: "full", "zero" or "less" (loses points)."""

    score: str
    traps: tuple[str, ...] = ()  # exactly these trap ids must be named
    failed: tuple[str, ...] = ()  # these checks must have status "failed"

    def label(self, max_score: int) -> str:
        return {"full": f"={max_score}", "zero": "=0", "less": f"<{max_score}"}[self.score]


def judge(expect: Expectation, result) -> list[str]:
    """Why ``result`` (an ``ExerciseResult``) misses ``expect``; empty when it meets it."""
    problems = []
    if result.error and expect.score == "full":
        problems.append(f"exercise error: {result.error}")
    if expect.score == "full" and result.score != result.max_score:
        problems.append(f"expected full marks, got {result.score}/{result.max_score}")
    if expect.score == "zero" and result.score != 0:
        problems.append(f"expected 0, got {result.score}/{result.max_score}")
    if expect.score == "less" and result.score >= result.max_score:
        problems.append(f"expected to lose points, got {result.score}/{result.max_score}")
    for check in result.checks:
        if check.status == "error":
            problems.append(f"check {check.id} ended in error: {check.message}")
        if check.status == "passed" and check.points != check.max_points:
            problems.append(f"check {check.id} passed with {check.points}/{check.max_points}")
        if check.status != "passed" and check.points != 0:
            problems.append(f"check {check.id} is {check.status} yet paid {check.points}")
    found = result.traps
    for trap in expect.traps:
        if trap not in found:
            problems.append(f"trap {trap} not named")
    for trap in found:
        if trap not in expect.traps:
            problems.append(f"trap {trap} named but not expected")
    statuses = {c.id: c.status for c in result.checks}
    for check in expect.failed:
        if statuses.get(check) != "failed":
            problems.append(f"check {check} should fail, is {statuses.get(check, 'missing')}")
    if sum(c.points for c in result.checks) != result.score:
        problems.append("the score is not the sum of the checks' points")
    return problems


@dataclass
class Row:
    """One graded file: where it comes from, what it must score, and what it got."""

    label: str
    exercise: Exercise
    expect: Expectation
    source: str | None = None  # file text to write into a scratch folder; None: use `folder`
    folder: Path | None = None
    why: str = ""
    result: object = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.result is not None and not self.problems


def _skeleton_rows(exercises: list[Exercise]) -> tuple[list[Row], list[str]]:
    """Rows for the untouched skeletons; regenerated where exercises/ was edited."""
    from kata.generate import strip

    rows, notes = [], []
    for ex in exercises:
        expect = Expectation("zero", SKELETON_TRAPS[ex.stem])
        pristine = strip((SOLUTIONS / ex.filename).read_text(), ex.filename)
        current = EXERCISES / ex.filename
        if current.is_file() and current.read_text() == pristine:
            rows.append(Row("exercises", ex, expect, folder=EXERCISES))
        else:
            notes.append(f"exercises/{ex.filename} differs from its skeleton: graded the "
                         "skeleton regenerated from solutions/ instead")  # fmt: skip
            rows.append(Row("skeleton (regenerated)", ex, expect, source=pristine))
    return rows, notes


def build_rows(
    names: list[str] | None = None, baseline: bool = True
) -> tuple[list[Row], list[str]]:
    """All rows to grade, and notes to print before the table. ``baseline``: also the rows of
    solutions/ and the skeletons, for every exercise the chosen variants belong to."""
    chosen = gallery.variants(names)
    stems = {v.exercise_stem for v in chosen}
    if names:  # an exercise named without variants of its own still gets its baseline rows
        for name in names:
            try:
                stems.add(find(name).stem)
            except KeyError:
                pass
    if not names:  # the performance track has no gallery of its own, only its baseline rows
        stems |= {ex.stem for ex in PERFORMANCE_LIST}
    exercises = [ex for ex in ALL_EXERCISES if ex.stem in stems] if baseline else []
    rows = [Row("solutions", ex, Expectation("full"), folder=SOLUTIONS) for ex in exercises]
    skeletons, notes = _skeleton_rows(exercises)
    rows += skeletons
    for v in chosen:
        ex = find(v.exercise_stem)
        if v.full_marks:
            expect = Expectation("full")
        else:
            traps = (v.expect_trap,) if v.expect_trap else ()
            expect = Expectation("less", traps, v.expect_failed)
        row = Row(v.name, ex, expect, why=v.why)
        try:
            row.source = v.source()
        except gallery.GalleryError as exc:
            row.problems.append(str(exc))
        rows.append(row)
    return rows, notes


def grade_row(row: Row, scratch: Path, backend: str, timeout: float | None) -> Row:
    """Grade one row's exercise (only that one) and judge the result."""
    from grader import runner

    if row.problems:  # its edits no longer apply: nothing to grade
        return row
    here = scratch / row.label.replace(" ", "_") / row.exercise.number
    target = row.folder
    if target is None:
        target = here / "target"
        target.mkdir(parents=True)
        (target / row.exercise.filename).write_text(row.source)
    try:
        row.result = runner.grade_exercise(row.exercise, target, backend, here / "reports",
                                           timeout=timeout)  # fmt: skip
    except Exception as exc:  # the grader itself broke: a miss, with the reason
        row.problems.append(f"the grader raised {type(exc).__name__}: {exc}")
        return row
    row.problems = judge(row.expect, row.result)
    return row


def grade_rows(rows: list[Row], backend: str, jobs: int, timeout: float | None = None,
               on_done=None) -> list[Row]:  # fmt: skip
    """Grade rows concurrently (each grade spawns its own processes); keeps the rows' order."""
    scratch = Path(tempfile.mkdtemp(prefix="kata-validate-"))
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [pool.submit(grade_row, row, scratch, backend, timeout) for row in rows]
            for future in futures:
                row = future.result()
                if on_done:
                    on_done(row)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


# ---- the table -----------------------------------------------------------------------------

_COLUMNS = ((25, "variant"), (2, "ex"), (5, "score"), (8, "expected"), (29, "traps found"))


def header() -> str:
    cells = [f"{title:<{width}}" for width, title in _COLUMNS]
    return (" ".join(cells) + " result").rstrip() + "\n" + "-" * WIDTH


def format_row(row: Row, verbose: bool = False) -> str:
    """One table row (80 columns); wrapped trap lists and reasons go on following lines."""
    res = row.result
    max_score = res.max_score if res else sum(c.points for c in _checks(row.exercise))
    score = f"{res.score}/{res.max_score}" if res else "-"
    traps = res.traps if res else []
    trap_lines = textwrap.wrap(", ".join(traps), _COLUMNS[4][0], break_on_hyphens=False) or ["-"]
    values = [row.label, row.exercise.number, score, row.expect.label(max_score), trap_lines[0]]
    cells = [
        f"{v:<{w}}" if i != 2 else f"{v:>{w}}"
        for i, ((w, _), v) in enumerate(zip(_COLUMNS, values))
    ]
    lines = [" ".join(cells) + (" OK" if row.ok else " MISS")]
    indent = sum(w + 1 for w, _ in _COLUMNS[:4])
    lines += [" " * indent + extra for extra in trap_lines[1:]]
    if verbose and row.why:
        lines += textwrap.wrap(row.why, WIDTH - 4, initial_indent="    ", subsequent_indent="    ")
    for problem in row.problems:
        lines += textwrap.wrap(
            problem, WIDTH - 6, initial_indent="    ! ", subsequent_indent="      "
        )
    return "\n".join(lines)


def _checks(ex: Exercise):
    from grader import rubric

    return rubric.checks_for(ex.stem)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m grader.validate", description=__doc__.split("\n")[0]
    )
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="variants (or exercise numbers) to grade; default: all")  # fmt: skip
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="files graded at once (default: the number of CPUs)")  # fmt: skip
    p.add_argument("--device", choices=("auto", "cuda", "interpreter"), default="auto",
                   help="where kernels run (default: auto, CUDA when torch sees a GPU)")  # fmt: skip
    p.add_argument("--timeout", type=float, help="seconds per exercise for a submission")
    p.add_argument("--no-baseline", action="store_true",
                   help="grade only the variants, not solutions/ and the skeletons")  # fmt: skip
    p.add_argument("--list", action="store_true", help="list the galleries and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="print what each variant is")
    args = p.parse_args(argv)

    if args.list:
        for v in gallery.GALLERY:
            kind = "right" if v.full_marks else "wrong"
            print(f"{v.name:<26} {kind}  {v.expect_trap or '-':<25} {v.why}")
        return 0
    try:
        rows, notes = build_rows(args.names, baseline=not args.no_baseline)
    except KeyError as exc:
        print(f"validate: {exc.args[0]}", file=sys.stderr)
        return 2
    os.environ["KATA_DEVICE"] = args.device
    try:
        from kata import runtime
    except Exception as exc:
        print(f"validate: cannot choose a backend: {exc}", file=sys.stderr)
        return 2

    problems = gallery.check_gallery()
    print(
        f"Validating the grader on {runtime.describe()}: {len(rows)} files, {args.jobs} at a time"
    )
    for note in notes + [f"gallery: {problem}" for problem in problems]:
        print(textwrap.fill(note, WIDTH, subsequent_indent="  "))
    print(header(), flush=True)
    start = time.monotonic()
    grade_rows(rows, runtime.BACKEND, args.jobs, args.timeout,
               on_done=lambda row: print(format_row(row, args.verbose), flush=True))  # fmt: skip
    elapsed = time.monotonic() - start
    misses = [row for row in rows if not row.ok]
    print("-" * WIDTH)
    verdict = "grader validated" if not misses and not problems else "GRADER NOT VALIDATED"
    print(f"{verdict}: {len(rows) - len(misses)}/{len(rows)} rows OK, "
          f"{len(problems)} gallery problem(s), {elapsed:.1f} s")  # fmt: skip
    return 1 if misses or problems else 0


if __name__ == "__main__":
    sys.exit(main())
