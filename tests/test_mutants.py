"""The mutation tool (``grader.validate.mutants``): what it generates, how it classifies, the committed
list of equivalent mutants, and one exercise's mutants graded end to end."""

from __future__ import annotations

import ast

import pytest

from grader import specs
from grader.model import Expect
from grader.report.records import CheckResult, ExerciseResult
from grader.validate import cli as validate
from grader.validate import mutants
from kata import runtime
from kata.catalogue import ALL_EXERCISES, find


def every_mutant() -> list[mutants.Mutant]:
    return [m for ex in ALL_EXERCISES for m in mutants.mutants_of(specs.load(ex.stem, "hidden"))]


def test_every_operator_is_used_and_every_mutant_is_one_change():
    found = every_mutant()
    assert {m.operator for m in found} == {
        "compare",
        "arith",
        "const",
        "tile",
        "swap",
        "where",
        "precision",
        "clamp",
        "drop",
    }
    for m in found:
        reference = specs.load(m.stem, "hidden").reference[m.todo]
        regions = (reference,) if isinstance(reference, str) else reference
        mutated = m.code.split("\n# region\n")
        assert len(mutated) == len(regions), m.label
        changed = [r for r, c in zip(regions, mutated) if ast.unparse(ast.parse(r)) != c]
        assert len(changed) == 1, m.label  # one region changed, and it still parses
        for code in mutated:
            ast.parse(code)
    labels = [m.label for m in found]
    assert len(labels) == len(set(labels))


def test_the_slips_of_the_issue_are_generated():
    """Operator swaps, constants +-1, a tile too many, dropped statements, where branches."""
    changes = {(find(m.stem).number, m.operator, m.change) for m in every_mutant()}
    assert (
        "02",
        "compare",
        "`offs_m[:, None] >= offs_n[None, :]`: comparison 1 made `>`",
    ) in changes
    assert ("06", "const", "`1` made `2`") in changes
    assert ("02", "tile", "`(pid_m + 1) * BLOCK_M` + BLOCK_M") in changes
    assert any(n == "03" and op == "where" for n, op, _ in changes)
    assert any(n == "01" and op == "drop" for n, op, _ in changes)
    # Grader v4's slips: TF32 in 01's dot, 09's capacity taken as at least one pair.
    assert ("01", "precision", '`tl.dot(p, v)`: input_precision="tf32"') in changes
    assert ("09", "clamp", "`rank < CAPACITY`: CAPACITY taken as at least 1") in changes


def test_every_listed_equivalent_is_a_current_mutant_with_a_reason():
    current = {(m.stem, m.todo, m.code.strip()) for m in every_mutant()}
    listed = mutants.equivalents()
    assert listed, "the list of equivalent mutants is empty"
    stale = [key for key in listed if key not in current]
    assert stale == [], "equivalents that no longer match a mutant: remove or update them"
    assert all(len(reason) > 20 for reason in listed.values())


def _row(score: int) -> validate.Row:
    ex = find("01")
    row = validate.Row("m", ex, Expect(score="less"))
    check = CheckResult(
        id="c",
        todo="rescale-acc",
        status="passed" if score else "failed",
        points=score,
        max_points=25,
        trap=None,
        message="",
    )
    row.result = ExerciseResult(
        id=ex.stem, file="f.py", track="core", score=score, max_score=25, checks=[check]
    )
    return row


def test_outcomes_are_killed_equivalent_or_survived():
    m = mutants.Mutant(find("01").stem, "rescale-acc", "arith", "acc = acc", "x", 1)
    known = {(m.stem, m.todo, "acc = acc"): "the same, for a reason"}
    assert mutants._outcome(m, _row(0), known).verdict == "killed"
    assert mutants._outcome(m, _row(25), known).verdict == "equivalent"
    assert mutants._outcome(m, _row(25), {}).verdict == "survived"
    broken = validate.Row("m", find("01"), Expect(score="less"))
    broken.problems.append("could not be built")
    assert mutants._outcome(m, broken, {}).verdict == "broken"


def test_the_summary_replaces_only_its_own_backend(tmp_path):
    page = tmp_path / "mutants.md"
    page.write_text("# Mutants\n")
    mutants.write_summary("interpreter table\n", "interpreter", page)
    mutants.write_summary("cuda table\n", "cuda", page)
    mutants.write_summary("new interpreter table\n", "interpreter", page)
    text = page.read_text()
    assert "new interpreter table" in text and "cuda table" in text
    assert "\ninterpreter table" not in text and text.startswith("# Mutants\n")


@pytest.mark.slow
def test_the_mutants_of_01_are_all_killed():
    outcomes = mutants.run([find("01").stem], runtime.BACKEND, jobs=2, timeout=None)
    assert outcomes and {o.verdict for o in outcomes} == {"killed"}, [
        (o.mutant.label, o.verdict, o.score) for o in outcomes
    ]
