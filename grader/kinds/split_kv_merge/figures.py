"""08's failure figure: which rows are wrong, in out or in lse, and by how much
(``"kind": "split-kv"`` in a check's details; grader/judge/details.py describes the shapes)."""

from __future__ import annotations

import numpy as np

from grader.kinds import compare
from grader.kinds.base import MAX_BINS, error, num
from grader.model import Case, Output


def failure(judge, case: Case, got: Output) -> dict:
    """08's merge: which rows are wrong, in out or in lse, and by how much (no picture yet)."""
    want = judge.interface.expected(case)
    err = error(got["out"], want["out"], got.get("out.unwritten")).max(axis=1)
    err = np.maximum(err, error(got["lse"], want["lse"], got.get("lse.unwritten")))
    tol = judge.interface.tolerance("out", case.dtype)
    bad = compare.bad_mask(got["out"], want["out"], tol).any(axis=1)
    bad |= compare.bad_mask(got["lse"], want["lse"], judge.interface.tolerance("lse", case.dtype))
    B, S, D = case.inputs["acc"].shape
    return {
        "kind": "split-kv",
        "case": case.name,
        "hidden": case.hidden,
        "shape": {"B": B, "S": case.params.get("NUM_SPLITS", S), "D": D},
        "bad_rows": int(bad.sum()),
        "rows": B,
        "row_error": [num(e) for e in err[:MAX_BINS]],
    }
