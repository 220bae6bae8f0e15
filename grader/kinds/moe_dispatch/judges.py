"""09's judges: the layout against the oracle's, told expert by expert and pair by pair."""

from __future__ import annotations

import numpy as np

from grader.kinds.base import Judge
from grader.model import Case, Output


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


JUDGES = {"dispatch-slots": DispatchSlotsJudge, "dispatch-capacity": DispatchCapacityJudge}
