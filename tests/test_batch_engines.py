"""Batch grading's engines without a cluster: the grader version, the emitted sbatch script and
its manifest, and how the gather step reads Slurm's answers (a stand-in squeue on PATH). The
real cluster runs in ``nox -s slurm-test`` (tests/slurm/)."""

import csv
import json
import os
import subprocess
import sys

from grader.classroom import batch
from grader.classroom.engines import slurm, task
from kata import catalogue

ROOT = catalogue.ROOT


def run_batch(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "grader.classroom.batch", *map(str, args)],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def fake_squeue(bin_dir, stdout="", stderr="", code=0):
    """An squeue that prints what it is told to (sacct is absent, as on a cluster without
    accounting)."""
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "out.txt").write_text(stdout)
    (bin_dir / "err.txt").write_text(stderr)
    script = bin_dir / "squeue"
    script.write_text(f"#!/bin/sh\ncat {bin_dir}/out.txt\ncat {bin_dir}/err.txt >&2\nexit {code}\n")
    script.chmod(0o755)


def graded(out, student, score, version):
    folder = out / student
    folder.mkdir(parents=True, exist_ok=True)
    task.write_json(
        folder / "task.json", {"student": student, "status": "graded", "grader_version": version}
    )
    report = {
        "score": score,
        "max_score": 100,
        "traps": [],
        "exercises": [
            {"id": ex.stem, "score": 0, "max_score": 0, "checks": []}
            for ex in catalogue.EXERCISE_LIST
        ],
    }
    task.write_json(folder / "score.json", report)


def test_array_ids_are_expanded():
    assert slurm.expand("12_3") == ["12_3"]
    assert slurm.expand("12") == ["12"]
    assert slurm.expand("12_[3-5,8%2]") == ["12_3", "12_4", "12_5", "12_8"]


def test_slurm_reason_is_read_back_from_the_task_log(tmp_path):
    logs = tmp_path / ".slurm" / "logs"
    logs.mkdir(parents=True)
    (logs / "12_3.log").write_text(
        "grading...\nslurmstepd: error: *** JOB 15 ON node7 CANCELLED AT 2026-01-01T10:00:00 "
        "DUE TO TIME LIMIT ***\n"
    )
    (logs / "12_4.log").write_text(
        "slurmstepd: error: *** JOB 16 ON node7 CANCELLED AT 2026-01-01T10:00:00 ***\n"
    )
    assert slurm.state_from_log(tmp_path, "12_3")[0] == "TIMEOUT"
    assert slurm.state_from_log(tmp_path, "12_4")[0] == "CANCELLED"
    assert slurm.state_from_log(tmp_path, "12_5") is None


def test_gather_marks_infrastructure_failures_not_zero(tmp_path, monkeypatch):
    out, bin_dir = tmp_path / "out", tmp_path / "bin"
    version = task.grader_version()
    graded(out, "ada", 100, version)
    (out / "gus").mkdir()  # started, then cancelled: its task.json still says running
    task.write_json(out / "gus" / "task.json", {"status": "running", "slurm_job": "7_1"})
    (out / "ivy").mkdir()  # never wrote anything: the submission side recorded its job
    task.write_json(out / "ivy" / "slurm.json", {"job": "7_2"})
    (out / "hal").mkdir()  # the grader itself could not run
    task.write_json(out / "hal" / "task.json", {"status": "grader_error", "reason": "grader: x"})
    (out / "kim").mkdir()  # still in the queue
    task.write_json(out / "kim" / "slurm.json", {"job": "7_3"})
    fake_squeue(bin_dir, "7_1|CANCELLED|None\n7_2|TIMEOUT|TimeLimit\n7_3|PENDING|Priority\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    rows = {r.student: r for r in batch.gather(out)}
    assert {s: r.status for s, r in rows.items()} == {
        "ada": "graded",
        "gus": "infra_error",
        "hal": "grader_error",
        "ivy": "infra_error",
        "kim": "queued",
    }
    assert rows["gus"].note.startswith("CANCELLED") and rows["ivy"].note.startswith("TIMEOUT")
    book = batch.write_gradebook(list(rows.values()), out)
    csv_rows = {r["student"]: r for r in csv.DictReader(book.read_text().splitlines())}
    assert csv_rows["ada"]["score"] == "100"
    assert all(csv_rows[s]["score"] == "" for s in ("gus", "hal", "ivy", "kim"))

    # Slurm forgets ended jobs (MinJobAge); the reason saved in slurm.json remains.
    assert json.loads((out / "ivy" / "slurm.json").read_text())["state"] == "TIMEOUT"
    fake_squeue(bin_dir, stderr="slurm_load_jobs error: Invalid job id specified\n", code=1)
    rows = {r.student: r for r in batch.gather(out)}
    assert rows["gus"].note.startswith("CANCELLED") and rows["ivy"].note.startswith("TIMEOUT")
    assert rows["kim"].status == "infra_error" and rows["kim"].note.startswith("LOST")


def test_the_slurm_engine_names_a_missing_sbatch(tmp_path):
    (tmp_path / "subs" / "ada").mkdir(parents=True)
    proc = run_batch(
        "--engine",
        "slurm",
        "--submissions",
        tmp_path / "subs",
        "--out",
        tmp_path / "out",
        env={"PATH": str(tmp_path)},
    )
    assert proc.returncode == 2
    assert "needs Slurm's sbatch" in proc.stderr and "login node" in proc.stderr


def test_options_belong_to_their_engine(tmp_path):
    (tmp_path / "subs").mkdir()
    common = ["--submissions", tmp_path / "subs", "--out", tmp_path / "out"]
    local = run_batch(*common, "--partition", "gpu")
    assert local.returncode == 2 and "--partition is for --engine slurm" in local.stderr
    jobs = run_batch(*common, "--engine", "slurm", "--jobs", "2")
    assert jobs.returncode == 2 and "--max-parallel" in jobs.stderr


def test_emit_sbatch_writes_an_array_and_its_manifest(tmp_path):
    subs, out, script = tmp_path / "subs", tmp_path / "out", tmp_path / "grade.sbatch"
    for student in ("ada", "bob", "cy"):
        (subs / student).mkdir(parents=True)
        # One file that does not even parse: graded fast (the others "not found"), and not an
        # upload without exercise files, which is not graded at all.
        (subs / student / catalogue.find("01").filename).write_text("x = (\n")
    graded(out, "ada", 100, task.grader_version())  # skipped: same grader version
    graded(out, "bob", 90, "0.0.1+old")  # regraded: another grader version
    proc = run_batch(
        "--submissions",
        subs,
        "--out",
        out,
        "--emit-sbatch",
        script,
        "--partition",
        "gpu",
        "--gpus-per-task",
        "1",
        "--time",
        "20",
        "--sbatch-arg=--qos=short",
        "--device",
        "interpreter",
    )
    assert proc.returncode == 0, proc.stderr
    assert "grading 2, 1 already graded" in proc.stdout and f"sbatch {script}" in proc.stdout
    text = script.read_text()
    for line in (
        "#SBATCH --array=0-1%2",
        "#SBATCH --time=20",
        "#SBATCH --partition=gpu",
        "#SBATCH --gpus-per-node=1",
        f"#SBATCH --cpus-per-task={len(catalogue.EXERCISE_LIST)}",
        "#SBATCH --qos=short",
        f"#SBATCH --output={out}/.slurm/logs/%A_%a.log",
    ):
        assert line in text.splitlines(), line
    (manifest,) = (out / ".slurm" / "manifests").glob("*.json")
    data = json.loads(manifest.read_text())
    assert [s["student"] for s in data["students"]] == ["bob", "cy"]
    assert f"--manifest {manifest}" in text
    assert not (out / "bob" / "score.json").exists()  # the stale grade is gone, not kept

    # What each array task runs, here by hand for task 0 (bob), outside Slurm.
    one = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader.classroom.engines.task",
            "--manifest",
            str(manifest),
            "--index",
            "0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one.returncode == 0, one.stdout + one.stderr
    gathered = run_batch("--gather", "--out", out)
    assert gathered.returncode == 0, gathered.stderr
    rows = {
        r["student"]: r for r in csv.DictReader((out / "gradebook.csv").read_text().splitlines())
    }
    assert (rows["ada"]["score"], rows["bob"]["score"], rows["cy"]["score"]) == ("100", "0", "")
    assert (rows["bob"]["status"], rows["cy"]["status"]) == ("graded", "not_graded")

    # Under Slurm a task records its array id; the manifest then maps cy to task 1 of that array.
    record = json.loads((out / "bob" / "task.json").read_text())
    task.write_json(out / "bob" / "task.json", {**record, "slurm_job": "55_0"})
    fake_squeue(tmp_path / "bin", "55_0|COMPLETED|None\n55_1|PENDING|JobArrayTaskLimit\n")
    path = f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"
    assert run_batch("--gather", "--out", out, env={"PATH": path}).returncode == 0
    rows = {
        r["student"]: r for r in csv.DictReader((out / "gradebook.csv").read_text().splitlines())
    }
    assert (rows["cy"]["status"], rows["cy"]["score"]) == ("queued", "")
    assert "55_1" in rows["cy"]["note"]
    assert (
        json.loads((out / "bob" / "task.json").read_text())["grader_version"]
        == data["grader_version"]
    )


def test_grader_version_follows_the_grading_code_only(tmp_path, monkeypatch):
    for name in (
        "grader/rubric.py",
        "grader/classroom/batch.py",
        "grader/classroom/engines/slurm.py",
        "kata/host.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "k"\nversion = "1.2.3"\n')
    monkeypatch.setattr(task, "ROOT", tmp_path)
    first = task.grader_version()
    assert first.startswith("1.2.3+")
    for name in ("grader/classroom/batch.py", "grader/classroom/engines/slurm.py"):
        (tmp_path / name).write_text("x = 2\n")
    assert task.grader_version() == first  # the batch machinery does not decide grades
    for name in ("grader/rubric.py", "kata/host.py"):
        (tmp_path / name).write_text("x = 3\n")
        assert task.grader_version() != first
        first = task.grader_version()


def test_a_refused_submission_keeps_the_earlier_grades(tmp_path):
    bin_dir, subs, out = tmp_path / "bin", tmp_path / "subs", tmp_path / "out"
    bin_dir.mkdir()
    for name, body in (
        ("sbatch", "echo 'sbatch: error: invalid partition specified: gpux' >&2\nexit 1"),
        ("srun", "exit 0"),
        ("squeue", "exit 0"),
        ("scancel", "exit 0"),
    ):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (subs / "ada").mkdir(parents=True)
    (subs / "ada" / catalogue.find("01").filename).write_text("x = 1\n")  # an upload to grade
    graded(out, "ada", 100, task.grader_version())
    proc = run_batch(
        "--engine",
        "slurm",
        "--submissions",
        subs,
        "--out",
        out,
        "--force",
        "--partition",
        "gpux",
        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )
    assert proc.returncode == 2
    # The sbatch's own words (or, where submitit is not installed yet, that it is missing).
    assert "invalid partition specified: gpux" in proc.stderr or "needs submitit" in proc.stderr
    assert json.loads((out / "ada" / "score.json").read_text())["score"] == 100


def test_gradebook_flags_exercises_edited_outside_their_todo_regions(tmp_path):
    from grader.classroom import batch

    def report(flags: dict) -> dict:
        exercises = [
            {"id": ex.stem, "score": 0, "integrity": {"ok": ok}}
            for ex, ok in zip(catalogue.EXERCISE_LIST, flags.values())
        ]
        return {"score": 0, "max_score": 100, "traps": [], "exercises": exercises}

    rows = [
        batch.Row("ada", "graded", report({"01": True, "02": True, "03": True})),
        batch.Row("bob", "graded", report({"01": False, "02": True, "03": False})),
        batch.Row("cy", "infra_error", None, "TIMEOUT"),
    ]
    book = batch.write_gradebook(rows, tmp_path)
    got = {r["student"]: r["integrity"] for r in csv.DictReader(book.read_text().splitlines())}
    assert got == {"ada": "", "bob": "01;03", "cy": ""}


# ---- the gradebook's reasons (grader.report.reasons) -------------------------------------------


def _exercise(checks=(), error=None, score=0, integrity=None):
    return {
        "id": catalogue.find("01").stem,
        "score": score,
        "max_score": 25,
        "error": error,
        "integrity": integrity,
        "checks": [
            {"id": i, "todo": "rescale-acc", "status": s, "trap": trap, "message": "m"}
            for i, s, trap in checks
        ],
    }


def test_a_reason_for_each_exercise_error_the_grader_gives(tmp_path):
    """The grader's own messages, made by the grader, each in a few words."""
    from grader import specs
    from grader.report import reasons
    from grader.run import process, runner

    first, gating = catalogue.find("01"), catalogue.find("03")
    folder = tmp_path / "eve"
    folder.mkdir()
    (folder / f"{gating.stem} (1).py").write_text("x = 1\n")
    (folder / first.filename).write_text("def flash_attn_kernel(:\n")
    missing = runner.grade_exercise(gating, folder, "interpreter", timed=False)
    broken = runner.grade_exercise(first, folder, "interpreter", timed=False)
    right = "        acc = acc * alpha[:, None] + tl.dot(p, v)\n"
    text = (catalogue.SOLUTIONS / first.filename).read_text()
    (folder / first.filename).write_text(text.replace(right, right + "        import os\n"))
    refused = runner.grade_exercise(first, folder, "interpreter", timed=False)
    (line,) = [n for n, s in enumerate(text.splitlines(), 1) if s == right.rstrip("\n")]
    loop = process.Finished(code=None, output="", output_bytes=0, seconds=60.0)
    where = {"line": line, "function": first.kernel, "code": right.strip()}
    stopped = runner.stopped_message(loop, 60.0, where, specs.load(first.stem), text)
    said = {
        "missing": missing.error,
        "broken": broken.error,
        "refused": refused.error,
        "stopped": f"the submission's process {stopped}",
        "stopped, nowhere": f"the submission's process {loop.stopped(60.0)}",
    }
    assert {k: reasons.short(v) for k, v in said.items()} == {
        "missing": f"{gating.filename} not found ('{gating.stem} (1).py' looks like it)",
        "broken": "not valid Python, line 1",
        "refused": f"not run: an import is not kernel code, line {line + 1}",
        # the line of the loop that holds it: the key-tile loop
        "stopped": f"stopped after 60 s, the time limit, at line {runner.enclosing_loop(text, line)[0]}",
        "stopped, nowhere": "stopped after 60 s, the time limit",
    }


def test_a_compile_error_reason_names_its_line_and_todo():
    from grader.report import reasons

    message = (
        "case one-row-d64 (M=1, N=40, D=64: a single query row): your kernel does not compile, "
        "line 91 (in TODO(rescale-acc)): Triton's compiler says: Cannot make_shape_compatible: "
        "incompatible dimensions at index 1: 64 and 16. In plain words: ..."
    )
    assert reasons.short(message) == "does not compile at line 91 (TODO(rescale-acc))"


def test_a_reason_from_the_first_check_that_did_not_pass():
    from grader.report import reasons

    trap = _exercise([("a", "passed", None), ("b", "failed", "acc-not-rescaled")])
    wrong = _exercise([("a", "blocked", None), ("b", "failed", None)])
    waiting = _exercise([("a", "blocked", None)])
    zeroed = _exercise(score=0, integrity={"ok": False, "strict_zeroed": True})
    assert reasons.reason(trap) == "trap acc-not-rescaled"
    assert reasons.reason(wrong) == "wrong output in b"  # the failure, not what waits on it
    assert reasons.reason(waiting) == "a not judged yet"
    assert reasons.reason(zeroed) == "scored 0: edited given code (strict grading)"
    contract = _exercise([("a", "passed", None), ("strided", "error", None)], score=0)
    contract["checks"][1]["todo"] = None  # a note
    contract["integrity"] = {"ok": True, "contract_zeroed": True}
    assert (
        reasons.reason(contract) == "scored 0: note strided failed, on inputs the exercise accepts"
    )
    assert reasons.reason(_exercise(score=25)) is None
    error = _exercise([("a", "error", None)])
    error["checks"][0]["message"] = "ValueError at line 3 of x.py: one; two"
    assert reasons.reason(error) == "ValueError at line 3 of x.py: one, two"  # no ";" in a cell
    report = {"exercises": [trap, {**wrong, "id": catalogue.find("03").stem}, _exercise(score=25)]}
    assert reasons.column(report) == "01: trap acc-not-rescaled; 03: wrong output in b"
