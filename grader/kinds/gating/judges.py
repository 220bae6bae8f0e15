"""03's judges: the two experts chosen (indices in range first, ties to the lowest index) and
their renormalized weights."""

from __future__ import annotations

import numpy as np

from grader.kinds import compare
from grader.kinds.base import Blocked, Judge
from grader.model import Case, Output
from kata.kinds.gating import softmax


def index_evidence(case: Case, got: Output) -> str | None:
    """Indices must lie in [0, E) before anything is looked up with them."""
    E = case.inputs["logits"].shape[1]
    for key in ("idx0", "idx1"):
        idx = got[key].astype(np.int64)
        bad = np.flatnonzero((idx < 0) | (idx >= E))
        if bad.size:
            unwritten = got.get(f"{key}.unwritten")
            never = unwritten is not None and bool(unwritten[bad].all())
            what = "never written" if never else f"first at token {bad[0]}: {idx[bad[0]]}"
            return f"{key} is outside [0, {E}) for {bad.size} of {idx.size} tokens ({what})"
    return None


def tie_tokens(logits: np.ndarray) -> np.ndarray:
    """Tokens whose top-2 choice depends on a tie rule: the second largest logit is shared
    with an expert outside the top two, or the two largest are equal."""
    x = np.asarray(logits, np.float64)
    ranked = -np.sort(-x, axis=1)
    at_least_second = (x >= ranked[:, 1:2]).sum(axis=1)
    return (at_least_second > 2) | (ranked[:, 0] == ranked[:, 1])


class Top2Judge(Judge):
    """Two distinct experts holding the two largest probabilities (by value, within the
    tolerance), and on exact ties in the logits the lowest index first."""

    keys = ("idx0", "idx1")

    def evidence(self, case, got):
        problem = index_evidence(case, got)
        if problem:
            return problem
        logits = case.inputs["logits"]
        probs = softmax(logits)
        rows = np.arange(len(probs))
        i0, i1 = got["idx0"].astype(np.int64), got["idx1"].astype(np.int64)
        ranked = -np.sort(-probs, axis=1)
        tol = self.tol("prob", case)
        want = self.expected(case, got)
        bad = (
            (i0 == i1)
            | compare.bad_mask(probs[rows, i0], ranked[:, 0], tol)
            | compare.bad_mask(probs[rows, i1], ranked[:, 1], tol)
        )
        if bad.any():
            t = int(np.flatnonzero(bad)[0])
            return (
                f"wrong experts for {int(bad.sum())} of {len(bad)} tokens; first at token {t}: "
                f"chose ({i0[t]}, {i1[t]}), expected ({want['idx0'][t]}, {want['idx1'][t]})"
            )
        ties = tie_tokens(logits) & ((i0 != want["idx0"]) | (i1 != want["idx1"]))
        if ties.any():
            t = int(np.flatnonzero(ties)[0])
            return (
                f"equal logits must go to the lowest expert index first; token {t} chose "
                f"({i0[t]}, {i1[t]}), expected ({want['idx0'][t]}, {want['idx1'][t]})"
            )
        return None


class WeightsJudge(Judge):
    """Weights judged on the experts the kernel itself chose: w = p[i] / (p[i0] + p[i1]), on
    the tokens where it chose two distinct, valid experts; with none, the check is blocked."""

    keys = ("w0", "w1")
    # Why no token could be judged; what a token left out of the judging has.
    blocked, unjudged = "no token got two distinct, valid experts", "a repeated or invalid expert"

    def judged(self, case: Case, got: Output) -> np.ndarray:
        E = case.inputs["logits"].shape[1]
        i0, i1 = got["idx0"].astype(np.int64), got["idx1"].astype(np.int64)
        return (i0 != i1) & (i0 >= 0) & (i0 < E) & (i1 >= 0) & (i1 < E)

    def expected(self, case, got):
        probs = softmax(case.inputs["logits"])
        ok = self.judged(case, got)
        rows = np.arange(len(probs))
        i0 = np.where(ok, got["idx0"].astype(np.int64), 0)
        i1 = np.where(ok, got["idx1"].astype(np.int64), 1)
        p0, p1 = probs[rows, i0], probs[rows, i1]
        return {"w0": p0 / (p0 + p1), "w1": p1 / (p0 + p1)}

    def evidence(self, case, got):
        for key in self.keys:  # an unwritten weight is wrong whatever the experts are
            unwritten = got.get(f"{key}.unwritten")
            never = compare.unwritten_evidence(unwritten, len(got[key]), "token")
            if never:
                return f"{key}: {never}"
        ok = self.judged(case, got)
        if not ok.any():
            raise Blocked(f"cannot be judged until top-2 works: {self.blocked}")
        want = self.expected(case, got)
        for key in self.keys:
            unwritten = got.get(f"{key}.unwritten")
            problem = compare.vector_evidence(
                np.where(ok, got[key], want[key]),
                want[key],
                self.tol(key, case),
                key,
                None if unwritten is None else unwritten & ok,
            )
            if problem:
                skipped = int((~ok).sum())
                note = f" ({skipped} tokens with {self.unjudged} not judged)"
                return problem + (note if skipped else "")
        return None


JUDGES = {"top2": Top2Judge, "weights": WeightsJudge}
