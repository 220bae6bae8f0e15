"""`validate --solutions DIR` with the instructor's own solutions swapped in: when only those
files miss, the verdict says that the solutions were refused and why, each cause once, and that
the grader itself was validated (issue 28, item 4)."""

import dataclasses
import shutil

import pytest

from grader.validate import cli as validate
from grader.validate import static
from kata import catalogue, runtime

STEM = catalogue.find("02").stem
FIRST = catalogue.find("01").stem
# The chapter's own 02 kernel: `continue` past the future tiles, which does not compile for a
# GPU, so every check of both check sets ends in the same compiler error.
CHAPTER = catalogue.ROOT / "grader" / "specs" / STEM / "gallery" / "chapter.py"


@pytest.fixture(scope="module")
def swapped(tmp_path_factory):
    folder = tmp_path_factory.mktemp("swapped")
    shutil.copy(CHAPTER, folder / f"{STEM}.py")  # 02 only: the other exercises are absent
    return folder


@pytest.fixture(scope="module")
def graded(swapped):
    """The swapped 02 graded with both check sets, and one gallery row of the grader's own."""
    rows = validate.build_rows(["02-chapter"], runtime.BACKEND, swapped)
    # No row asks for the exercises the folder does not hold.
    assert {r.exercise.stem for r in rows if r.swapped_solution} == {STEM}
    rows = [r for r in rows if r.swapped_solution or r.label == "02-chapter"]
    assert [r.label for r in rows] == ["solutions", "solutions [public]", "02-chapter"]
    return validate.grade_rows(rows, runtime.BACKEND, jobs=2)


@pytest.mark.slow
def test_only_the_swapped_file_misses_the_headline_says_so_once(graded, swapped):
    theirs, public, own = graded
    assert not theirs.ok and not public.ok and own.ok
    error = theirs.result.error
    assert error and public.result.error == error
    # The row repeats the compiler's message once per check; printed, it appears once.
    assert sum(error in p for p in theirs.problems) > 1
    assert sum(error in p for p in validate.condensed(theirs.problems)) == 1
    lines, status = validate.verdict(graded, [], swapped, 1.0)
    assert status == 1
    head, closing = lines
    assert head.startswith(f"SOLUTIONS NOT ACCEPTED: {swapped / STEM}.py (0/25) must change: ")
    assert head.count(error) == 1  # the hidden and the public rows share one cause
    assert "NOT VALIDATED" not in " ".join(lines)
    assert closing.startswith("the grader itself validated (1/1 rows of its own")


@pytest.mark.slow
def test_a_miss_of_the_grader_is_still_the_graders(graded, swapped):
    theirs, public, own = graded
    broken = dataclasses.replace(own, problems=["expected to lose points, got 25/25"])
    lines, status = validate.verdict([theirs, public, broken], [], swapped, 1.0)
    assert status == 1 and lines[0].startswith("GRADER NOT VALIDATED: 0/3 rows OK")
    assert f"{STEM}.py" in lines[1]  # the refused solutions are still named
    # Static problems are the grader's too.
    lines, status = validate.verdict(graded, ["a spec disagrees"], swapped, 1.0)
    assert status == 1 and lines[0].startswith("GRADER NOT VALIDATED")


@pytest.mark.slow
def test_accepted_solutions_validate(graded, swapped):
    accepted = [dataclasses.replace(r, problems=[]) for r in graded]
    lines, status = validate.verdict(accepted, [], swapped, 1.0)
    assert status == 0 and lines == ["grader validated: 3/3 rows OK, 0 static problem(s), 1.0 s"]


def test_exercises_missing_from_a_swapped_folder_are_a_note(swapped, monkeypatch):
    notes = []
    problems = static._files(notes, swapped)
    assert not [p for p in problems if "no solution" in p]
    (absent,) = [n for n in notes if n.startswith(f"not in {swapped}")]
    assert f"{FIRST}.py" in absent and f"{STEM}.py" not in absent
    # The repository's own solutions/ must hold every exercise: there a missing file is a problem.
    monkeypatch.setattr(static, "SOLUTIONS", swapped)
    problems = static._files([], swapped)
    assert f"{FIRST}: no solution {FIRST}.py" in " ".join(problems)


def test_condensed_prints_a_shared_error_once():
    problems = [
        "expected full marks, got 0/25",
        "exercise error: it does not compile",
        "check a ended in error: it does not compile",
        "check b ended in error: it does not compile",
        "check c ended in error: another cause",
    ]
    assert validate.condensed(problems) == [
        "expected full marks, got 0/25",
        "exercise error: it does not compile (also a, b: the same error)",
        "check c ended in error: another cause",
    ]


def test_a_trap_shared_by_both_check_sets_is_one_cause():
    """Swapped-in solutions that fall into a trap (the 02 skeleton's, say): the trap is named
    once, with every check that found it, hidden and public."""
    from pathlib import Path

    from grader.model import Expect
    from grader.report.records import CheckResult, ExerciseResult

    ex = catalogue.find("02")

    def result(*ids):
        checks = [
            CheckResult(
                id=i,
                todo="causal-mask",
                status="failed",
                points=0,
                max_points=5,
                trap="causal-mask-missing",
                message="M=20, N=20: wrong rows\nmore",
            )
            for i in ids
        ]
        return ExerciseResult(
            id=ex.stem, file="f", track="core", score=0, max_score=25, checks=checks
        )

    mine = Path("/mine")

    def row(label, checkset, res, swapped=True):
        return validate.Row(
            label,
            ex,
            Expect(score="full"),
            checkset=checkset,
            folder=mine if swapped else None,
            free_form=swapped,
            result=res,
            problems=["expected full marks, got 0/25"] if swapped else [],
        )

    rows = [
        row("solutions", "hidden", result("causal-square", "causal-tiles")),
        row("solutions [public]", "public", result("public-causal")),
        row("02-mask-one-ahead", "hidden", result(), swapped=False),
    ]
    (head, closing), status = validate.verdict(rows, [], mine, 2.0)
    assert status == 1
    assert head == (
        f"SOLUTIONS NOT ACCEPTED: {mine / ex.filename} (0/25) must change: the grader names "
        "trap causal-mask-missing (checks causal-square, causal-tiles, public-causal)"
    )
    assert closing.startswith("the grader itself validated (1/1 rows")
