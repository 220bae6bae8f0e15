"""Batch grading through a real Slurm: ``nox -s slurm-test`` brings one up (tests/slurm/cluster.py)
and runs this file; elsewhere it is skipped.

A class of eight (solutions, skeletons, partial work, a missing file, a hostile endless loop, a
nested upload, a syntax error) is graded by the local engine and by ``--engine slurm``; the two
gradebooks must agree, except for a task cancelled with scancel, which must be an infra_error
and not a 0. A rerun regrades only that one. Beside them, a task that outlives its Slurm time
limit, an emitted sbatch script with --gather, and Ctrl-C cancelling an array.
"""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import endless_01

from kata import catalogue

pytestmark = pytest.mark.skipif(
    os.environ.get("KATA_SLURM_TEST") != "1", reason="needs a Slurm cluster: nox -s slurm-test"
)

ROOT = catalogue.ROOT
WORK = ROOT / ".slurm-test" / "work"  # inside the checkout: shared with the nodes if it is
HANG_S = 45  # the class's --timeout: the grader stops the endless loop after this
STEMS = [ex.stem for ex in catalogue.EXERCISE_LIST]
S, E = catalogue.SOLUTIONS, catalogue.EXERCISES
ALL = tuple(ex.number for ex in catalogue.EXERCISE_LIST)


def copy(folder, source, numbers=ALL):
    folder.mkdir(parents=True, exist_ok=True)
    for ex in catalogue.EXERCISE_LIST:
        if ex.number in numbers:
            shutil.copy(source / ex.filename, folder)


def make_class(root):
    copy(root / "ada", S)  # the reference solutions: 100
    copy(root / "bob", E)  # untouched skeletons: 0, four traps
    copy(root / "cy", S, tuple(n for n in ALL if n != "02"))  # partial: 02 untouched
    copy(root / "cy", E, ("02",))
    copy(root / "dee", S, ("03",))  # only 03 uploaded
    copy(root / "eve", S)  # hostile: 01's kernel loops forever
    (root / "eve" / catalogue.find("01").filename).write_text(endless_01())
    copy(root / "fay" / "my-upload", S)  # a nested upload (a zipped folder)
    copy(root / "gus", S)  # cancelled with scancel during the Slurm run
    copy(root / "hal", S, ("02",))  # 01 does not parse, 03 untouched
    copy(root / "hal", E, ("03",))
    (root / "hal" / "01_flash_attention_core.py").write_text("def flash_attn_kernel(:\n")


def command(*args):
    return [sys.executable, "-m", "grader.classroom.batch", *map(str, args)]


def spawn(title, *args):
    print(f"\n=== {title}\n$ nox -s batch -- {' '.join(map(str, args))}", flush=True)
    proc = subprocess.Popen(
        command(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    proc.started = time.monotonic()
    return proc


def collect(proc, timeout=900):
    output, _ = proc.communicate(timeout=timeout)
    print(
        output + f"(exit {proc.returncode} after {time.monotonic() - proc.started:.1f} s)",
        flush=True,
    )
    return proc.returncode, output


def batch(title, *args):
    return collect(spawn(title, *args))


def book(out):
    text = (out / "gradebook.csv").read_text()
    return {r["student"]: r for r in csv.DictReader(text.splitlines())}


def grades(row):
    return (row["score"], *[row[s] for s in STEMS], row["traps"])


def wait_running(out, student, seconds=600):
    """The student's task has started (task.json says running): its Slurm job id."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            record = json.loads((out / student / "task.json").read_text())
        except (OSError, ValueError):
            record = {}
        if record.get("status") == "running" and record.get("slurm_job"):
            return record["slurm_job"]
        time.sleep(0.5)
    raise AssertionError(f"{student}'s task never started")


@pytest.fixture(scope="module")
def klass():
    shutil.rmtree(WORK, ignore_errors=True)
    make_class(WORK / "class")
    return WORK / "class"


@pytest.fixture(scope="module")
def local_book(klass):
    out = WORK / "out-local"
    code, _ = batch(
        "local engine, the class of 8",
        "--engine",
        "local",
        "--submissions",
        klass,
        "--out",
        out,
        "--jobs",
        "2",
        "--device",
        "interpreter",
        "--timeout",
        HANG_S,
    )
    assert code == 0
    return book(out)


@pytest.fixture(scope="module")
def time_limit_run():
    """Started beside the Slurm class run: a student whose kernel loops forever,
    graded with a grader timeout (600 s) beyond the task's Slurm time limit (--time 1 minute).
    (A loop in the region, not time.sleep: a region holds Triton only.)"""
    subs = WORK / "sleeper"
    copy(subs / "ivy", S)
    (subs / "ivy" / catalogue.find("01").filename).write_text(endless_01())
    proc = spawn(
        "slurm engine, --time 1 for a student who sleeps",
        "--engine",
        "slurm",
        "--submissions",
        subs,
        "--out",
        WORK / "out-time-limit",
        "--time",
        "1",
        "--device",
        "interpreter",
        "--timeout",
        "600",
    )
    yield proc
    if proc.poll() is None:
        proc.kill()


def test_local_engine_grades_the_class(local_book):
    assert len(local_book) == 8 and all(r["status"] == "graded" for r in local_book.values())
    full = local_book["ada"]["max_score"]
    assert (local_book["ada"]["score"], local_book["gus"]["score"]) == (full, full)
    assert local_book["bob"]["score"] == "0"
    ex = {s: {n[:2]: v for n, v in r.items() if n in STEMS} for s, r in local_book.items()}
    assert (ex["cy"]["01"], ex["cy"]["02"]) == (ex["ada"]["01"], "0")  # 02 untouched
    assert (ex["dee"]["01"], ex["dee"]["03"]) == ("0", ex["ada"]["03"])  # 01 not uploaded
    assert (ex["eve"]["01"], ex["eve"]["02"]) == ("0", ex["ada"]["02"])  # the loop, stopped
    assert (ex["hal"]["01"], ex["hal"]["02"]) == ("0", ex["ada"]["02"])  # a syntax error
    assert set(local_book["bob"]["traps"].split(";")) == {
        "acc-not-rescaled",
        "causal-mask-missing",
        "top2-not-masked",
        "weights-not-renormalized",
    }


def test_slurm_engine_matches_local_and_a_cancelled_task_is_no_zero(
    klass, local_book, time_limit_run
):
    out = WORK / "out-slurm"
    proc = spawn(
        "slurm engine, the class of 8 (gus cancelled with scancel)",
        "--engine",
        "slurm",
        "--submissions",
        klass,
        "--out",
        out,
        "--max-parallel",
        "2",
        "--time",
        "10",
        "--device",
        "interpreter",
        "--timeout",
        HANG_S,
    )
    job = wait_running(out, "gus")
    subprocess.run(["scancel", job], check=True)
    print(f"(scancel {job}: gus's task, {time.monotonic() - proc.started:.1f} s in)", flush=True)
    code, output = collect(proc)
    assert code == 0
    assert "submitted Slurm job" in output and "8 array task(s)" in output
    rows = book(out)
    print((out / "gradebook.csv").read_text())
    assert set(rows) == set(local_book)
    gus = rows.pop("gus")
    assert (gus["status"], gus["score"]) == ("infra_error", "")
    assert gus["note"].startswith("CANCELLED"), gus["note"]
    for student, row in rows.items():
        assert row["status"] == "graded", (student, row)
        assert grades(row) == grades(local_book[student]), student


def test_rerun_grades_only_the_cancelled_student(klass, local_book):
    out = WORK / "out-slurm"
    code, output = batch(
        "slurm engine, rerun (resume)",
        "--engine",
        "slurm",
        "--submissions",
        klass,
        "--out",
        out,
        "--max-parallel",
        "2",
        "--time",
        "10",
        "--device",
        "interpreter",
        "--timeout",
        HANG_S,
    )
    assert code == 0
    assert "grading 1, 7 already graded" in output
    rows = book(out)
    print((out / "gradebook.csv").read_text())
    assert {s: grades(r) for s, r in rows.items()} == {s: grades(r) for s, r in local_book.items()}
    assert all(r["status"] == "graded" for r in rows.values())


def test_a_task_past_its_time_limit_is_an_infra_error(time_limit_run):
    code, _ = collect(time_limit_run, timeout=600)
    assert code == 0
    ivy = book(WORK / "out-time-limit")["ivy"]
    assert (ivy["status"], ivy["score"], ivy["01_flash_attention_core"]) == ("infra_error", "", "")
    assert ivy["note"].startswith("TIMEOUT"), ivy["note"]


def test_emitted_sbatch_script_and_gather(klass, local_book):
    subs, out = WORK / "pair", WORK / "out-sbatch"
    for student in ("ada", "bob"):
        shutil.copytree(klass / student, subs / student)
    script = WORK / "grade.sbatch"
    code, _ = batch(
        "--emit-sbatch",
        "--submissions",
        subs,
        "--out",
        out,
        "--emit-sbatch",
        script,
        "--device",
        "interpreter",
        "--time",
        "10",
    )
    assert code == 0
    text = script.read_text()
    print(text)
    assert "#SBATCH --array=0-1%2" in text and "grader.classroom.engines.task --manifest" in text
    start = time.monotonic()
    submitted = subprocess.run(["sbatch", "--wait", str(script)], capture_output=True, text=True)
    print(
        f"$ sbatch --wait {script}\n{submitted.stdout}{submitted.stderr}"
        f"(exit {submitted.returncode} after {time.monotonic() - start:.1f} s)"
    )
    assert submitted.returncode == 0
    code, _ = batch("--gather", "--gather", "--out", out)
    assert code == 0
    rows = book(out)
    assert {s: (r["status"], *grades(r)) for s, r in rows.items()} == {
        s: ("graded", *grades(local_book[s])) for s in ("ada", "bob")
    }


def test_ctrl_c_cancels_the_array(klass):
    # ada's kernel loops forever (eve's file): her task surely runs when Ctrl-C comes, however
    # fast a grading is.
    subs, out = WORK / "slow-pair", WORK / "out-ctrl-c"
    shutil.copytree(klass / "eve", subs / "ada")
    shutil.copytree(klass / "bob", subs / "bob")
    proc = spawn(
        "slurm engine, Ctrl-C while grading",
        "--engine",
        "slurm",
        "--submissions",
        subs,
        "--out",
        out,
        "--max-parallel",
        "1",
        "--device",
        "interpreter",
    )
    job = wait_running(out, "ada")
    proc.send_signal(signal.SIGINT)
    code, output = collect(proc)
    assert code == 130 and f"cancelling Slurm job {job.split('_')[0]}" in output
    live = subprocess.run(
        ["squeue", "-h", "-r", "-j", job.split("_")[0], "-t", "PD,R,CG"],
        capture_output=True,
        text=True,
    )
    assert live.stdout.strip() == "", live.stdout
    rows = book(out)
    assert (rows["ada"]["status"], rows["ada"]["score"]) == ("infra_error", "")
    assert rows["ada"]["note"].startswith("CANCELLED")
    assert rows["bob"]["status"] in ("graded", "infra_error")
    assert rows["bob"]["status"] == "graded" or rows["bob"]["score"] == ""
