"""Float64 references for the chapter's three kernels, in NumPy.

They hold the whole (M, N) score matrix, which is exactly what flash attention avoids; at the
small sizes used for checking that costs nothing and leaves no room for a shared mistake.
"""

from __future__ import annotations

import numpy as np


def _f64(x) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def causal_mask(M: int, N: int, window: int | None = None) -> np.ndarray:
    """(M, N) booleans: query row i sees keys 0..i (top-left alignment, like torch SDPA), or
    with a ``window`` only the last ``window`` of them, keys i - window + 1 .. i."""
    rows, cols = np.arange(M)[:, None], np.arange(N)[None, :]
    visible = rows >= cols
    if window is not None:
        visible &= rows - cols < window
    return visible


def attention(q, k, v, causal: bool = False, window: int | None = None) -> np.ndarray:
    """softmax(q k^T / sqrt(D)) v, optionally with the top-left causal mask (and a sliding
    ``window``, which implies causal)."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    scores = q @ k.T / np.sqrt(q.shape[1])
    if causal or window is not None:
        scores = np.where(causal_mask(len(q), len(k), window), scores, -np.inf)
    scores = scores - scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    return (p / p.sum(axis=1, keepdims=True)) @ v


def softmax(logits) -> np.ndarray:
    x = _f64(logits)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def top2_gating(logits):
    """``(w0, w1, idx0, idx1)``: the two most probable experts, lowest index first on ties,
    and their probabilities renormalized to sum to one."""
    probs = softmax(logits)
    order = np.argsort(-probs, axis=1, kind="stable")  # stable: equal probs keep index order
    idx0, idx1 = order[:, 0], order[:, 1]
    rows = np.arange(len(probs))
    p0, p1 = probs[rows, idx0], probs[rows, idx1]
    return p0 / (p0 + p1), p1 / (p0 + p1), idx0, idx1
