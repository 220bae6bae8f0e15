"""The grader itself, on the backend the runtime picks (the interpreter on a CPU): the score report and Gradescope file,
exit codes, exercise selection, determinism, every isolation case of the grader's issue, and
the validation machinery with a sample of its galleries.

Each grading is a real ``python -m grader`` subprocess on a small submission folder made in a
temporary directory. The runs a session needs are started together, a few at a time, as soon as
the first test asks for one (see ``graded``); every test then only inspects its run's results.
The full galleries are graded by ``python -m grader.validate``, which ``nox -s tests`` runs
right after these tests; here they are checked for soundness and a sample is graded end to end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader import gallery, rubric, validate
from grader.report import STATUSES, CheckResult, ExerciseResult
from grader.traps import TRAPS
from kata import runtime
from kata.catalogue import EXERCISE_LIST, ROOT, SOLUTIONS, find
from kata.generate import strip

STEM = {ex.number: ex.stem for ex in EXERCISE_LIST}
ANCHOR = "from kata import examples, host\n"  # the last import of every kernel file
OUTPUT_LIMIT = 4096  # grader.plugin keeps this many bytes of output at each end

slow = pytest.mark.slow


# ---- running the grader ----------------------------------------------------------------------


@dataclass
class Run:
    """One ``python -m grader`` run: exit code, console output, and the files it wrote."""

    code: int
    console: str
    target: Path
    report: dict | None
    gradescope: dict | None
    seconds: float

    def exercise(self, number: str) -> dict:
        (found,) = [e for e in self.report["exercises"] if e["id"] == STEM[number]]
        return found


def grade(target: Path, *args: str, gradescope: bool = False, timeout: float = 600) -> Run:
    out = target.parent / f"{target.name}-out"
    out.mkdir(exist_ok=True)
    report, results = out / "score.json", out / "results.json"
    # The backend the runtime picks (compiled on a GPU machine), or KATA_TEST_DEVICE.
    device = os.environ.get("KATA_TEST_DEVICE", "auto")
    cmd = [sys.executable, "-m", "grader", "--device", device, "--target", str(target),
           "--report", str(report), *args]  # fmt: skip
    if gradescope:
        cmd += ["--gradescope", str(results)]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return Run(
        proc.returncode, proc.stdout + proc.stderr, target,
        json.loads(report.read_text()) if report.exists() else None,
        json.loads(results.read_text()) if results.exists() else None,
        round(time.monotonic() - start, 1),
    )  # fmt: skip


def solution_text(number: str) -> str:
    return (SOLUTIONS / f"{STEM[number]}.py").read_text()


def skeleton_text(number: str) -> str:
    return strip(solution_text(number), f"{STEM[number]}.py")


def at_import(code: str) -> Callable[[str], str]:
    """A change that runs ``code`` when the file is imported (after its own imports)."""
    return lambda text: gallery.apply_edits(text, ((ANCHOR, ANCHOR + code + "\n"),))


def edit(*edits: tuple[str, str]) -> Callable[[str], str]:
    return lambda text: gallery.apply_edits(text, edits)


def rename(text: str, old: str, new: str) -> str:
    """Replace every occurrence of a name (there must be at least one)."""
    assert old in text, old
    return text.replace(old, new)


def solutions_copy(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for ex in EXERCISE_LIST:
        shutil.copy(SOLUTIONS / ex.filename, folder / ex.filename)
    return folder


# ---- isolation cases -------------------------------------------------------------------------


@dataclass(frozen=True)
class Broken:
    """A copy of the solutions with one exercise's file broken in one way."""

    number: str  # the broken exercise
    change: Callable[[str], str] | None  # solution text -> submitted text; None: no file
    cause: tuple[str, ...]  # what every check's message must mention (regular expressions)
    status: str = "error"  # what every check of the broken exercise must end as
    traps: tuple[str, ...] = ()  # traps the broken exercise must be diagnosed with
    options: tuple[str, ...] = ()
    neighbour: bool = True  # also grade an intact exercise, which must keep full marks
    whole: bool = True  # an "error" that stops the whole exercise (its `error` field says why)
    line_of: str | None = None  # the messages must name the line of the file holding this text
    from_skeleton: bool = False  # break the untouched skeleton instead of the solution
    extra: Callable[[Path, Path], None] | None = None  # (target, report path): more files

    @property
    def neighbour_number(self) -> str:
        return "02" if self.number == "01" else "01"

    def build(self, folder: Path, report: Path) -> None:
        solutions_copy(folder)
        path = folder / f"{STEM[self.number]}.py"
        if self.change is None:
            path.unlink()
        else:
            text = skeleton_text(self.number) if self.from_skeleton else solution_text(self.number)
            path.write_text(self.change(text))
        if self.extra:
            self.extra(folder, report)


# A conftest.py and a pytest.ini in the target folder that, if pytest ever loaded them, would
# pass every check and leave a mark; the grader must ignore both.
CONFTEST = """\
import pathlib
import pytest

pathlib.Path(__file__).with_name("CONFTEST_WAS_LOADED").write_text("yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None


def pytest_json_runtest_metadata(item, call):
    check = item.callspec.params["check"]
    return {"check": check.id, "status": "passed", "message": "", "trap": None}
"""


def _conftest(folder: Path, report: Path) -> None:
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "pytest.ini").write_text("[pytest]\naddopts = -p conftest\n")


# Patches every comparison the submission's process could reach and writes fake results
# wherever it could guess the grader keeps them: the report itself, the raw pytest reports,
# the launcher's scratch folder.
CHEAT = """\
import json as _json, os as _os, pathlib as _pl, sys as _sys
import numpy as _np, torch as _torch
_np.allclose = lambda *a, **k: True
_np.array_equal = lambda *a, **k: True
_np.testing.assert_allclose = lambda *a, **k: None
_torch.allclose = lambda *a, **k: True
_fake = {{"schema_version": "1.0", "score": 100, "max_score": 100, "traps": [], "exercises": []}}
_report = _pl.Path({report!r})
for _p in (_report, _report.parent / "pytest" / "03_moe_gating.json",
           _pl.Path.cwd() / "reports" / "score.json", _pl.Path(_sys.argv[-1]) / "pytest.json",
           _pl.Path(_sys.argv[-1]) / "launch.json"):
    _p.parent.mkdir(parents=True, exist_ok=True)
    _p.write_text(_json.dumps(_fake))
_pl.Path(__file__).with_name("CHEAT_RAN").write_text("yes")
"""


def _cheat(folder: Path, report: Path) -> None:
    path = folder / f"{STEM['03']}.py"
    path.write_text(at_import(CHEAT.format(report=str(report)))(path.read_text()))


FLOOD = """\
for _ in range(50):
    print("x" * 1_000_000)
print("y" * 1_000_000, file=sys.stderr)
"""

_SCORES = "scores = tl.dot(q, tl.trans(k)) * scale"
_BAD_DOT = "scores = tl.dot(tl.reshape(q, (2 * BLOCK_M, BLOCK_D // 2)), tl.trans(k)) * scale"

ISOLATION: dict[str, Broken] = {
    "syntax-error": Broken(
        "01",
        edit(
            (
                "def flash_attention(q, k, v, BLOCK_M=16, BLOCK_N=16):",
                "def flash_attention(q, k, v, BLOCK_M=16, BLOCK_N=16:",
            )
        ),
        (r"failed to import", r"SyntaxError"),
        line_of="BLOCK_N=16:",
    ),
    "import-exception": Broken(
        "02",
        at_import('raise RuntimeError("no GPU for this student")'),
        (r"failed to import", r"RuntimeError", r"no GPU for this student"),
        line_of="raise RuntimeError",
    ),
    "sys-exit": Broken("03", at_import("sys.exit(3)"), (r"failed to import", r"sys\.exit\(3\)")),
    "os-exit": Broken("01", at_import("import os\nos._exit(0)"), (r"os\._exit", r"code 0")),
    "hang": Broken(
        "02",
        at_import("while True:\n    pass"),
        (r"stopped after 5 s",),
        options=("--timeout", "5"),
        neighbour=False,
    ),
    # A flood with a right kernel: graded normally, its output cut down in the report.
    "stdout-flood": Broken("03", at_import(FLOOD), (), status="passed"),
    "kernel-missing": Broken(
        "01",
        lambda text: rename(text, "flash_attn_kernel", "my_attention_kernel"),
        (r"defines no `flash_attn_kernel`",),
    ),
    "plain-function": Broken(
        "02",
        edit(("@triton.jit\ndef flash_attn_causal_kernel(", "def flash_attn_causal_kernel(")),
        (r"plain Python function", r"@triton\.jit"),
    ),
    "wrong-signature": Broken(
        "03",
        edit(("    M, E, stride_m,\n", "    E, M, stride_m,\n")),
        (r"wrong parameters", r"logits_ptr, weight0_ptr, weight1_ptr, idx0_ptr, idx1_ptr, M, E"),
    ),
    "missing-file": Broken("02", None, (r"02_causal_flash_attention\.py not found",)),
    # The untouched skeleton plus a conftest.py that would pass everything: still 0, trap named.
    "conftest": Broken(
        "01",
        lambda text: text,
        (r"TODO\(rescale-acc\)",),
        status="failed",
        traps=("acc-not-rescaled",),
        from_skeleton=True,
        extra=_conftest,
    ),
    # The untouched skeleton, patching comparisons and writing fake reports at import.
    "monkeypatch": Broken(
        "03",
        lambda text: text,
        (r"TODO\((top2-mask|renormalize)\)",),
        status="failed",
        traps=("top2-not-masked", "weights-not-renormalized"),
        from_skeleton=True,
        extra=_cheat,
    ),
    # The interpreter refuses a tl.dot whose inner dimensions differ (2*BLOCK_D//2 vs BLOCK_D).
    "compile-error": Broken(
        "01",
        edit((_SCORES, _BAD_DOT)),
        (r"InterpreterError|CompilationError|could not compile", r"reduction dimension|shape|dot"),
        whole=False,  # the file loads; every launch fails, case by case
        line_of=_BAD_DOT,
    ),
}


def _isolation_run(name: str, tmp: Path) -> Run:
    case = ISOLATION[name]
    folder, report = tmp / "target", tmp / "target-out" / "score.json"
    case.build(folder, report)
    numbers = [case.number] + ([case.neighbour_number] if case.neighbour else [])
    return grade(folder, *numbers, *case.options)


# ---- every run the tests use, started together -----------------------------------------------


def _mixed(tmp: Path) -> Run:
    """01 right, 02 untouched, 03 with its top-1 not masked: passes, fails and traps."""
    folder = solutions_copy(tmp / "target")
    (folder / f"{STEM['02']}.py").write_text(skeleton_text("02"))
    (variant,) = gallery.variants(["03-top2-not-masked"])
    variant.write(folder)
    return grade(folder, gradescope=True)


def _selection(tmp: Path) -> Run:
    """Skeletons chosen by stem and number, 01 twice, out of order: graded once each, in
    catalogue order; exit 0, score 0, a complete report."""
    folder = tmp / "target"
    folder.mkdir()
    for number in ("01", "02", "03"):
        (folder / f"{STEM[number]}.py").write_text(skeleton_text(number))
    return grade(folder, STEM["03"], "1", "01", gradescope=True)


def _cli_error(*args: str) -> Callable[[Path], Run]:
    def run(tmp: Path) -> Run:
        folder = tmp / "target"
        folder.mkdir()
        return grade(folder, *args)

    return run


RUNS: dict[str, Callable[[Path], Run]] = {
    "mixed": _mixed,
    "mixed-again": _mixed,
    "selection": _selection,
    "unknown-exercise": _cli_error("07"),
    "missing-target": _cli_error("--target", "/nonexistent/kata-target"),
}
for _name in ISOLATION:
    RUNS[f"isolation:{_name}"] = lambda tmp, _name=_name: _isolation_run(_name, tmp)

# test function -> the runs it reads (parametrized isolation tests: from their parameter)
USES = {
    "test_report_schema": ["mixed"],
    "test_gradescope_file": ["mixed"],
    "test_deterministic": ["mixed", "mixed-again"],
    "test_zero_score_run_exits_0_and_selects_by_number_and_stem": ["selection"],
    "test_grader_cannot_run_exits_2": ["unknown-exercise", "missing-target"],
}


class Runs:
    """Starts every run the selected tests need, a few at a time; ``get`` waits for one."""

    def __init__(self, names: list[str], tmp: Path, workers: int):
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._futures: dict[str, Future] = {}
        self._tmp = tmp
        for name in names:
            self._start(name)

    def _start(self, name: str) -> Future:
        if name not in self._futures:
            folder = self._tmp / re.sub(r"[^\w-]", "_", name)
            folder.mkdir()
            self._futures[name] = self._pool.submit(RUNS[name], folder)
        return self._futures[name]

    def get(self, name: str) -> Run:
        return self._start(name).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def graded(request, tmp_path_factory):
    needed = []
    for item in request.session.items:
        if item.module.__name__ != __name__:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        names = [f"isolation:{params['case']}"] if "case" in params else []
        needed += [n for n in USES.get(item.originalname, []) + names if n not in needed]
    # Cheap runs (exit 2, nothing graded) and the one that waits on a timeout go first.
    needed.sort(key=lambda n: n not in ("unknown-exercise", "missing-target", "isolation:hang"))
    runs = Runs(needed, tmp_path_factory.mktemp("grader-runs"), max(2, os.cpu_count() or 1))
    yield runs
    runs.close()


# ---- what a complete report looks like -------------------------------------------------------

TOP = ["schema_version", "target", "device", "versions", "checkset", "score", "max_score",
       "duration_s", "traps", "exercises"]  # fmt: skip
EXERCISE_FIELDS = {"id", "file", "score", "max_score", "checks"}
CHECK_FIELDS = {"id", "status", "points", "max_points", "trap", "message"}


def assert_complete(report: dict, numbers: list[str]) -> None:
    """Every required field, with a consistent value, for exactly these exercises."""
    assert list(report)[: len(TOP)] == TOP
    assert report["checkset"] == "hidden"
    assert report["schema_version"] == "1.1"
    assert report["device"] == runtime.describe()  # the backend the test run itself picked
    assert set(report["versions"]) >= {"python", "torch", "triton"}
    assert all(isinstance(v, str) and v for v in report["versions"].values())
    assert isinstance(report["duration_s"], (int, float)) and report["duration_s"] > 0
    assert [e["id"] for e in report["exercises"]] == [STEM[n] for n in numbers]
    assert report["score"] == sum(e["score"] for e in report["exercises"])
    assert report["max_score"] == sum(rubric.max_score(STEM[n]) for n in numbers)
    named = [c["trap"] for e in report["exercises"] for c in e["checks"] if c["trap"]]
    assert report["traps"] == list(dict.fromkeys(named))
    assert set(report["traps"]) <= set(TRAPS)
    for ex in report["exercises"]:
        assert EXERCISE_FIELDS <= set(ex)
        assert ex["file"].endswith(f"{ex['id']}.py")
        rubric_checks = rubric.checks_for(ex["id"])
        assert [c["id"] for c in ex["checks"]] == [c.id for c in rubric_checks]
        assert ex["max_score"] == sum(c.points for c in rubric_checks)
        assert ex["score"] == sum(c["points"] for c in ex["checks"])
        for c, want in zip(ex["checks"], rubric_checks):
            assert CHECK_FIELDS <= set(c)
            assert c["status"] in STATUSES
            assert c["max_points"] == want.points
            assert c["points"] == (want.points if c["status"] == "passed" else 0)
            assert isinstance(c["message"], str)
            assert (c["message"] == "") == (c["status"] == "passed")
            assert c["trap"] is None or (c["status"] == "failed" and c["trap"] in TRAPS)


# ---- report, Gradescope, exit codes, selection, determinism ----------------------------------


@slow
def test_report_schema(graded):
    run = graded.get("mixed")
    assert run.code == 0, run.console
    assert_complete(run.report, ["01", "02", "03"])
    assert run.report["target"] == str(run.target.resolve())
    assert [e["score"] for e in run.report["exercises"]] == [25, 0, 25]
    assert run.report["score"] == 50
    assert run.report["traps"] == ["causal-mask-missing", "top2-not-masked"]
    for e in run.report["exercises"]:
        assert e["file"] == str(run.target.resolve() / f"{e['id']}.py")
    # The raw pytest reports are kept beside the score report.
    kept = run.target.parent / "target-out" / "pytest"
    assert sorted(p.name for p in kept.glob("*.json")) == [f"{s}.json" for s in STEM.values()]
    # The console shows the same totals.
    assert "Score: 50/100" in run.console
    summary = run.console.split("-" * 80)[1]  # the summary table names each trap with its hint
    assert "causal-mask-missing: " in summary and "top2-not-masked: " in summary


@slow
def test_gradescope_file(graded):
    run = graded.get("mixed")
    gs, report = run.gradescope, run.report
    assert gs is not None, run.console
    assert gs["score"] == report["score"] == 50
    assert isinstance(gs["execution_time"], (int, float)) and gs["execution_time"] > 0
    assert gs["output"] == f"50/100 on {runtime.describe()}; traps found: " + ", ".join(
        report["traps"]
    )
    checks = [(e["id"], c) for e in report["exercises"] for c in e["checks"]]
    assert len(gs["tests"]) == len(checks)
    for test, (ex_id, c) in zip(gs["tests"], checks):
        assert set(test) >= {"name", "score", "max_score", "status", "output", "visibility"}
        assert test["name"] == f"{ex_id}: {c['id']}"
        assert (test["score"], test["max_score"]) == (c["points"], c["max_points"])
        assert test["status"] == ("passed" if c["status"] == "passed" else "failed")
        assert test["visibility"] == "visible"
        if c["trap"]:
            assert test["output"] == f"trap: {c['trap']}\n{c['message']}"
        else:
            assert test["output"] == c["message"]
    assert sum(t["score"] for t in gs["tests"]) == gs["score"]
    assert {t["status"] for t in gs["tests"]} == {"passed", "failed"}


@slow
def test_deterministic(graded):
    first, second = graded.get("mixed"), graded.get("mixed-again")

    def outcome(run):
        return [
            (
                e["id"],
                e["score"],
                [(c["id"], c["status"], c["points"], c["trap"], c["message"]) for c in e["checks"]],
            )
            for e in run.report["exercises"]
        ]

    assert outcome(first) == outcome(second)
    assert first.gradescope["tests"] == second.gradescope["tests"]


@slow
def test_zero_score_run_exits_0_and_selects_by_number_and_stem(graded):
    run = graded.get("selection")
    assert run.code == 0, run.console
    assert_complete(run.report, ["01", "03"])
    assert run.report["score"] == 0 and run.report["max_score"] == 75
    assert run.report["traps"] == ["acc-not-rescaled", "top2-not-masked",
                                   "weights-not-renormalized"]  # fmt: skip
    for e in run.report["exercises"]:
        assert {c["status"] for c in e["checks"]} == {"failed"}
        assert all(c["trap"] for c in e["checks"])
    assert run.gradescope["score"] == 0
    assert "Score: 0/75" in run.console


@slow
def test_grader_cannot_run_exits_2(graded):
    unknown, missing = graded.get("unknown-exercise"), graded.get("missing-target")
    assert unknown.code == 2 and "grader: no exercise '07'" in unknown.console
    assert missing.code == 2
    assert "grader: target folder /nonexistent/kata-target does not exist" in missing.console
    assert unknown.report is None and missing.report is None


def test_exercise_selection_names():
    assert find("2").stem == find("02").stem == find(STEM["02"]).stem == STEM["02"]
    assert find(f"{STEM['03']}.py").stem == STEM["03"]
    with pytest.raises(KeyError):
        find("07")


# ---- isolation -------------------------------------------------------------------------------


@slow
@pytest.mark.parametrize("case", list(ISOLATION))
def test_isolation(graded, case):
    spec = ISOLATION[case]
    run = graded.get(f"isolation:{case}")
    assert run.code == 0, run.console
    numbers = sorted([spec.number] + ([spec.neighbour_number] if spec.neighbour else []))
    assert_complete(run.report, numbers)
    broken = run.exercise(spec.number)
    checks = broken["checks"]
    assert {c["status"] for c in checks} == {spec.status}, checks
    if spec.status == "passed":
        assert broken["score"] == broken["max_score"]
    else:
        assert broken["score"] == 0
        causes = list(spec.cause)
        if spec.line_of:
            text = (run.target / f"{STEM[spec.number]}.py").read_text()
            (line,) = [n for n, s in enumerate(text.splitlines(), 1) if spec.line_of in s]
            causes.append(rf"line {line} of {STEM[spec.number]}\.py")
        for c in checks:
            for cause in causes:
                assert re.search(cause, c["message"]), (cause, c["message"])
    assert sorted({c["trap"] for c in checks if c["trap"]}) == sorted(spec.traps)
    if spec.status == "error" and spec.whole:  # nothing could be judged: said once, up front
        assert broken["error"] and all(re.search(cause, broken["error"]) for cause in spec.cause)
    else:
        assert broken["error"] is None
    # Whatever the submission printed is kept, cut to its first and last 4 KiB.
    assert len(broken["output"].encode()) <= 2 * OUTPUT_LIMIT + 200
    if spec.neighbour:  # the intact exercise graded in the same run keeps full marks
        neighbour = run.exercise(spec.neighbour_number)
        assert neighbour["score"] == neighbour["max_score"], neighbour
    assert run.report["score"] == sum(e["score"] for e in run.report["exercises"])


@slow
def test_flood_output_is_truncated(graded):
    broken = graded.get("isolation:stdout-flood").exercise("03")
    head, _, tail = broken["output"].partition("bytes of output left out")
    left_out = int(re.search(r"\[\.\.\. (\d+) $", head).group(1))
    assert left_out >= 51_000_000 - 2 * OUTPUT_LIMIT
    assert head.startswith("x" * 1000) and tail.rstrip().endswith("y" * 1000)


@slow
def test_conftest_in_target_is_never_loaded(graded):
    run = graded.get("isolation:conftest")
    assert not (run.target / "CONFTEST_WAS_LOADED").exists()
    assert run.exercise("01")["score"] == 0


@slow
def test_monkeypatching_and_fake_reports_change_nothing(graded):
    run = graded.get("isolation:monkeypatch")
    report_path = run.target.parent / "target-out" / "score.json"
    assert (run.target / "CHEAT_RAN").exists()  # the patches and fake reports were made...
    # ...yet the file on disk is the grader's report: 03 (the untouched skeleton) 0 with its
    # traps named, the neighbour 01 full marks.
    assert [e["score"] for e in run.report["exercises"]] == [25, 0]
    assert run.report["traps"] == ["top2-not-masked", "weights-not-renormalized"]
    raw = json.loads((report_path.parent / "pytest" / f"{STEM['03']}.json").read_text())
    assert "tests" in raw and len(raw["tests"]) == len(rubric.checks_for(STEM["03"]))


@slow
def test_hang_is_stopped_near_its_timeout(graded):
    run = graded.get("isolation:hang")
    assert run.exercise("02")["duration_s"] < 60, run.report


# ---- the validation galleries ----------------------------------------------------------------


def test_gallery_is_sound():
    assert gallery.check_gallery() == []
    names = {v.name for v in gallery.GALLERY}
    required_wrong = {"01-no-scale", "01-no-final-division", "01-no-running-max",
                      "02-mask-reversed", "02-skip-diagonal", "03-zero-padded-experts",
                      "03-swapped-weights", "03-top1-masked-by-value"}  # fmt: skip
    required_right = {"01-exp2", "02-finite-mask", "02-no-block-skip"}
    assert required_wrong <= {v.name for v in gallery.WRONG}
    assert required_right <= {v.name for v in gallery.CORRECT}
    assert len(names) == len(gallery.GALLERY)
    for trap in TRAPS:
        assert any(v.expect_trap == trap for v in gallery.WRONG), trap
    assert not any(v.full_marks for v in gallery.WRONG)
    assert all(v.full_marks and v.expect_trap is None for v in gallery.CORRECT)
    for v in gallery.GALLERY:  # every variant really differs from its solution
        assert v.source() != (SOLUTIONS / v.filename).read_text()


def test_edits_that_no_longer_apply_are_refused():
    text = "a = 1\nb = 2\nb = 2\n"
    assert gallery.apply_edits(text, (("a = 1", "a = 3"),)) == "a = 3\nb = 2\nb = 2\n"
    with pytest.raises(gallery.GalleryError, match="not found"):
        gallery.apply_edits(text, (("c = 3", "c = 4"),))
    with pytest.raises(gallery.GalleryError, match="found 2 times"):
        gallery.apply_edits(text, (("b = 2", "b = 5"),))
    with pytest.raises(gallery.GalleryError, match="changes nothing"):
        gallery.apply_edits(text, (("a = 1", "a = 1"),))
    with pytest.raises(gallery.GalleryError, match="at least one edit"):
        gallery.apply_edits(text, ())
    rotten = gallery.Variant("rotten", STEM["01"], (("no such line", "x"),), None, False, "")
    with pytest.raises(gallery.GalleryError, match="rotten"):
        rotten.source()


def _result(statuses: dict[str, tuple[str, str | None]], stem: str = STEM["03"]) -> ExerciseResult:
    """A synthetic result: check id -> (status, trap); checks not listed passed."""
    checks = []
    for c in rubric.checks_for(stem):
        status, trap = statuses.get(c.id, ("passed", None))
        points = c.points if status == "passed" else 0
        checks.append(CheckResult(c.id, status, points, c.points, trap,
                                  "" if status == "passed" else "wrong", c.todo))  # fmt: skip
    return ExerciseResult(stem, f"{stem}.py", sum(c.points for c in checks),
                          rubric.max_score(stem), checks)  # fmt: skip


def test_judge_can_fail_every_way():
    judge, E = validate.judge, validate.Expectation
    full, none_passed = _result({}), _result({c.id: ("failed", None)
                                              for c in rubric.checks_for(STEM["03"])})  # fmt: skip
    trapped = _result({"top2-ties": ("failed", "top2-not-masked")})
    errored = _result({"top2-ties": ("error", None)})
    assert judge(E("full"), full) == []
    assert judge(E("zero"), none_passed) == []
    assert judge(E("less", ("top2-not-masked",), ("top2-ties",)), trapped) == []
    assert judge(E("full"), trapped)  # lost points
    assert judge(E("zero"), trapped)  # not zero
    assert judge(E("less"), full)  # did not lose points
    assert judge(E("less"), trapped)  # a trap named that was not expected
    assert judge(E("less", ("weights-not-renormalized",)), trapped)  # the expected one missing
    assert judge(E("less", ("top2-not-masked",), ("top2-random",)), trapped)  # wrong check
    assert judge(E("less"), errored)  # an error is the grader failing, never a catch
    tampered = _result({})
    tampered.score = 10
    assert judge(E("full"), tampered)


@slow
def test_validate_grades_a_sample_of_the_galleries(capsys):
    names = ["02-mask-one-ahead", "03-zero-padded-experts", "02-finite-mask"]
    rows, notes = validate.build_rows(names)
    assert [r.label for r in rows if r.label in names] == names
    assert {r.label for r in rows} >= {"solutions"}
    rows = [r for r in rows if r.label in names]  # the baseline rows are validate's own job
    validate.grade_rows(rows, runtime.BACKEND, jobs=os.cpu_count() or 1)
    table = "\n".join([validate.header()] + [validate.format_row(r, verbose=True) for r in rows])
    assert all(len(line) <= validate.WIDTH for line in table.splitlines()), table
    assert [r.ok for r in rows] == [True, True, True], table
    assert table.count(" OK") == 3 and "MISS" not in table
    one_ahead, padded, finite = (r.result for r in rows)
    assert one_ahead.traps == ["causal-mask-off-by-one"]
    assert padded.score < padded.max_score and not padded.traps
    assert finite.score == finite.max_score
    # The same results judged against the wrong expectations are misses, shown as such.
    E = validate.Expectation
    assert validate.judge(E("full"), one_ahead)
    assert validate.judge(E("less", ("causal-mask-missing",)), one_ahead)
    assert validate.judge(E("less"), finite)
    assert validate.judge(E("less", (), ("top2-random",)), padded)
    rows[2].problems = validate.judge(E("less"), finite)
    assert validate.format_row(rows[2]).splitlines()[0].endswith(" MISS")


def test_validate_exit_codes(monkeypatch, capsys):
    monkeypatch.setenv("KATA_DEVICE", os.environ.get("KATA_DEVICE", "auto"))
    assert validate.main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(v.name in listed for v in gallery.GALLERY)
    assert validate.main(["no-such-variant"]) == 2
    rotten = gallery.Variant("rotten-edit", STEM["02"], (("no such line", "x"),), None, False, "")
    monkeypatch.setattr(gallery, "GALLERY", gallery.GALLERY + (rotten,))
    assert validate.main(["--no-baseline", "rotten-edit"]) == 1
    out = capsys.readouterr().out
    assert "rotten-edit" in out and "MISS" in out and "not found" in out


def test_trap_hints_fit_the_summary_line():
    """The summary prints `<trap>: <hint>` in 76 columns; a longer hint would be cut."""
    for trap in TRAPS.values():
        assert len(f"{trap.id}: {trap.hint}") <= 76, trap.id
        assert f"TODO {trap.todo}" in trap.hint and f"TODO({trap.todo})" in trap.message


def test_compilation_errors_name_the_students_line(tmp_path):
    """A compiled kernel's error (only raised on a GPU) names the line in the student's file:
    built here from Triton's own CompilationError, on a real file."""
    import ast

    from triton.compiler.errors import CompilationError

    from grader.errors import explain

    path = tmp_path / "01_flash_attention_core.py"
    path.write_text(solution_text("01"))
    text = path.read_text()
    src = text[text.index("def flash_attn_kernel(") :]
    bad = "scores = tl.dot(q, tl.trans(k)) * scale"
    node = ast.parse("x")
    node.lineno, node.col_offset = (
        src.splitlines().index(next(ln for ln in src.splitlines() if bad in ln)) + 1,
        8,
    )
    inner = CompilationError(src, node, "input and other must have equal reduction dimensions")
    try:
        try:
            raise inner
        except CompilationError as exc:
            raise CompilationError(src, node, None) from exc
    except CompilationError as outer:
        message = explain(outer, str(path))
    (line,) = [n for n, s in enumerate(text.splitlines(), 1) if bad in s]
    assert message.startswith(
        f"Triton could not compile the kernel (line {line} of {path.name}): "
        "input and other must have equal reduction dimensions. Hint: tl.dot's inner dimensions"
    )


def test_summary_prints_timed_and_skipped_performance(tmp_path):
    """The performance lines of the summary, for a GPU run (timed) and a CPU run (skipped)."""
    import io

    from grader import timing
    from grader.report import Report
    from grader.summary import Printer

    timed = {"timed": True, "device": "GPU", "shapes": [
        {"shape": "M=1M E=128 float32", "baseline": "torch", "kernel_ms": 0.23, "torch_ms": 6.1, "speedup": 26.5},
    ]}  # fmt: skip
    results = []
    for stem, raw, correct in (("04_fast_attention", None, True), ("05_fast_gating", timed, False)):
        ex = ExerciseResult(stem, f"{stem}.py", 0, 50, [], performance=timing.score(raw, correct))
        results.append(ex)
    report = Report("t", "cuda: GPU", {}, results, 1.0)
    out = io.StringIO()
    Printer(stream=out).finish(report, tmp_path / "score.json", None)
    text = out.getvalue()
    assert "Performance: 0/20 points" in text
    assert "04 timing skipped: timing needs a CUDA GPU" in text
    assert "M=1M E=128 float32" in text and "x26.50 vs torch" in text
    assert "no performance points until every correctness check passes" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert report.to_json()["performance"]["max_points"] == 20


@pytest.mark.parametrize("needle", [n for n, _ in __import__("grader.errors").errors.ADVICE])
def test_known_compile_problems_get_advice(needle, tmp_path):
    """Each known Triton message gets one line of advice, also through a chained error."""
    from grader.errors import explain

    path = tmp_path / "k.py"
    path.write_text("x = 1\n")
    try:
        try:
            raise ValueError(f"... {needle} ...")
        except ValueError as inner:
            raise RuntimeError("wrapped by the interpreter") from inner
    except RuntimeError as exc:
        message = explain(exc, str(path))
    assert ". Hint: " in message and len(message.split(". Hint: ")[1]) > 20


@slow
def test_a_crashing_submission_is_named_by_its_signal(tmp_path):
    """A hard crash (here a segfault at import) costs only that exercise, and says so."""
    target = tmp_path / "target"
    target.mkdir()
    text = solution_text("03") + "\nimport ctypes\nctypes.string_at(0)\n"
    (target / f"{STEM['03']}.py").write_text(text)
    run = grade(target, "03")
    assert run.code == 0, run.console
    ex = run.exercise("03")
    assert ex["score"] == 0 and "killed by SIGSEGV" in ex["error"], ex["error"]
    assert all(c["status"] == "error" for c in ex["checks"])
