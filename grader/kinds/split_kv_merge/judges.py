"""08's judges: out like any attention output, and the log-sum-exp row by row."""

from __future__ import annotations

import numpy as np

from grader.kinds import compare
from grader.kinds.base import Judge, OutputJudge


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


JUDGES = {"output": OutputJudge, "lse": LseJudge}
