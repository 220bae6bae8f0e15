"""The probe: the attention weights a 2-D attention kernel gives, key by key, drawn for the
first failing check of each TODO of 01 and 02."""

from __future__ import annotations

import math

import numpy as np

from grader.kinds.base import error, num
from grader.model import Case, Output
from kata.kinds.attention import attention

PROBE_N = 48  # the probe: 48 queries x 48 keys, three 16-key blocks


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
    want = attention(*(case.inputs[n] for n in "qkv"), causal=case.causal)
    err = error(got["out"], want, got.get("out.unwritten"))
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
        "max_error": num(finite.max()) if finite.size else None,
        "levels": rows,
    }
