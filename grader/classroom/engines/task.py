"""Grade one student: ``python -m grader`` on their folder, results written so that a reader never
sees half of them.

The local engine's workers and every Slurm array task call ``grade_student``, so both engines
grade the same way. It writes, in ``OUT/<student>/``:

- ``task.json``: how the grading went (``status``: running, graded, grader_error, infra_error),
  the grader version, host, CUDA_VISIBLE_DEVICES and Slurm job id;
- ``score.json``: the grader's report, moved into place last (``os.replace``): when it is there,
  the grading finished;
- ``grader.log`` (the grader's output, after a one-line header saying where it ran) and the raw
  pytest reports in ``pytest/``.

``python -m grader.classroom.engines.task --manifest FILE`` grades the student at index
``$SLURM_ARRAY_TASK_ID`` of a manifest: the command of the scripts that ``--emit-sbatch`` writes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from grader.run import process
from kata.catalogue import ROOT

STATUSES = ("running", "graded", "grader_error", "infra_error")  # and batch's own no_files


@dataclass(frozen=True, kw_only=True)
class Task:
    """One student to grade. Plain values only: it is pickled for Slurm and stored in manifests."""

    student: str
    target: str  # the folder holding the student's exercise files
    out: str  # OUT; this student's files go to OUT/<student>/
    device: str = "auto"
    jobs: int = 1  # exercises graded at once
    timeout: float | None = None  # seconds per exercise, passed to the grader
    gpu: int | None = None  # local engine: the GPU this worker is pinned to
    manifest: str | None = None  # --emit-sbatch: the manifest this task came from
    index: int | None = None  # ... and its index there
    upload: str | None = None  # how the target came from the upload ("unpacked from a.zip")


@dataclass(frozen=True)
class Files:
    folder: Path

    @property
    def score(self) -> Path:
        return self.folder / "score.json"

    @property
    def partial(self) -> Path:  # where the grader writes; renamed to score.json when complete
        return self.folder / ".score.partial.json"

    @property
    def task(self) -> Path:
        return self.folder / "task.json"

    @property
    def slurm(self) -> Path:  # written on the submitting side: job id, final Slurm state
        return self.folder / "slurm.json"

    @property
    def log(self) -> Path:
        return self.folder / "grader.log"


def files(out: Path, student: str) -> Files:
    return Files(Path(out) / student)


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict) -> None:
    """Write through a temporary file and rename: readers on other nodes see old or new, whole."""
    tmp = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def _counts_for_version(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return "__pycache__" not in rel and not rel.startswith(
        ("grader/classroom/engines/", "grader/classroom/batch.py")
    )


def grader_version() -> str:
    """``<version in pyproject.toml>+<digest>``: the digest covers the code that decides a grade
    (every file under grader/ except the batch machinery, and kata/*.py), so a rerun after a check
    was fixed regrades everyone, while an edit to the batch engines does not."""
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    paths = [p for p in (ROOT / "grader").rglob("*") if p.is_file() and _counts_for_version(p)]
    paths += list((ROOT / "kata").glob("*.py"))
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return f"{found.group(1) if found else 'unknown'}+{digest.hexdigest()[:12]}"


def is_graded(out: Path, student: str, version: str) -> bool:
    """Graded by this grader version: a rerun skips the student."""
    f = files(out, student)
    record, report = read_json(f.task), read_json(f.score)
    return bool(
        record
        and report
        and "score" in report
        and record.get("status") == "graded"
        and record.get("grader_version") == version
    )


def clear(out: Path, student: str) -> None:
    """Forget an earlier grading before a new one starts (its score must not outlive it)."""
    f = files(out, student)
    for path in (f.score, f.partial, f.task, f.slurm):
        path.unlink(missing_ok=True)


def slurm_ids() -> dict:
    """The Slurm job this process runs in, if any (``123_4`` for task 4 of array 123)."""
    env = os.environ
    if "SLURM_JOB_ID" not in env:
        return {}
    if "SLURM_ARRAY_JOB_ID" in env:
        job = f"{env['SLURM_ARRAY_JOB_ID']}_{env.get('SLURM_ARRAY_TASK_ID', '')}"
    else:
        job = env["SLURM_JOB_ID"]
    return {
        "slurm_job": job,
        "slurm_raw_id": env["SLURM_JOB_ID"],
        "node": env.get("SLURMD_NODENAME"),
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _kill_tree(pid: int) -> None:
    """Kill a process and everything below it (the grader starts launcher processes in their
    own process groups, so killing one group is not enough)."""
    for p in process.descendants(pid):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def _in_slurm_main() -> bool:
    return "SLURM_JOB_ID" in os.environ and threading.current_thread() is threading.main_thread()


def _ignore_time_warning() -> None:
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


def _run(cmd: list[str], env: dict) -> tuple[int, str]:
    # Slurm sends submitit's time-limit warning (USR2) to every process of the task; USR2 kills
    # by default, so the grader and everything it starts inherit "ignore" (kept across exec).
    # Only in a Slurm task's main thread: preexec_fn is unsafe beside other threads.
    ignore = _ignore_time_warning if _in_slurm_main() else None
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=ignore,
    )
    try:
        output, _ = proc.communicate()
    except BaseException:  # Ctrl-C, or the task being stopped: leave no grader running
        _kill_tree(proc.pid)
        proc.wait()
        raise
    return proc.returncode, output


def _keep_grading_on_time_warning(record: dict, path: Path) -> None:
    """submitit asks Slurm for a warning signal (USR2) before the time limit and, for a task that
    cannot checkpoint, turns it into an exception: the task would end as FAILED before Slurm's
    own TIMEOUT, with the grading cut short. Note the warning instead and keep grading: the
    student may still finish in time, and if not, Slurm's TIMEOUT names the reason."""
    if not _in_slurm_main():
        return

    def note(signum, frame):
        record["time_limit_warning"] = _now()
        write_json(path, record)

    signal.signal(signal.SIGUSR2, note)


def grader_command(task: Task, report: Path) -> list[str]:
    """``python -m grader`` on the student's target, its report written to ``report``."""
    cmd = [
        sys.executable,
        "-m",
        "grader",
        "--target",
        task.target,
        "--report",
        str(report),
        "--device",
        task.device,
        "--quiet",
        "--jobs",
        str(task.jobs),
        "--no-html",
    ]
    if task.timeout:
        cmd += ["--timeout", str(task.timeout)]
    return cmd


def grade_student(task: Task) -> dict:
    """Grade one student; returns the final ``task.json`` record (also when grading failed)."""
    f = files(Path(task.out), task.student)
    f.folder.mkdir(parents=True, exist_ok=True)
    f.partial.unlink(missing_ok=True)
    env = dict(os.environ)
    if task.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(task.gpu)
    host = socket.gethostname()
    record = {
        "student": task.student,
        "target": task.target,
        "status": "running",
        "grader_version": grader_version(),
        "host": host,
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        **slurm_ids(),
        "manifest": task.manifest,
        "index": task.index,
        "upload": task.upload,
        "started": _now(),
    }
    write_json(f.task, record)
    _keep_grading_on_time_warning(record, f.task)

    def finish(status: str, **fields) -> dict:
        record.update(status=status, finished=_now(), **fields)
        write_json(f.task, record)
        return record

    if not Path(task.target).is_dir():
        return finish(
            "infra_error",
            reason=f"{host} cannot see the submission folder "
            f"{task.target} (is it on a filesystem shared with the nodes?)",
        )
    # No page here: batch.finish draws score.html once score.json is in place.
    cmd = grader_command(task, f.partial)
    start = time.monotonic()
    code, output = _run(cmd, env)
    duration = round(time.monotonic() - start, 1)
    where = f"Slurm job {record['slurm_job']}" if record.get("slurm_job") else "no Slurm job"
    f.log.write_text(
        f"# batch: {task.student} graded on {host}, CUDA_VISIBLE_DEVICES="
        f"{record['cuda_visible_devices'] or '-'}, {where}, grader "
        f"{record['grader_version']}\n{output}"
    )
    report = read_json(f.partial)
    if code < 0:  # killed from outside: Slurm ending the task, or the kernel's OOM killer
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        return finish(
            "infra_error",
            duration_s=duration,
            reason=f"the grader was killed by {name} (task cancelled, out of time or memory?)",
        )
    if code != 0 or not report or "score" not in report:
        last = next((ln for ln in reversed(output.splitlines()) if ln.strip()), "no output")
        return finish(
            "grader_error",
            duration_s=duration,
            reason=f"the grader exited {code} without a report: {last.strip()}",
        )
    done = finish(
        "graded",
        duration_s=duration,
        score=report["score"],
        max_score=report.get("max_score"),
        schema_version=report.get("schema_version"),
    )
    os.replace(f.partial, f.score)  # last: score.json appears whole, after task.json says graded
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m grader.classroom.engines.task",
        description="Grade one student of a batch manifest.",
    )
    p.add_argument("--manifest", type=Path, required=True)
    p.add_argument("--index", type=int, help="default: $SLURM_ARRAY_TASK_ID")
    args = p.parse_args(argv)
    index = args.index if args.index is not None else os.environ.get("SLURM_ARRAY_TASK_ID")
    if index is None:
        p.error("no --index and no $SLURM_ARRAY_TASK_ID (run this inside a Slurm array)")
    manifest = read_json(args.manifest)
    if manifest is None:
        print(f"task: cannot read the manifest {args.manifest}", file=sys.stderr)
        return 2
    entry = manifest["students"][int(index)]
    task = Task(
        student=entry["student"],
        target=entry["target"],
        out=manifest["out"],
        device=manifest["device"],
        jobs=manifest["jobs"],
        timeout=manifest.get("timeout"),
        gpu=None,
        manifest=str(args.manifest.resolve()),
        index=int(index),
        upload=entry.get("upload"),
    )
    record = grade_student(task)
    print(
        f"{task.student}: {record['status']} {record.get('score', '')}"
        f" {record.get('reason', '')}".rstrip()
    )
    return 0 if record["status"] == "graded" else 1


if __name__ == "__main__":
    sys.exit(main())
