"""04's inputs: q, k, v of shape (B, H, S, D), rounded to a 16-bit dtype."""

from __future__ import annotations

from grader.kinds.base import rng, round_to


def bhsd(seed, B, H, S, D, dtype):
    """q, k, v of shape (B, H, S, D), rounded to ``dtype``."""
    r = rng(seed)
    return {n: round_to(r.standard_normal((B, H, S, D)), dtype) for n in "qkv"}
