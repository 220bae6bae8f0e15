"""``python -m grader.validate`` / ``nox -s validate``: prove the grader right before trusting it.

First the static checks (``--static`` stops there): the manifest, the specs, the solutions, the
generated exercises and skeletons, the docs pages and the hints must agree; every trap must have
a wrong kernel in a gallery that expects it; public and hidden checks must pay every TODO the
same points. Then it grades, each exercise in its own process as ``python -m grader`` would:

* ``solutions/`` (or ``--solutions DIR``): every exercise must get full marks, no trap named;
* the frozen skeletons: every exercise must score 0 and name exactly its skeleton's traps;
* both again with the public checks, which must agree;
* every variant of the galleries (``grader/specs/*/hidden.py``): a wrong kernel must lose
  points, name exactly its traps, fail where its mistake shows and leave the checks of every
  other TODO passing; a correct kernel written differently must keep full marks. Nothing is
  read from ``solutions/`` to build them, so any correct solutions can be swapped in.

No check may end in ``error`` unless the row expects it. Prints one row per graded file and
exits 1 on any miss (2 when it cannot run at all).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from grader import specs
from grader.specs.model import Expect
from grader.validate import gallery
from kata.catalogue import ALL_EXERCISES, SOLUTIONS, Exercise, find

WIDTH = 80


def judge(
    expect: Expect, result, backend: str = "interpreter", any_notes: bool = False
) -> list[str]:
    """Why ``result`` (an ``ExerciseResult``) misses ``expect``; empty when it meets it.
    ``any_notes``: 0-point notes may fail (swapped-in solutions need not handle float16)."""
    problems = []
    paid = [c for c in result.checks if not c.note]
    if expect.score == "full" and result.score != result.max_score:
        problems.append(f"expected full marks, got {result.score}/{result.max_score}")
    if expect.score == "zero" and result.score != 0:
        problems.append(f"expected 0, got {result.score}/{result.max_score}")
    if expect.score == "less" and result.score >= result.max_score:
        problems.append(f"expected to lose points, got {result.score}/{result.max_score}")
    if expect.error:
        said = [result.error or ""] + [c.message for c in paid]
        if not any(re.search(expect.error, m) for m in said):
            problems.append(f"no error matching {expect.error!r}")
    elif result.error and expect.score == "full":
        problems.append(f"exercise error: {result.error}")
    for check in result.checks:
        allowed = check.note and (any_notes or expect.error or check.id in expect.notes_failed)
        if check.status == "error" and not expect.error and not allowed:
            problems.append(f"check {check.id} ended in error: {check.message}")
        if check.note and check.status != "passed" and not allowed:
            problems.append(f"note {check.id} is {check.status}: {check.message}")
        if check.status == "passed" and check.points != check.max_points:
            problems.append(f"check {check.id} passed with {check.points}/{check.max_points}")
        if check.status != "passed" and check.points != 0:
            problems.append(f"check {check.id} is {check.status} yet paid {check.points}")
    found = result.traps
    problems += [f"trap {t} not named" for t in expect.traps if t not in found]
    problems += [f"trap {t} named but not expected" for t in found if t not in expect.traps]
    statuses = {c.id: c.status for c in result.checks}
    for check in expect.failed:
        if statuses.get(check) != "failed":
            problems.append(f"check {check} should fail, is {statuses.get(check, 'missing')}")
    for check in expect.passed:
        if statuses.get(check) != "passed":
            problems.append(f"check {check} should pass, is {statuses.get(check, 'missing')}")
    if expect.breaks:
        for c in paid:
            if c.todo != expect.breaks and c.status not in ("passed", "blocked"):
                problems.append(
                    f"check {c.id} of TODO {c.todo} is {c.status}: only TODO "
                    f"{expect.breaks} is wrong here"
                )
    if result.integrity is not None and expect.integrity is not None:
        flagged = not result.integrity["ok"]
        if flagged != expect.integrity:
            problems.append("integrity " + ("flagged, not expected" if flagged else "not flagged"))
    if expect.message:
        if not any(re.search(expect.message, c.message) for c in paid if c.status != "passed"):
            problems.append(f"no failed check's message matches {expect.message!r}")
    if expect.warning and not any(re.search(expect.warning, w) for w in result.warnings):
        problems.append(f"no warning matches {expect.warning!r}")
    if sum(c.points for c in result.checks) != result.score:
        problems.append("the score is not the sum of the checks' points")
    return problems


@dataclass
class Row:
    """One graded file: where it comes from, what it must score, and what it got."""

    label: str
    exercise: Exercise
    expect: Expect
    checkset: str = "hidden"
    source: str | None = None  # file text to write into a scratch folder; None: use `folder`
    folder: Path | None = None
    why: str = ""
    any_notes: bool = False
    # Graded as written (--free-form), not as its regions in the skeleton: a whole file written
    # apart, a variant whose mistake lives in given code, solutions an instructor swapped in.
    free_form: bool = False
    result: object = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.result is not None and not self.problems


def _baseline_rows(ex: Exercise, solutions: Path) -> list[Row]:
    """Solutions full, the frozen skeleton 0 with its traps: with the hidden and public checks."""
    from kata import skeletons

    rows = []
    skeleton = skeletons.pristine(ex.stem).text
    for checkset in specs.CHECKSETS:
        spec = specs.load(ex.stem, checkset)
        tag = "" if checkset == "hidden" else " [public]"
        rows.append(
            Row(
                f"solutions{tag}",
                ex,
                Expect(score="full", integrity=None),
                checkset=checkset,
                folder=solutions,
                any_notes=True,
                free_form=solutions.resolve() != SOLUTIONS.resolve(),
            )
        )
        rows.append(
            Row(
                f"skeleton{tag}",
                ex,
                Expect(score="zero", traps=spec.skeleton_traps, integrity=False),
                checkset=checkset,
                source=skeleton,
            )
        )
    return rows


def build_rows(
    names: list[str] | None, backend: str, solutions: Path = SOLUTIONS, baseline: bool = True
) -> list[Row]:
    """Rows for the variants named (by name, or an exercise number/stem; default: all), with
    the baseline rows of every exercise they belong to."""
    pairs = gallery.all_variants()
    chosen, stems = [], set()
    for name in names or []:
        hits = [(s, v) for s, v in pairs if v.name == name]
        if not hits:
            stem = find(name).stem  # KeyError for an unknown name
            hits = [(s, v) for s, v in pairs if s.exercise.stem == stem]
            stems.add(stem)
        chosen += [h for h in hits if h not in chosen]
    if not names:
        chosen, stems = pairs, {ex.stem for ex in ALL_EXERCISES}
    stems |= {s.exercise.stem for s, _ in chosen}
    rows = []
    if baseline:
        for ex in ALL_EXERCISES:
            if ex.stem in stems:
                rows += _baseline_rows(ex, solutions)
    for spec, v in chosen:
        row = Row(
            v.name,
            spec.exercise,
            v.expectation(backend),
            why=v.why,
            free_form=bool(v.file or v.edits),
        )
        try:
            row.source = gallery.source(v, spec)
        except gallery.GalleryError as exc:
            row.problems.append(str(exc))
        rows.append(row)
    return rows


def grade_row(row: Row, scratch: Path, backend: str, timeout: float | None) -> Row:
    """Grade one row's exercise (only that one) and judge the result."""
    from grader.run import runner

    if row.problems:  # it could not be built: nothing to grade
        return row
    here = scratch / re.sub(r"\W", "_", f"{row.label}-{row.checkset}") / row.exercise.number
    target = row.folder
    if target is None:
        target = here / "target"
        target.mkdir(parents=True)
        (target / row.exercise.filename).write_text(row.source)
    try:
        # Verdicts are what validation judges: the performance track is not timed here.
        row.result = runner.grade_exercise(
            row.exercise,
            target,
            backend,
            here / "reports",
            timeout=timeout,
            checkset=row.checkset,
            timed=False,
            free_form=row.free_form,
        )
    except Exception as exc:  # the grader itself broke: a miss, with the reason
        row.problems.append(f"the grader raised {type(exc).__name__}: {exc}")
        return row
    row.problems = judge(row.expect, row.result, backend, row.any_notes)
    return row


def grade_rows(
    rows: list[Row], backend: str, jobs: int, timeout: float | None = None, on_done=None
) -> list[Row]:
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

_COLUMNS = ((28, "variant"), (2, "ex"), (5, "score"), (8, "expected"), (26, "traps found"))


def header() -> str:
    cells = [f"{title:<{width}}" for width, title in _COLUMNS]
    return (" ".join(cells) + " result").rstrip() + "\n" + "-" * WIDTH


def format_row(row: Row, verbose: bool = False) -> str:
    """One table row (80 columns); wrapped trap lists and reasons go on following lines."""
    res = row.result
    max_score = res.max_score if res else specs.load(row.exercise.stem, row.checkset).max_score
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m grader.validate", description=__doc__.split("\n")[0]
    )
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="variants (or exercise numbers) to grade; default: all",
    )
    p.add_argument("--static", action="store_true", help="only the static checks; grade nothing")
    p.add_argument(
        "--solutions",
        type=Path,
        default=SOLUTIONS,
        help="the solutions that must get full marks (default: solutions/)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="files graded at once (default: the number of CPUs)",
    )
    p.add_argument(
        "--device",
        choices=("auto", "cuda", "interpreter"),
        default="auto",
        help="where kernels run (default: auto, CUDA when torch sees a GPU)",
    )
    p.add_argument("--timeout", type=float, help="seconds per exercise for a submission")
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="grade only the variants, not the solutions and the skeletons",
    )
    p.add_argument("--list", action="store_true", help="list the galleries and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="print what each variant is")
    args = p.parse_args(argv)

    from grader.validate import static

    if args.list:
        for _, v in gallery.all_variants():
            kind = "right" if v.full_marks else "wrong"
            print(f"{v.name:<30} {kind}  {','.join(v.expect.traps) or '-':<26} {v.why}")
        return 0
    problems, notes = static.problems(args.solutions)
    for note in notes:
        print(textwrap.fill(f"note: {note}", WIDTH, subsequent_indent="  "))
    for problem in problems:
        print(textwrap.fill(f"static: {problem}", WIDTH, subsequent_indent="  "))
    if args.static:
        print(f"static checks: {'OK' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    from kata import runtime

    try:
        runtime.configure(args.device)
    except Exception as exc:
        print(f"validate: cannot choose a backend: {exc}", file=sys.stderr)
        return 2
    try:
        rows = build_rows(args.names, runtime.BACKEND, args.solutions, not args.no_baseline)
    except KeyError as exc:
        print(f"validate: {exc.args[0]}", file=sys.stderr)
        return 2
    print(
        f"Validating the grader on {runtime.describe()}: {len(rows)} files, {args.jobs} at a "
        f"time; solutions from {args.solutions}"
    )
    print(header(), flush=True)
    start = time.monotonic()
    grade_rows(
        rows,
        runtime.BACKEND,
        args.jobs,
        args.timeout,
        on_done=lambda row: print(format_row(row, args.verbose), flush=True),
    )
    elapsed = time.monotonic() - start
    misses = [row for row in rows if not row.ok]
    print("-" * WIDTH)
    verdict = "grader validated" if not misses and not problems else "GRADER NOT VALIDATED"
    print(
        f"{verdict}: {len(rows) - len(misses)}/{len(rows)} rows OK, "
        f"{len(problems)} static problem(s), {elapsed:.1f} s"
    )
    return 1 if misses or problems else 0


if __name__ == "__main__":
    sys.exit(main())
