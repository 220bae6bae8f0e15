"""A right kernel gets full marks whatever editor saved it (grader v4, ``grader.run.splice``).

Every solution is reformatted by black, ruff format, autopep8 and isort with their default
settings, and saved with a byte-order mark, ``\\r\\n``, ``\\r`` and ``\\r\\r\\n`` line ends, tabs, a
form feed before its kernel and U+2028 in a comment. Each form must splice to the same graded
file as the solution itself, with nothing reported as changed and nothing the region rules
refuse: the grader then runs the same code, so the verdict is the solution's. One grading in
the interpreter (and, with KATA_TEST_DEVICE=cuda, compiled) proves it end to end on a file that
carries several forms at once.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from grader import specs
from grader.run import rules, splice
from kata import skeletons, source
from kata.catalogue import ALL_EXERCISES, ROOT, SOLUTIONS
from kata.regions import MARKER

STEMS = [ex.stem for ex in ALL_EXERCISES]


def solution(stem: str) -> str:
    """The solution file as a student would hand it in: its region markers gone."""
    text = (SOLUTIONS / f"{stem}.py").read_text()
    return "".join(line for line in text.splitlines(keepends=True) if not MARKER.match(line))


def _tool(args: list[str], text: str, tmp_path, name: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    # Run where the repository's own settings (pyproject.toml) cannot reach: default settings.
    proc = subprocess.run([*args, str(path)], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return path.read_text()


def _formatter(name: str):
    module = {"ruff": "ruff", "black": "black", "autopep8": "autopep8", "isort": "isort"}[name]
    pytest.importorskip(module)
    return {
        "black": [sys.executable, "-m", "black", "-q"],
        "ruff": [sys.executable, "-m", "ruff", "format", "-q", "--isolated"],
        "autopep8": [sys.executable, "-m", "autopep8", "--in-place"],
        "isort": [sys.executable, "-m", "isort", "-q"],
    }[name]


def _tabs(text: str) -> str:
    out = []
    for line in text.split("\n"):
        bare = line.lstrip(" ")
        spaces = len(line) - len(bare)
        out.append("\t" * (spaces // 4) + " " * (spaces % 4) + bare)
    return "\n".join(out)


def _form_feed(text: str) -> str:
    return text.replace("\n@triton.jit", "\n\f@triton.jit", 1)


def _u2028(text: str) -> str:
    lines = text.split("\n")
    at = next(n for n, line in enumerate(lines) if line.lstrip().startswith("# TODO("))
    lines[at] += " (pasted\u2028from a page)"
    return "\n".join(lines)


SAVED = {
    "bom": lambda t: b"\xef\xbb\xbf" + t.encode(),
    "crlf": lambda t: t.replace("\n", "\r\n").encode(),
    "cr": lambda t: t.replace("\n", "\r").encode(),
    "cr-cr-lf": lambda t: t.replace("\n", "\r\r\n").encode(),
    "tabs": lambda t: _tabs(t).encode(),
    "form-feed": lambda t: _form_feed(t).encode(),
    "u2028": lambda t: _u2028(t).encode(),
    # Windows' code page, declared (PEP 263); what it cannot hold goes as ? in comments only.
    "coding-cp1252": lambda t: ("# -*- coding: cp1252 -*-\n" + t).encode("cp1252", "replace"),
}


def graded(stem: str, data: bytes) -> splice.Spliced:
    return splice.splice(skeletons.pristine(stem), source.read(data))


def assert_same_grading(stem: str, data: bytes) -> None:
    want = graded(stem, solution(stem).encode())
    got = graded(stem, data)
    assert ast.dump(ast.parse(got.text)) == ast.dump(ast.parse(want.text))
    assert got.ok and not got.missing, got.changes
    spec = specs.load(stem, "hidden")
    assert rules.check(got.text, got.graded, got.lines, spec.forbidden) == []


@pytest.mark.parametrize("form", sorted(SAVED))
@pytest.mark.parametrize("stem", STEMS)
def test_a_solution_saved_any_way_grades_as_itself(stem, form):
    assert_same_grading(stem, SAVED[form](solution(stem)))


@pytest.mark.parametrize("tool", ["black", "ruff", "autopep8", "isort"])
@pytest.mark.parametrize("stem", STEMS)
def test_a_solution_reformatted_grades_as_itself(stem, tool, tmp_path):
    text = _tool(_formatter(tool), solution(stem), tmp_path, f"{stem}.py")
    assert_same_grading(stem, text.encode())


def test_the_graded_file_keeps_the_skeletons_given_code():
    """A given line the student changed is not what runs: the skeleton's is, and the report
    names the student's line."""
    stem = ALL_EXERCISES[0].stem
    text = solution(stem).replace("    out = acc / l_i[:, None]", "    out = acc")
    found = graded(stem, text.encode())
    assert "out = acc / l_i[:, None]" in found.text
    (change,) = found.changes
    line = text.split("\n").index("    out = acc") + 1
    assert (change.line, change.kind, change.todo) == (line, "changed", "rescale-acc")


def test_code_moved_out_of_its_kernel_is_not_graded():
    """Region code dedented to column 0 is module-level code, not the region's: the region is
    then empty and the kernel fails, whatever the module-level code would have done."""
    stem = ALL_EXERCISES[0].stem
    right = "        acc = acc * alpha[:, None] + tl.dot(p, v)\n"
    cheat = "acc = acc * alpha[:, None] + tl.dot(p, v)\nif False:\n    if False:\n"
    text = solution(stem).replace(right, cheat)
    found = graded(stem, text.encode())
    assert "if False" not in found.text and "acc * alpha" not in found.text
    assert found.regions["rescale-acc"] == [] and not found.ok


@pytest.mark.slow
def test_many_forms_at_once_get_full_marks(tmp_path):
    """End to end: 01 to 03 reformatted by black, saved with a BOM and CRLF, graded."""
    target = tmp_path / "target"
    target.mkdir()
    for ex in ALL_EXERCISES[:3]:
        text = _tool(_formatter("black"), solution(ex.stem), tmp_path, ex.filename)
        (target / ex.filename).write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    report = tmp_path / "score.json"
    device = os.environ.get("KATA_TEST_DEVICE", "auto")
    cmd = [sys.executable, "-m", "grader", "--target", str(target), "--report", str(report)]
    proc = subprocess.run(
        [*cmd, "--device", device, "--no-html"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(report.read_text())
    assert got["score"] == got["max_score"] == 100, proc.stdout
    assert all(e["integrity"]["ok"] for e in got["exercises"])


def test_python_and_the_grader_count_the_same_lines():
    """``source.lines`` splits where Python's tokenizer does, not where str.splitlines does."""
    text = "a = 1  # x\f y\u2028z\nb = 2\n"
    assert len(source.lines(text)) == 2 == len(text.split("\n")) - 1
