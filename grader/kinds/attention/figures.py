"""Attention's failure figure (01, 02, 04, 06): the largest error of each group of query rows
(``"kind": "attention"`` in a check's details; grader/judge/details.py describes the shapes)."""

from __future__ import annotations

import math

from grader.kinds import compare
from grader.kinds.base import MAX_BINS, error, num
from grader.model import Case, Output


def failure(judge, case: Case, got: Output) -> dict:
    want = judge.expected(case, got)["out"]
    out = got["out"]
    err = error(out, want, got.get("out.unwritten"))
    if out.ndim == 4:  # (B, H, S, D): the profile is over S, worst over batch and heads
        B, H, S, D = out.shape
        shape = {"B": B, "H": H, "S": S, "D": D}
        per_row = err.max(axis=(0, 1, 3))
        N = S
    else:
        M, D = out.shape
        N = len(case.inputs["k"])
        shape = {"M": M, "N": N, "D": D}
        per_row = err.max(axis=1)
    rows = len(per_row)
    step = max(1, math.ceil(rows / MAX_BINS))
    bins = [float(per_row[i : i + step].max()) for i in range(0, rows, step)]
    bad = compare.bad_mask(out, want, judge.tol("out", case))
    return {
        "kind": "attention",
        "case": case.name,
        "hidden": case.hidden,
        "shape": shape,
        "block_m": case.block_m,
        "block_n": case.block_n,
        "causal": case.causal,
        "bad_values": int(bad.sum()),
        "values": int(bad.size),
        "rows": rows,
        "row_step": step,
        "row_error": [num(b) for b in bins],
        "keys": N,
    }
