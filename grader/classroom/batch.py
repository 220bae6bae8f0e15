"""``nox -s batch -- --submissions DIR --out DIR``: grade a class.

Every subfolder of DIR is one student's submission, graded by ``python -m grader`` in its own
process (with the grader's usual per-exercise isolation) by one of two engines
(``grader/classroom/engines/``):

- ``--engine local`` (the default): several students at once on this machine, one worker per GPU
  (each pinned with CUDA_VISIBLE_DEVICES), otherwise one per CPU core;
- ``--engine slurm``: one Slurm array task per student, submitted through submitit; or, with
  ``--emit-sbatch FILE``, a plain sbatch script to submit by hand, and ``--gather`` afterwards.

Writes ``OUT/<student>/score.json`` (and ``score.html``), ``OUT/gradebook.csv`` (with one column
per trap) and ``OUT/class.html`` (grader.classroom.dashboard). A student's files may sit in a folder below
theirs, as an unzipped upload's do, or in a zip (a student's folder holding zips, or a zip in DIR
standing for the student): the grader finds them, and unpacks zips safely into
``OUT/<student>/upload/`` (grader.run.discover). An upload with no exercise file is not graded
(status ``no_files``, with what it holds). A rerun skips students already graded by the same
grader version, unless ``--force``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from grader.classroom import dashboard
from grader.classroom.engines import local, slurm
from grader.classroom.engines.task import (
    Task,
    clear,
    files,
    grader_version,
    is_graded,
    read_json,
    write_json,
)
from grader.report import reasons
from grader.run import discover
from kata.catalogue import EXERCISE_LIST, ROOT

# The gradebook's status column: only "graded" rows have a score.
STATUSES = (
    "graded",
    "no_files",
    "infra_error",
    "grader_error",
    "queued",
    "running",
    "not_graded",
)


def find_students(submissions: Path) -> dict[str, Path]:
    """{student: their upload}: one subfolder of DIR per student, or one zip (an LMS export's
    uploads as they came; the student is the zip's name without .zip)."""
    found = {}
    for d in sorted(submissions.iterdir()):
        if d.name.startswith(".") or d.name in discover.IGNORED:
            continue
        if d.is_dir():
            found[d.name] = d.resolve()
        elif d.suffix.lower() == ".zip" and d.is_file():
            name = d.stem if not (submissions / d.stem).is_dir() else d.name
            found[name] = d.resolve()
    return found


def not_a_class(submissions: Path, students: dict[str, Path]) -> str | None:
    """Why DIR does not look like a class (one folder or zip per student), or None: exercise
    files at its top are one student's own folder, given by mistake."""
    own = sorted(ex.filename for ex in EXERCISE_LIST if (submissions / ex.filename).is_file())
    if own:
        return (
            f"{submissions} holds exercise files itself ({', '.join(own)}): it looks like one "
            "student's folder. --submissions takes the folder that holds one subfolder (or zip) "
            "per student; to grade one student, run `python -m grader --target "
            f"{submissions}` (or `nox -s grade -- --target {submissions}`)"
        )
    if not students:
        return (
            f"{submissions} holds no student folder or zip ({discover.contents(submissions)}): "
            "--submissions takes the folder that holds one subfolder (or zip) per student"
        )
    return None


def upload_folder(out: Path, student: str, upload: Path) -> discover.Found:
    """Where a student's exercise files are: in their folder, or in the zips of their upload,
    unpacked into OUT/<student>/upload/."""
    return discover.locate(upload, files(out, student).folder / "upload")


@dataclass
class Row:
    """One student of the gradebook."""

    student: str
    status: str  # one of STATUSES
    report: dict | None = None  # the score report, when graded
    note: str = ""  # why there is no score, or what is odd about it


def gather(out: Path) -> list[Row]:
    """One row per student folder in OUT, from what the engines wrote there: graded students
    from their score.json; the others with the reason (Slurm's, for the Slurm engine)."""
    version = grader_version()
    students = sorted(d.name for d in out.iterdir() if d.is_dir() and not d.name.startswith("."))
    rows: dict[str, Row] = {}
    unsettled = []
    for student in students:
        f = files(out, student)
        record, report = read_json(f.task), read_json(f.score)
        if report and "score" in report and (record is None or record.get("status") == "graded"):
            stale = record is not None and record.get("grader_version") != version
            note = f"graded by grader {record['grader_version']}, not {version}" if stale else ""
            rows[student] = Row(student, "graded", report, note)
        elif record and record.get("status") in ("grader_error", "no_files"):
            rows[student] = Row(student, record["status"], None, record.get("reason", ""))
        else:  # running, never started, or stopped from outside: ask Slurm why
            unsettled.append(student)
    for student, (status, note) in slurm.explain(out, unsettled).items():
        rows[student] = Row(student, status, None, note)
    return [rows[s] for s in students]


def write_gradebook(rows: list[Row], out: Path) -> Path:
    """OUT/gradebook.csv: student, score, max_score, one column per exercise, traps, one
    trap:<id> column per known trap (1: fell into it), integrity (the exercises edited outside
    their TODO regions, `;`-separated), status, note, reasons (why each exercise below full
    marks is, grader.report.reasons). Rows without a score have empty score columns (never a
    0)."""
    path = out / "gradebook.csv"
    stems = [ex.stem for ex in EXERCISE_LIST]
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "student",
                "score",
                "max_score",
                *stems,
                "traps",
                *dashboard.TRAP_HEADER,
                "integrity",
                "status",
                "note",
                "reasons",
            ]
        )
        for row in rows:
            traps = dashboard.trap_columns(row.report)
            if row.report is None:
                writer.writerow(
                    [
                        row.student,
                        "",
                        "",
                        *[""] * len(stems),
                        "",
                        *traps,
                        "",
                        row.status,
                        row.note,
                        "",
                    ]
                )
                continue
            per = {e["id"]: e["score"] for e in row.report["exercises"]}
            edited = [
                e["id"][:2]
                for e in row.report["exercises"]
                if (e.get("integrity") or {}).get("ok") is False
            ]
            writer.writerow(
                [
                    row.student,
                    row.report["score"],
                    row.report["max_score"],
                    *[per.get(s, "") for s in stems],
                    ";".join(row.report["traps"]),
                    *traps,
                    ";".join(edited),
                    row.status,
                    row.note,
                    reasons.column(row.report),
                ]
            )
    return path


def finish(out: Path) -> Path:
    """Gather, write the gradebook and the pages, and say what has no score and why."""
    rows = dashboard.annotate(gather(out), out)  # notes for nested and empty uploads
    book = write_gradebook(rows, out)
    page = dashboard.write_pages(rows, out, out.name)
    if page:
        print(f"class page: {page}")
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    print(f"gradebook: {book}  (" + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ")")
    for row in rows:
        if row.status != "graded":
            print(f"  {row.student}: {row.status}: {row.note}")
    return book


SLURM_ONLY = (
    "partition",
    "gpus_per_task",
    "max_parallel",
    "time",
    "mem_gb",
    "account",
    "sbatch_arg",
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nox -s batch --", description="Grade every student folder.")
    p.add_argument("--submissions", type=Path, help="one subfolder per student")
    p.add_argument("--out", type=Path, required=True, help="where reports and gradebook.csv go")
    p.add_argument(
        "--engine",
        choices=("local", "slurm"),
        default="local",
        help="local: this machine (default); slurm: one Slurm array task per student",
    )
    p.add_argument("--force", action="store_true", help="regrade students already graded")
    p.add_argument("--device", choices=("auto", "cuda", "interpreter"), default="auto")
    p.add_argument("--timeout", type=float, help="seconds per exercise for a submission")
    p.add_argument(
        "--gather",
        action="store_true",
        help="grade nothing: write the gradebook from what OUT holds (after --emit-sbatch)",
    )
    local_ = p.add_argument_group("local engine")
    local_.add_argument(
        "--jobs", type=int, help="students graded at once (default: GPUs, else CPU cores)"
    )
    s = p.add_argument_group("slurm engine (and --emit-sbatch)")
    s.add_argument(
        "--emit-sbatch",
        type=Path,
        metavar="FILE",
        help="write an sbatch array script to submit by hand, instead of submitting",
    )
    s.add_argument("--partition", help="Slurm partition (default: the cluster's default)")
    s.add_argument(
        "--gpus-per-task",
        type=int,
        help="GPUs per student (default: 1, or 0 with --device interpreter)",
    )
    s.add_argument(
        "--max-parallel", type=int, default=8, help="array tasks running at once (default: 8)"
    )
    s.add_argument(
        "--time",
        type=int,
        default=30,
        metavar="MIN",
        help="time limit per student, in minutes (default: 30)",
    )
    s.add_argument("--mem-gb", type=float, help="memory per task (default: the partition's)")
    s.add_argument("--account", help="Slurm account to charge")
    s.add_argument(
        "--sbatch-arg",
        action="append",
        default=[],
        metavar="--OPTION=VALUE",
        help="any other sbatch option, e.g. --sbatch-arg=--qos=short (repeatable)",
    )
    return p


def is_slurm(args: argparse.Namespace) -> bool:
    """Whether Slurm grades the class: submitted through submitit, or by hand from a script."""
    return bool(args.engine == "slurm" or args.emit_sbatch)


def check_options(p: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """Why the options cannot grade a class (a misused option exits through argparse), or None."""
    slurm_mode = is_slurm(args)
    if args.submissions is None:
        p.error("--submissions DIR is needed (or --gather to only write the gradebook)")
    if not args.submissions.is_dir():
        return f"{args.submissions} is not a folder"
    given = [o for o in SLURM_ONLY if p.get_default(o) != getattr(args, o)]
    if not slurm_mode and given:
        p.error(f"--{given[0].replace('_', '-')} is for --engine slurm or --emit-sbatch")
    if slurm_mode and args.jobs:
        p.error("--jobs is for the local engine; with Slurm, --max-parallel caps the tasks")
    if slurm_mode and args.engine == "slurm" and not args.emit_sbatch:
        return slurm.missing_commands()
    return None


def sort_uploads(
    out: Path, students: dict[str, Path], todo: list[str], version: str
) -> tuple[dict[str, Path], dict[str, str], list[str]]:
    """Each upload's exercise files, zips unpacked: (the folder to grade per student, a note per
    student whose zips were unpacked, the students without any). An upload without exercise
    files is not graded, and its row says what it holds (no score, never a 0)."""
    targets, unpacked, empty = {}, {}, []
    for student in todo:
        found = upload_folder(out, student, students[student])
        if found.unpacked:  # graded where its zips were unpacked
            targets[student] = found.folder
            unpacked[student] = "unpacked from " + ", ".join(z.name for z in found.unpacked)
            continue
        if found.folder is not None:  # the grader finds the files below the student's folder
            targets[student] = students[student]
            continue
        empty.append(student)
        clear(out, student)
        write_json(
            files(out, student).task,
            {
                "student": student,
                "target": str(students[student]),
                "status": "no_files",
                "grader_version": version,
                "reason": found.why_not(students[student]),
            },
        )
    return targets, unpacked, empty


def slurm_options(args: argparse.Namespace, out: Path) -> slurm.Options:
    """The Slurm engine's settings, with a note on the paths the nodes may not see."""
    gpus = args.gpus_per_task
    if gpus is None:
        gpus = 0 if args.device == "interpreter" else 1
    opts = slurm.Options(
        args.partition,
        gpus,
        args.max_parallel,
        args.time,
        args.mem_gb,
        args.account,
        tuple(args.sbatch_arg),
        args.device,
    )
    local_ = slurm.local_paths(
        {
            "OUT": out,
            "the submissions": args.submissions,
            "this checkout": ROOT,
            "Python": Path(sys.executable),
        }
    )
    if local_:
        print(
            f"note: usually node-local, but the nodes must see them: {'; '.join(local_)} "
            f"({slurm.SHARED_HINT})",
            file=sys.stderr,
        )
    return opts


class Engine(Protocol):
    """What ``main`` needs of an engine (after otter's runner ABC): where it grades, in words;
    how many jobs one student's grading runs at once; whether ``main`` clears the students'
    earlier results before grading; and ``run``, which grades the tasks and writes the
    gradebook where it is due, returning the exit code."""

    where: str
    jobs: int
    clears: bool

    def run(self, tasks: list[Task], out: Path) -> int: ...


class Local:
    """Several students at once on this machine (grader.classroom.engines.local)."""

    clears = True

    def __init__(self, args: argparse.Namespace):
        self.slots, self.jobs, where = local.plan(args.device, args.jobs)
        self.where = f"{len(self.slots)} worker(s) on {where}"

    def run(self, tasks: list[Task], out: Path) -> int:
        if tasks:
            local.run(tasks, self.slots)
        finish(out)
        return 0


class Slurm:
    """One Slurm array task per student, submitted through submitit; the engine clears a
    student's earlier results once sbatch took the array."""

    clears = False
    where = "one Slurm array task per student"

    def __init__(self, args: argparse.Namespace, out: Path):
        self.opts = slurm_options(args, out)
        self.jobs = self.opts.cpus

    def run(self, tasks: list[Task], out: Path) -> int:
        code = slurm.run(tasks, out, self.opts) if tasks else 0
        if code == 2:
            return code
        finish(out)
        return code


class Sbatch(Slurm):
    """``--emit-sbatch``: the array written as a script to submit by hand; the gradebook
    waits for ``--gather``."""

    clears = True

    def __init__(self, args: argparse.Namespace, out: Path):
        super().__init__(args, out)
        self.script = args.emit_sbatch.resolve()

    def run(self, tasks: list[Task], out: Path) -> int:
        if not tasks:
            print("nothing to grade (--force regrades everyone)")
            finish(out)
            return 0
        script, manifest = slurm.emit(tasks, out, self.opts, self.script)
        print(
            f"wrote {script} ({len(tasks)} array task(s)) and {manifest}\n"
            f"submit it with: sbatch {script}\n"
            f"when it is over: nox -s batch -- --gather --out {out}"
        )
        return 0


def engine_for(args: argparse.Namespace, out: Path) -> Engine:
    """The engine the options ask for (``--emit-sbatch`` writes Slurm's script, whichever
    ``--engine``)."""
    if args.emit_sbatch:
        return Sbatch(args, out)
    if args.engine == "slurm":
        return Slurm(args, out)
    return Local(args)


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    out = args.out.resolve()
    if args.gather:
        if not out.is_dir():
            p.error(f"{args.out} is not a folder")
        finish(out)
        return 0
    problem = check_options(p, args)
    if problem:
        print(f"batch: {problem}", file=sys.stderr)
        return 2

    students = find_students(args.submissions)
    problem = not_a_class(args.submissions, students)
    if problem:
        print(f"batch: {problem}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for student in students:  # OUT lists the class, for --gather
        (out / student).mkdir(exist_ok=True)
    version = grader_version()
    todo = [s for s in students if args.force or not is_graded(out, s, version)]
    skipped = len(students) - len(todo)
    targets, unpacked, empty = sort_uploads(out, students, todo, version)
    todo = [s for s in todo if s in targets]

    engine = engine_for(args, out)
    without = f", {len(empty)} without exercise files" if empty else ""
    print(
        f"{len(students)} student(s) in {args.submissions}: grading {len(todo)}, "
        f"{skipped} already graded{without}; {engine.where}; grader {version}"
    )
    tasks = [
        Task(
            student=s,
            target=str(targets[s]),
            upload=unpacked.get(s),
            out=str(out),
            device=args.device,
            jobs=engine.jobs,
            timeout=args.timeout,
        )
        for s in todo
    ]
    if engine.clears:
        for task in tasks:
            clear(out, task.student)
    return engine.run(tasks, out)


if __name__ == "__main__":
    sys.exit(main())
