"""Gating's failure figure (03, 05): the experts chosen and expected per token, and each
token's weight sum (``"kind": "gating"`` in a check's details; grader/judge/details.py describes
the shapes)."""

from __future__ import annotations

import numpy as np

from grader.kinds import compare
from grader.kinds.base import MAX_TOKENS, num
from grader.model import Case, Output
from kata.kinds.gating import top2_gating


def _valid(idx: np.ndarray, E: int) -> list[int | None]:
    return [int(i) if 0 <= i < E else None for i in idx.astype(np.int64)]


def failure(judge, case: Case, got: Output) -> dict:
    logits = case.inputs["logits"]
    M, E = logits.shape
    _, _, j0, j1 = top2_gating(logits)
    i0, i1 = got["idx0"].astype(np.int64), got["idx1"].astype(np.int64)
    w_sum = np.asarray(got["w0"], np.float64) + np.asarray(got["w1"], np.float64)
    for key in ("w0", "w1"):
        unwritten = got.get(f"{key}.unwritten")
        if unwritten is not None:
            w_sum[unwritten] = np.nan
    if "w0" in judge.keys:  # the weights judge: what the weights of its own choices should be
        want = judge.expected(case, got)
        ok = judge.judged(case, got)
        bad = ~ok | compare.bad_mask(got["w0"], want["w0"], judge.tol("w0", case))
    else:
        bad = (i0 != j0) | (i1 != j1)
    # The first wrong tokens, then the first tokens, so the grid always shows what went wrong.
    wrong = np.flatnonzero(bad)[: MAX_TOKENS // 2].tolist()
    others = [i for i in range(M) if i not in set(wrong)][: MAX_TOKENS - len(wrong)]
    tokens = sorted(wrong + others)
    t = np.asarray(tokens, np.int64)
    return {
        "kind": "gating",
        "case": case.name,
        "hidden": case.hidden,
        "shape": {"M": M, "E": E},
        "bad_tokens": int(bad.sum()),
        "tokens": tokens,
        "chosen": [list(p) for p in zip(_valid(i0[t], E), _valid(i1[t], E))],
        "expected": [[int(a), int(b)] for a, b in zip(j0[t], j1[t])],
        "weight_sum": [num(s) for s in w_sum[t]],
        "expected_sum": 1.0,
    }
