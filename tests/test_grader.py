"""The grader itself, on the backend the runtime picks (the interpreter on a CPU): the score
report against its JSON Schema and Gradescope's file, exit codes, exercise selection,
determinism, the validation machinery (static checks, galleries, the judge of a row), integrity,
compile-error messages and the summary. Broken and hostile submissions are golden folders:
tests/test_golden.py.

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

import jsonschema
import pytest
import torch
from conftest import endless_01

from grader import model, specs
from grader.judge import errors
from grader.kinds import TRAPS
from grader.report.records import CheckResult, ExerciseResult, edits_outside
from grader.run import runner
from grader.validate import cli as validate
from grader.validate import gallery, static
from kata import regions, runtime, skeletons
from kata.authoring import bench
from kata.catalogue import ALL_EXERCISES, EXERCISE_LIST, ROOT, SOLUTIONS, find
from kata.kinds import bhsd_attention

STEM = {ex.number: ex.stem for ex in EXERCISE_LIST}
SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())

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

    def exercise(self, number: str) -> dict:
        (found,) = [e for e in self.report["exercises"] if e["id"] == STEM[number]]
        return found


def grade(target: Path, *args: str, gradescope: bool = False, timeout: float = 600) -> Run:
    out = target.parent / f"{target.name}-out"
    out.mkdir(exist_ok=True)
    report, results = out / "score.json", out / "results.json"
    # The backend the runtime picks (compiled on a GPU machine), or KATA_TEST_DEVICE.
    device = os.environ.get("KATA_TEST_DEVICE", "auto")
    cmd = [
        sys.executable,
        "-m",
        "grader",
        "--device",
        device,
        "--target",
        str(target),
        "--report",
        str(report),
        *args,
    ]
    if gradescope:
        cmd += ["--gradescope", str(results)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return Run(
        proc.returncode,
        proc.stdout + proc.stderr,
        target,
        json.loads(report.read_text()) if report.exists() else None,
        json.loads(results.read_text()) if results.exists() else None,
    )


def solution_text(number: str) -> str:
    return (SOLUTIONS / f"{STEM[number]}.py").read_text()


def skeleton_text(number: str) -> str:
    return skeletons.pristine(STEM[number]).text


def solutions_copy(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for ex in EXERCISE_LIST:
        shutil.copy(SOLUTIONS / ex.filename, folder / ex.filename)
    return folder


# ---- every run the tests use, started together -----------------------------------------------


def _mixed(tmp: Path) -> Run:
    """01 right, 02 untouched, 03 with its top-1 not masked: passes, fails and traps."""
    folder = solutions_copy(tmp / "target")
    (folder / f"{STEM['02']}.py").write_text(skeleton_text("02"))
    spec = specs.load(STEM["03"], "hidden")
    (variant,) = [v for v in spec.gallery if v.name == "03-top2-not-masked"]
    (folder / f"{STEM['03']}.py").write_text(gallery.source(variant, spec))
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


def _odd_target(kind: str) -> Callable[[Path], Run]:
    """A target the grader must not grade as it is: a file, a folder of notes (with a report
    from an earlier grading that must survive), a browser's duplicate name and a binary file."""

    def run(tmp: Path) -> Run:
        folder = tmp / "target"
        folder.mkdir()
        if kind == "file":
            return grade(folder, "--target", str(ROOT / "README.md"))
        if kind == "exercise-file":
            (folder / f"{STEM['01']}.py").write_text(skeleton_text("01"))
            return grade(folder, "--target", str(folder / f"{STEM['01']}.py"))
        if kind == "notes":
            (folder / "notes.txt").write_text("on paper\n")
            (folder / f"{STEM['03']} (1).py").write_text(solution_text("03"))
            earlier = tmp / "target-out" / "score.json"
            earlier.parent.mkdir()
            earlier.write_text('{"earlier": true}\n')
            return grade(folder)
        (folder / f"{STEM['01']}.py").write_bytes(
            b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 40
        )
        (folder / f"{STEM['03']} (1).py").write_text(solution_text("03"))
        return grade(folder, "01", "03")

    return run


RUNS: dict[str, Callable[[Path], Run]] = {
    "mixed": _mixed,
    "mixed-again": _mixed,
    "selection": _selection,
    "unknown-exercise": _cli_error("07"),
    "missing-target": _cli_error("--target", "/nonexistent/kata-target"),
    "file-target": _odd_target("file"),
    "exercise-file-target": _odd_target("exercise-file"),
    "notes-target": _odd_target("notes"),
    "binary-and-duplicate": _odd_target("binary"),
}
# test function -> the runs it reads
USES = {
    "test_report_schema": ["mixed"],
    "test_gradescope_file": ["mixed"],
    "test_deterministic": ["mixed", "mixed-again"],
    "test_zero_score_run_exits_0_and_selects_by_number_and_stem": ["selection"],
    "test_grader_cannot_run_exits_2": ["unknown-exercise", "missing-target"],
    "test_a_target_with_nothing_to_grade_says_what_is_there_and_writes_nothing": [
        "file-target",
        "exercise-file-target",
        "notes-target",
    ],
    "test_a_binary_file_and_a_duplicates_name_are_said_plainly": ["binary-and-duplicate"],
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
        needed += [n for n in USES.get(item.originalname, []) if n not in needed]
    cheap = ("unknown-exercise", "missing-target", "file-target", "exercise-file-target")
    needed.sort(key=lambda n: n not in cheap)  # cheap first
    runs = Runs(needed, tmp_path_factory.mktemp("grader-runs"), max(2, os.cpu_count() or 1))
    yield runs
    runs.close()


# ---- what a complete report looks like -------------------------------------------------------


def assert_complete(report: dict, numbers: list[str]) -> None:
    """Valid against docs/report.schema.json, and consistent, for exactly these exercises."""
    jsonschema.validate(report, SCHEMA)
    assert report["checkset"] == "hidden"
    assert report["device"] == runtime.describe()  # the backend the test run itself picked
    assert report["isolation"].startswith(("landlock (ABI ", "none: "))
    assert [e["id"] for e in report["exercises"]] == [STEM[n] for n in numbers]
    assert report["score"] == sum(e["score"] for e in report["exercises"])
    assert report["max_score"] == sum(specs.load(STEM[n]).max_score for n in numbers)
    named = [c["trap"] for e in report["exercises"] for c in e["checks"] if c["trap"]]
    assert report["traps"] == list(dict.fromkeys(named))
    assert set(report["traps"]) <= set(TRAPS)
    for ex in report["exercises"]:
        assert ex["file"].endswith(f"{ex['id']}.py")
        spec_checks = specs.load(ex["id"]).checks
        assert [c["id"] for c in ex["checks"]] == [c.id for c in spec_checks]
        assert ex["max_score"] == sum(c.points for c in spec_checks)
        assert ex["score"] == sum(c["points"] for c in ex["checks"])
        for c, want in zip(ex["checks"], spec_checks):
            assert (c["todo"], c["max_points"], c["hidden"]) == (
                want.todo,
                want.points,
                want.hidden,
            )
            assert c["points"] == (want.points if c["status"] == "passed" else 0)
            assert (c["message"] == "") == (c["status"] == "passed")
            assert c["trap"] is None or c["status"] in ("failed", "blocked")


def test_the_schema_refuses_what_the_grader_never_writes():
    """The schema is a contract that can fail: a few reports it must refuse."""
    good = {
        "schema_version": "4.0",
        "target": "t",
        "device": "interpreter: cpu",
        "versions": {"python": "3", "torch": "2", "triton": "3"},
        "checkset": "hidden",
        "strict": False,
        "free_form": False,
        "score": 0,
        "max_score": 0,
        "duration_s": 1.0,
        "traps": [],
        "exercises": [],
    }
    jsonschema.validate(good, SCHEMA)
    for isolation in ("landlock (ABI 7)", "none: not Linux"):
        jsonschema.validate({**good, "isolation": isolation}, SCHEMA)
    for bad in (
        {**good, "schema_version": "1.1"},
        {**good, "checkset": "secret"},
        {**good, "extra": 1},
        {k: v for k, v in good.items() if k != "strict"},
        {**good, "exercises": [{"id": "01_x"}]},
        {**good, "isolation": "landlock"},
        {**good, "isolation": "none"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, SCHEMA)


# ---- report, Gradescope, exit codes, selection, determinism ----------------------------------


@slow
def test_report_schema(graded):
    run = graded.get("mixed")
    assert run.code == 0, run.console
    assert_complete(run.report, ["01", "02", "03"])
    assert run.report["target"] == str(run.target.resolve())
    # 03 picks its top-1 twice: its right renormalization cannot be judged, so it is not paid.
    assert [e["score"] for e in run.report["exercises"]] == [25, 0, 0]
    assert run.report["score"] == 25
    assert run.report["traps"] == ["causal-mask-missing", "top2-not-masked"]
    statuses = {c["id"]: c["status"] for c in run.exercise("03")["checks"]}
    assert statuses["renormalized-random"] == "blocked"  # one expert twice: not judged, not paid
    for e in run.report["exercises"]:
        assert e["file"] == str(run.target.resolve() / f"{e['id']}.py")
    # The raw pytest reports are kept beside the score report.
    kept = run.target.parent / "target-out" / "pytest"
    assert sorted(p.name for p in kept.glob("*.json")) == [f"{s}.json" for s in STEM.values()]
    # The console shows the same totals.
    assert "Score: 25/100" in run.console
    summary = run.console.split("-" * 80)[1]  # the summary table names each trap with its hint
    assert "causal-mask-missing: " in summary and "top2-not-masked: " in summary


@slow
def test_gradescope_file(graded):
    run = graded.get("mixed")
    gs, report = run.gradescope, run.report
    assert gs is not None, run.console
    assert gs["score"] == report["score"] == 25
    assert isinstance(gs["execution_time"], (int, float)) and gs["execution_time"] > 0
    assert gs["output"] == f"25/100 on {runtime.describe()}; traps found: " + ", ".join(
        report["traps"]
    )
    assert gs["output_format"] == "md"
    checks = [(e["id"], c) for e in report["exercises"] for c in e["checks"]]
    assert len(gs["tests"]) == len(checks)
    for test, (ex_id, c) in zip(gs["tests"], checks):
        assert set(test) >= {"name", "score", "max_score", "status", "output", "visibility"}
        note = " (note, no points)" if c["todo"] is None else ""
        assert test["name"] == f"{ex_id}: {c['id']}{note}"
        assert (test["score"], test["max_score"]) == (c["points"], c["max_points"])
        assert test["status"] == ("passed" if c["status"] == "passed" else "failed")
        assert test["visibility"] == "visible" and test["output_format"] == "md"
        assert c["message"] in test["output"]
        assert (f"**trap: `{c['trap']}`**" in test["output"]) == bool(c["trap"])
        assert ("*not judged yet*" in test["output"]) == (c["status"] == "blocked")
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
    assert run.report["traps"] == [
        "acc-not-rescaled",
        "top2-not-masked",
        "weights-not-renormalized",
    ]
    for e in run.report["exercises"]:
        paid = [c for c in e["checks"] if c["todo"]]
        assert {c["status"] for c in paid} <= {"failed", "blocked"}
        assert all(c["trap"] for c in paid)
    assert run.gradescope["score"] == 0
    assert "Score: 0/75" in run.console


@slow
def test_grader_cannot_run_exits_2(graded):
    unknown, missing = graded.get("unknown-exercise"), graded.get("missing-target")
    assert unknown.code == 2 and "grader: no exercise '07'" in unknown.console
    assert missing.code == 2
    assert "grader: target folder /nonexistent/kata-target does not exist" in missing.console
    assert unknown.report is None and missing.report is None


def test_a_target_with_nothing_to_grade_says_what_is_there_and_writes_nothing(graded):
    file, exercise, notes = (
        graded.get(n) for n in ("file-target", "exercise-file-target", "notes-target")
    )
    assert file.code == 2 and file.report is None
    assert f"target {ROOT / 'README.md'} is a file, not a folder (nor a .zip)" in file.console
    assert exercise.code == 2 and exercise.report is None
    assert f"--target {exercise.target} 01" in exercise.console
    assert notes.code == 2 and notes.report == {"earlier": True}  # the earlier report stands
    assert f"no exercise files in {notes.target}: it holds 2 file(s): " in notes.console
    assert "notes.txt" in notes.console
    assert f"'{STEM['03']} (1).py' looks like it: rename it to {STEM['03']}.py" in notes.console
    assert not (notes.target.parent / "target-out" / "score.html").exists()


def test_a_binary_file_and_a_duplicates_name_are_said_plainly(graded):
    run = graded.get("binary-and-duplicate")
    assert run.code == 0, run.console
    binary, missing = run.exercise("01"), run.exercise("03")
    assert binary["error"].startswith(f"{STEM['01']}.py is not a text file (it holds binary data")
    assert binary["integrity"] is None  # no line-by-line list of every line of a binary
    assert "skeleton line" not in run.console
    assert missing["error"] == (
        f"{STEM['03']}.py not found in {run.target.resolve()}; '{STEM['03']} (1).py' looks like "
        f"it: rename it to {STEM['03']}.py"
    )


def test_exercise_selection_names():
    assert find("2").stem == find("02").stem == find(STEM["02"]).stem == STEM["02"]
    assert find(f"{STEM['03']}.py").stem == STEM["03"]
    with pytest.raises(KeyError):
        find("07")


# ---- the validation galleries ----------------------------------------------------------------


def test_the_tree_passes_the_static_checks():
    """validate --static: manifest, specs, solutions, generated files, galleries, docs agree."""
    problems, _ = static.problems()
    assert problems == []


def test_every_trap_has_a_wrong_kernel_and_every_exercise_a_correct_twin():
    pairs = gallery.all_variants()
    expected = {t for _, v in pairs for t in v.expect.traps}
    assert set(TRAPS) <= expected
    for ex in EXERCISE_LIST:
        kinds = {v.full_marks for s, v in pairs if s.exercise.stem == ex.stem}
        assert kinds == {True, False}, ex.stem
    for spec, v in pairs:  # every variant really differs from the kata's solution
        assert gallery.source(v, spec) != (SOLUTIONS / spec.exercise.filename).read_text()


def test_edits_and_fills_that_no_longer_apply_are_refused():
    text = "a = 1\nb = 2\nb = 2\n"
    assert gallery.apply_edits(text, (("a = 1", "a = 3"),)) == "a = 3\nb = 2\nb = 2\n"
    with pytest.raises(gallery.GalleryError, match="not found"):
        gallery.apply_edits(text, (("c = 3", "c = 4"),))
    with pytest.raises(gallery.GalleryError, match="found 2 times"):
        gallery.apply_edits(text, (("b = 2", "b = 5"),))
    with pytest.raises(gallery.GalleryError, match="changes nothing"):
        gallery.apply_edits(text, (("a = 1", "a = 1"),))
    sk = skeletons.pristine(STEM["02"])
    with pytest.raises(gallery.GalleryError, match="has 2 region"):
        gallery.fill(sk, {"causal-mask": "hi = N"})
    with pytest.raises(gallery.GalleryError, match="no TODO renormalize"):
        gallery.fill(sk, {"renormalize": "x = 1"})


def test_fill_writes_code_into_the_regions_at_their_indentation():
    sk = skeletons.pristine(STEM["02"])
    text = gallery.fill(sk, {"causal-mask": ("hi = 7", "a = 1\nb = 2")})
    lines = text.splitlines()
    (hi,) = [n for n, line in enumerate(lines) if line.strip() == "hi = 7"]
    assert lines[hi] == "    hi = 7"  # the region's own indentation
    a = lines.index("        a = 1")  # the mask's region: its one line became two
    assert lines[a + 1] == "        b = 2" and lines[a - 1].strip().startswith("#")
    assert len(lines) == len(sk.text.splitlines()) + 1
    sk = skeletons.pristine(find("04").stem)  # its diagonal stage's region is empty
    (empty,) = [r for r in sk.regions if r.end < r.start]
    lines = gallery.fill(sk, {empty.todo: "a = 1"}).splitlines()
    above = sk.text.splitlines()[empty.start - 2]
    indent = above[: len(above) - len(above.lstrip())]
    assert lines[empty.start - 1] == f"{indent}a = 1"  # the indentation of the line above


def test_a_todo_that_names_a_variable_has_a_line_assigning_it_in_its_region():
    """The static check that keeps a student's natural edit inside the regions: a TODO saying
    "add that condition to `visible`" under a `visible = ...` line left outside its region (02
    before issue 20) is refused; the same line moved into the region passes."""
    outside = regions.skeleton(
        "def k(x):\n"
        "    visible = x > 0\n"
        "    # TODO(mask): add the other condition to `visible`.\n"
        "    # BEGIN SOLUTION\n"
        "    visible = visible & (x < 9)\n"
        "    # END SOLUTION\n"
        "    return visible\n"
    )
    (problem,) = static.names_outside_regions(outside)
    assert "TODO(mask)" in problem and "`visible`, assigned at line(s) 2" in problem
    inside = regions.skeleton(
        "def k(x):\n"
        "    # TODO(mask): add the other condition to `visible`.\n"
        "    # BEGIN SOLUTION\n"
        "    visible = (x > 0) & (x < 9)\n"
        "    # END SOLUTION\n"
        "    # BEGIN SKELETON\n"
        "    # visible = x > 0\n"
        "    # END SKELETON\n"
        "    return visible\n"
    )
    assert static.names_outside_regions(inside) == []


def test_integrity_sees_edits_outside_the_regions_only():
    from grader.run.splice import splice

    sk = skeletons.pristine(STEM["03"])
    inside = gallery.fill(sk, specs.load(STEM["03"], "hidden").reference)
    assert splice(sk, inside).ok
    commented = inside.replace(
        "    row = tl.program_id(0)\n", "    # a note\n    row = tl.program_id(0)\n"
    )
    assert splice(sk, commented).ok  # comments and blank lines never count
    outside = inside.replace("tl.store(weight0_ptr + row, w0)", "tl.store(weight0_ptr + row, w1)")
    found = splice(sk, outside)
    (line,) = [n for n, s in enumerate(outside.splitlines(), 1) if "weight0_ptr + row, w1" in s]
    assert [(c.line, c.kind) for c in found.changes] == [(line, "changed")]
    assert "tl.store(weight0_ptr + row, w0)" in found.text  # the skeleton's line runs
    added = inside.replace(
        "    row = tl.program_id(0)\n", "    row = tl.program_id(0)\n    row = 0\n"
    )
    found = splice(sk, added)
    assert [c.kind for c in found.changes] == ["added"]  # a line added far from any region
    assert "row = 0" not in found.text


def test_specs_refuse_to_contradict_themselves():
    from grader.model import Check

    spec = specs.load(STEM["01"], "hidden")
    wrong_todo = Check(id="x", todo="renormalize", points=0, about="", cases=(), judge="output")
    one_more = Check(id="y", todo="rescale-acc", points=1, about="", cases=("nope",), judge="top2")
    bad = specs.Spec(**{**spec.__dict__, "checks": spec.checks + (wrong_todo, one_more)})
    problems = specs.consistency(bad, spec.cases)
    assert any("unknown TODO renormalize" in p for p in problems)
    assert any("pay 26 points" in p for p in problems)
    assert any("unknown case(s) nope" in p for p in problems)
    assert any("has no judge 'top2'" in p for p in problems)
    with pytest.raises(ValueError, match="worth no points"):
        Check(id="note", todo=None, points=5, about="", cases=(), judge="twin")


def test_each_stem_is_named_by_at_most_one_file_beyond_its_own():
    """An exercise lives in its manifest entry, its spec folder, its solution and exercise files
    and its docs page. Other code, tests and configuration name it through the manifest; at
    most one further file may name its stem (the README's table of exercises). Markdown pages
    link to each other by file name and are not counted; nor is the generated skeletons.json."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode:
        pytest.skip("not a git checkout")
    files = [ROOT / f for f in tracked.stdout.split() if not f.endswith((".md", ".png"))]
    for ex in ALL_EXERCISES:
        own = {
            "exercises/info.toml",
            f"solutions/{ex.filename}",
            f"exercises/{ex.filename}",
            "kata/skeletons.json",
        }
        naming = [
            f.relative_to(ROOT).as_posix()
            for f in files
            if f.is_file()
            and ex.stem in f.read_text(errors="replace")
            and f.relative_to(ROOT).as_posix() not in own
            and not f.is_relative_to(specs.folder(ex.stem))
        ]
        assert len(naming) <= 1, f"{ex.stem} is named in {naming}"


def _result(statuses: dict[str, tuple[str, str | None]], stem: str = STEM["03"]) -> ExerciseResult:
    """A synthetic result: check id -> (status, trap); checks not listed passed."""
    checks = []
    for c in specs.load(stem, "hidden").checks:
        status, trap = statuses.get(c.id, ("passed", None))
        checks.append(
            CheckResult(
                id=c.id,
                todo=c.todo,
                status=status,
                points=c.points if status == "passed" else 0,
                max_points=c.points,
                trap=trap,
                message="" if status == "passed" else "wrong",
            )
        )
    return ExerciseResult(
        id=stem,
        file=f"{stem}.py",
        track="core",
        score=sum(c.points for c in checks),
        max_score=specs.load(stem, "hidden").max_score,
        checks=checks,
        integrity={"ok": True, "lines": [], "diff": "", "strict_zeroed": False},
    )


def test_judge_can_fail_every_way():
    judge, E = validate.judge, model.Expect
    paid = [c.id for c in specs.load(STEM["03"], "hidden").checks if c.todo]
    full, none_passed = _result({}), _result({c: ("failed", None) for c in paid})
    trapped = _result({"top2-ties": ("failed", "top2-not-masked")})
    errored = _result({"top2-ties": ("error", None)})
    other_todo = _result({"top2-ties": ("failed", None), "renormalized-random": ("failed", None)})
    blocked = _result({"top2-ties": ("failed", None), "renormalized-random": ("blocked", None)})
    note_failed = _result({"strided-rows": ("failed", None)})
    assert judge(E(score="full"), full) == []
    assert judge(E(score="zero"), none_passed) == []
    assert judge(E(score="less", traps=("top2-not-masked",), failed=("top2-ties",)), trapped) == []
    assert judge(E(score="less", breaks="top2-mask"), blocked) == []  # blocked is not charged
    assert judge(E(score="less", passed=("renormalized-random",)), blocked)  # nor paid
    passes = E(score="less", traps=("top2-not-masked",), passed=("renormalized-random",))
    assert judge(passes, trapped) == []
    assert judge(E(score="full"), trapped)  # lost points
    assert judge(E(score="zero"), trapped)  # not zero
    assert judge(E(score="less"), full)  # did not lose points
    assert judge(E(score="less"), trapped)  # a trap named that was not expected
    assert judge(E(score="less", traps=("weights-not-renormalized",)), trapped)  # expected missing
    assert judge(E(score="less", traps=("top2-not-masked",), failed=("top2-random",)), trapped)
    assert judge(E(score="less"), errored)  # an error is the grader failing, never a catch
    assert judge(E(score="less", breaks="top2-mask"), other_todo)  # another TODO was charged
    assert judge(E(score="full"), note_failed)  # a note that must pass
    assert judge(E(score="full", notes_failed=("strided-rows",)), note_failed) == []
    assert judge(E(score="full", integrity=True), full)  # integrity expected, not flagged
    assert judge(E(score="full", error="boom"), full)
    tampered = _result({})
    tampered.score = 10
    assert judge(E(score="full"), tampered)


def test_05s_weights_are_judged_on_one_expert_picked_twice():
    """05's weights check pays for rows-per-program: a token given its top-1 twice has weights
    1/2 and 1/2 (what the given code computes), and that is judged, not blocked as in 03."""
    import numpy as np

    from grader.judge import judges
    from grader.kinds.base import Blocked
    from grader.kinds.gating.judges import WeightsJudge
    from kata import oracles

    spec = specs.load(find("05").stem, "hidden")
    (check,) = [c for c in spec.checks if c.todo == "rows-per-program"]
    case = spec.cases[check.cases[0]]
    judge = judges.make(check.judge, spec.interface)
    top1 = oracles.softmax(case.inputs["logits"]).argmax(axis=1).astype(np.int32)
    half = np.full(len(top1), 0.5, np.float32)
    twice = {"idx0": top1, "idx1": top1, "w0": half, "w1": half}
    assert judge.evidence(case, twice) is None
    assert "w0" in judge.evidence(case, {**twice, "w0": half * 0.9})
    with pytest.raises(Blocked):  # 03's judge waits for two distinct experts
        WeightsJudge(spec.interface).evidence(case, twice)
    with pytest.raises(Blocked, match="no token got two valid experts"):
        judge.evidence(case, {**twice, "idx0": top1 * 0 - 7})


@slow
def test_validate_grades_a_sample_of_the_galleries(capsys):
    names = ["02-mask-one-ahead", "03-zero-padded-experts", "02-finite-mask"]
    rows = validate.build_rows(names, runtime.BACKEND, baseline=False)
    assert [r.label for r in rows] == names
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
    E = model.Expect
    assert validate.judge(E(score="full"), one_ahead)
    assert validate.judge(E(score="less", traps=("causal-mask-missing",)), one_ahead)
    assert validate.judge(E(score="less"), finite)
    assert validate.judge(E(score="less", failed=("top2-random",)), padded)
    rows[2].problems = validate.judge(E(score="less"), finite)
    assert validate.format_row(rows[2]).splitlines()[0].endswith(" MISS")


def test_validate_exit_codes(monkeypatch, capsys):
    monkeypatch.setenv("KATA_DEVICE", os.environ.get("KATA_DEVICE", "auto"))
    assert validate.main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(v.name in listed for _, v in gallery.all_variants())
    assert validate.main(["--static"]) == 0
    assert "static checks: OK" in capsys.readouterr().out
    assert validate.main(["no-such-variant"]) == 2
    spec = specs.load(STEM["02"], "hidden")
    rotten = model.wrong(
        "rotten-edit", "an edit that no longer applies", edits=[("no such line", "x")]
    )
    patched = specs.Spec(**{**spec.__dict__, "gallery": spec.gallery + (rotten,)})
    monkeypatch.setattr(gallery, "all_variants", lambda stems=None: [(patched, rotten)])
    assert validate.main(["--no-baseline", "rotten-edit"]) == 1
    out = capsys.readouterr().out
    assert "rotten-edit" in out and "MISS" in out and "not found" in out


def test_dispatch_evidence_counts_one_row_and_one_pair_in_the_singular():
    """09's evidence says "1 row ... was written" and "(1 pair)", "2 rows ... were" (L4)."""
    import numpy as np

    from grader.judge import judges

    spec = specs.load(find("09").stem, "hidden")
    check = next(c for c in spec.checks if c.judge == "dispatch-capacity")
    judge = judges.make(check.judge, spec.interface)
    case = spec.cases[check.cases[0]]
    right = spec.interface.expected(case)
    total = int(right["counts"].sum())
    for n, said in ((1, "1 row past the last one filled"), (2, "2 rows past the last one")):
        got = {k: np.array(v, copy=True) for k, v in right.items()}
        got["token_of_slot.unwritten"][total : total + n] = False
        evidence = judge.evidence(case, got)
        assert evidence.startswith(said), evidence
        assert (" was written;" if n == 1 else " were written;") in evidence
    got = {k: np.array(v, copy=True) for k, v in right.items()}
    kept = np.flatnonzero(got["slot"].reshape(-1) >= 0)[0]
    got["slot"].reshape(-1)[kept] = -1
    assert "was dropped (1 pair);" in judge.evidence(case, got)


def test_trap_hints_fit_the_summary_line():
    """The summary prints `<trap>: <hint>` in 76 columns; a longer hint would be cut."""
    for trap in TRAPS.values():
        assert len(f"{trap.id}: {trap.hint}") <= 76, trap.id
        assert f"TODO {trap.todo}" in trap.hint
        for message in (trap.message, *trap.messages):
            assert f"TODO({trap.todo})" in message, trap.id


def test_compilation_errors_name_the_students_line(tmp_path):
    """A compiled kernel's error (only raised on a GPU) names the line in the student's file:
    built here from Triton's own CompilationError, on a real file."""
    import ast

    from triton.compiler.errors import CompilationError

    from grader.judge.errors import explain

    path = tmp_path / f"{STEM['01']}.py"
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
        f"your kernel does not compile, line {line} of {path.name}: Triton's compiler says: "
        "input and other must have equal reduction dimensions. In plain words: tl.dot's inner "
        "dimensions"
    )


def _worded(summary: str) -> list[str]:
    """The summary's lines but the ones that end in a file's path, which is as long as it is."""
    return [line for line in summary.splitlines() if not line.startswith(("Report:", "Open in"))]


def test_summary_prints_timed_and_skipped_performance(tmp_path):
    """The performance lines of the summary, for a GPU run (timed) and a CPU run (skipped)."""
    import io

    from grader.report.records import Report
    from grader.report.summary import Printer
    from grader.run import timing

    timed = {
        "timed": True,
        "device": "GPU",
        "shapes": [
            {
                "shape": "M=1M E=128 float32",
                "baseline": "torch",
                "kernel_ms": 0.23,
                "torch_ms": 6.1,
                "speedup": 26.5,
            },
        ],
    }
    results = []
    for number, raw, correct in (("04", None, True), ("05", timed, False)):
        stem = find(number).stem
        ex = ExerciseResult(
            id=stem,
            file=f"{stem}.py",
            track="performance",
            score=0,
            max_score=50,
            checks=[],
            performance=timing.score(raw, correct),
        )
        results.append(ex)
    report = Report(target="t", device="cuda: GPU", versions={}, exercises=results, duration_s=1.0)
    out = io.StringIO()
    Printer(stream=out).finish(report, tmp_path / "score.json", None)
    text = out.getvalue()
    assert "Performance: 0/20 points" in text
    assert "04 timing skipped: timing needs a CUDA GPU" in text
    assert "M=1M E=128 float32" in text and "x26.50" in text
    assert "no performance points until every correctness check passes" in text
    assert max(len(line) for line in _worded(text)) <= 80
    assert report.to_json()["performance"]["max_points"] == 20


def test_performance_points_state_what_the_timing_noise_allows(tmp_path):
    """x0.79 gives 8 points; rounds that allow x0.71 to x0.86 could as well give 7 or 9, and
    the report and the summary say so. Rounds that agree give one number."""
    import io

    from grader.report.records import Report
    from grader.report.summary import Printer
    from grader.run import timing

    def timed(low, high):
        return {
            "timed": True,
            "device": "GPU",
            "shapes": [
                {
                    "shape": f"B=4 H=16 S=4096 D=128 bf16{c}",
                    "baseline": "torch SDPA",
                    "kernel_ms": 1.0,
                    "torch_ms": 0.79,
                    "speedup": 0.79,
                    "speedup_range": [low, high],
                }
                for c in ("", " causal")
            ],
        }

    noisy, steady = timing.score(timed(0.71, 0.86), True), timing.score(timed(0.78, 0.80), True)
    assert (noisy["points"], noisy["points_range"]) == (8, [7, 9])
    assert (steady["points"], steady["points_range"]) == (8, [8, 8])
    assert "points_range" not in timing.score(timed(0.71, 0.86), False)
    stem = find("04").stem
    out = io.StringIO()
    for perf in (noisy, steady):
        ex = ExerciseResult(
            id=stem,
            file=f"{stem}.py",
            track="performance",
            score=50,
            max_score=50,
            checks=[],
            performance=perf,
        )
        Printer(stream=out).finish(
            Report(target="t", device="cuda: GPU", versions={}, exercises=[ex], duration_s=1.0),
            tmp_path / "s.json",
            None,
        )
    text = out.getvalue()
    assert text.count("x0.79 (0.71-0.86)") == 2 and text.count("x0.79 (0.78-0.80)") == 2
    assert "04 8/10 points at x0.79 vs torch (geomean); 7-9 within the timing's spread" in text
    assert text.count("04 8/10 points at x0.79 vs torch (geomean)\n") == 1
    assert max(len(line) for line in _worded(text)) <= 80


class _TimedOn:
    """A performance interface whose ``timed`` hands out the given calls (on the CPU): the rest,
    the output pairing and the tolerances, is the real interface's."""

    def __init__(self, interface, mine, ref):
        self.interface, self.mine, self.ref = interface, mine, ref

    def timed(self, kernel, shape):
        return self.mine, self.ref, "B=1 H=2 S=64 D=16 bf16", "torch SDPA"

    def __getattr__(self, name):
        return getattr(self.interface, name)


def _timed_attention(monkeypatch, kernel_writes):
    """04's score from ``time_shape`` on a CPU problem whose timed calls run
    ``kernel_writes(out, right)`` into one output buffer made once, as the real ``timed`` does;
    the rounds' times are fixed (x0.8, 8 points)."""
    from grader.run import timing
    from kata.kinds.bhsd_attention import INTERFACE

    monkeypatch.setattr(
        timing, "interleaved_ms", lambda fns: {"kernel": [1.0] * 5, "torch": [0.8] * 5}
    )
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 64, 16, dtype=torch.bfloat16) for _ in "qkv")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    right = sdpa(q.float(), k.float(), v.float()).to(torch.bfloat16)
    out = torch.empty_like(q)

    def mine():
        kernel_writes(out, right)
        return out

    row = timing.time_shape(_TimedOn(INTERFACE, mine, lambda: sdpa(q, k, v)), object(), {})
    return row, timing.score({"timed": True, "device": "GPU", "shapes": [row, row]}, True)


def test_timed_output_that_agrees_with_torch_keeps_its_points(monkeypatch):
    row, entry = _timed_attention(monkeypatch, lambda out, right: out.copy_(right))
    assert row["agrees_with_torch"] and row["max_difference"] < 1e-2
    assert entry["points"] == 8 and entry["points_range"] == [8, 8] and "reason" not in entry


def test_timed_output_that_differs_from_torch_earns_no_points(monkeypatch):
    """A kernel that does its work only when checked (poisoned buffers, checked shapes) leaves
    the timed output unwritten: here zeros, where torch's answer is not."""
    row, entry = _timed_attention(monkeypatch, lambda out, right: out.zero_())
    assert row["agrees_with_torch"] is False and row["max_difference"] > 1e-2
    assert entry["points"] == 0 and "points_range" not in entry
    assert entry["reason"].startswith(
        "the kernel's output on the timed shape B=1 H=2 S=64 D=16 bf16 differs from torch's: "
        "out differs in "
    )
    assert entry["reason"].endswith("; speed counts only for right answers")
    jsonschema.validate(entry, SCHEMA["$defs"]["performance"])


def test_timed_output_of_nan_earns_no_points(monkeypatch):
    row, entry = _timed_attention(monkeypatch, lambda out, right: out.fill_(float("nan")))
    assert row["agrees_with_torch"] is False and row["max_difference"] is None
    assert entry["points"] == 0 and "NaN" in entry["reason"]
    json.dumps(entry, allow_nan=False)  # the report is strict JSON
    jsonschema.validate(entry, SCHEMA["$defs"]["performance"])


def test_timed_gating_output_is_compared_by_probability(monkeypatch):
    """05: on equal logits the kernel may pick another expert of the same probability than
    torch.topk, and agrees; an expert of a lower probability does not."""
    from grader.run import timing
    from kata.kinds.tiled_gating import INTERFACE

    logits = torch.tensor([[0.0, 3.0, 1.0, 3.0], [2.0, 0.5, 1.5, 1.5], [0.1, 0.2, 0.3, 0.4]])
    theirs = INTERFACE.baseline(logits)
    w, i, probs = theirs

    def outputs(row0=(3, 1), row2=(3, 2)):
        idx0 = torch.tensor([row0[0], 0, row2[0]], dtype=torch.int32)  # row 0: 3 ties torch's 1
        idx1 = torch.tensor([row0[1], 3, row2[1]], dtype=torch.int32)  # row 1: 3 ties 2
        return w[:, 0].clone(), w[:, 1].clone(), idx0, idx1

    tied = timing.agreement(INTERFACE, outputs(), theirs, "float32")
    assert tied["agrees_with_torch"], tied
    wrong = timing.agreement(INTERFACE, outputs(row2=(3, 0)), theirs, "float32")
    assert wrong["agrees_with_torch"] is False
    assert wrong["difference"].startswith("prob differs in 1 of 3 values")
    # Expert 3 twice in row 0: each choice has the top probability, but one expert is not two.
    twice = timing.agreement(INTERFACE, outputs(row0=(3, 3)), theirs, "float32")
    assert twice["agrees_with_torch"] is False


# One kernel per entry of errors.KNOWN, each making that entry's message in a real compile for the
# course's GPU (named by the entry's id, "-" as "_"). N is a runtime argument, the rest constexpr.
_KNOWN_KERNELS = """\
import triton
import triton.language as tl


@triton.jit
def shape_mismatch(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm, rd = tl.arange(0, M), tl.arange(0, D)
    acc = tl.load(x_ptr + rm[:, None] * D + rd[None, :])
    alpha = tl.load(x_ptr + rm)
    acc = acc * alpha
    tl.store(x_ptr + rm[:, None] * D + rd[None, :], acc)


@triton.jit
def dot_too_small(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm, rd = tl.arange(0, M), tl.arange(0, D)
    a = tl.load(x_ptr + rm[:, None] * D + rd[None, :]).to(tl.float16)
    tl.store(x_ptr + rm[:, None] * M + rm[None, :], tl.dot(a, tl.trans(a)))


@triton.jit
def dot_inner_mismatch(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm, rd = tl.arange(0, M), tl.arange(0, D)
    a = tl.load(x_ptr + rm[:, None] * D + rd[None, :])
    tl.store(x_ptr + rm[:, None] * M + rm[None, :], tl.dot(a, a))


@triton.jit
def dot_not_2d(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    a = tl.load(x_ptr + rm)
    tl.store(x_ptr + rm, tl.dot(a, a))


@triton.jit
def continue_(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    for i in range(N):
        if i == 3:
            continue
        tl.store(x_ptr + rm, tl.load(x_ptr + rm) + 1.0)


@triton.jit
def break_(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    for i in range(N):
        if i == 3:
            break
        tl.store(x_ptr + rm, tl.load(x_ptr + rm) + 1.0)


@triton.jit
def unsupported_syntax(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    f = lambda v: v + 1
    tl.store(x_ptr + rm, f(tl.load(x_ptr + rm)))


@triton.jit
def arange_not_constexpr(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, N)
    tl.store(x_ptr + rm, 1.0)


@triton.jit
def arange_not_power_of_2(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, 24)
    tl.store(x_ptr + rm, 1.0)


@triton.jit
def shape_not_constexpr(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    acc = tl.zeros((N,), dtype=tl.float32)
    tl.store(x_ptr + rm, acc)


@triton.jit
def loop_changes_type(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    acc = tl.zeros((M, D), dtype=tl.float32)
    for i in range(N):
        acc = tl.sum(acc, axis=1)
    tl.store(x_ptr + rm, acc)


@triton.jit
def branch_changes_type(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    m = tl.full((M,), float("-inf"), tl.float32)
    if N > 3:
        m = 0
    tl.store(x_ptr + rm, m)


@triton.jit
def name_not_defined(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    tl.store(x_ptr + rm, tl.load(x_ptr + rm) * scale)


@triton.jit
def pointer_plus_float(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    tl.store(x_ptr + rm * 1.5, 1.0)


@triton.jit
def trans_1d(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    tl.store(x_ptr + rm, tl.trans(tl.load(x_ptr + rm)))


@triton.jit
def range_not_int(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm = tl.arange(0, M)
    for i in range(0, 10, 0.5):
        tl.store(x_ptr + rm, 1.0)


@triton.jit
def unknown_keyword(x_ptr, N, M: tl.constexpr, D: tl.constexpr):
    rm, rd = tl.arange(0, M), tl.arange(0, D)
    a = tl.load(x_ptr + rm[:, None] * D + rd[None, :])
    tl.store(x_ptr + rm, tl.max(a, dim=1))
"""

# Compiles each kernel of _KNOWN_KERNELS for sm_90, as the grader's compile gate does, and prints
# what the grader tells the student; the shape mismatch's line is put inside a TODO region.
_COMPILE_KNOWN = """\
import json, sys
from kata import runtime
runtime.configure()  # KATA_DEVICE=compiler
import torch
from triton.backends.compiler import GPUTarget
from grader.judge import errors
from grader.run import launcher
sys.path.insert(0, sys.argv[1])
import known_kernels
text = open(known_kernels.__file__).read().splitlines()
line = text.index("    acc = acc * alpha") + 1
errors.use_lines(None, {"rescale-acc": [[line - 1, line]]})
x = torch.empty(4096, dtype=torch.float32)
said = {}
for entry in errors.KNOWN:
    name = entry.id.replace("-", "_")
    kernel = getattr(known_kernels, name if hasattr(known_kernels, name) else name + "_")
    shape = {"M": 64, "D": 16} if entry.id == "shape-mismatch" else {"M": 16, "D": 8}
    if entry.id in ("dot-inner-mismatch", "unknown-keyword"):
        shape = {"M": 32, "D": 16}
    try:
        launcher._compile_one(kernel, (x, 10), shape, GPUTarget(*launcher.GPU_TARGET), full=False)
        said[entry.id] = None
    except Exception as exc:
        said[entry.id] = errors.explain(exc, known_kernels.__file__)
print(json.dumps({"said": said, "line": line}))
"""


@pytest.fixture(scope="module")
def compiled_known(tmp_path_factory):
    """What the grader says for each kernel of _KNOWN_KERNELS, compiled in one child Python."""
    tmp = tmp_path_factory.mktemp("known")
    (tmp / "known_kernels.py").write_text(_KNOWN_KERNELS)
    env = {**os.environ, "KATA_DEVICE": "compiler", "TRITON_CACHE_DIR": str(tmp / "cache")}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-c", _COMPILE_KNOWN, str(tmp)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@slow
@pytest.mark.parametrize("entry", errors.KNOWN, ids=lambda k: k.id)
def test_a_known_compile_message_gets_its_plain_words(entry, compiled_known):
    """Each known message, made by a real compile for sm_90: the compiler's words whole, then
    this entry's plain words (not an earlier entry's), and the line."""
    message = compiled_known["said"][entry.id]
    assert message is not None, f"{entry.id}: its kernel compiled"
    assert message.startswith(errors.DOES_NOT_COMPILE + ", line "), message
    compiler, plain = message.split(" In plain words: ")
    assert "Triton's compiler says: " in compiler and entry.needle in compiler, message
    assert plain == entry.plain and errors.known(message) == entry


@slow
def test_a_compile_error_in_a_region_names_its_todo(compiled_known):
    line = compiled_known["line"]
    assert compiled_known["said"]["shape-mismatch"].startswith(
        f"{errors.DOES_NOT_COMPILE}, line {line} (in TODO(rescale-acc)): Triton's compiler says: "
        "Cannot make_shape_compatible: incompatible dimensions at index 1: "
    )


def test_every_known_message_has_a_kernel_that_makes_it():
    names = set(re.findall(r"^def (\w+)\(", _KNOWN_KERNELS, flags=re.M))
    assert {k.id.replace("-", "_") for k in errors.KNOWN} <= {n.rstrip("_") for n in names}
    assert len({k.id for k in errors.KNOWN}) == len(errors.KNOWN)


@slow
def test_acc_times_alpha_without_a_column_axis_is_the_students_compile_error(tmp_path):
    """01 with ``acc = acc * alpha`` (review persona M3): the checks whose head dimension is not
    the block's say the kernel does not compile, on the student's line and TODO, with the
    compiler's words and plain ones; the page titles the note as the student's error."""
    from grader.report import html
    from grader.report.records import Report

    ex = find("01")
    right = "acc = acc * alpha[:, None] + tl.dot(p, v)"
    text = solution_text("01").replace(right, "acc = acc * alpha + tl.dot(p, v)")
    (tmp_path / ex.filename).write_text(text)
    (line,) = [n for n, s in enumerate(text.splitlines(), 1) if "acc = acc * alpha +" in s]
    result = runner.grade_exercise(ex, tmp_path, "interpreter", timed=False)
    said = [c for c in result.checks if errors.DOES_NOT_COMPILE in c.message]
    assert said, [c.message for c in result.checks]
    for check in said:
        assert (
            f"{errors.DOES_NOT_COMPILE}, line {line} (in TODO(rescale-acc)): Triton's compiler "
            "says: Cannot make_shape_compatible: incompatible dimensions at index 1: "
        ) in check.message
        assert check.message.endswith(f"In plain words: {errors.KNOWN[0].plain}")
    page = html.render(
        Report(target="t", device="d", versions={}, exercises=[result], duration_s=0)
    )
    assert any(c.note for c in said)  # strided-inputs: D = 24 in a 32-wide block
    assert "Your code does not compile, <code>" in page
    assert "Note on given code" not in page
    # The summary keeps the compiler's words whole (it used to cut them after the file's name).
    import io

    from grader.report.summary import Printer

    out = io.StringIO()
    Printer(stream=out).finish(
        Report(target="t", device="d", versions={}, exercises=[result], duration_s=0),
        tmp_path / "s.json",
        None,
    )
    summary = " ".join(out.getvalue().split("-" * 80)[1].split())
    assert re.search(
        rf"ragged-shapes: your kernel does not compile, line {line} \(in TODO\(rescale-acc\)\): "
        r"Triton's compiler says: Cannot make_shape_compatible: incompatible dimensions at index "
        r"1: \d+ and \d+\.",
        summary,
    ), summary


_SMALL_DOT = """\
import triton
import triton.language as tl


@triton.jit
def small_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))
"""

# Compiles small_dot for the grader's sm_90 target, as the grader does before it runs a file, and
# prints what the grader would tell the student for each (dtype, K).
_COMPILE_SMALL_DOTS = """\
import json, sys
from kata import runtime
runtime.configure()  # KATA_DEVICE=compiler: the kernel is made for Triton's compiler
import torch
from triton.backends.compiler import GPUTarget
from grader.judge import errors
from grader.run import launcher
sys.path.insert(0, sys.argv[1])
import small_dot
said = {}
for dtype, K in (("float16", 8), ("float16", 16), ("float32", 4), ("float32", 8)):
    t = getattr(torch, dtype)
    args = (torch.empty(16, K, dtype=t), torch.empty(K, 16, dtype=t), torch.empty(16, 16, dtype=t))
    try:
        launcher._compile_one(small_dot.small_dot, args, {"M": 16, "N": 16, "K": K},
                              GPUTarget(*launcher.GPU_TARGET), full=False)
        said[f"{dtype} K={K}"] = None
    except Exception as exc:
        said[f"{dtype} K={K}"] = errors.explain(exc, small_dot.__file__)
print(json.dumps(said))
"""


def _compiled_for_sm90(tmp_path, name: str, kernels: str, script: str) -> dict:
    """Writes ``kernels`` as ``name``, runs ``script`` on it in a fresh Python compiling for
    sm_90 on this machine (no GPU), and returns the JSON of its last line."""
    (tmp_path / name).write_text(kernels)
    env = {**os.environ, "KATA_DEVICE": "compiler", "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@slow
def test_a_small_dot_gets_the_compilers_message_and_its_advice(tmp_path):
    """The compiler's own words for a tl.dot whose reduction dimension is too small, compiled for
    sm_90 on this machine (no GPU needed): the advice's needle must match them. Triton 3.6 and
    3.9 both say "M >= 1, N >= 1 and K >= 16" for 16-bit inputs; 3.9 lets fp32 go down to 8."""
    said = _compiled_for_sm90(tmp_path, "small_dot.py", _SMALL_DOT, _COMPILE_SMALL_DOTS)
    advice = next(k.plain for k in errors.KNOWN if k.id == "dot-too-small")
    assert said["float16 K=16"] is None
    assert "Input shapes should have M >= 1, N >= 1 and K >= 16" in said["float16 K=8"]
    assert said["float16 K=8"].endswith(f". In plain words: {advice}")
    # 3.9: K >= 8; 3.6: K >= 16
    assert re.search(r"K >= \d+\. In plain words: ", said["float32 K=4"])
    assert said["float32 K=4"].endswith(f". In plain words: {advice}")
    import triton

    if tuple(int(x) for x in triton.__version__.split(".")[:2]) >= (3, 9):  # the guide says so
        assert said["float32 K=8"] is None
    assert "reduction (K) dimension" in advice


_TILE_DOT = """\
import triton
import triton.language as tl


@triton.jit
def tile_dot(a_ptr, c_ptr, M: tl.constexpr, K: tl.constexpr):
    rm, rk = tl.arange(0, M), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    tl.store(c_ptr + rm[:, None] * M + rm[None, :], tl.dot(a, tl.trans(a)))
"""

# Compiles tile_dot for sm_90 as the compile gate does: what each launch needs per program, by
# the gate's own allocation (full=False) and by Triton's whole compile (full=True), and what the
# gate says of it.
_COMPILE_TILE_DOTS = """\
import json, sys
from kata import runtime
runtime.configure()  # KATA_DEVICE=compiler
import torch
from triton.backends.compiler import GPUTarget
from grader.run import launcher
sys.path.insert(0, sys.argv[1])
import tile_dot
said = {}
for label, M, K, warps, full in (("small", 16, 16, 4, False), ("small-full", 16, 16, 4, True),
                                 ("wide", 64, 64, 8, False), ("wide-full", 64, 64, 8, True),
                                 ("big", 256, 512, 4, False), ("many-warps", 16, 16, 64, False)):
    args = (torch.empty(M, K, dtype=torch.float16), torch.empty(M, M, dtype=torch.float16))
    compiled = launcher._compile_one(tile_dot.tile_dot, args, {"M": M, "K": K, "num_warps": warps},
                                     GPUTarget(*launcher.GPU_TARGET), full=full)
    said[label] = [compiled.shared, compiled.warps, launcher.resources(compiled)]
print(json.dumps(said))
"""


def test_the_gate_refuses_what_an_sm90_program_cannot_hold():
    """Triton's OutOfResources, before a GPU launches a kernel: more shared memory or threads
    per program than an H100 or H200 has. The limits are the GPU's, not one byte either way."""
    from grader.run.launcher import SHARED_PER_PROGRAM, Compiled, resources

    assert SHARED_PER_PROGRAM == 232448  # cudaDevAttrMaxSharedMemoryPerBlockOptin, sm_90
    assert resources(Compiled("", SHARED_PER_PROGRAM, 32)) is None
    said = resources(Compiled("", SHARED_PER_PROGRAM + 1, 4))
    assert said.startswith("the kernel needs 232449 bytes of shared memory per program; an H100")
    assert "has 232448: use smaller tiles" in said
    assert resources(Compiled("", 0, 64)).startswith("the kernel runs 2048 threads per program")


@slow
def test_the_gate_finds_the_shared_memory_tritons_compile_finds(tmp_path):
    """The gate's shared memory per launch, from make_llir's passes up to the allocation, is
    the metadata.shared of Triton's whole compile (what its launcher compares on a GPU), and a
    256x512 fp16 tile and its product are over an H100's limit (the red team's region)."""
    from grader.run.launcher import SHARED_PER_PROGRAM

    said = _compiled_for_sm90(tmp_path, "tile_dot.py", _TILE_DOT, _COMPILE_TILE_DOTS)
    assert said["small"] == said["small-full"] and said["wide"] == said["wide-full"], said
    assert 0 < said["small"][0] < said["wide"][0] < SHARED_PER_PROGRAM and said["wide"][1] == 8
    assert said["small"][2] is None and said["wide"][2] is None
    assert said["big"][0] > SHARED_PER_PROGRAM, said
    assert said["big"][2].startswith(f"the kernel needs {said['big'][0]} bytes of shared memory")
    assert said["many-warps"][1] == 64
    assert said["many-warps"][2].startswith("the kernel runs 2048 threads per program (64 warps)")


def test_gradescope_and_summary_say_an_exercise_was_edited_outside_its_regions(tmp_path):
    import io

    from grader.report import gradescope
    from grader.report.records import Report
    from grader.report.summary import Printer

    ex = _result({})
    ex.integrity = {
        "ok": False,
        "lines": [58, 59],
        "edited": [60, 61],
        "regions": {"top2-mask": [[62, 62]], "renormalize": [[68, 70]]},
        "diff": "-a\n+b",
        "strict_zeroed": True,
    }
    report = Report(
        target="t",
        device="interpreter: cpu",
        versions={},
        exercises=[ex],
        duration_s=1.0,
        strict=True,
    )
    said = (
        f"edited given code outside its TODO regions, at line(s) 60, 61 of {STEM['03']}.py "
        "(skeleton line(s) 58, 59); write inside the regions: TODO(top2-mask) is line(s) 62; "
        "TODO(renormalize) is line(s) 68-70; scored 0 (strict grading)"
    )
    assert said in gradescope.results(report)["output"]
    out = io.StringIO()
    Printer(stream=out).exercise_done(ex)
    assert said in " ".join(out.getvalue().split())


def test_region_lines_are_said_once():
    """A kernel replaced whole holds a TODO's region twice at the same lines, and two TODOs can
    share one range: each range is said once ("42-60", never "42-60 and 42-60")."""
    from grader.report.records import line_spans, where_to_write

    assert line_spans([[42, 60], [42, 60]]) == "42-60"
    assert line_spans([[42, 60], [62, 62], [42, 60]]) == "42-60 and 62"
    said = where_to_write(
        {"top2-mask": [[39, 55]], "renormalize": [[39, 55]], "router": [[20, 30], [20, 30]]}
    )
    assert said == [
        "TODO(top2-mask) and TODO(renormalize) are line(s) 39-55",
        "TODO(router) is line(s) 20-30",
    ]
    ex = _result({})
    ex.integrity = {
        "ok": False,
        "lines": [58],
        "edited": [60],
        "regions": {"causal-mask": [[42, 60], [42, 60]]},
    }
    assert edits_outside(ex).endswith(
        "write inside the regions: TODO(causal-mask) is line(s) 42-60"
    )


def test_gradescope_says_a_misnamed_file_once_at_the_top(tmp_path):
    """03 saved under a browser's duplicate name (``NN_name (1).py``): the rename is said once,
    in the summary; each of 03's tests points there, with no TODO to revisit and no hint (its
    code never ran). A check that ran and failed keeps its card."""
    from grader.report import gradescope
    from grader.report.records import Report

    (tmp_path / f"{STEM['03']} (1).py").write_text(solution_text("03"))
    missing = runner.grade_exercise(find("03"), tmp_path, "interpreter")
    failed = _result({"causal-square": ("failed", None)}, STEM["02"])
    report = Report(
        target=str(tmp_path),
        device="interpreter: cpu",
        versions={},
        exercises=[failed, missing],
        duration_s=1.0,
    )
    out = gradescope.results(report)
    rename = f"rename it to {STEM['03']}.py"
    assert out["output"].count(rename) == 1
    assert f"{STEM['03']}: not run: {STEM['03']}.py not found in " in out["output"]
    mine = [t for t in out["tests"] if t["name"].startswith(STEM["03"])]
    assert len(mine) == len(missing.checks) > 0
    assert {t["output"] for t in mine} == {gradescope.NOT_RUN}
    theirs = [t["output"] for t in out["tests"] if t["status"] == "failed" and t not in mine]
    assert len(theirs) == 1 and "**revisit:**" in theirs[0] and "**next hint:**" in theirs[0]


# ---- the FA3 showcase (07): graded as right or wrong by 04's checks ----------------------------

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def _showcase_as_04(tmp_path: Path) -> Path:
    """A submission folder holding 07 under exercise 04's file name."""
    target = tmp_path / "fa3"
    target.mkdir()
    shutil.copy(SOLUTIONS / "07_fa3_attention.py", target / find("04").filename)
    return target


@slow
@pytest.mark.skipif(not HOPPER, reason="07 is Gluon for Hopper (sm_90): it needs that GPU")
def test_fa3_showcase_is_right_on_every_input_of_exercise_04_under_its_own_tiles():
    """07 has 04's kernel name, parameters and launcher, but only tiles of its own (TMA, 128
    rows): 04's pinned configurations, pointer loads among them, are outside what it runs, and
    a grading of 07 as 04 fails there with the compiler's message. On every input of 04's
    hidden cases (ragged S, both dtypes, D = 32 to 128, causal or not), under each tile
    configuration 07's own autotuner offers, its output is right."""
    import dataclasses

    spec = specs.load(find("04").stem, "hidden")
    own = {n: dataclasses.replace(c, config=None, each_config=True) for n, c in spec.cases.items()}
    spec = dataclasses.replace(spec, cases=own)
    file = SOLUTIONS / "07_fa3_attention.py"
    ran = runner.launch(spec, file.read_text(), file, "cuda", 300, timed=False)
    checks = runner.judge(spec, ran)
    wrong = {c.id: c.message for c in checks if c.status != "passed"}
    assert ran.error is None and not wrong, (ran.error, wrong)


@slow
@pytest.mark.skipif(not HOPPER, reason="07 is Gluon for Hopper (sm_90): it needs that GPU")
@pytest.mark.parametrize("sms", [1, 12])
def test_fa3_wrapper_is_right_where_a_program_runs_several_query_tiles(monkeypatch, sms):
    """``fa3_attention`` launches 07 on a persistent grid, where each program loops over work
    items (pairs of query tiles) of several heads and every barrier's phase runs on across
    them; graded as 04, each program has one. Told the GPU has 1 or 12 SMs, the 6 heads get 1
    program or 2 each (unequal item counts at S = 383): the output, written over NaN, must
    equal that of a program per tile bit for bit, at ragged S (an odd tile count leaves a
    middle tile alone)."""
    fa3 = bench.load("07")
    device = torch.cuda.current_device()
    monkeypatch.setitem(bhsd_attention._SMS, device, sms)
    for D, dtype in ((64, torch.bfloat16), (128, torch.float16)):
        for S in (1, 129, 383, 1000):
            for causal in (False, True):
                torch.manual_seed(S)
                q, k, v = (torch.randn(2, 3, S, D, device="cuda", dtype=dtype) for _ in "qkv")
                outs = []
                for persistent in (True, False):
                    out = torch.full_like(q, float("nan"))
                    bhsd_attention.cached_attention_launch(
                        fa3.attention_fwd_kernel, q, k, v, out, causal, persistent
                    )
                    outs.append(out)
                label = f"D={D} S={S} causal={causal} on {sms} SMs"
                items = (-(-S // 128) + 1) // 2
                programs = bhsd_attention.persistent_programs(S, 6, 128, sms)
                assert programs == (1 if sms == 1 else min(2, items)), label
                assert torch.equal(*outs), label
                assert torch.equal(fa3.fa3_attention(q, k, v, causal=causal), outs[1]), label


@slow
@pytest.mark.skipif(not runtime.INTERPRETER, reason="the interpreter's refusal")
def test_a_gluon_kernel_is_refused_by_the_interpreter_with_its_reason(tmp_path):
    # A file written apart: graded as written (--free-form), the launcher says why it cannot run.
    run = grade(_showcase_as_04(tmp_path), "04", "--free-form")
    (ex,) = [e for e in run.report["exercises"] if e["id"] == find("04").stem]
    assert ex["score"] == 0 and "is a Gluon kernel" in ex["error"]
    assert "grade it on a GPU" in ex["error"]


def _hold(kind: str, name: str, log, release) -> None:
    """Hold the GPU as a launch (shared) or a timing (to ourselves) until ``release`` is set;
    ``log`` numbers each entry and exit in the order they happen."""
    from grader.run import timing

    def say(what: str) -> None:
        with log["lock"]:
            log["order"].append((name, what))

    with timing.gpu_to_ourselves() if kind == "timing" else timing.gpu_shared():
        say("in")
        release.wait(60)
        say("out")  # before the lock is let go: the next holder's "in" comes after it


def test_a_timing_has_the_gpu_to_itself(tmp_path, monkeypatch):
    """Correctness launches run together; a timing waits for those under way, and a launch that
    comes while the timing waits (or runs) waits for it: no launch overlaps a timing. Each
    holder keeps the GPU until the test lets it go, so the order of events is the locks' own,
    however slowly this machine starts processes (the waits only bound a hang)."""
    import fcntl
    import multiprocessing

    lock = tmp_path / "gpu.lock"
    monkeypatch.setenv("KATA_TIMING_LOCK", str(lock))
    ctx = multiprocessing.get_context("fork")
    manager = ctx.Manager()
    log = {"lock": manager.Lock(), "order": manager.list()}
    release = {name: ctx.Event() for name in "abtc"}
    procs = {}

    def start(kind: str, name: str) -> None:
        procs[name] = ctx.Process(target=_hold, args=(kind, name, log, release[name]))
        procs[name].start()

    def until(ready, what: str) -> None:
        for _ in range(600):
            if ready():
                return
            time.sleep(0.05)
        pytest.fail(f"never happened: {what} ({list(log['order'])})")

    def waiting_timing() -> bool:  # the timing holds the turnstile while it waits
        fd = os.open(lock.with_suffix(".turnstile"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    start("launch", "a")
    until(lambda: ("a", "in") in log["order"], "a in")
    start("launch", "b")
    until(lambda: ("b", "in") in log["order"], "b in while a holds the GPU")  # shared
    start("timing", "t")
    until(waiting_timing, "the timing waiting")
    start("launch", "c")
    time.sleep(0.5)  # room for c to come in wrongly, beside a and b
    release["a"].set()
    release["b"].set()
    until(lambda: ("t", "in") in log["order"], "the timing in once a and b are out")
    release["t"].set()
    release["c"].set()
    for p in procs.values():
        p.join(timeout=60)
    order = list(log["order"])
    manager.shutdown()
    at = {event: n for n, event in enumerate(order)}
    assert at[("b", "in")] < at[("a", "out")], order  # launches share the GPU
    assert at[("t", "in")] > max(at[("a", "out")], at[("b", "out")]), order  # the timing waited
    assert at[("c", "in")] > at[("t", "out")], order  # a later launch waited for the timing


def test_a_lock_that_cannot_be_opened_does_not_stop_grading(tmp_path, monkeypatch):
    from grader.run import timing

    unopenable = tmp_path / "a-folder"
    unopenable.mkdir()
    monkeypatch.setenv("KATA_TIMING_LOCK", str(unopenable))
    with timing.gpu_shared(), timing.gpu_to_ourselves():  # would deadlock if both held the lock
        pass
    monkeypatch.setenv("KATA_TIMING_LOCK", str(tmp_path / "gpu.lock"))
    with timing.gpu_shared():
        pass
    assert (tmp_path / "gpu.lock").stat().st_mode & 0o777 == 0o666


# ---- a kernel that never finishes --------------------------------------------------------------


def test_still_running_lines_tick_until_the_exercise_is_done():
    import io

    from grader.report.records import Report
    from grader.report.summary import Printer, ticks

    # The default limit's first line comes within 10 s, a short limit's well before it ends.
    assert ticks(runner.default_timeout("interpreter", find("01")))[0] <= 9
    assert ticks(None)[0] <= 9 and ticks(2.5) == (1.0, 1.0)
    # The printer's clock is the test's: the lines depend on the times it reads, never on how
    # fast this machine runs (its own thread ticks too, on the same clock: a line is due once).
    now = [100.0]
    out = io.StringIO()
    printer = Printer(stream=out, clock=lambda: now[0])
    ex = find("01")
    printer.start(Path("t"), "interpreter: cpu", [ex], {ex.stem: 2.5})
    printer.exercise_started(ex)
    for now[0] in (100.5, 101.0, 101.5, 102.0, 102.3):
        printer.tick()
    printer.exercise_done(_result({}, ex.stem))
    now[0] = 103.5
    printer.tick()  # no line once it is done
    empty = Report(target="t", device="d", versions={}, exercises=[], duration_s=0.0)
    printer.finish(empty, Path("r.json"), None)
    lines = [ln for ln in out.getvalue().splitlines() if "still running" in ln]
    assert [ln.strip() for ln in lines] == [
        f"... {ex.stem}: still running (1 s of 2 s)",
        f"... {ex.stem}: still running (2 s of 2 s)",
    ], out.getvalue()


def test_exercise_blocks_print_in_the_order_asked_whichever_finishes_first():
    import io

    from grader.report.summary import Printer

    out = io.StringIO()
    printer = Printer(stream=out)
    exercises = [find("01"), find("03")]
    printer.start(Path("t"), "interpreter: cpu", exercises)
    printer.exercise_done(_result({}, STEM["03"]))
    assert STEM["03"] not in out.getvalue().split("Grading")[1]  # held until 01 is done
    printer.exercise_done(_result({}, STEM["01"]))
    text = out.getvalue()
    assert text.index(f"{STEM['01']}  ") < text.index(f"{STEM['03']}  ")


def test_a_track_outside_the_chapter_keeps_its_own_report_and_says_it_is_not_the_chapter(tmp_path):
    """`--track extensions` (or its exercises named) writes reports/score-extensions.json, never
    the chapter's reports/score.json, and its total says it is not the chapter's 100."""
    import io

    from grader import cli
    from grader.report.records import Report
    from grader.report.summary import Printer
    from kata.catalogue import TRACKS

    reports = ROOT / "reports"
    assert cli.default_report(TRACKS["core"]) == reports / "score.json"
    assert cli.default_report([find("01")]) == reports / "score.json"
    assert cli.default_report(TRACKS["extensions"]) == reports / "score-extensions.json"
    assert cli.default_report([find("08")]) == reports / "score-extensions.json"
    assert cli.default_report(TRACKS["performance"]) == reports / "score-performance.json"
    assert cli.default_report(ALL_EXERCISES) == reports / "score.json"  # the chapter's in it
    assert cli.build_parser().parse_args([]).report is None  # so the default is chosen above

    extensions = [_result({}, ex.stem) for ex in TRACKS["extensions"]]
    for ex in extensions:
        ex.track = "extensions"
    extensions[0].score = 0
    report = Report(target="t", device="d", versions={}, exercises=extensions, duration_s=1.0)
    out = io.StringIO()
    Printer(stream=out).finish(report, tmp_path / "score-extensions.json", None)
    chapter = sum(specs.load(ex.stem).max_score for ex in EXERCISE_LIST)
    said = f"Extensions track score: {report.score}/{report.max_score} (not part of the chapter's {chapter})"
    assert said in out.getvalue()
    assert "Score:" not in out.getvalue()


def test_blocked_checks_say_what_they_wait_for_once():
    """09's capacity checks all wait on TODO(dest-slot): the first says why in full, each of the
    others is its WAIT line alone."""
    import io

    from grader.report.summary import Printer

    blocked = ["capacity-skewed", "capacity-exact", "capacity-block-edge", "capacity-ragged"]
    ex = _result({c: ("failed", None) for c in ["slots-e8", *blocked]}, find("09").stem)
    for c in ex.checks:
        if c.id in blocked:
            c.status = "blocked"
            c.message = (
                "cannot be judged until TODO(dest-slot) works (slots-e8 did not pass): "
                f"{c.id}'s slot 3 of expert 2 holds token 7 where token 9 belongs, and the "
                "rows after it are shifted by one, so the capacity cannot be told apart"
            )
    out = io.StringIO()
    Printer(stream=out).exercise_done(ex)
    lines = out.getvalue().splitlines()
    assert out.getvalue().count("cannot be judged until") == 1
    first = next(i for i, ln in enumerate(lines) if "WAIT capacity-skewed" in ln)
    assert "cannot be judged until" in lines[first + 1]
    rows = [i for i, ln in enumerate(lines) if "WAIT" in ln]
    assert len(rows) == 4 and rows[1:] == [rows[1], rows[1] + 1, rows[1] + 2]
    assert rows[-1] == len(lines) - 1  # nothing follows the last WAIT line


@slow
def test_an_endless_loop_ticks_and_says_its_reason_once(tmp_path):
    """With a short limit: a "still running" line before the exercise's block says it was
    stopped, one reason for the exercise (its checks do not repeat it), and the reason in the
    page's paid rows."""
    folder = tmp_path / "target"
    folder.mkdir()
    (folder / f"{STEM['01']}.py").write_text(endless_01())
    report = tmp_path / "out" / "score.json"
    cmd = [sys.executable, "-m", "grader", "01", "--target", str(folder), "--report", str(report)]
    proc = subprocess.Popen(
        [*cmd, "--timeout", "8", "--device", os.environ.get("KATA_TEST_DEVICE", "auto")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = [line.rstrip() for line in proc.stdout]
    assert proc.wait(timeout=120) == 0  # only bounds a hang
    console = "\n".join(lines)
    # The student sees the kernel is still running before being told it was stopped (whatever
    # the machine's load: the order of the lines, not their times).
    ticking = [n for n, line in enumerate(lines) if f"{STEM['01']}: still running (" in line]
    stopped = next(n for n, line in enumerate(lines) if line.startswith(f"{STEM['01']}  0/25"))
    assert ticking and ticking[0] < stopped, console
    assert "of 8 s)" in lines[ticking[0]]
    block = console.split("\n\n")[1]
    assert " ".join(block.split()).count("was stopped after 8 s") == 1, console
    got = json.loads(report.read_text())["exercises"][0]
    assert got["error"].startswith("the submission's process was stopped after 8 s")
    assert {c["message"] for c in got["checks"]} == {got["error"]}
    page = report.with_suffix(".html").read_text()
    assert page.count("not judged: the reason is above the table") == len(got["checks"])
    assert "data-note=" not in page  # the notes did not run either: not shown as their problem


def test_every_failed_check_says_which_todo_to_revisit_and_its_line(tmp_path):
    """Evidence (no trap) ends with the TODO and its line; a trap's message gets the line where
    it names its TODO; the summary names the check and the TODO, not a cut case description."""
    import io

    from grader.report.records import Report
    from grader.report.summary import Printer

    ex = _result(
        {
            "top2-random": ("failed", None),
            "renormalized-random": ("failed", "weights-not-renormalized"),
        }
    )
    file = tmp_path / f"{ex.id}.py"
    file.write_text(skeleton_text("03"))
    ex.file = str(file)
    trap_message = TRAPS["weights-not-renormalized"].message
    for c in ex.checks:
        if c.id == "top2-random":
            c.message = "300 tokens x 64 experts, a long description of the case: idx1 is wrong"
        elif c.id == "renormalized-random":
            c.message = f"300 tokens: {trap_message}"
    lines = skeleton_text("03").splitlines()
    top2 = next(n for n, s in enumerate(lines, 1) if "TODO(top2-mask)" in s)
    renorm = next(n for n, s in enumerate(lines, 1) if "TODO(renormalize)" in s)
    out = io.StringIO()
    printer = Printer(stream=out)
    printer.exercise_done(ex)
    report = Report(target="t", device="d", versions={}, exercises=[ex], duration_s=1.0)
    printer.finish(report, Path("r.json"), None)
    text = " ".join(out.getvalue().split())
    assert f"idx1 is wrong. Revisit TODO(top2-mask) (line {top2})." in text
    assert f"TODO(renormalize) (line {renorm})" in text
    assert f"top2-random: wrong output; revisit TODO(top2-mask) (line {top2})" in text
    assert "a long description of the case" not in text.split("-" * 80)[1]  # the summary


def test_at_full_marks_the_summary_points_to_what_comes_next(tmp_path):
    import io

    from grader.report.records import Report
    from grader.report.summary import Printer

    done = [_result({}, ex.stem) for ex in EXERCISE_LIST]
    for ex in done:
        ex.score = ex.max_score
    report = Report(target="t", device="d", versions={}, exercises=done, duration_s=1.0)
    out = io.StringIO()
    page = tmp_path / "score.html"
    Printer(stream=out).finish(report, tmp_path / "score.json", None, page)
    text = " ".join(out.getvalue().split())
    assert f"Open in a browser: {page.resolve().as_uri()}" in text  # file://, clickable
    assert "Next: the performance track (" in text and "--track performance" in text
    assert "the extensions (" in text and "docs/self-check.md" in text
    partly = Report(target="t", device="d", versions={}, exercises=done[:1], duration_s=1.0)
    out = io.StringIO()
    Printer(stream=out).finish(partly, tmp_path / "score.json", None)
    said = " ".join(out.getvalue().split())
    assert "Next:" not in said  # one exercise done is not the chapter done, but what follows it:
    assert f"01 done: next, 02 (docs/exercises/{STEM['02']}.md): `" in said
    assert "-s grade -- 02`." in said
    last = Report(target="t", device="d", versions={}, exercises=done[2:], duration_s=1.0)
    out = io.StringIO()
    Printer(stream=out).finish(last, tmp_path / "score.json", None)
    said = " ".join(out.getvalue().split())
    assert "03 done, the last exercise of the chapter: `" in said and "-s grade` grades" in said
