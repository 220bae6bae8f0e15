"""Gating's inputs (03, 05): random logits, one dominant logit per token, logits beyond
float32's exp range, and ties."""

from __future__ import annotations

import numpy as np

from grader.kinds.base import f32, rng


def logits(seed, M, E, shift=0.0, scale=1.0):
    return {"logits": (rng(seed).standard_normal((M, E)) * scale + shift).astype(np.float32)}


def dominant(seed, M, E, gap=200.0, shift=-8.0):
    """One logit per token beats the rest by ``gap``: in float32 the other probabilities all
    underflow to 0. Half the tokens have it at expert 0, the rest at a random expert; the other
    logits sit around ``shift`` (below 0)."""
    r = rng(seed)
    x = r.standard_normal((M, E)) + shift
    top = np.where(np.arange(M) % 2 == 0, 0, r.integers(0, E, M))
    x[np.arange(M), top] = x.max(axis=1) + gap
    return f32(logits=x)


def extremes(seed, M, E, kinds=("high", "low", "mixed"), high=100.0, low=-120.0):
    """Logits beyond float32's exp range, token by token in turn through ``kinds``: "high" (all
    near ``high``, where exp overflows past 88.7), "low" (all near ``low``, where exp underflows
    below -103), "mixed" (both in one row, half the experts high), "tie-high" and "tie-low"
    (every expert exactly at ``high`` or ``low``). Shifting a row changes no probability: only a
    softmax that subtracts the row's maximum before exp() gets them."""
    r = rng(seed)
    noise = r.standard_normal((M, E))
    x = np.empty((M, E))
    for t in range(M):
        kind = kinds[t % len(kinds)]
        if kind == "mixed":
            up = r.permutation(E) < max(1, E // 2)
            x[t] = np.where(up, high, low) + noise[t]
        elif kind.startswith("tie"):
            x[t] = high if kind == "tie-high" else low
        else:
            x[t] = (high if kind == "high" else low) + noise[t]
    return f32(logits=x)


def ties(E):
    """All-zero rows (every expert ties) and rows where two experts share the maximum."""
    rows = np.zeros((6, E), dtype=np.float32)
    rows[3:, :] = rng(E).standard_normal((3, E)).astype(np.float32)
    for r, (a, b) in zip(range(3, 6), ((0, 1), (1, E - 1), (E - 2, 0))):
        rows[r, a] = rows[r, b] = rows[r].max() + 1.0
    return {"logits": rows}
