"""``python -m grader`` / ``nox -s grade``: grade a folder of kernel files and write a report.

Exit status 0 whenever a report was written, whatever the score; 2, with the reason and nothing
written, when it could not grade at all (bad arguments, no such folder, a folder with no exercise
file, a backend that is not available).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from grader.run import process
from kata import commands
from kata.catalogue import ALL_EXERCISES, EXERCISES, ROOT, TRACKS, find

# What a kernel that never finishes costs, measured (docs/instructors.md#timings).
ENDLESS_LOOP = (
    "A kernel that never finishes is stopped at the limit (in the interpreter, with the line it "
    "was on: on a 2-core CPU, 61 s after the grading starts), a 'still running' line every 15 s "
    "meanwhile; compiled on a GPU, no line can be named."
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=commands.prog("grade", "grader"), description="Grade the kata's exercises."
    )
    add_what_to_grade(p)
    add_how_to_run(p)
    add_what_to_write(p)
    return p


def add_what_to_grade(p: argparse.ArgumentParser) -> None:
    """The exercises, the submission's folder and where its report goes."""
    p.add_argument(
        "exercises",
        nargs="*",
        metavar="EXERCISE",
        help="exercise number (02) or file stem; default: the track's exercises",
    )
    tracks = "; ".join(
        f"{name}: {', '.join(ex.number for ex in exs)}"
        for name, exs in TRACKS.items()
        if exs and name != "all"
    )
    p.add_argument(
        "--track",
        choices=tuple(TRACKS),
        default="core",
        help=f"{tracks}; all: every one (default: core, the chapter's 100 points)",
    )
    p.add_argument(
        "--target",
        type=Path,
        default=EXERCISES,
        help="folder (or .zip) with the submission's files, at its top or in a folder below "
        "(default: exercises/)",
    )
    p.add_argument(
        "--report",
        type=Path,
        help="score report to write (default: reports/score.json; reports/score-<track>.json "
        "where only the performance or the extensions track is graded)",
    )
    p.add_argument("--gradescope", type=Path, help="also write Gradescope's results.json here")


def add_how_to_run(p: argparse.ArgumentParser) -> None:
    """Where kernels run, for how long, under which checks and rules."""
    p.add_argument(
        "--device",
        choices=("auto", "cuda", "interpreter"),
        help="where kernels run (default: KATA_DEVICE if set, else auto: CUDA when torch sees "
        "a GPU)",
    )
    limits = process.TIME_LIMITS
    p.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="seconds one exercise may take, the compile for the GPU included; 0: no limit "
        f"(default: {limits[('interpreter', 'core')]:.0f} in the interpreter, "
        f"{limits[('cuda', 'core')]:.0f} on a GPU; the performance track "
        f"{limits[('interpreter', 'performance')]:.0f} and {limits[('cuda', 'performance')]:.0f}, "
        f"the extensions {limits[('interpreter', 'extensions')]:.0f} in the interpreter). "
        f"{ENDLESS_LOOP}",
    )
    p.add_argument("--jobs", type=int, help="exercises graded at once")
    p.add_argument(
        "--checks",
        choices=("hidden", "public"),
        help="which checks grade (default: hidden where this copy has them)",
    )
    p.add_argument(
        "--strict", action="store_true", help="an exercise edited outside its TODO regions scores 0"
    )
    p.add_argument(
        "--free-form",
        action="store_true",
        help="run each file as written, not its TODO regions in the skeleton (an instructor's "
        "opt-in for kernels written apart; edits outside the regions are still flagged)",
    )
    p.add_argument(
        "--no-isolation",
        action="store_true",
        help="let the submission's process write anywhere this user may, as without Landlock "
        "(to test the grader's defences behind it; the report says so)",
    )


def add_what_to_write(p: argparse.ArgumentParser) -> None:
    """The HTML page and what the terminal shows."""
    p.add_argument(
        "--html",
        type=Path,
        help="the page to look at in a browser (default: the report's path, .html)",
    )
    p.add_argument("--no-html", action="store_true", help="write no HTML page")
    p.add_argument(
        "--no-advice",
        action="store_true",
        help="no 'Stuck?' line at the end (logs nobody acts on: Gradescope, batch)",
    )
    p.add_argument("--quiet", action="store_true", help="print only the total")


def fail(message: str) -> int:
    print(f"grader: {message}", file=sys.stderr)
    return 2


class Refused(Exception):
    """Why the grader grades nothing: ``main`` says it on stderr and exits with 2."""


def find_target(args: argparse.Namespace, chosen: list) -> Path:
    """The folder that holds the submission's files, zips unpacked beside the report."""
    target = args.target.resolve()
    if not target.exists():
        raise Refused(f"target folder {args.target} does not exist")
    from grader.run import discover

    # A zip (or a folder holding only zips) is unpacked beside the report, where the report's
    # file paths and the page's line numbers can still find the files.
    found = discover.locate(target, args.report.resolve().parent / "unzipped", chosen)
    for problem in found.problems:
        print(f"grader: {problem}", file=sys.stderr)
    if found.folder is not None and found.folder != target:  # an upload of a zipped folder
        opened = f" (unpacked from {', '.join(z.name for z in found.unpacked)})"
        print(
            f"grader: no exercise file directly in {args.target}; grading {found.folder}, where "
            f"they are{opened if found.unpacked else ''}",
            file=sys.stderr,
        )
        target = found.folder
    elif found.folder is None:  # nothing to grade: say what is there, and write nothing
        raise Refused(nothing_to_grade(args.target, target, found, chosen))
    return target


def prepare(args: argparse.Namespace, chosen: list) -> str:
    """Check the packages, choose the backend and load the chosen exercises' specs: the
    checkset that grades."""
    from kata import environment

    missing = environment.missing()
    if missing:
        packages = [environment.RUNTIME[m] for m in missing]
        raise Refused(
            f"missing Python packages: {', '.join(missing)} ({commands.install(packages)})"
        )

    from kata import runtime

    try:
        runtime.configure(args.device)
    except Exception as exc:  # BackendError, or torch missing
        raise Refused(f"cannot choose a backend: {exc}") from exc

    from grader import specs

    try:
        checkset = args.checks or specs.default_checkset()
        for ex in chosen:  # a broken spec is the grader's fault: say so before grading
            specs.load(ex.stem, checkset)
    except specs.SpecError as exc:
        raise Refused(str(exc)) from exc
    return checkset


def grade(args: argparse.Namespace, chosen: list, target: Path, checkset: str) -> None:
    """Grade the chosen exercises in ``target``, print as they finish and write the reports."""
    from grader import specs
    from grader.report import gradescope
    from grader.report.records import Report
    from grader.report.summary import Printer
    from grader.run import isolation, runner
    from kata import runtime

    process.contain()  # whatever a submission starts comes back here, to be killed
    if args.no_isolation:
        isolation.disable("--no-isolation")
    printer = Printer(quiet=args.quiet, advice=not args.no_advice)
    limits = {ex.stem: runner.time_limit(runtime.BACKEND, ex, args.timeout) for ex in chosen}
    printer.start(target, runtime.describe(), chosen, limits)
    start = time.monotonic()
    results = runner.grade(
        chosen,
        target,
        runtime.BACKEND,
        args.report.parent,
        jobs=args.jobs,
        timeout=args.timeout,
        on_done=printer.exercise_done,
        on_start=printer.exercise_started,
        checkset=checkset,
        strict=args.strict,
        free_form=args.free_form,
    )
    process.reap(spare=False)  # nothing a submission started may outlive its report
    report = Report(
        target=str(target),
        device=runtime.describe(),
        versions=runtime.versions(),
        isolation=isolation.state(),
        exercises=results,
        duration_s=round(time.monotonic() - start, 2),
        checkset=specs.load(chosen[0].stem, checkset).checkset,
        strict=args.strict,
        free_form=args.free_form,
    )
    report.write(args.report)
    if args.gradescope:
        gradescope.write(report, args.gradescope)
    html = None if args.no_html else (args.html or args.report.with_suffix(".html"))
    if html is not None:
        html = write_html(report, html)
    printer.finish(report, args.report, args.gradescope, html)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.timeout is not None and not args.timeout >= 0:
        parser.error(f"--timeout {args.timeout:g}: give seconds (a number > 0), or 0 for no limit")
    try:
        named = {find(name) for name in args.exercises}
    except KeyError as exc:
        return fail(exc.args[0])
    # Catalogue order, each once: `02 2` must not grade (and count) exercise 02 twice.
    chosen = [ex for ex in ALL_EXERCISES if ex in named] or list(TRACKS[args.track])
    if args.report is None:
        args.report = default_report(chosen)
    try:
        target = find_target(args, chosen)
        checkset = prepare(args, chosen)
    except Refused as exc:
        return fail(str(exc))
    grade(args, chosen, target, checkset)
    return 0


def default_report(chosen) -> Path:
    """reports/score.json, or reports/score-<track>.json where every exercise graded is of one
    track outside the chapter's: grading a track never replaces the chapter's report."""
    tracks = {ex.track for ex in chosen}
    (track,) = tracks if len(tracks) == 1 else ("core",)
    name = "score.json" if track == "core" else f"score-{track}.json"
    return ROOT / "reports" / name


def nothing_to_grade(given: Path, target: Path, found, chosen) -> str:
    """Why a target holds nothing to grade, and what to give instead."""
    from grader.run import discover

    names = ", ".join(ex.filename for ex in chosen)
    if not target.is_dir():
        ex = next((e for e in ALL_EXERCISES if e.filename == target.name), None)
        if ex is not None:  # the exercise file itself
            return (
                f"target {given} is a file, not a folder: give the folder that holds it, and "
                f"the exercise: --target {given.parent} {ex.number}"
            )
        return (
            f"target {given} is a file, not a folder (nor a .zip): give the folder that holds "
            f"your exercise files ({names}), or a zip of it"
        )
    renames = "".join(discover.rename_hint(target, ex, below=True) for ex in chosen)
    return (
        f"{found.why_not(given)}; the grader looks for {names}, in the folder or one below "
        f"it{renames}"
    )


def write_html(report, path: Path) -> Path | None:
    """The page a student looks at; the JSON report is what counts, so a page that cannot be
    drawn (jinja2 missing, say) is one line of warning, not a failed grading."""
    try:
        from grader.report import html

        return html.write(report, path)
    except Exception as exc:  # noqa: BLE001  (any failure to draw the page)
        print(f"grader: no HTML page ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None
