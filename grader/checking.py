"""How a check judges a kernel's outputs: judges (what "right" means), the Check record, trap
diagnosis, and the exceptions that become a check's status (failed / error).

Every check is only paid for a right answer on all its cases, and each of its traps is first
proven to be visible on those cases. The lists of checks live in grader/rubric.py (hidden) and
grader/public.py (shipped with the student handout).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from grader import compare
from grader.inputs import Case
from grader.traps import Output, Trap
from kata import oracles


class CheckFailed(AssertionError):
    """The submission ran but its output is wrong."""

    def __init__(self, message: str, trap: str | None = None):
        super().__init__(message)
        self.message, self.trap = message, trap


class SubmissionError(Exception):
    """The submission could not produce an output (missing, import error, crash, timeout)."""


class GraderError(Exception):
    """The grader's own premise failed (e.g. a trap not visible on a check's inputs)."""


# ---- judges: what "right" means for each kind of output ------------------------------------


class AttentionJudge:
    keys = ("out",)

    def __init__(self, causal: bool):
        self.causal = causal

    def expected(self, case: Case, got: Output) -> Output:
        q, k, v = (case.inputs[n] for n in "qkv")
        return {"out": oracles.attention(q, k, v, causal=self.causal)}

    def evidence(self, case: Case, got: Output, want: Output) -> str | None:
        return compare.matrix_evidence(got["out"], want["out"])


class FastAttentionJudge(AttentionJudge):
    """(B, H, S, D) in float16 / bfloat16: the oracle per (batch, head), a looser tolerance
    for P rounded to 16 bits before P @ V."""

    def expected(self, case: Case, got: Output) -> Output:
        q, k, v = (case.inputs[n] for n in "qkv")
        B, H = q.shape[:2]
        out = np.empty(q.shape)
        for b in range(B):
            for h in range(H):
                out[b, h] = oracles.attention(q[b, h], k[b, h], v[b, h], causal=self.causal)
        return {"out": out}

    def evidence(self, case: Case, got: Output, want: Output) -> str | None:
        B, H, S, D = case.inputs["q"].shape
        flat = lambda x: np.asarray(x).reshape(B * H * S, D)  # noqa: E731  (row = b, h, s)
        return compare.matrix_evidence(flat(got["out"]), flat(want["out"]), "out16")


def _index_evidence(case: Case, got: Output) -> str | None:
    """Indices must lie in [0, E) before anything is looked up with them (on the CPU)."""
    E = case.inputs["logits"].shape[1]
    for key in ("idx0", "idx1"):
        idx = got[key].astype(np.int64)
        bad = np.flatnonzero((idx < 0) | (idx >= E))
        if bad.size:
            unwritten = " (still -1: never written)" if (idx[bad] == -1).all() else ""
            return (
                f"{key} is outside [0, {E}) for {bad.size} of {idx.size} tokens{unwritten}; "
                f"first at token {bad[0]}: {idx[bad[0]]}"
            )
    return None


class Top2Judge:
    """The two chosen experts must be distinct and hold the two largest probabilities
    (compared by value, so any order among exactly tied experts is accepted)."""

    keys = ("idx0", "idx1")

    def __init__(self, lowest_index_on_ties: bool = False):
        # 05 promises vLLM's rule (the lowest index wins a tie); 03 accepts any order.
        self.lowest_index_on_ties = lowest_index_on_ties

    def expected(self, case: Case, got: Output) -> Output:
        w0, w1, idx0, idx1 = oracles.top2_gating(case.inputs["logits"])
        return {"idx0": idx0, "idx1": idx1}

    def evidence(self, case: Case, got: Output, want: Output) -> str | None:
        problem = _index_evidence(case, got)
        if problem:
            return problem
        probs = oracles.softmax(case.inputs["logits"])
        rows = np.arange(len(probs))
        i0, i1 = got["idx0"].astype(np.int64), got["idx1"].astype(np.int64)
        ranked = -np.sort(-probs, axis=1)
        bad = (
            (i0 == i1)
            | compare.bad_mask(probs[rows, i0], ranked[:, 0], "prob")
            | compare.bad_mask(probs[rows, i1], ranked[:, 1], "prob")
        )
        if self.lowest_index_on_ties and not bad.any():
            bad = (i0 != want["idx0"]) | (i1 != want["idx1"])
            if bad.any():
                t = int(np.flatnonzero(bad)[0])
                return (
                    f"equal logits must go to the lowest expert index first; token {t} chose "
                    f"({i0[t]}, {i1[t]}), expected ({want['idx0'][t]}, {want['idx1'][t]})"
                )
        if not bad.any():
            return None
        t = int(np.flatnonzero(bad)[0])
        return (
            f"wrong experts for {int(bad.sum())} of {len(bad)} tokens; first at token {t}: "
            f"chose ({i0[t]}, {i1[t]}), expected ({want['idx0'][t]}, {want['idx1'][t]})"
        )


class WeightsJudge:
    """Weights are judged on the experts the kernel itself chose: p[i] / (p[i0] + p[i1])."""

    keys = ("w0", "w1")

    def expected(self, case: Case, got: Output) -> Output:
        probs = oracles.softmax(case.inputs["logits"])
        rows = np.arange(len(probs))
        p0 = probs[rows, got["idx0"].astype(np.int64)]
        p1 = probs[rows, got["idx1"].astype(np.int64)]
        return {"w0": p0 / (p0 + p1), "w1": p1 / (p0 + p1)}

    def evidence(self, case: Case, got: Output, want: Output) -> str | None:
        for key in self.keys:
            bad = compare.bad_mask(got[key], want[key], key)
            if bad.any():
                t = int(np.flatnonzero(bad)[0])
                extra = " (NaN: never written?)" if np.isnan(got[key][t]) else ""
                return (
                    f"{key} wrong for {int(bad.sum())} of {bad.size} tokens; first at token {t}: "
                    f"got {got[key][t]:.6g}, expected {want[key][t]:.6g}{extra} "
                    f"(weights of the experts your kernel chose, ({got['idx0'][t]}, {got['idx1'][t]}))"
                )
        return None


# ---- checks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    id: str
    exercise: str  # file stem
    todo: str
    points: int
    about: str
    cases: tuple[str, ...]
    judge: object
    traps: tuple[Trap, ...] = ()
    proof: Callable[[list[Case]], None] | None = None  # a chapter demonstration, kept as a check

    def __str__(self) -> str:
        return self.id

    def _right_output(self, case: Case) -> Output:
        """The right answer as the kernel would write it (indices included), for proofs."""
        if isinstance(self.judge, AttentionJudge):
            return self.judge.expected(case, {})
        w0, w1, idx0, idx1 = oracles.top2_gating(case.inputs["logits"])
        return {"w0": w0, "w1": w1, "idx0": idx0, "idx1": idx1}

    def prove_traps_visible(self, cases: list[Case]) -> None:
        """Every form of every trap must be far from the right answer on some case, or the
        check could be passed by that very mistake."""
        rights = [self._right_output(case) for case in cases]
        for trap in self.traps:
            forms = [trap.forms(case, right) for case, right in zip(cases, rights)]
            for n in range(len(forms[0])):
                if max(_gap(f[n], right) for f, right in zip(forms, rights)) < 1.0:
                    raise GraderError(
                        f"grader self-check: trap {trap.id} (form {n}) is not visible on the "
                        f"inputs of check {self.id}, so the check could pay for that mistake"
                    )
        if self.proof:
            self.proof(cases)

    def run(self, submission) -> None:
        cases = [submission.case(name) for name in self.cases]
        self.prove_traps_visible(cases)
        for case in cases:
            got = submission.output(case.name)
            # Indices are validated here, on the CPU, before anything is looked up with them.
            evidence = _index_evidence(case, got) if "idx0" in got else None
            if evidence is None:
                evidence = self.judge.evidence(case, got, self.judge.expected(case, got))
            if evidence is None:
                continue
            for trap in self.traps:
                if any(_matches(got, form) for form in trap.forms(case, got)):
                    raise CheckFailed(f"{case.about}: {trap.message}", trap=trap.id)
            raise CheckFailed(f"{case.about}: {evidence}")


def _gap(form: Output, right: Output) -> float:
    """How far a trap's form is from the right output, in units of SEPARATION tolerances
    (indices: any difference is infinitely far)."""
    gaps = []
    for key, predicted in form.items():
        if key.startswith("idx"):
            gaps.append(0.0 if np.array_equal(predicted, right[key]) else float("inf"))
        else:
            scale = compare.TOLERANCE[key][0] * compare.SEPARATION
            gaps.append(compare.distance(predicted, right[key]) / scale)
    return max(gaps)


def _matches(got: Output, form: Output) -> bool:
    for key, predicted in form.items():
        if key.startswith("idx"):
            if not np.array_equal(got[key].astype(np.int64), predicted.astype(np.int64)):
                return False
        elif not compare.close(got[key], predicted, key):
            return False
    return True
