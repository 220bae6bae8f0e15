"""10's failure figure: which query rows (dQ) and key rows (dK, dV) are wrong, and by how
much. ``"kind": "attention-backward"`` in a check's details, with ``"case"``, ``"hidden"``,
``"shape"`` ({"B", "H", "S", "D"}), ``"block_m"``, ``"block_n"``, ``"causal"``, and for each
gradient the judge compares, ``"<key>_bad_rows"`` and ``"<key>_row_error"`` (the largest error
of each row of the first (batch, head), for the first ``MAX_BINS`` rows)."""

from __future__ import annotations

from grader.kinds import compare
from grader.kinds.base import MAX_BINS, error, num
from grader.model import Case, Output


def failure(judge, case: Case, got: Output) -> dict:
    want = judge.interface.expected(case)
    B, H, S, D = case.inputs["q"].shape
    details = {
        "kind": "attention-backward",
        "case": case.name,
        "hidden": case.hidden,
        "shape": {"B": B, "H": H, "S": S, "D": D},
        "block_m": case.block_m,
        "block_n": case.block_n,
        "causal": case.causal,
    }
    for key in judge.keys:
        err = error(got[key], want[key], got.get(f"{key}.unwritten")).max(axis=-1)
        bad = compare.bad_mask(got[key], want[key], judge.interface.tolerance(key, case.dtype))
        details[f"{key}_bad_rows"] = int(bad.any(axis=-1).sum())
        details[f"{key}_row_error"] = [num(e) for e in err.reshape(-1, S)[0][:MAX_BINS]]
    return details
