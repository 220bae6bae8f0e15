"""Tolerances and the evidence a failed comparison reports.

All comparisons happen in float64 against the float64 oracles. fp32 kernels land near 1e-6 on
these sizes (IEEE dots on the GPU, full fp32 in the interpreter); the tolerances leave two orders
of magnitude for that and none for a real mistake, whose errors are of order 0.01 to 1.
"""

from __future__ import annotations

import numpy as np

# output -> (atol, rtol)
TOLERANCE = {
    "out": (1e-4, 1e-4),  # attention outputs (the chapter's atol)
    "out16": (1e-2, 1e-2),  # 04: float16 / bfloat16 inputs, P rounded to 16 bits for P @ V
    "w0": (1e-5, 1e-5),  # gating weights (the chapter's atol)
    "w1": (1e-5, 1e-5),
    "prob": (1e-6, 1e-5),  # a chosen expert's probability against the k-th largest
}
# A trap's wrong answer must sit this many tolerances away from the right one, or the trap
# cannot be told apart and the check would prove nothing.
SEPARATION = 100.0


def bad_mask(got: np.ndarray, want: np.ndarray, key: str) -> np.ndarray:
    """Elements that are not close; NaN and inf in ``got`` are never close."""
    atol, rtol = TOLERANCE[key]
    got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
    with np.errstate(invalid="ignore"):
        close = np.abs(got64 - want64) <= atol + rtol * np.abs(want64)
    both_nan = np.isnan(got64) & np.isnan(want64)  # a trap's form may itself hold NaN rows
    return ~(close | both_nan)


def close(got, want, key: str) -> bool:
    return got.shape == want.shape and not bad_mask(got, want, key).any()


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference; NaN against a number counts as infinitely far."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a64.shape != b64.shape:
        return float("inf")
    with np.errstate(invalid="ignore"):
        d = np.abs(a64 - b64)
    d[np.isnan(a64) != np.isnan(b64)] = np.inf
    d[np.isnan(a64) & np.isnan(b64)] = 0.0
    return float(d.max()) if d.size else 0.0


def matrix_evidence(got: np.ndarray, want: np.ndarray, key: str = "out") -> str | None:
    """None when ``got`` is close to ``want``, else what differs and where."""
    if got.shape != want.shape:
        return f"output has shape {got.shape}, expected {want.shape}"
    bad = bad_mask(got, want, key)
    if not bad.any():
        return None
    n_nan, n_inf = int(np.isnan(got).sum()), int(np.isinf(got).sum())
    if n_nan == got.size:
        return "no output was written: every element still holds the NaN the buffer started with"
    rows = np.flatnonzero(bad.any(axis=1))
    first_r = int(rows[0])
    first_c = int(np.flatnonzero(bad[first_r])[0])
    err = np.where(bad, np.abs(got.astype(np.float64) - want), 0.0)
    err = np.where(np.isnan(err), np.inf, err)
    worst = np.unravel_index(int(np.argmax(err)), err.shape)
    parts = [
        f"{int(bad.sum())} of {bad.size} values differ (in {len(rows)} of {got.shape[0]} rows)",
        f"first at row {first_r}, col {first_c}: got {got[first_r, first_c]:.6g}, "
        f"expected {want[first_r, first_c]:.6g}",
        f"max error {float(err[worst]):.3g} at row {worst[0]}, col {worst[1]}",
    ]
    if n_nan or n_inf:
        parts.append(f"{n_nan} NaN and {n_inf} inf in the output")
    return "; ".join(parts)
