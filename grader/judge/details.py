"""Figures of a check's judgement, for the HTML report: how far the output was from the right
answer, and for a failure, *where*.

Computed in the checks' process (grader.judge.checking), where the outputs and the right answers
are; they travel to the runner in the check's pytest metadata and land in the report as the
check's optional ``details``. Small by construction (every list is capped), and never a value
of a check's inputs: a hidden check's inputs stay hidden; its outputs' errors, placed on the
output's shape, are what the student is told anyway.

Shapes (all numbers finite or null; null means NaN, inf or never written):

* every judged check: ``{"max_error": float|null, "tolerance": [atol, rtol]}``
  (``"exact": true`` instead for expert indices and every other integer output);
* a failed or blocked attention check adds ``"kind": "attention"``, ``"case"``,
  ``"hidden"``, ``"shape"`` ({"M", "N", "D"} or {"B", "H", "S", "D"}), ``"block_m"``,
  ``"block_n"``, ``"causal"``, ``"bad_values"``, ``"values"``, ``"rows"`` (row count),
  ``"row_step"`` and ``"row_error"`` (the largest error in each group of ``row_step`` query
  rows, at most ``MAX_BINS`` groups), and, on the first failing check of each TODO of a 2-D
  attention exercise, ``"probe"`` (see ``probe_details``: a text heatmap of 48 x 48 characters);
* a failed or blocked gating check adds ``"kind": "gating"``, ``"case"``, ``"hidden"``,
  ``"shape"`` ({"M", "E"}), ``"bad_tokens"``, ``"tokens"`` (the token numbers shown, at most
  ``MAX_TOKENS``), ``"chosen"`` and ``"expected"`` ([idx0, idx1] per token shown; an index
  outside [0, E) is null), ``"weight_sum"`` (w0 + w1 per token shown) and
  ``"expected_sum"`` (1.0: renormalized weights);
* a failed or blocked split-KV merge check (08) adds ``"kind": "split-kv"``, ``"case"``,
  ``"hidden"``, ``"shape"`` ({"B", "S", "D"}: rows, splits, head dimension), ``"bad_rows"``,
  ``"rows"`` and ``"row_error"`` (the largest error of each row, in out or lse, for the first
  ``MAX_BINS`` rows);
* a failed or blocked MoE dispatch check (09) adds ``"kind": "dispatch"``, ``"case"``,
  ``"hidden"``, ``"shape"`` ({"M", "K", "E"}: tokens, choices, experts), ``"counts"`` and
  ``"offsets"`` ({"got", "expected"}, one entry per expert for the first ``MAX_BINS``
  experts; null where never written), ``"bad_experts"`` (experts whose count or offset is
  wrong), ``"bad_pairs"`` (pairs whose slot is wrong), ``"pairs"`` and ``"slots"`` (the first
  ``MAX_TOKENS`` wrong pairs, by number in (token, choice) order, with [got, expected] slots).
"""

from __future__ import annotations

import math

import numpy as np

from grader import kinds
from grader.kinds import compare
from grader.kinds.base import MAX_BINS
from grader.kinds.base import error as _error
from grader.kinds.base import num as _num
from grader.model import Case, Output
from kata import oracles

PROBE_N = 48  # the probe: 48 queries x 48 keys, three 16-key blocks


def max_error(judge, case: Case, got: Output) -> dict:
    """The figures of one judged case: the largest error against the tolerance."""
    keys = [
        k
        for k in judge.keys
        if not judge.interface.exact(k) and not np.issubdtype(np.asarray(got[k]).dtype, np.integer)
    ]
    if not keys:
        return {"exact": True}
    want = judge.expected(case, got)
    worst = max(float(_error(got[k], want[k]).max(initial=0.0)) for k in keys)
    return {"max_error": _num(worst), "tolerance": list(judge.tol(keys[0], case))}


def merge(figures: list[dict]) -> dict:
    """The figures of several cases of one check: the worst of them."""
    if not figures or "exact" in figures[0]:
        return figures[0] if figures else {}
    errors = [f["max_error"] for f in figures]
    worst = None if None in errors else max(errors)
    return {"max_error": worst, "tolerance": figures[0]["tolerance"]}


def _attention(judge, case: Case, got: Output) -> dict:
    want = judge.expected(case, got)["out"]
    out = got["out"]
    err = _error(out, want, got.get("out.unwritten"))
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
        "row_error": [_num(b) for b in bins],
        "keys": N,
    }


def failure(judge, case: Case, got: Output) -> dict:
    """Where the output of a failing case is wrong, on the output's own shape: each
    interface's outputs have their own figure."""
    home = kinds.home(judge.interface.name)
    if home is not None:
        return home.failure(judge, case, got)
    if "out" in got:
        return _attention(judge, case, got)
    raise KeyError(f"no figure for outputs {sorted(got)}")


# ---- the probe: the attention weights a 2-D attention kernel gives, key by key ----------------


def probe_case(causal: bool) -> Case:
    """v = identity, so out = the attention matrix itself: row i, column j is the weight query
    i gave key j. Scores rise by ~3 per 16-key block, so every block raises the running
    maximum (a missing rescale shows in every row), and future keys score highest (a missing
    causal mask shows at once). A public, fixed input: nothing of a check's inputs."""
    rng = np.random.default_rng(2113)
    n = PROBE_N
    q = 0.5 * rng.standard_normal((n, n))
    k = 0.5 * rng.standard_normal((n, n))
    q[:, 0] = 1.0
    k[:, 0] = 3.0 * (np.arange(n) // 16) * math.sqrt(n)
    inputs = {
        "q": q.astype(np.float32),
        "k": k.astype(np.float32),
        "v": np.eye(n, dtype=np.float32),
    }
    return Case(
        name="__probe__",
        about="the picture's probe: v = identity",
        inputs=inputs,
        causal=causal,
        hidden=False,
    )


LEVELS = 9  # probe errors: "." within tolerance, "1".."9" on a log scale, "x" NaN/inf/unwritten


def probe_details(case: Case, got: Output) -> dict:
    """``{"rows", "keys", "block_m", "block_n", "causal", "tolerance", "max_error", "levels"}``:
    ``levels`` holds one string per query row, one character per key: how wrong the weight
    that query gave that key is. "." is within the tolerance, "1" to "9" climb on a log scale
    from the tolerance to ``max_error``, "x" is NaN, inf or never written. A text heatmap:
    small in the JSON, and readable there too."""
    want = oracles.attention(*(case.inputs[n] for n in "qkv"), causal=case.causal)
    err = _error(got["out"], want, got.get("out.unwritten"))
    tol = 1e-4  # the interface's atol for attention outputs
    finite = err[np.isfinite(err)]
    top = max(float(finite.max()) if finite.size else tol, tol * 10)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.log(np.maximum(err, tol) / tol) / np.log(top / tol)
    level = np.clip(np.ceil(scaled * LEVELS), 1, LEVELS).astype(int)
    rows = []
    for i in range(err.shape[0]):
        chars = [
            "x" if not np.isfinite(e) else "." if e <= tol else str(level[i, j])
            for j, e in enumerate(err[i])
        ]
        rows.append("".join(chars))
    return {
        "rows": int(err.shape[0]),
        "keys": int(err.shape[1]),
        "block_m": case.block_m,
        "block_n": case.block_n,
        "causal": case.causal,
        "tolerance": tol,
        "max_error": _num(finite.max()) if finite.size else None,
        "levels": rows,
    }
