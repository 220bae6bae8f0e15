"""10's inputs: q, k, v and dO drawn at random, O and lse from the float64 forward rounded to
fp32, as a forward kernel would store them."""

from __future__ import annotations

import numpy as np

from grader.kinds.base import f32, rng
from kata.kinds.attention_backward import forward


def backward_inputs(
    seed: int, B: int, H: int, S: int, D: int, causal: bool, spread: float | None = None
) -> dict[str, np.ndarray]:
    """q, k, v, do (B, H, S, D) and o, lse from their forward, float32. With ``spread``, q and
    k are multiplied by it: at 12 the scaled scores spread over hundreds (a standard deviation
    of 144), so that exp of a score alone overflows fp32 (past 88.7) and, causal, a future
    key's score passes its row's lse by more than that."""
    g = rng(seed)
    q, k, v, do = (g.standard_normal((B, H, S, D)) for _ in range(4))
    if spread is not None:
        q, k = spread * q, spread * k
    q, k, v, do = (np.asarray(x, np.float32) for x in (q, k, v, do))
    o, lse = forward(q, k, v, causal)
    return f32(q=q, k=k, v=v, do=do, o=o, lse=lse)
