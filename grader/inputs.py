"""What a check feeds a kernel: the Case record and deterministic input builders.

Shared by the hidden cases (grader/cases.py) and the public ones (grader/public.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ATTENTION, GATING = "attention", "gating"
FAST_ATTENTION, FAST_GATING = "fast_attention", "fast_gating"  # the performance track


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # ATTENTION or GATING
    about: str  # what a student reads in a failure message
    inputs: dict[str, np.ndarray]
    layout: dict[str, str] = field(default_factory=dict)  # input -> "transposed" | "sliced"
    block_m: int = 16
    block_n: int = 16
    dtype: str | None = None  # cast inputs to this torch dtype on the device ("bfloat16", ...)
    causal: bool = False  # for FAST_ATTENTION

    def job(self) -> dict:
        """What the launcher needs to run this case (plain data, picklable)."""
        return {
            "name": self.name, "kind": self.kind, "inputs": self.inputs,
            "layout": self.layout, "block_m": self.block_m, "block_n": self.block_n,
            "dtype": self.dtype, "causal": self.causal,
        }  # fmt: skip


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def qkv(seed, M, N, D, dtype=np.float32, magnitude=1.0):
    r = rng(seed)
    # Scaling q and k by sqrt(magnitude) each scales every score by `magnitude`.
    s = np.sqrt(magnitude)
    q, k, v = (r.standard_normal((n, D)) for n in (M, N, N))
    return {"q": (q * s).astype(dtype), "k": (k * s).astype(dtype), "v": v.astype(dtype)}


def growing(seed, M, N, D, block_n):
    """Keys whose scores rise by ~3 per key block for every query row, so each block raises
    the running maximum and alpha = exp(m_old - m_new) is far from 1."""
    r = rng(seed)
    q = np.abs(r.standard_normal((M, D))) + 0.5  # positive, so a positive key shift raises all
    k = 0.5 * r.standard_normal((N, D))
    k += (np.arange(N) // block_n)[:, None] * (3.0 * np.sqrt(D) / (q.sum(axis=1).mean()))
    v = r.standard_normal((N, D))
    return {"q": q.astype(np.float32), "k": k.astype(np.float32), "v": v.astype(np.float32)}


def logits(seed, M, E, shift=0.0, scale=1.0):
    return {"logits": (rng(seed).standard_normal((M, E)) * scale + shift).astype(np.float32)}


def ties(E):
    """All-zero rows (every expert ties) and rows where two experts share the maximum."""
    rows = np.zeros((6, E), dtype=np.float32)
    rows[3:, :] = rng(E).standard_normal((3, E)).astype(np.float32)
    for r, (a, b) in zip(range(3, 6), ((0, 1), (1, E - 1), (E - 2, 0))):
        rows[r, a] = rows[r, b] = rows[r].max() + 1.0
    return {"logits": rows}


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values exactly representable in float16 / bfloat16, so that the device's cast
    loses nothing and the float64 oracle sees the very numbers the kernel reads."""
    x = np.asarray(values, np.float32)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":  # round to nearest even on the upper 16 bits
        bits = x.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.astype(np.uint32).view(np.float32)
    return x


def bhsd(seed, B, H, S, D, dtype):
    """q, k, v of shape (B, H, S, D), rounded to ``dtype``."""
    r = rng(seed)
    return {n: round_to(r.standard_normal((B, H, S, D)), dtype) for n in "qkv"}
