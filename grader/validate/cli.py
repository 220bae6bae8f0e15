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
from grader.model import Expect
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

    @property
    def swapped_solution(self) -> bool:
        """A row that grades the instructor's swapped-in solutions, not the grader's own files."""
        return self.folder is not None and self.free_form and self.label.startswith("solutions")


def _baseline_rows(ex: Exercise, solutions: Path) -> list[Row]:
    """Solutions full, the frozen skeleton 0 with its traps: with the hidden and public checks."""
    from kata import skeletons

    rows = []
    skeleton = skeletons.pristine(ex.stem).text
    swapped = solutions.resolve() != SOLUTIONS.resolve()
    for checkset in specs.CHECKSETS:
        spec = specs.load(ex.stem, checkset)
        tag = "" if checkset == "hidden" else " [public]"
        # A swapped-in folder without this exercise: a note (static), not a row that must miss.
        if not swapped or (solutions / ex.filename).is_file():
            rows.append(
                Row(
                    f"solutions{tag}",
                    ex,
                    Expect(score="full", integrity=None),
                    checkset=checkset,
                    folder=solutions,
                    any_notes=True,
                    free_form=swapped,
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
    for problem in condensed(row.problems):
        lines += textwrap.wrap(
            problem,
            WIDTH - 6,
            initial_indent="    ! ",
            subsequent_indent="      ",
            break_on_hyphens=False,
        )
    return "\n".join(lines)


_IN_ERROR = re.compile(r"(exercise error|check (\S+) ended in error): (.*)", re.S)


def condensed(problems: list[str]) -> list[str]:
    """``problems`` with each error message once: a compile error that stops every check is
    the exercise's error and each check's, and reads better once than six times."""
    out, seen = [], {}  # message -> index in out of the line that printed it
    same: dict[int, list[str]] = {}
    for problem in problems:
        m = _IN_ERROR.fullmatch(problem)
        if not m:
            out.append(problem)
        elif m[3] not in seen:
            seen[m[3]] = len(out)
            out.append(problem)
        else:
            same.setdefault(seen[m[3]], []).append(m[2] or "the exercise")
    for at, checks in same.items():
        out[at] += f" (also {', '.join(checks)}: the same error)"
    return out


def _causes(rows: list[Row]) -> list[str]:
    """Why one swapped-in solution file (its hidden and public rows) misses full marks, each
    cause once: the exercise's error, else the traps named and the checks failed."""
    causes: dict[str, list[str]] = {}  # cause -> checks it covers
    for row in rows:
        res = row.result
        if res is None or res.error:
            causes.setdefault(res.error if res else "; ".join(row.problems), [])
            continue
        for c in res.checks:
            if c.note or c.status == "passed":
                continue
            first = c.message.strip().splitlines()[0] if c.message.strip() else c.status
            key = f"the grader names trap {c.trap}" if c.trap else first
            causes.setdefault(key, []).append(c.id)
        if not causes:  # full marks, yet a miss: say what the judge said
            for problem in row.problems:
                causes.setdefault(problem, [])
    return [
        f"{cause} (check{'s' if len(ids) > 1 else ''} {', '.join(dict.fromkeys(ids))})"
        if ids
        else cause
        for cause, ids in causes.items()
    ]


def verdict(
    rows: list[Row], problems: list[str], solutions: Path, elapsed: float
) -> tuple[list[str], int]:
    """The closing lines and the exit status. When only swapped-in solutions miss, the headline
    says so, names each file with what in it must change (each cause once), and says that the
    grader itself was validated."""
    theirs = [r for r in rows if r.swapped_solution]
    own = [r for r in rows if not r.swapped_solution]
    own_misses = [r for r in own if not r.ok]
    refused: dict[str, list[Row]] = {}  # file -> its rows that missed (hidden, public)
    for row in theirs:
        if not row.ok:
            refused.setdefault(row.exercise.filename, []).append(row)
    tail = f"{len(problems)} static problem(s), {elapsed:.1f} s"
    if own_misses or problems or not refused:
        misses = len(own_misses) + sum(len(rs) for rs in refused.values())
        head = "grader validated" if not misses and not problems else "GRADER NOT VALIDATED"
        lines = [f"{head}: {len(rows) - misses}/{len(rows)} rows OK, {tail}"]
        if refused:
            lines.append(f"(the swapped-in solutions also miss: {', '.join(refused)})")
        return lines, 1 if misses or problems else 0
    lines = []
    for filename, file_rows in refused.items():
        res = file_rows[0].result
        score = f"{res.score}/{res.max_score}" if res else "not graded"
        lines.append(
            f"SOLUTIONS NOT ACCEPTED: {solutions / filename} ({score}) must change: "
            + "; ".join(_causes(file_rows))
        )
    accepted = sorted({r.exercise.filename for r in theirs} - set(refused))
    lines.append(
        f"the grader itself validated ({len(own)}/{len(own)} rows of its own skeletons and "
        f"galleries OK, {tail})"
        + (f"; accepted from {solutions}: {', '.join(accepted)}" if accepted else "")
    )
    return lines, 1


def build_parser() -> argparse.ArgumentParser:
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
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

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
    print("-" * WIDTH)
    lines, status = verdict(rows, problems, args.solutions, elapsed)
    for line in lines:
        print(textwrap.fill(line, WIDTH, subsequent_indent="  "))
    return status


if __name__ == "__main__":
    sys.exit(main())
