"""The Slurm engine: one array task per student, each running ``task.grade_student``.

Two ways in:

- ``run``: submitit (``AutoExecutor.map_array``) submits the array from this process, which then
  shows how many tasks are queued, running, done and failed until the array is over. Ctrl-C
  cancels the array (``scancel``).
- ``emit``: a plain ``#SBATCH --array=0-N%K`` script plus a manifest of the students, for sites
  where nothing may keep running on the login node; ``nox -s batch -- --gather`` then reads
  what the tasks wrote.

All state is in OUT, which must be on a filesystem that the nodes share: per student, what the
task writes (``task.json``, ``score.json``) and ``slurm.json`` (the job id and, once the job is
over, Slurm's final state); in ``OUT/.slurm/``, submitit's folder, the sbatch logs and the
manifests.

A task that Slurm ended (time limit, node failure, cancellation, preemption, out of memory) is an
``infra_error`` with the reason, never a score. The reason comes from Slurm (squeue, or sacct
where the cluster keeps accounting) and, once Slurm has forgotten the job, from what was saved
in ``slurm.json`` or from the "CANCELLED ... DUE TO ..." line that slurmstepd writes into the
task's log.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.classroom.engines.task import (
    Task,
    clear,
    files,
    grade_student,
    grader_version,
    is_graded,
    read_json,
    write_json,
)
from kata.catalogue import EXERCISE_LIST, ROOT

QUEUED = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
RUNNING = {
    "RUNNING",
    "CONFIGURING",
    "COMPLETING",
    "SIGNALING",
    "STAGE_OUT",
    "RESIZING",
    "SUSPENDED",
    "STOPPED",
}
# Ended by Slurm or the machine, not by the grader: never a score.
INFRA = {
    "TIMEOUT": "the task reached its time limit (--time)",
    "DEADLINE": "the task reached its deadline",
    "NODE_FAIL": "the node failed",
    "BOOT_FAIL": "the node failed to boot",
    "CANCELLED": "the task was cancelled",
    "PREEMPTED": "the task was preempted",
    "OUT_OF_MEMORY": "the task ran out of memory (try --mem-gb)",
    "REVOKED": "the job was revoked",
}
# What slurmstepd writes into the job's log when it ends a job: "*** JOB 12 ON node1 CANCELLED AT
# 2025-01-01T10:00:00 DUE TO TIME LIMIT ***" (no "DUE TO" for scancel).
LOG_LINE = re.compile(
    r"\*\*\* (?:JOB|STEP) \S+ ON (\S+) CANCELLED AT (\S+)(?: DUE TO ([A-Z ]+?))? \*\*\*"
)
DUE_TO = {"TIME LIMIT": "TIMEOUT", "NODE FAILURE": "NODE_FAIL", "PREEMPTION": "PREEMPTED"}
SHARED_HINT = "docs/instructors.md#grading-on-a-slurm-cluster"


@dataclass(frozen=True)
class Options:
    partition: str | None = None
    gpus_per_task: int = 0
    max_parallel: int = 8
    time_min: int = 30
    mem_gb: float | None = None
    account: str | None = None
    sbatch_args: tuple[str, ...] = ()  # further sbatch options, e.g. "--qos=short"
    device: str = "auto"
    poll_s: float = 5.0

    @property
    def cpus(self) -> int:
        """CPUs per task, also the exercises graded at once: all of them on a GPU (as the local
        engine does; also for a GPU requested through --sbatch-arg=--gres=...), one at a time
        in the interpreter."""
        return len(EXERCISE_LIST) if self.gpus_per_task or self.device == "cuda" else 1


def missing_commands(names: Iterable[str] = ("sbatch", "squeue", "scancel", "srun")) -> str | None:
    """Why the Slurm engine cannot run here, or None."""
    missing = [n for n in names if shutil.which(n) is None]
    if not missing:
        return None
    return (
        f"--engine slurm needs Slurm's {', '.join(missing)} on PATH, and there is none: run "
        f"this on the cluster's login node (see {SHARED_HINT}), or use --engine local"
    )


def local_paths(paths: dict[str, Path]) -> list[str]:
    """The paths that are probably not shared with the nodes (node-local temporary folders)."""
    local = ("/tmp/", "/var/tmp/", "/dev/shm/", "/run/")
    return [
        f"{what} ({p})" for what, p in paths.items() if str(Path(p).resolve()).startswith(local)
    ]


def _call(cmd: list[str]) -> tuple[int, str, str] | None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.returncode, p.stdout, p.stderr


def expand(job: str) -> list[str]:
    """sacct's and squeue's ids for array tasks: ``12_3``, or ``12_[3-5,8%2]`` for pending ones."""
    m = re.fullmatch(r"(\d+)_\[([\d,\-]+)(?:%\d+)?\]", job)
    if not m:
        return [job]
    ids = []
    for part in m.group(2).split(","):
        lo, _, hi = part.partition("-")
        ids += [f"{m.group(1)}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return ids


def scheduler_states(jobs: Iterable[str]) -> tuple[dict[str, tuple[str, str]], bool]:
    """Slurm's (state, reason) for each job id (``123_4``), and whether Slurm answered at all.

    squeue first: it is current, and keeps ended jobs for a few minutes (MinJobAge). Then sacct
    for the rest, on clusters that keep accounting (it says "accounting storage is disabled"
    and fails where they do not)."""
    jobs = set(jobs)
    states: dict[str, tuple[str, str]] = {}
    answered = False
    for array in sorted({j.split("_")[0] for j in jobs}):
        result = _call(["squeue", "-h", "-r", "-t", "all", "-j", array, "-o", "%i|%T|%r"])
        if result is None:
            continue
        code, out, err = result
        answered |= code == 0 or "Invalid job id" in err  # the controller answered: job forgotten
        for line in out.splitlines():
            job, state, reason = (line.split("|") + ["", ""])[:3]
            for one in expand(job.strip()):
                states[one] = (state.strip(), reason.strip())
    rest = sorted({j.split("_")[0] for j in jobs if j not in states})
    if rest:
        result = _call(
            ["sacct", "-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", ",".join(rest)]
        )
        if result is not None and result[0] == 0:
            answered = True
            for line in result[1].splitlines():
                job, state, code = (line.split("|") + ["", ""])[:3]
                for one in expand(job.strip()):
                    # "CANCELLED by 1234" -> CANCELLED
                    states.setdefault(one, (state.split()[0] if state else "", f"exit {code}"))
    return {j: s for j, s in states.items() if j in jobs}, answered


def log_files(out: Path, job: str) -> list[Path]:
    """The task's logs: sbatch's for an emitted script, submitit's otherwise."""
    slurm = out / ".slurm"
    return [
        slurm / "logs" / f"{job}.log",
        slurm / "submitit" / f"{job}_0_log.err",
        slurm / "submitit" / f"{job}_0_log.out",
    ]


def state_from_log(out: Path, job: str) -> tuple[str, str] | None:
    """Slurm's reason, read back from the "*** JOB ... CANCELLED AT ... ***" line of the log."""
    for path in log_files(out, job):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        found = LOG_LINE.findall(text)
        if found:
            node, when, due = found[-1]
            return DUE_TO.get(due, "CANCELLED"), f"{when} on {node} (from the task's log)"
        if "oom_kill event" in text or "oom-kill event" in text:
            return "OUT_OF_MEMORY", "from the task's log"
    return None


def _log_hint(out: Path, job: str) -> str:
    existing = [p for p in log_files(out, job) if p.exists()]
    return f"; log: {existing[0]}" if existing else ""


def _started_arrays(out: Path) -> dict[str, set[str]]:
    """{manifest path: the array ids its started tasks recorded}, for emitted scripts."""
    arrays: dict[str, set[str]] = {}
    for folder in out.iterdir():
        record = read_json(folder / "task.json") or {}
        if record.get("manifest") and record.get("slurm_job"):
            arrays.setdefault(record["manifest"], set()).add(record["slurm_job"].split("_")[0])
    return arrays


def job_for(out: Path, student: str, started: dict[str, set[str]] | None = None) -> str | None:
    """The Slurm job id (``123_4``) of the student's latest task: from the task itself, from the
    submission (submitit), or for an emitted script whose task has not started, from its
    manifest and the array id that the manifest's other tasks recorded."""
    f = files(out, student)
    record = read_json(f.task) or {}
    if record.get("slurm_job"):
        return record["slurm_job"]
    submitted = read_json(f.slurm) or {}
    if submitted.get("job"):
        return submitted["job"]
    for manifest in sorted((out / ".slurm" / "manifests").glob("*.json"), reverse=True):
        names = [s["student"] for s in (read_json(manifest) or {}).get("students", [])]
        if student in names:  # the newest manifest that lists the student
            if started is None:
                started = _started_arrays(out)
            arrays = started.get(str(manifest.resolve()))
            return f"{max(arrays, key=int)}_{names.index(student)}" if arrays else None
    return None


def explain(out: Path, students: list[str]) -> dict[str, tuple[str, str]]:
    """(status, note) for students without a report: queued, running, infra_error (with
    Slurm's reason) or not_graded. Saves an ended job's state in slurm.json, so that the
    reason outlives Slurm's memory of the job."""
    started = _started_arrays(out) if students else {}
    jobs = {s: job_for(out, s, started) for s in students}
    states, answered = scheduler_states(j for j in jobs.values() if j)
    result = {}
    for student, job in jobs.items():
        f = files(out, student)
        record = read_json(f.task) or {}
        own = record.get("reason", "") if record.get("status") == "infra_error" else ""
        if not job:
            result[student] = (
                ("infra_error", own)
                if own
                else ("not_graded", "grading started and did not finish" if record else "no report")
            )
            continue
        saved = read_json(f.slurm) or {}
        state, reason = states.get(job, ("", ""))
        if saved.get("job") == job and saved.get("state") and state in ("", saved["state"]):
            state, reason = saved["state"], saved.get("reason") or reason  # ours names the cause
        if not state:
            state, reason = state_from_log(out, job) or ("", "")
        if not state and record.get("time_limit_warning"):
            state, reason = "TIMEOUT", "Slurm's time-limit warning came; the task never finished"
        node = f" on {record['node']}" if record.get("node") else ""
        hint = _log_hint(out, job)
        if state in QUEUED:
            result[student] = (
                "queued",
                f"job {job} {state.lower()}"
                + (f" ({reason})" if reason not in ("", "None") else ""),
            )
        elif state in RUNNING:
            result[student] = ("running", f"job {job} {state.lower()}{node}")
        elif state in INFRA or (state and not own):
            meaning = INFRA.get(state, "the task ended without a report")
            detail = f", {reason}" if reason not in ("", "None") else ""
            result[student] = ("infra_error", f"{state}: {meaning} (job {job}{node}{detail}){hint}")
            if saved.get("state") != state:
                write_json(f.slurm, {**saved, "job": job, "state": state, "reason": reason})
        elif own:  # what the task itself saw (a folder it could not read, a killed grader)
            result[student] = ("infra_error", f"{own} (job {job}{node}){hint}")
        elif answered:
            result[student] = (
                "infra_error",
                f"LOST: Slurm no longer knows job {job} and it left no "
                f"report (cancelled before it started?){hint}",
            )
        else:
            result[student] = (
                "not_graded",
                f"no report; Slurm did not answer about job {job} "
                f"(gather on the cluster's login node){hint}",
            )
    return result


# ---- submitting through submitit, and waiting ----------------------------------------------


class SubmitError(Exception):
    pass


def _extra_parameters(args: Iterable[str]) -> dict[str, object]:
    """``--qos=short`` -> {"qos": "short"}; ``--exclusive`` -> {"exclusive": True}."""
    extra: dict[str, object] = {}
    for arg in args:
        key, eq, value = arg.removeprefix("--").partition("=")
        extra[key] = value if eq else True
    return extra


def submit(tasks: list[Task], out: Path, opts: Options) -> dict[str, str]:
    """Submit one array (one task per student) through submitit: {student: job id}."""
    try:
        import submitit
    except ImportError as exc:
        raise SubmitError("the Slurm engine needs submitit (`nox -s batch` installs it)") from exc
    executor = submitit.AutoExecutor(folder=out / ".slurm" / "submitit", cluster="slurm")
    params: dict[str, object] = {
        "name": "kata-grade",
        "timeout_min": opts.time_min,
        "cpus_per_task": opts.cpus,
        "slurm_array_parallelism": opts.max_parallel,
        # The tasks import the grader from this checkout (shared with the nodes).
        "slurm_setup": [f"cd {shlex.quote(str(ROOT))}"],
    }
    if opts.gpus_per_task:
        params["gpus_per_node"] = opts.gpus_per_task  # one task per job: the task's GPUs
    if opts.partition:
        params["slurm_partition"] = opts.partition
    if opts.mem_gb:
        params["mem_gb"] = opts.mem_gb
    if opts.account:
        params["slurm_account"] = opts.account
    if opts.sbatch_args:
        params["slurm_additional_parameters"] = _extra_parameters(opts.sbatch_args)
    executor.update_parameters(**params)
    try:
        jobs = executor.map_array(grade_student, tasks)  # pickled by name: imported on the node
    except Exception as exc:  # sbatch refused: bad partition, account, GPU request...
        raise SubmitError(f"sbatch refused the array: {str(exc).strip()}") from exc
    ids = {}
    for task, job in zip(tasks, jobs):
        # Only now that sbatch took the array: a refused one (say, a misspelt partition with
        # --force) must not cost the earlier grades. A task cannot have finished meanwhile.
        clear(out, task.student)
        ids[task.student] = job.job_id
        write_json(
            files(out, task.student).slurm,
            {
                "job": job.job_id,
                "engine": "submitit",
                "submitted": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
        )
    return ids


def _phase(out: Path, student: str, version: str, state: str, answered: bool) -> str:
    if is_graded(out, student, version):
        return "done"
    record = read_json(files(out, student).task) or {}
    if record.get("status") in ("grader_error", "infra_error"):
        return "failed"
    if state in QUEUED or (not state and not answered):
        return "queued"
    if state in RUNNING:
        return "running"
    return "failed"  # ended without a report, or forgotten by Slurm


def wait(jobs: dict[str, str], out: Path, opts: Options, stream=sys.stdout) -> None:
    """Poll until no task is queued or running, with a progress line."""
    version = grader_version()
    start = time.monotonic()
    tty = stream.isatty()
    shown, settled, silent_since = "", False, None
    arrays = ", ".join(sorted({j.split("_")[0] for j in jobs.values()}))
    while True:
        states, answered = scheduler_states(jobs.values())
        counts = dict.fromkeys(("queued", "running", "done", "failed"), 0)
        for student, job in jobs.items():
            counts[_phase(out, student, version, states.get(job, ("", ""))[0], answered)] += 1
        elapsed = int(time.monotonic() - start)
        text = ", ".join(f"{n} {k}" for k, n in counts.items())
        line = f"Slurm job {arrays}: {text}  [{elapsed // 60}:{elapsed % 60:02d}]"
        if tty:
            stream.write("\r\033[K" + line)
        elif text != shown:
            stream.write(line + "\n")
        shown = text
        stream.flush()
        if answered:
            silent_since = None
        elif silent_since is None:
            silent_since = time.monotonic()
        elif time.monotonic() - silent_since > 600:
            stream.write(
                f"\nSlurm has not answered for 10 minutes; the tasks may still run: "
                f"gather later with `nox -s batch -- --gather --out {out}`\n"
            )
            return
        if answered and counts["queued"] + counts["running"] == 0:
            if settled:  # a second look: shared filesystems can show a node's files late
                break
            settled = True
        else:
            settled = False
        time.sleep(opts.poll_s)
    if tty:
        stream.write("\n")


def cancel(jobs: dict[str, str], out: Path, stream=sys.stdout) -> None:
    """Ctrl-C: cancel the array, wait (briefly) for its tasks to end, and record why the
    unfinished ones have no score."""
    arrays = sorted({j.split("_")[0] for j in jobs.values()})
    stream.write(f"\ncancelling Slurm job {', '.join(arrays)} (scancel)\n")
    _call(["scancel", *arrays])
    version = grader_version()
    for _ in range(30):
        states, _answered = scheduler_states(jobs.values())
        if not any(s in QUEUED | RUNNING for s, _ in states.values()):
            break
        time.sleep(1)
    for student, job in jobs.items():
        if is_graded(out, student, version):
            continue
        state = states.get(job, ("", ""))[0]
        if state in ("", "CANCELLED"):  # a pending task that was cancelled leaves no trace
            f = files(out, student)
            write_json(
                f.slurm,
                {
                    **(read_json(f.slurm) or {}),
                    "job": job,
                    "state": "CANCELLED",
                    "reason": "Ctrl-C in the batch command",
                },
            )


def run(tasks: list[Task], out: Path, opts: Options, stream=sys.stdout) -> int:
    """Submit the array, wait for it, and return the exit status (130 after Ctrl-C)."""
    # A Ctrl-C while the array is submitted is held until the submission is done (submitit may
    # swallow it, and the first tasks can be running by then), then cancels it like any other.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        jobs = submit(tasks, out, opts)
    except SubmitError as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        print(f"batch: {exc}", file=sys.stderr)
        return 2
    arrays = ", ".join(sorted({j.split("_")[0] for j in jobs.values()}))
    gpus = f"{opts.gpus_per_task} GPU(s)" if opts.gpus_per_task else "no GPU"
    stream.write(
        f"submitted Slurm job {arrays} through submitit: {len(tasks)} array task(s), "
        f"at most {min(opts.max_parallel, len(tasks))} at once, {opts.time_min} min, {gpus} and "
        f"{opts.cpus} CPU(s) each; logs in {out / '.slurm' / 'submitit'}\n"
    )
    stream.flush()
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a Ctrl-C held meanwhile comes here
        wait(jobs, out, opts, stream)
    except KeyboardInterrupt:
        cancel(jobs, out, stream)
        return 130
    return 0


# ---- a plain sbatch script, for sites where nothing may stay on the login node ----------------


def emit(tasks: list[Task], out: Path, opts: Options, script: Path) -> tuple[Path, Path]:
    """Write ``script`` (an sbatch array, one task per student) and its manifest in
    OUT/.slurm/manifests/; returns both paths."""
    slurm = out / ".slurm"
    (slurm / "manifests").mkdir(parents=True, exist_ok=True)
    (slurm / "logs").mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    manifest = slurm / "manifests" / f"{stamp}.json"
    n = 1
    while manifest.exists():
        n += 1
        manifest = slurm / "manifests" / f"{stamp}-{n}.json"
    first = tasks[0]
    write_json(
        manifest,
        {
            "grader_version": grader_version(),
            "out": str(out),
            "device": first.device,
            "jobs": first.jobs,
            "timeout": first.timeout,
            "students": [
                {"student": t.student, "target": t.target, "upload": t.upload} for t in tasks
            ],
        },
    )
    q = shlex.quote
    options = [
        "--job-name=kata-grade",
        f"--array=0-{len(tasks) - 1}%{min(opts.max_parallel, len(tasks))}",
        f"--time={opts.time_min}",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={opts.cpus}",
        f"--output={q(str(slurm / 'logs' / '%A_%a.log'))}",
    ]
    if opts.gpus_per_task:
        options.append(f"--gpus-per-node={opts.gpus_per_task}")
    if opts.partition:
        options.append(f"--partition={q(opts.partition)}")
    if opts.mem_gb:
        options.append(f"--mem={int(opts.mem_gb * 1024)}M")
    if opts.account:
        options.append(f"--account={q(opts.account)}")
    options += list(opts.sbatch_args)
    lines = [
        "#!/bin/bash",
        f"# Grades {len(tasks)} student(s), one per array task; written by `nox -s batch -- --emit-sbatch`.",
        f"# Students: {manifest}",
        f"# Submit: sbatch {script}",
        f"# Then, when the array is over: nox -s batch -- --gather --out {out}",
        *[f"#SBATCH {o}" for o in options],
        "",
        f"cd {q(str(ROOT))}",
        f"exec {q(sys.executable)} -m grader.classroom.engines.task --manifest {q(str(manifest))}",
        "",
    ]
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("\n".join(lines))
    script.chmod(0o755)
    return script, manifest
