"""09's failure figure: each expert's count and first row, and the pairs on the wrong row
(``"kind": "dispatch"`` in a check's details; grader/judge/details.py describes the shapes)."""

from __future__ import annotations

import numpy as np

from grader.kinds.base import MAX_BINS, MAX_TOKENS
from grader.model import Case, Output


def _ints(values, unwritten=None) -> list[int | None]:
    """Integer outputs for JSON: None where the kernel never wrote."""
    values = np.asarray(values, np.int64).reshape(-1)
    mask = np.zeros(values.shape, bool) if unwritten is None else np.asarray(unwritten, bool)
    return [None if m else int(v) for v, m in zip(values, mask.reshape(-1))]


def failure(judge, case: Case, got: Output) -> dict:
    """09's grouped layout: which experts' counts or offsets are wrong, and which pairs got the
    wrong row. Outputs only: an expert id of a pair is an input, and is not shown."""
    want = judge.interface.expected(case)
    M, K = np.shape(case.inputs["idx"])
    E = case.params["E"]
    per_expert = {}
    bad_experts = np.zeros(E, bool)
    for key in ("counts", "offsets"):
        mine = np.asarray(got[key], np.int64)
        unwritten = got.get(f"{key}.unwritten")
        wrong = mine != want[key]
        if unwritten is not None:
            wrong |= np.asarray(unwritten, bool)
        bad_experts |= wrong
        per_expert[key] = {
            "got": _ints(mine[:MAX_BINS], None if unwritten is None else unwritten[:MAX_BINS]),
            "expected": _ints(want[key][:MAX_BINS]),
        }
    mine = np.asarray(got["slot"], np.int64).reshape(-1)
    right = np.asarray(want["slot"], np.int64).reshape(-1)
    wrong = mine != right
    unwritten = got.get("slot.unwritten")
    if unwritten is not None:
        wrong |= np.asarray(unwritten, bool).reshape(-1)
    pairs = np.flatnonzero(wrong)[:MAX_TOKENS]
    shown = _ints(mine, unwritten)
    return {
        "kind": "dispatch",
        "case": case.name,
        "hidden": case.hidden,
        "shape": {"M": int(M), "K": int(K), "E": int(E)},
        **per_expert,
        "bad_experts": int(bad_experts.sum()),
        "bad_pairs": int(wrong.sum()),
        "pairs": [int(p) for p in pairs],
        "slots": [[shown[p], int(right[p])] for p in pairs],
    }
