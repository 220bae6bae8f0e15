"""10's judges: dV alone (it depends on the recomputed P only), and dQ with dK (they depend on
P and dS). Each compares (B, H, S, D) gradients as rows of D with the oracle.

On a case whose ``params`` ask for it (``"fp32_bound": 1``: the scores in the hundreds), an
element may also differ by its first-order worst-case fp32 error bound (``traps.error_bound``):
there every probability carries the rounding of a score that large, and dQ and dK are sums of
dS that cancel, times q and k twelve times their usual size; a right kernel errs by up to 2e-4
on dV. Those cases are there to catch what overflows (NaN, inf), which no bound admits. Every
other case is judged by the kind's flat tolerance alone."""

from __future__ import annotations

import numpy as np

from grader.kinds import compare
from grader.kinds.attention_backward.traps import error_bound
from grader.kinds.base import Judge, error


class GradJudge(Judge):
    """Every gradient in ``keys`` close to the float64 backward's."""

    def evidence(self, case, got):
        want = self.expected(case, got)
        ins = case.inputs
        names = ("q", "k", "v", "o", "do", "lse")
        bound = {}
        if case.params.get("fp32_bound"):
            bounds = error_bound(*(ins[n] for n in names), case.causal)
            bound = dict(zip(("dq", "dk", "dv"), bounds))
        for key in self.keys:
            d = want[key].shape[-1]
            unwritten = got.get(f"{key}.unwritten")
            mine = got[key]
            if key in bound:  # within its bound an element counts as right (NaN, inf never)
                near = error(got[key], want[key], unwritten) <= bound[key]
                mine = np.where(near, want[key], got[key])
            problem = compare.matrix_evidence(
                mine.reshape(-1, d),
                want[key].reshape(-1, d),
                self.tol(key, case),
                None if unwritten is None else unwritten.reshape(-1, d),
            )
            if problem:
                return f"{key}: {problem}"
        return None


class DvJudge(GradJudge):
    keys = ("dv",)


class DqDkJudge(GradJudge):
    keys = ("dq", "dk")


JUDGES = {"dv": DvJudge, "dqdk": DqDkJudge}
