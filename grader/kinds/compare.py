"""Comparisons and the evidence a failed one reports.

Every comparison happens in float64 against the float64 oracles, with the (atol, rtol) the
interface gives for that output and input dtype. fp32 kernels land near 1e-6 on the checks'
sizes; the tolerances leave two orders of magnitude for that and none for a real mistake.
"""

from __future__ import annotations

import numpy as np

Tol = tuple[float, float]  # (atol, rtol)


def bad_mask(got: np.ndarray, want: np.ndarray, tol: Tol) -> np.ndarray:
    """Elements that are not close; NaN and inf in ``got`` are never close (unless a trap's
    form predicts the same NaN or infinity there: 08's merge without its maximum turns an
    overflowing row's log-sum-exp into inf)."""
    atol, rtol = tol
    got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
    with np.errstate(invalid="ignore"):
        close = np.abs(got64 - want64) <= atol + rtol * np.abs(want64)
    close &= np.isfinite(want64)  # rtol * inf would let every number near an infinity
    both_nan = np.isnan(got64) & np.isnan(want64)
    same_inf = np.isinf(want64) & (got64 == want64)
    return ~(close | both_nan | same_inf)


def close(got, want, tol: Tol) -> bool:
    return np.shape(got) == np.shape(want) and not bad_mask(got, want, tol).any()


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference; NaN against a number counts as infinitely far."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a64.shape != b64.shape:
        return float("inf")
    with np.errstate(invalid="ignore"):
        d = np.abs(a64 - b64)
    d[np.isnan(a64) != np.isnan(b64)] = np.inf
    d[np.isnan(a64) & np.isnan(b64)] = 0.0
    d[np.isinf(a64) & (a64 == b64)] = 0.0
    return float(d.max()) if d.size else 0.0


def unwritten_evidence(unwritten: np.ndarray | None, rows: int, what: str) -> str | None:
    if unwritten is None or not unwritten.any():
        return None
    if unwritten.all():
        return f"no output was written: every {what} still holds the value the buffer started with"
    flat = unwritten.reshape(rows, -1)
    bad_rows = np.flatnonzero(flat.any(axis=1))
    return (
        f"{int(unwritten.sum())} of {unwritten.size} values were never written "
        f"(in {len(bad_rows)} of {rows} rows; first at row {int(bad_rows[0])})"
    )


def matrix_evidence(
    got: np.ndarray, want: np.ndarray, tol: Tol, unwritten: np.ndarray | None = None
) -> str | None:
    """None when ``got`` (rows x columns) is close to ``want``, else what differs and where."""
    if got.shape != want.shape:
        return f"output has shape {got.shape}, expected {want.shape}"
    bad = bad_mask(got, want, tol)
    if not bad.any():
        return None
    never = unwritten_evidence(unwritten, got.shape[0], "element")
    if never and unwritten.all():
        return never
    rows = np.flatnonzero(bad.any(axis=1))
    first_r = int(rows[0])
    first_c = int(np.flatnonzero(bad[first_r])[0])
    with np.errstate(invalid="ignore"):
        err = np.where(bad, np.abs(got.astype(np.float64) - want), 0.0)
    err = np.where(np.isnan(err), np.inf, err)
    worst = np.unravel_index(int(np.argmax(err)), err.shape)
    parts = [
        f"{int(bad.sum())} of {bad.size} values differ (in {len(rows)} of {got.shape[0]} rows)",
        f"first at row {first_r}, col {first_c}: got {got[first_r, first_c]:.6g}, "
        f"expected {want[first_r, first_c]:.6g}",
        f"max error {float(err[worst]):.3g} at row {worst[0]}, col {worst[1]}",
    ]
    written = ~unwritten if unwritten is not None else np.ones(got.shape, bool)
    n_nan = int((np.isnan(got) & written).sum())
    n_inf = int(np.isinf(got).sum())
    if n_nan or n_inf:
        parts.append(f"{n_nan} NaN and {n_inf} inf written by the kernel")
    if never:
        parts.append(never)
    return "; ".join(parts)


def vector_evidence(
    got: np.ndarray, want: np.ndarray, tol: Tol, key: str, unwritten: np.ndarray | None = None
) -> str | None:
    """None when the per-token vector ``got`` is close to ``want``, else the first bad token."""
    bad = bad_mask(got, want, tol)
    if not bad.any():
        return None
    never = unwritten_evidence(unwritten, got.shape[0], "token")
    if never and unwritten.all():
        return f"{key}: {never}"
    t = int(np.flatnonzero(bad)[0])
    extra = " (never written)" if unwritten is not None and unwritten[t] else ""
    return (
        f"{key} wrong for {int(bad.sum())} of {bad.size} tokens; first at token {t}: "
        f"got {got[t]:.6g}, expected {want[t]:.6g}{extra}"
    )
