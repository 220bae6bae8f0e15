"""What "right" means for each kind of output, given the exercise's interface.

A judge returns ``None`` for a right answer, a line of evidence for a wrong one, and raises
``Blocked`` when it cannot judge its own TODO because another TODO is not done yet (the weights
of two experts that are the same expert, say). Judges never look at a trap.
"""

from __future__ import annotations

import numpy as np

from grader.judge import compare
from grader.model import Case, Output
from kata import oracles
from kata.interfaces import Interface


class Blocked(Exception):
    """This check cannot be judged until another TODO works; it is not paid, and not failed."""


class Judge:
    keys: tuple[str, ...] = ()

    def __init__(self, interface: Interface):
        self.interface = interface

    def tol(self, key: str, case: Case) -> compare.Tol:
        return self.interface.tolerance(key, case.dtype)

    def expected(self, case: Case, got: Output) -> Output:
        """The right output, as far as this judge is concerned (for proofs and evidence)."""
        full = self.interface.expected(case)
        return {k: full[k] for k in self.keys}

    def evidence(self, case: Case, got: Output) -> str | None:
        raise NotImplementedError


class OutputJudge(Judge):
    """Every output close to the oracle; (B, H, S, D) outputs are compared as rows of D."""

    keys = ("out",)

    def evidence(self, case, got):
        want = self.expected(case, got)["out"]
        d = want.shape[-1]
        unwritten = got.get("out.unwritten")
        return compare.matrix_evidence(
            got["out"].reshape(-1, d),
            want.reshape(-1, d),
            self.tol("out", case),
            None if unwritten is None else unwritten.reshape(-1, d),
        )


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
        probs = oracles.softmax(logits)
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
        probs = oracles.softmax(case.inputs["logits"])
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


class ChosenWeightsJudge(WeightsJudge):
    """05's weights, which given code computes from the two logits the top-2 search picked:
    judged on every token with valid experts, one expert picked twice included (each weight is
    then 1/2). Their check pays for the rows-per-program TODO, so a top-2 search still missing
    its mask must not hold it back."""

    blocked, unjudged = "no token got two valid experts", "an invalid expert"

    def judged(self, case: Case, got: Output) -> np.ndarray:
        E = case.inputs["logits"].shape[1]
        i0, i1 = got["idx0"].astype(np.int64), got["idx1"].astype(np.int64)
        return (i0 >= 0) & (i0 < E) & (i1 >= 0) & (i1 < E)


class LseJudge(Judge):
    """08's log-sum-exp: one value per row, close to the oracle's."""

    keys = ("lse",)

    def evidence(self, case, got):
        want = self.expected(case, got)["lse"]
        unwritten = got.get("lse.unwritten")
        never = compare.unwritten_evidence(unwritten, len(want), "row")
        if never and unwritten.all():
            return f"lse: {never}"
        bad = compare.bad_mask(got["lse"], want, self.tol("lse", case))
        if not bad.any():
            return None
        r = int(np.flatnonzero(bad)[0])
        extra = " (never written)" if unwritten is not None and unwritten[r] else ""
        return (
            f"lse wrong for {int(bad.sum())} of {bad.size} rows; first at row {r}: "
            f"got {got['lse'][r]:.6g}, expected {want[r]:.6g}{extra}"
        )


class TwinJudge(Judge):
    """For notes on given code (strides, dtypes): the kernel's outputs on a case must equal its
    own outputs on the case's twin, the same numbers in a plain layout. Whether those are right
    is the TODO checks' business, so a note never charges a TODO."""

    def evidence(self, case, got, twin: Output | None = None):
        for key in self.interface.outputs:
            if key.startswith("idx"):
                bad = np.flatnonzero(got[key] != twin[key])
                if bad.size:
                    t = int(bad[0])
                    return (
                        f"{key} differs from the kernel's own answer on plain inputs for "
                        f"{bad.size} tokens; first at token {t}: {got[key][t]} vs "
                        f"{twin[key][t]}"
                    )
                continue
            want = twin[key].reshape(len(twin[key]), -1).astype(np.float64)
            problem = compare.matrix_evidence(
                got[key].reshape(want.shape), want, self.tol(key, case)
            )
            if problem:
                return f"not what the kernel gives on plain inputs: {problem}"
        return None


def _n(count: int, word: str) -> str:
    """``count`` and ``word``, plural unless the count is 1: "1 pair", "2 pairs"."""
    return f"{count} {word}" + ("" if count == 1 else "s")


def _were(count: int) -> str:
    return "was" if count == 1 else "were"


class DispatchJudge(Judge):
    """09's grouped layout, compared exactly, key by key, with evidence in a student's words:
    which expert, which (token, choice) pair, which row of the grouped buffer."""

    def _pair(self, case: Case, p: int) -> str:
        M, K = case.inputs["idx"].shape
        e = int(case.inputs["idx"].reshape(-1)[p])
        return f"token {p // K}, choice {p % K} (expert {e})"

    def _never(self, got: Output, key: str, what: str) -> str | None:
        unwritten = got.get(f"{key}.unwritten")
        if unwritten is None or not unwritten.any():
            return None
        flat = np.asarray(unwritten).reshape(-1)
        return f"{key} was never written for {int(flat.sum())} of {flat.size} {what}s"

    def per_expert(self, case: Case, got: Output, want: Output, key: str) -> str | None:
        never = self._never(got, key, "expert")
        if never:
            return never
        mine, right = got[key].astype(np.int64), want[key].astype(np.int64)
        bad = np.flatnonzero(mine != right)
        if not bad.size:
            return None
        e = int(bad[0])
        if key == "offsets":
            why = "the rows kept by the experts before it" if e else "expert 0 starts at row 0"
        else:
            routed = int((case.inputs["idx"] == e).sum())
            why = f"it is routed {routed} pairs, CAPACITY is {case.params['CAPACITY']}"
        return (
            f"{key} wrong for {bad.size} of {len(right)} experts; first at expert {e}: got "
            f"{mine[e]}, expected {right[e]} ({why})"
        )

    def slots(self, case: Case, got: Output, want: Output) -> str | None:
        never = self._never(got, "slot", "pair")
        if never:
            first = int(np.flatnonzero(np.asarray(got["slot.unwritten"]).reshape(-1))[0])
            return f"{never} (first: {self._pair(case, first)})"
        mine = got["slot"].astype(np.int64).reshape(-1)
        right = want["slot"].astype(np.int64).reshape(-1)
        for wrongly, what in (
            ((mine >= 0) & (right < 0), "a pair its expert must drop got a row"),
            ((mine < 0) & (right >= 0), "a pair its expert keeps was dropped"),
        ):
            if wrongly.any():
                p = int(np.flatnonzero(wrongly)[0])
                return (
                    f"{what} ({_n(int(wrongly.sum()), 'pair')}); first: {self._pair(case, p)}, slot "
                    f"{mine[p]}, expected {right[p]} (an expert keeps its first "
                    f"{case.params['CAPACITY']} pairs in token order)"
                )
        bad = np.flatnonzero(mine != right)
        if not bad.size:
            return None
        p = int(bad[0])
        e = int(case.inputs["idx"].reshape(-1)[p])
        first, count = int(want["offsets"][e]), int(want["counts"][e])
        rank = right[p] - first
        return (
            f"slot wrong for {bad.size} of {mine.size} pairs; first at {self._pair(case, p)}: "
            f"got {mine[p]}, expected {right[p]} (expert {e}'s rows are {first}..{first + count - 1}"
            f", and this is its pair number {rank} in token order, counting from 0)"
        )

    def rows(self, case: Case, got: Output, want: Output) -> str | None:
        total = int(want["counts"].sum())
        mine = got["token_of_slot"].astype(np.int64)
        unwritten = np.asarray(got["token_of_slot.unwritten"], bool)
        never = np.flatnonzero(unwritten[:total])
        if never.size:
            return (
                f"{never.size} of the {total} rows of the grouped buffer {_were(never.size)} "
                f"never written; first: row {int(never[0])}"
            )
        # Rows outside the filled ones first: which of them are written does not depend on the
        # order in which programs run, while a row that two of them write holds a race's winner.
        before = np.flatnonzero(~np.asarray(got["rows_before.unwritten"], bool))
        if before.size:
            return (
                f"{_n(before.size, 'row')} before row 0 of the grouped buffer {_were(before.size)} "
                "written: a negative row, offset + rank below 0"
            )
        past = np.flatnonzero(~unwritten[total:])
        if past.size:
            r = total + int(past[0])
            return (
                f"{_n(past.size, 'row')} past the last one filled (row {total - 1}) "
                f"{_were(past.size)} written; first row {r}: a dropped pair's, or one past the end "
                "of a block"
            )
        bad = np.flatnonzero(mine[:total] != want["token_of_slot"][:total])
        if bad.size:
            r = int(bad[0])
            return (
                f"token_of_slot wrong for {bad.size} of {total} rows; first at row {r}: token "
                f"{mine[r]}, expected token {want['token_of_slot'][r]}"
            )
        return None


class DispatchSlotsJudge(DispatchJudge):
    """TODO dest-slot, on cases where no expert reaches its capacity: where each expert's rows
    begin (offsets) and each pair's row (slot). The counts and the grouped buffer's rows are
    the capacity checks' business (keep, which the capacity TODO writes, masks those rows)."""

    keys = ("offsets", "slot")

    def evidence(self, case, got):
        want = self.interface.expected(case)
        return self.per_expert(case, got, want, "offsets") or self.slots(case, got, want)


class DispatchCapacityJudge(DispatchJudge):
    """TODO capacity-drop: the whole layout, the counts capped at CAPACITY, the dropped pairs'
    -1 and the grouped buffer's rows, nothing written past the last row filled."""

    keys = ("counts", "offsets", "slot", "token_of_slot")

    def evidence(self, case, got):
        want = self.interface.expected(case)
        return (
            self.per_expert(case, got, want, "counts")
            or self.per_expert(case, got, want, "offsets")
            or self.slots(case, got, want)
            or self.rows(case, got, want)
        )


JUDGES = {
    "output": OutputJudge,
    "top2": Top2Judge,
    "weights": WeightsJudge,
    "chosen-weights": ChosenWeightsJudge,
    "lse": LseJudge,
    "twin": TwinJudge,
    "dispatch-slots": DispatchSlotsJudge,
    "dispatch-capacity": DispatchCapacityJudge,
}


def make(name: str, interface: Interface) -> Judge:
    if name == "twin":
        return TwinJudge(interface)
    if name not in interface.judges:
        raise KeyError(f"interface {interface.name} offers no judge {name!r}")
    return JUDGES[name](interface)
