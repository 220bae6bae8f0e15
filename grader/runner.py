"""Grade a target folder: one time-limited pytest process per exercise, its verdicts and launch
record read back from pytest-json-report's file and turned into ``ExerciseResult``s.

The protocol, in one place:

1. Here (the parent): read the submission's text; compare it with the frozen skeleton
   (integrity) and scan its kernels for what only the interpreter accepts (warnings). No
   student code runs here.
2. ``python -m pytest grader/checks/test_checks.py -p grader.plugin`` (``grader.process`` sets
   its environment and kills it at the time limit): one test per check of the exercise's spec.
3. The plugin starts ``python -m grader.launcher`` once, the only process that imports the
   submission; it writes each case's outputs (or error) to the scratch folder.
4. Each check judges those outputs; the plugin writes every verdict, and the launch record under
   the key ``kata``, into ``pytest.json``, the one file this module reads back.

Only this process writes the score report.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from grader import process, specs, timing
from grader.report import CheckResult, ExerciseResult
from kata import skeletons
from kata.catalogue import Exercise

ROOT = process.ROOT
CHECKS = ROOT / "grader" / "checks"


def default_timeout(backend: str, ex: Exercise | None = None) -> float:
    """Seconds the submission's process may take for all cases of one exercise (the
    performance track also autotunes and times its kernel on a GPU)."""
    if ex is not None and ex.track == "performance":
        return 300.0 if backend == "cuda" else 240.0
    return 90.0 if backend == "cuda" else 180.0


def _pytest_command(ex: Exercise, file: Path, work: Path, timeout: float, checkset: str,
                    timed: bool = True):  # fmt: skip
    return process.python(
        "-m", "pytest", str(CHECKS / "test_checks.py"),
        "-c", str(CHECKS / "pytest.ini"), "--rootdir", str(CHECKS), "--noconftest",
        "-p", "grader.plugin", "-p", "pytest_jsonreport.plugin",
        "--json-report", f"--json-report-file={work / 'pytest.json'}",
        "--json-report-omit", "log", "streams",
        "--kata-exercise", ex.stem, "--kata-file", str(file), "--kata-checkset", checkset,
        "--kata-workdir", str(work), "--kata-timeout", str(timeout),
        "-q", "--no-header", "-p", "no:warnings", *(() if timed else ("--kata-no-timing",)),
    )  # fmt: skip


def interpreter_only(text: str) -> list[str]:
    """Warnings for what the interpreter runs and the compiler rejects: `continue` and `break`
    inside a Triton kernel (UnsupportedLanguageConstruct on Triton 3.6)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        marks = [ast.unparse(d) for d in fn.decorator_list]
        if not any("jit" in m or "autotune" in m for m in marks):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.Continue, ast.Break)):
                word = "continue" if isinstance(node, ast.Continue) else "break"
                found.append(
                    f"`{word}` at line {node.lineno} (in {fn.name}) runs in the interpreter but "
                    "does not compile on a GPU: bound the loop instead"
                )
    return found


def _results(spec: specs.Spec, raw: dict) -> list[CheckResult]:
    by_id = {}
    for test in raw.get("tests", []):
        meta = test.get("metadata") or {}
        if "check" in meta:
            by_id[meta["check"]] = meta
    results = []
    for c in spec.checks:
        meta = by_id.get(c.id) or {}
        status = meta.get("status", "error")
        message = meta.get("message", "the grader could not run this check")
        results.append(CheckResult(
            id=c.id, todo=c.todo, status=status, points=c.points if status == "passed" else 0,
            max_points=c.points, trap=meta.get("trap"), message=message, hidden=c.hidden,
            details=meta.get("details"),
        ))  # fmt: skip
    return results


def _zero(spec: specs.Spec, file: Path, message: str, **extra) -> ExerciseResult:
    checks = [CheckResult(id=c.id, todo=c.todo, status="error", points=0, max_points=c.points,
                          trap=None, message=message, hidden=c.hidden) for c in spec.checks]  # fmt: skip
    return ExerciseResult(spec.exercise.stem, str(file), spec.exercise.track, 0, spec.max_score,
                          checks, error=message, **extra)  # fmt: skip


def _run_checks(spec: specs.Spec, file: Path, backend: str, report_dir: Path,
                timeout: float, timed: bool = True) -> tuple[dict | None, str]:  # fmt: skip
    """Run the exercise's pytest process; (its report, or None, and its last output)."""
    with tempfile.TemporaryDirectory(prefix=f"kata-{spec.exercise.number}-") as tmp:
        work = Path(tmp)
        env = process.child_env(
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", KATA_DEVICE=backend,
            # The tolerances assume IEEE fp32 dots; an inherited TF32 setting must not apply.
            TRITON_F32_DEFAULT="ieee",
        )  # fmt: skip
        cmd = _pytest_command(spec.exercise, file, work, timeout, spec.checkset, timed)
        done = process.run(cmd, cwd=ROOT, env=env, timeout=timeout + 120)
        raw_path = work / "pytest.json"
        if not raw_path.exists():
            return None, done.output[-2000:]
        kept = report_dir / "pytest" / f"{spec.exercise.stem}.json"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(raw_path, kept)
        return json.loads(raw_path.read_text()), ""


def grade_exercise(ex: Exercise, target: Path, backend: str, report_dir: Path,
                   timeout: float | None = None, checkset: str | None = None,
                   strict: bool = False, timed: bool = True) -> ExerciseResult:  # fmt: skip
    """Grade one exercise's file in ``target``. ``timed=False`` skips the performance track's
    timing, for callers that need the verdicts only (``grader.validate``)."""
    spec = specs.load(ex.stem, checkset)
    file = target / ex.filename
    start = time.monotonic()
    if not file.is_file():
        result = _zero(spec, file, f"{ex.filename} not found in {target}")
        result.duration_s = round(time.monotonic() - start, 2)
        return result
    text = file.read_text(errors="replace")
    found = skeletons.check(skeletons.pristine(ex.stem), text)
    integrity = {"ok": found.ok, "lines": found.lines, "diff": found.diff, "strict_zeroed": False}
    warnings = interpreter_only(text) if backend == "interpreter" else []
    raw, tail = _run_checks(
        spec, file, backend, report_dir, timeout or default_timeout(backend, ex), timed
    )
    if raw is None:
        return _zero(spec, file, f"the grader's checks did not run: {tail}", integrity=integrity)
    launch = raw.get("kata") or {}
    checks = _results(spec, raw)
    result = ExerciseResult(
        ex.stem, str(file), ex.track, sum(c.points for c in checks), spec.max_score, checks,
        duration_s=round(time.monotonic() - start, 2), output=launch.get("output", ""),
        error=launch.get("error"), integrity=integrity,
        warnings=warnings + launch.get("warnings", []),
    )  # fmt: skip
    if strict and not found.ok:
        integrity["strict_zeroed"] = True
        for c in result.checks:
            c.points = 0
        result.score = 0
    if ex.track == "performance":
        result.performance = timing.score(launch.get("timing"), result.score == result.max_score)
    return result


def grade(exercises: list[Exercise], target: Path, backend: str, report_dir: Path,
          jobs: int | None = None, timeout: float | None = None, on_done=None,
          on_start=None, checkset: str | None = None,
          strict: bool = False) -> list[ExerciseResult]:  # fmt: skip
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
            return grade_exercise(ex, target, backend, report_dir, timeout, checkset, strict)

        futures = {pool.submit(work, ex): ex for ex in exercises}
        for future in as_completed(futures):
            result = future.result()
            results[result.id] = result
            if on_done:
                on_done(result)
    return [results[ex.stem] for ex in exercises]
