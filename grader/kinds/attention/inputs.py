"""Deterministic input builders for the specs' cases: ordinary ones, and the hostile ones that
only a right kernel survives (maxima that fall by 100 between key blocks, rows whose every
score is below -100, future keys 100 above the visible ones inside one tile, maxima that creep
up by 0.001 per key tile, one dominant logit, logits past float32's exp range).

Every builder draws from its own seeded generator, so a case is the same numbers everywhere.
"""

from __future__ import annotations

import numpy as np

from grader.kinds.base import f32, rng


def qkv(seed, M, N, D, dtype=np.float32, magnitude=1.0):
    r = rng(seed)
    # Scaling q and k by sqrt(magnitude) each scales every score by `magnitude`.
    s = np.sqrt(magnitude)
    q, k, v = (r.standard_normal((n, D)) for n in (M, N, N))
    return {"q": (q * s).astype(dtype), "k": (k * s).astype(dtype), "v": v.astype(dtype)}


def _with_scores(seed, M, N, D, shift_q, shift_k):
    """q, k whose first coordinate adds ``shift_q[i] * shift_k[j]`` to score (i, j), over small
    random scores from the other coordinates (D >= 2)."""
    r = rng(seed)
    q = 0.5 * r.standard_normal((M, D))
    k = 0.5 * r.standard_normal((N, D))
    q[:, 0] = shift_q
    k[:, 0] = np.asarray(shift_k) * np.sqrt(D)  # the kernel multiplies by 1/sqrt(D)
    return f32(q=q, k=k, v=r.standard_normal((N, D)))


def growing(seed, M, N, D, block_n):
    """Keys whose scores rise by ~3 per key block for every query row, so each block raises
    the running maximum and alpha = exp(m_old - m_new) is far from 1."""
    return _with_scores(seed, M, N, D, np.ones(M), 3.0 * (np.arange(N) // block_n))


def falling(seed, M, N, D, block_n, drop=120.0):
    """For every even row, the first key block scores ``drop`` above every later one: that
    row's maximum falls by more than 100 from the first tile to the next. Odd rows are
    ordinary."""
    rows = (np.arange(M) % 2 == 0).astype(float)
    return _with_scores(seed, M, N, D, rows, np.where(np.arange(N) < block_n, drop, 0.0))


def all_low(seed, M, N, D, level=-150.0):
    """Every score of every even row lies near ``level`` (far below -100); odd rows are
    ordinary."""
    rows = (np.arange(M) % 2 == 0).astype(float)
    return _with_scores(seed, M, N, D, rows, np.full(N, level))


def creeping(seed, M, N, D, block_n, step=1e-3):
    """Every row's maximum rises by ``step`` from one key tile to the next, so that alpha is
    exp(-step) (0.999) on every tile but the first: one key per tile scores exactly 2 + step *
    tile, noise-free, the others about 0. Values near 3 make a skipped rescale add up instead of
    averaging out."""
    r = rng(seed)
    q = 0.5 * r.standard_normal((M, D))
    k = 0.5 * r.standard_normal((N, D))
    q[:, 0], k[:, 0] = 1.0, 0.0
    starts = np.arange(0, N, block_n)
    peaks = np.minimum(starts + r.integers(0, block_n, len(starts)), N - 1)
    k[peaks, 1:] = 0.0  # a peak's score is its first coordinate's alone (over sqrt(D))
    k[peaks, 0] = (2.0 + step * np.arange(len(starts))) * np.sqrt(D)
    return f32(q=q, k=k, v=3.0 + r.standard_normal((N, D)))


def future_high(seed, M, N, D, slope=8.0):
    """Scores climb by ``slope`` per key position, for every row: inside one 16-key tile, the
    future keys of a row score up to 120 above its own key, the visible ones well below."""
    return _with_scores(seed, M, N, D, np.ones(M), slope * np.arange(N))
