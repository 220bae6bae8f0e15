"""How one check judges a submission: prove its traps visible on its cases, judge every case,
and name the trap a wrong answer matches. The exceptions become the check's status.

Every check is paid only for a right answer on all its cases, and each form of each of its
traps is first proven to be far from the right answer on at least one of them.
"""

from __future__ import annotations

import numpy as np

from grader import kinds
from grader.judge import details, judges
from grader.kinds import compare
from grader.kinds.base import Blocked, Judge
from grader.model import REVERSED, Case, Check, GraderError, Output, Trap


class CheckFailed(AssertionError):
    """The submission ran but its output is wrong."""

    def __init__(self, message: str, trap: str | None = None):
        super().__init__(message)
        self.message, self.trap = message, trap


class CheckBlocked(Exception):
    """The check's TODO cannot be judged until another TODO works (not paid, not failed)."""

    def __init__(self, message: str, trap: str | None = None):
        super().__init__(message)
        self.message, self.trap = message, trap


class SubmissionError(Exception):
    """The submission could not produce an output (missing, import error, crash, timeout)."""


def exact(interface, key: str, value) -> bool:
    """Whether an output is compared exactly: every integer output (slots, counts), and those
    the interface says (expert indices); floats are compared within the interface's tolerance."""
    return interface.exact(key) or np.issubdtype(np.asarray(value).dtype, np.integer)


def _written(form: Output, key: str) -> np.ndarray | None:
    """Where a form says the mistake writes ``key`` (None: everywhere, or it does not say)."""
    mask = form.get(f"{key}.unwritten")
    return None if mask is None else ~np.asarray(mask, bool)


def _gap(form: Output, right: Output, judge: Judge, case: Case) -> float:
    """How far a trap's form is from the right output, in units of the interface's
    ``separation`` absolute tolerances (exact outputs: any difference is infinitely far). The
    right answer writes every element, unless the oracle says which it leaves unwritten (a
    ``KEY.unwritten`` mask of its own: a grouped buffer's rows past the last one filled)."""
    gaps = []
    for key, predicted in form.items():
        if key.endswith(".unwritten"):
            want = np.asarray(right.get(key, False), bool)
            same = np.array_equal(np.broadcast_to(want, np.shape(predicted)), predicted)
            gaps.append(0.0 if same else float("inf"))
            continue
        written = _written(form, key)
        got, want = np.asarray(predicted), np.asarray(right[key])
        if written is not None and got.shape == want.shape:
            got, want = got[written], want[written]
        if exact(judge.interface, key, predicted):
            gaps.append(0.0 if np.array_equal(got, want) else float("inf"))
        else:
            unit = judge.tol(key, case)[0] * judge.interface.separation
            gaps.append(compare.distance(got, want) / unit)
    return max(gaps)


def _matches(got: Output, form: Output, judge: Judge, case: Case) -> bool:
    """Whether ``got`` is this form of a trap. Unwritten output is no trap's doing, unless the
    form says which elements the mistake leaves unwritten (a ``KEY.unwritten`` mask, to be met
    exactly; the form's values of KEY are then compared where it is written); and a form with
    no finite value says nothing a NaN-filled output would not also say."""
    for key, predicted in form.items():
        if key.endswith(".unwritten"):
            if not np.array_equal(np.asarray(got.get(key, False)), predicted):
                return False
            continue
        written = _written(form, key)
        mine, predicted = np.asarray(got[key]), np.asarray(predicted)
        if written is not None:
            if mine.shape != predicted.shape:
                return False
            mine, predicted = mine[written], predicted[written]
        else:
            unwritten = got.get(f"{key}.unwritten")
            if unwritten is not None and unwritten.any():
                return False
        if exact(judge.interface, key, predicted):
            if not np.array_equal(mine.astype(np.int64), predicted.astype(np.int64)):
                return False
            continue
        if not np.isfinite(predicted).any():
            return False
        if not compare.close(mine, predicted, judge.tol(key, case)):
            return False
    return True


def prove_traps_visible(check: Check, judge: Judge, cases: list[Case]) -> None:
    """Every form of every trap must be far from the right answer on some case, or the check
    could be passed by that very mistake."""
    rights = [judge.interface.expected(case) for case in cases]
    for trap in check.traps:
        forms = [trap.forms(case, right) for case, right in zip(cases, rights)]
        for n in range(len(forms[0])):
            if max(_gap(f[n], r, judge, c) for f, r, c in zip(forms, rights, cases)) < 1.0:
                raise GraderError(
                    f"grader self-check: trap {trap.id} (form {n}) is not visible on the "
                    f"inputs of check {check.id}, so the check could pay for that mistake"
                )
    if check.proof:
        check.proof(cases)


def diagnose(check: Check, judge: Judge, case: Case, got: Output) -> Trap | None:
    """The first of the check's traps one of whose forms ``got`` matches."""
    found = _diagnosis(check, judge, case, got)
    return found and found[0]


def _diagnosis(check: Check, judge: Judge, case: Case, got: Output) -> tuple | None:
    """``(trap, message)`` for the first of the check's traps one of whose forms ``got``
    matches, the message the one for the form it matched."""
    for trap in check.traps:
        for n, form in enumerate(trap.forms(case, got)):
            if _matches(got, form, judge, case):
                return trap, trap.message_for(n)
    return None


def run(check: Check, spec, submission) -> None:
    """Judge ``check`` on ``submission``'s outputs; raises to fail, block or error it. Records
    the verdict, so that a later check that ``requires`` this one's TODO can look it up."""
    try:
        _judge(check, spec, submission)
    except CheckFailed as exc:
        # Blocked while the required TODO's checks fail; a required check that is itself
        # blocked (waiting on this one's TODO) leaves this failure standing.
        waiting = [
            c.id
            for c in spec.checks_for(check.requires)
            if submission.verdicts.get(c.id) in ("failed", "error")
        ]
        if check.requires and waiting:
            submission.verdicts[check.id] = "blocked"
            raise CheckBlocked(
                f"cannot be judged until TODO({check.requires}) works "
                f"({', '.join(waiting)} did not pass): {exc.message}",
                exc.trap,
            ) from None
        submission.verdicts[check.id] = "failed"
        raise
    except CheckBlocked:
        submission.verdicts[check.id] = "blocked"
        raise
    except Exception:
        submission.verdicts[check.id] = "error"
        raise
    submission.verdicts[check.id] = "passed"


def _figures(submission, check: Check, make, *args) -> None:
    """Record the figures of a judgement for the HTML report (grader.judge.details). They are an
    illustration: a failure to draw them never changes a verdict, but it is recorded (as
    ``figure_error``), so that a missing figure is a bug someone sees, not a silence."""
    try:
        submission.details[check.id] = make(*args)
    except Exception as exc:  # noqa: BLE001
        submission.details[check.id] = {"figure_error": f"{type(exc).__name__}: {exc}"}


def _failure_figures(check: Check, submission, judge, case: Case, got: Output) -> dict:
    found = details.failure(judge, case, got)
    if judge.measured:
        found.update(details.max_error(judge, case, got))
    # The probe's picture once per TODO (on its first failing check): every check of that TODO
    # would show the same kernel's weights.
    shown = submission.probe_shown
    if check.todo not in shown:
        probe = submission.probe()
        if probe is not None:
            found["probe"] = kinds.home(judge.interface.name).probe_details(*probe)
            shown.add(check.todo)
    return found


def _says_something(interface, got: Output) -> bool:
    """Whether some float output holds a finite value (written by the kernel)."""
    floats = [
        np.asarray(v)
        for k, v in got.items()
        if not k.endswith(".unwritten") and not exact(interface, k, v)
    ]
    return not floats or any(np.isfinite(v).any() for v in floats)


def _ran_with(label: str | None) -> str:
    """How a run is named after its case: its tiles, and the order of its programs when they
    ran in reverse (``grader.run.order``)."""
    if not label:
        return ""
    if label == REVERSED:
        return f" ({REVERSED})"
    tiles = label.removesuffix(f", {REVERSED}")
    return f" (tiles: {tiles}; {REVERSED})" if tiles != label else f" (tiles: {label})"


def _judge(check: Check, spec, submission) -> None:
    judge = judges.make(check.judge, spec.interface)
    cases = [spec.cases[name] for name in check.cases]
    prove_traps_visible(check, judge, cases)
    blocked, failed = None, None
    figures = []
    # Lazily: a case that crashed ends the check only once the cases before it were judged.
    runs = ((case, label, got) for case in cases for label, got in submission.outputs(case.name))
    for case, label, got in runs:
        about = case.about + _ran_with(label)
        try:
            evidence = judge.judge(case, got, submission)
        except Blocked as exc:
            if blocked is None:
                trap = diagnose(check, judge, case, got)
                seen = f" Meanwhile, the output matches the trap {trap.id}." if trap else ""
                blocked = CheckBlocked(f"{about}: {exc}.{seen}", trap and trap.id)
                _figures(submission, check, _failure_figures, check, submission, judge, case, got)
            continue
        if evidence is None:
            if judge.measured:
                figures.append(details.max_error(judge, case, got))
            continue
        found = _diagnosis(check, judge, case, got)
        if found or failed is None:
            _figures(submission, check, _failure_figures, check, submission, judge, case, got)
        if found:
            trap, message = found
            raise CheckFailed(f"{about}: {message}", trap.id)
        failed = failed or CheckFailed(f"{about}: {evidence}")
        if _says_something(judge.interface, got):
            raise failed
        # An output with no finite value tells no trap apart (on the H200, 04's first causal
        # case is a single 128-row tile, all NaN without its diagonal stage): its evidence is
        # kept, and the next failing case may name the trap.
    if failed is not None:
        raise failed
    if blocked is not None:
        raise blocked
    if figures:
        _figures(submission, check, details.merge, figures)
