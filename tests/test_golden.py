"""Grader regression tests as golden folders, exercism style: each ``tests/submissions/<case>/``
holds a submission (small files whole, ``NAME.in`` for a file that must not be live in the
repository, or recipes in ``case.toml`` built from the kata's own solutions and skeletons) and the summary the grader must report for it. One test per folder.

``case.toml``:

    about = "..."               what the folder proves
    total = 100                 the report's total score (optional; total_cuda where it differs)
    args = ["--timeout", "5"]   extra grader arguments
    grade = ["01", "02"]        exercises to grade (default: those with files or expectations)
    [files.NN]                  a file built from "solution", "skeleton" or "gallery" (a whole
                                file of a spec's gallery: gallery = "chapter.py"), then
                                `replace` and `append` ({report!r} and {root!r} in `append`: the
                                report's path, the repository's)
    [expect.NN]                 score ("full" or points), status (every check's), traps, error
                                / messages / warnings / findings / diff (regular expressions:
                                findings are the static screen's, diff the integrity diff's),
                                line_of, integrity_ok, strict_zeroed, contract_zeroed,
                                output_cut (no expectation on time: a time limit shows in
                                the error, "stopped after 5 s", however loaded the machine)
    [expect_cuda.NN]            replaces [expect.NN] when kernels are compiled on a GPU
    [target]                    files that must be absent / present in the target afterwards
    [after] wait = 5            the report on disk must be unchanged this many seconds after the
                                grader exited (nothing a submission started outlives it)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader import specs
from kata import runtime, skeletons
from kata.catalogue import ROOT, SOLUTIONS, find

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent / "submissions"
CASES = sorted(p.name for p in HERE.iterdir() if (p / "case.toml").is_file())
OUTPUT_LIMIT = 4096  # grader.run.process keeps this many bytes of a child's output at each end


def build(case: Path, target: Path, report: Path) -> dict:
    """Copy the folder's files into ``target``, build its recipes; return its case.toml."""
    spec = tomllib.loads((case / "case.toml").read_text())
    target.mkdir(parents=True)
    for path in case.iterdir():  # NAME.in is stored so, lest pytest load a hostile conftest.py
        if path.name != "case.toml":
            shutil.copy(path, target / path.name.removesuffix(".in"))
    for number, recipe in spec.get("files", {}).items():
        ex = find(number)
        if recipe["from"] == "solution":
            text = (SOLUTIONS / ex.filename).read_text()
        elif recipe["from"] == "gallery":
            text = (specs.folder(ex.stem) / "gallery" / recipe["gallery"]).read_text()
        else:
            text = skeletons.pristine(ex.stem).text
        for old, new in recipe.get("replace", []):
            assert text.count(old) == 1, f"{case.name}: {old!r} must occur once in {ex.filename}"
            text = text.replace(old, new)
        appended = recipe.get("append", "").replace("{report!r}", repr(str(report)))
        text += appended.replace("{root!r}", repr(str(ROOT)))
        (target / ex.filename).write_text(text)
    return spec


def grade(target: Path, report: Path, numbers: list[str], args: list[str]):
    device = os.environ.get("KATA_TEST_DEVICE", "auto")
    cmd = [
        sys.executable,
        "-m",
        "grader",
        *numbers,
        "--device",
        device,
        "--target",
        str(target),
        "--report",
        str(report),
        *args,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(report.read_text()), proc.stdout


# What an [expect.NN] table may say; anything else (a retired `max_seconds`) would be ignored.
EXPECT_KEYS = {
    *("score", "status", "traps", "error", "messages", "warnings", "findings", "diff"),
    *("line_of", "integrity_ok", "strict_zeroed", "contract_zeroed", "output_cut"),
}


def check_exercise(case: str, got: dict, want: dict, target: Path) -> None:
    assert set(want) <= EXPECT_KEYS, f"{case}: unknown expectation(s) {set(want) - EXPECT_KEYS}"
    where = f"{case}: {got['id']}"
    checks = got["checks"]
    if want.get("score") == "full":
        assert got["score"] == got["max_score"], (where, checks)
    elif "score" in want:
        assert got["score"] == want["score"], (where, checks)
    if "status" in want:
        assert {c["status"] for c in checks if c["todo"]} == {want["status"]}, (where, checks)
    assert sorted({c["trap"] for c in checks if c["trap"]}) == sorted(want.get("traps", [])), where
    for pattern in want.get("error", []):
        assert got["error"] and re.search(pattern, got["error"]), (where, got["error"])
    if "error" not in want and want.get("status") != "error":
        assert got["error"] is None, (where, got["error"])
    messages = [c["message"] for c in checks if c["todo"]]
    for pattern in want.get("messages", []):
        assert all(re.search(pattern, m) for m in messages), (where, pattern, messages)
    if "line_of" in want:
        text = (target / Path(got["file"]).name).read_text()
        (line,) = [n for n, s in enumerate(text.splitlines(), 1) if want["line_of"] in s]
        said = [got["error"]] if got["error"] else messages
        # "line N of FILE", or "line N (in TODO(x))" where the line is in a TODO region
        named = rf"line {line} (of {re.escape(Path(got['file']).name)}|\(in TODO\()"
        assert all(re.search(named, m) for m in said), (where, said)
    if "integrity_ok" in want:
        assert got["integrity"]["ok"] == want["integrity_ok"], (where, got["integrity"])
    for pattern in want.get("diff", []):
        assert re.search(pattern, got["integrity"]["diff"]), (where, got["integrity"]["diff"])
    findings = [f["message"] for f in got["integrity"]["findings"]] if got["integrity"] else []
    for pattern in want.get("findings", []):
        assert any(re.search(pattern, f) for f in findings), (where, pattern, findings)
    if "findings" not in want:
        assert findings == [], (where, findings)
    for key in ("strict_zeroed", "contract_zeroed"):
        if key in want:
            assert got["integrity"][key] == want[key], (where, got["integrity"])
    if want.get("output_cut"):
        head, _, tail = got["output"].partition("bytes of output left out")
        assert int(re.search(r"\[\.\.\. (\d+) $", head).group(1)) >= 51_000_000 - 2 * OUTPUT_LIMIT
        assert head.startswith("x" * 1000) and tail.rstrip().endswith("y" * 1000)
    assert len(got["output"].encode()) <= 2 * OUTPUT_LIMIT + 200, where
    for pattern in want.get("warnings", []):
        assert any(re.search(pattern, w) for w in got["warnings"]), (where, got["warnings"])


def run_case(case: str, tmp: Path):
    target, report = tmp / case / "target", tmp / case / "out" / "score.json"
    spec = build(HERE / case, target, report)
    numbers = spec.get("grade") or sorted(set(spec.get("expect", {})) | set(spec.get("files", {})))
    got, console = grade(target, report, numbers, spec.get("args", []))
    wait = spec.get("after", {}).get("wait")
    if wait:  # whatever the submission started had this long to rewrite the report
        time.sleep(wait)
        assert json.loads(report.read_text()) == got, f"{case}: the report changed after the grader"
    return spec, target, numbers, got, console


class _OnDemand(dict):
    """Futures of gradings, each submitted when its test first asks for it."""

    def __init__(self, submit):
        super().__init__()
        self.submit = submit

    def __missing__(self, case):
        self[case] = future = self.submit(case)
        return future


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """Every folder's grading, a few at a time (each grading is its own processes). Where this
    process runs the whole module (no xdist, or xdist's ``--dist loadfile`` as ``nox -s tests``
    runs it) every folder is graded at once on a share of the CPUs: on a 16-core GPU machine, 12
    workers of 16 threads each starved the launchers past their 90 s. Where xdist deals the tests
    out one by one (``-n N`` alone), a worker grades only the folders of the tests it is given:
    grading every folder in each worker did the work N times over."""
    tmp = tmp_path_factory.mktemp("golden")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    whole = workers == 1 or request.config.getoption("dist", "no") in ("loadfile", "loadscope")
    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 1) // workers)) as pool:
        if whole:
            yield {case: pool.submit(run_case, case, tmp) for case in CASES}
        else:
            yield _OnDemand(lambda case: pool.submit(run_case, case, tmp))


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_golden(case, graded):
    spec, target, numbers, got, console = graded[case].result()
    expect = spec.get("expect", {})
    if runtime.BACKEND == "cuda":
        expect = {**expect, **spec.get("expect_cuda", {})}
    # The report on disk is the grader's own, complete for the exercises asked for.
    assert [e["id"] for e in got["exercises"]] == [find(n).stem for n in numbers], console
    assert got["score"] == sum(e["score"] for e in got["exercises"])
    total = (
        spec.get("total_cuda", spec.get("total"))
        if runtime.BACKEND == "cuda"
        else spec.get("total")
    )
    if total is not None:
        assert got["score"] == total, console
    for number, want in expect.items():
        (exercise,) = [e for e in got["exercises"] if e["id"] == find(number).stem]
        check_exercise(case, exercise, want, target)
    for name in spec.get("target", {}).get("absent", []):
        assert not (target / name).exists(), f"{case}: {name} was created"
    for name in spec.get("target", {}).get("present", []):
        assert (target / name).exists(), f"{case}: {name} was not created"
