"""2-D attention (01, 02): the chapter's flash attention kernel, causal or not.

Its oracle holds the whole (M, N) score matrix in float64, which is exactly what flash attention
avoids; at the small sizes used for checking that costs nothing and leaves no room for a shared
mistake. The kinds built on it (window_attention, bhsd_attention, split_kv_merge's decode
reference) call this oracle.
"""

from __future__ import annotations

import numpy as np

from kata import host
from kata.kinds.base import Interface, f64, poisoned

# fmt: off
PARAMS = (
    "q_ptr", "k_ptr", "v_ptr", "out_ptr", "M", "N", "D",
    "stride_qm", "stride_qd", "stride_kn", "stride_kd", "stride_vn", "stride_vd",
    "stride_om", "stride_od", "scale", "BLOCK_M", "BLOCK_N", "BLOCK_D",
)
# fmt: on


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
    q, k, v = f64(q), f64(k), f64(v)
    scores = q @ k.T / np.sqrt(q.shape[1])
    if causal or window is not None:
        scores = np.where(causal_mask(len(q), len(k), window), scores, -np.inf)
    scores = scores - scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    return (p / p.sum(axis=1, keepdims=True)) @ v


class Attention2D(Interface):
    """01, 02: q (M, D), k and v (N, D) of any float dtype and strides; out (M, D) float32."""

    def launch(self, kernel, case, device):
        ins = self.inputs(case, device)
        out = poisoned(tuple(ins["q"].shape), "float32", device)
        host.launch_attention(
            kernel,
            ins["q"],
            ins["k"],
            ins["v"],
            block_m=case.block_m,
            block_n=case.block_n,
            out=out,
            **self._extra(case),
        )
        return {"out": out}

    def _extra(self, case) -> dict:
        return {}

    def expected(self, case):
        q, k, v = (case.inputs[n] for n in "qkv")
        return {"out": attention(q, k, v, causal=case.causal, window=case.window)}

    def tolerance(self, key, dtype):
        return (1e-4, 1e-4)  # the chapter's atol; fp32 kernels land near 1e-6


INTERFACE = Attention2D(
    "attention",
    PARAMS,
    ("out",),
    ("output",),
    "2-D attention: q (M, D), k and v (N, D), out (M, D) float32",
)
