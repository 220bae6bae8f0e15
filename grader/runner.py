"""Grade a target folder: one time-limited pytest process per exercise, results read back from
pytest-json-report's raw report and turned into ``ExerciseResult``s.

Only this (parent) process writes the score report. The per-exercise pytest process compares
outputs; the submission's code runs one level further down, in grader.launcher.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from grader import checkset, timing
from grader.report import CheckResult, ExerciseResult
from kata.catalogue import Exercise

ROOT = Path(__file__).resolve().parents[1]
CHECKS = ROOT / "grader" / "checks"


def default_timeout(backend: str, ex: Exercise | None = None) -> float:
    """Seconds the submission's process may take for all cases of one exercise (the
    performance track also autotunes and times its kernel on a GPU)."""
    if ex is not None and ex.track == "performance":
        return 300.0 if backend == "cuda" else 240.0
    return 90.0 if backend == "cuda" else 180.0


def _pytest_command(ex: Exercise, file: Path, work: Path, timeout: float) -> list[str]:
    return [
        sys.executable, "-m", "pytest", str(CHECKS / "test_checks.py"),
        "-c", str(CHECKS / "pytest.ini"), "--rootdir", str(CHECKS), "--noconftest",
        "-p", "grader.plugin", "-p", "pytest_jsonreport.plugin",
        "--json-report", f"--json-report-file={work / 'pytest.json'}",
        "--json-report-omit", "log", "streams",
        "--kata-exercise", ex.stem, "--kata-file", str(file),
        "--kata-workdir", str(work), "--kata-timeout", str(timeout),
        "-q", "--no-header", "-p", "no:warnings",
    ]  # fmt: skip


def _zero(ex: Exercise, file: Path, message: str, status: str = "error") -> ExerciseResult:
    checks = [
        CheckResult(c.id, status, 0, c.points, None, message, c.todo)
        for c in checkset.checks_for(ex.stem)
    ]
    return ExerciseResult(ex.stem, str(file), 0, checkset.max_score(ex.stem), checks, error=message)


def _from_pytest(ex: Exercise, file: Path, raw: dict) -> list[CheckResult]:
    by_id = {}
    for test in raw.get("tests", []):
        meta = test.get("metadata") or {}
        if "check" in meta:
            by_id[meta["check"]] = meta
    results = []
    for c in checkset.checks_for(ex.stem):
        meta = by_id.get(c.id)
        if meta is None or "status" not in meta:
            results.append(CheckResult(c.id, "error", 0, c.points, None,
                                       "the grader could not run this check", c.todo))  # fmt: skip
            continue
        status = meta["status"]
        points = c.points if status == "passed" else 0
        results.append(CheckResult(c.id, status, points, c.points, meta.get("trap"),
                                   meta.get("message", ""), c.todo))  # fmt: skip
    return results


def grade_exercise(ex: Exercise, target: Path, backend: str, report_dir: Path,
                   timeout: float | None = None) -> ExerciseResult:  # fmt: skip
    file = target / ex.filename
    start = time.monotonic()
    if not file.is_file():
        result = _zero(ex, file, f"{ex.filename} not found in {target}")
        result.duration_s = round(time.monotonic() - start, 2)
        return result
    timeout = timeout or default_timeout(backend, ex)
    with tempfile.TemporaryDirectory(prefix=f"kata-{ex.number}-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        env.update(
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", KATA_DEVICE=backend, PYTHONDONTWRITEBYTECODE="1",
            # The tolerances assume IEEE fp32 dots; an inherited TF32 setting must not apply.
            TRITON_F32_DEFAULT="ieee",
            PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        )  # fmt: skip
        try:
            proc = subprocess.run(
                _pytest_command(ex, file, work, timeout), cwd=ROOT, env=env,
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout + 120,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return _zero(ex, file, "the grader timed out on this exercise")
        raw_path = work / "pytest.json"
        if not raw_path.exists():
            tail = (proc.stdout + proc.stderr)[-2000:]
            return _zero(
                ex, file, f"the grader's checks did not run (pytest exit {proc.returncode}): {tail}"
            )
        raw = json.loads(raw_path.read_text())
        kept = report_dir / "pytest" / f"{ex.stem}.json"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(raw_path, kept)
        launch = (
            json.loads((work / "launch.json").read_text())
            if (work / "launch.json").exists()
            else {}
        )
    checks = _from_pytest(ex, file, raw)
    error = launch.get("error")
    result = ExerciseResult(
        ex.stem, str(file), sum(c.points for c in checks), checkset.max_score(ex.stem), checks,
        duration_s=round(time.monotonic() - start, 2), output=launch.get("output", ""), error=error,
    )  # fmt: skip
    if ex.track == "performance":
        result.performance = timing.score(launch.get("timing"), result.score == result.max_score)
    return result


def grade(exercises: list[Exercise], target: Path, backend: str, report_dir: Path,
          jobs: int | None = None, timeout: float | None = None, on_done=None,
          on_start=None) -> list[ExerciseResult]:  # fmt: skip
    """Grade exercises concurrently; ``on_start(exercise)`` is called as each one starts and
    ``on_done(result)`` as each one finishes."""
    jobs = jobs or (
        len(exercises) if backend == "cuda" else max(1, min(len(exercises), os.cpu_count() or 1))
    )
    results: dict[str, ExerciseResult] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:

        def work(ex: Exercise) -> ExerciseResult:
            if on_start:
                on_start(ex)
            return grade_exercise(ex, target, backend, report_dir, timeout)

        futures = {pool.submit(work, ex): ex for ex in exercises}
        for future in as_completed(futures):
            result = future.result()
            results[result.id] = result
            if on_done:
                on_done(result)
    return [results[ex.stem] for ex in exercises]
