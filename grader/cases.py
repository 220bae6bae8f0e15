"""The inputs the hidden checks feed to a kernel, built deterministically from fixed seeds.

Each case is chosen to expose something: key blocks whose scores grow so that a missing rescale
shows, ragged and strided shapes, 30x scores that overflow without a running max, M != N for the
causal alignment, padded expert rows with all-negative logits, exact ties, E = 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ATTENTION, GATING = "attention", "gating"


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # ATTENTION or GATING
    about: str  # what a student reads in a failure message
    inputs: dict[str, np.ndarray]
    layout: dict[str, str] = field(default_factory=dict)  # input -> "transposed" | "sliced"
    block_m: int = 16
    block_n: int = 16

    def job(self) -> dict:
        """What the launcher needs to run this case (plain data, picklable)."""
        return {
            "name": self.name, "kind": self.kind, "inputs": self.inputs,
            "layout": self.layout, "block_m": self.block_m, "block_n": self.block_n,
        }  # fmt: skip


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _qkv(seed, M, N, D, dtype=np.float32, magnitude=1.0):
    r = _rng(seed)
    # Scaling q and k by sqrt(magnitude) each scales every score by `magnitude`.
    s = np.sqrt(magnitude)
    q, k, v = (r.standard_normal((n, D)) for n in (M, N, N))
    return {"q": (q * s).astype(dtype), "k": (k * s).astype(dtype), "v": v.astype(dtype)}


def _growing(seed, M, N, D, block_n):
    """Keys whose scores rise by ~3 per key block for every query row, so each block raises
    the running maximum and alpha = exp(m_old - m_new) is far from 1."""
    r = _rng(seed)
    q = np.abs(r.standard_normal((M, D))) + 0.5  # positive, so a positive key shift raises all
    k = 0.5 * r.standard_normal((N, D))
    k += (np.arange(N) // block_n)[:, None] * (3.0 * np.sqrt(D) / (q.sum(axis=1).mean()))
    v = r.standard_normal((N, D))
    return {"q": q.astype(np.float32), "k": k.astype(np.float32), "v": v.astype(np.float32)}


def attention_cases(causal: bool) -> list[Case]:
    """Cases for 01 (causal=False) and 02 (causal=True); seeds differ between the two."""
    base = 100 if causal else 0
    cases = [
        Case("grow-3-blocks", ATTENTION, "M=20, N=48, D=16; every key block raises the row maxima",
             _growing(base + 1, 20, 48, 16, 16)),
        Case("grow-blocks-16x32", ATTENTION,
             "M=40, N=96, D=32, 16x32 tiles; every key block raises the row maxima",
             _growing(base + 2, 40, 96, 32, 32), block_m=16, block_n=32),
        Case("single-block", ATTENTION, "M=5, N=7, D=8: one key block, smaller than a tile",
             _qkv(base + 3, 5, 7, 8)),
        Case("ragged-37x53-d24", ATTENTION, "M=37, N=53, D=24: nothing is a multiple of a tile",
             _qkv(base + 4, 37, 53, 24)),
        Case("one-row-d64", ATTENTION, "M=1, N=40, D=64: a single query row",
             _qkv(base + 5, 1, 40, 64)),
        Case("m-gt-n-50x19", ATTENTION, "M=50, N=19, D=8: more queries than keys",
             _qkv(base + 6, 50, 19, 8)),
        Case("strided", ATTENTION,
             "M=33, N=45, D=24 with q transposed in memory and k, v every other column",
             _qkv(base + 7, 33, 45, 24), layout={"q": "transposed", "k": "sliced", "v": "sliced"}),
        Case("fp16-inputs", ATTENTION, "M=24, N=40, D=16, q/k/v in float16",
             _qkv(base + 8, 24, 40, 16, dtype=np.float16)),
        Case("scores-30x", ATTENTION, "M=24, N=64, D=16, scores 30x larger than usual",
             _qkv(base + 9, 24, 64, 16, magnitude=30.0)),
    ]  # fmt: skip
    if causal:
        cases += [
            Case("chapter-20x20", ATTENTION, "M=N=20, D=8: the chapter's causal example shape",
                 _qkv(base + 10, 20, 20, 8)),
            Case("square-64", ATTENTION, "M=N=64, D=16: four diagonal tiles",
                 _qkv(base + 11, 64, 64, 16)),
            Case("m-lt-n-24x56", ATTENTION, "M=24, N=56, D=16: fewer queries than keys",
                 _qkv(base + 12, 24, 56, 16)),
            Case("m-gt-n-56x24", ATTENTION, "M=56, N=24, D=24: more queries than keys",
                 _qkv(base + 13, 56, 24, 24)),
            Case("tiles-16x32", ATTENTION, "M=N=48, D=16, 16-row by 32-key tiles",
                 _qkv(base + 14, 48, 48, 16), block_m=16, block_n=32),
            Case("tiles-32x16", ATTENTION, "M=N=48, D=16, 32-row by 16-key tiles",
                 _qkv(base + 15, 48, 48, 16), block_m=32, block_n=16),
        ]  # fmt: skip
    return cases


def _logits(seed, M, E, shift=0.0, scale=1.0):
    return {"logits": (_rng(seed).standard_normal((M, E)) * scale + shift).astype(np.float32)}


def _ties(E):
    """All-zero rows (every expert ties) and rows where two experts share the maximum."""
    rows = np.zeros((6, E), dtype=np.float32)
    rows[3:, :] = _rng(E).standard_normal((3, E)).astype(np.float32)
    for r, (a, b) in zip(range(3, 6), ((0, 1), (1, E - 1), (E - 2, 0))):
        rows[r, a] = rows[r, b] = rows[r].max() + 1.0
    return {"logits": rows}


def gating_cases() -> list[Case]:
    return [
        Case("random-64x8", GATING, "64 tokens x 8 experts, random logits", _logits(200, 64, 8)),
        Case("random-33x16", GATING, "33 tokens x 16 experts, random logits", _logits(201, 33, 16)),
        Case("strided-rows", GATING, "20 tokens x 8 experts, every other row of a larger tensor",
             _logits(202, 20, 8), layout={"logits": "row-sliced"}),
        Case("negative-e5", GATING, "16 tokens x 5 experts (padded to 8), all logits negative",
             _logits(203, 16, 5, shift=-8.0)),
        Case("negative-e6", GATING, "16 tokens x 6 experts (padded to 8), all logits negative",
             _logits(204, 16, 6, shift=-8.0)),
        Case("negative-e12", GATING, "16 tokens x 12 experts (padded to 16), all logits negative",
             _logits(205, 16, 12, shift=-8.0)),
        Case("ties-e8", GATING, "6 tokens x 8 experts with exact ties (all-zero rows, shared maxima)",
             _ties(8)),
        Case("ties-e5", GATING, "6 tokens x 5 experts with exact ties (all-zero rows, shared maxima)",
             _ties(5)),
        Case("two-experts", GATING, "16 tokens x 2 experts", _logits(206, 16, 2, scale=2.0)),
    ]  # fmt: skip


def cases_for(stem: str) -> dict[str, Case]:
    """All cases of one exercise, by name."""
    if stem.startswith("01"):
        found = attention_cases(causal=False)
    elif stem.startswith("02"):
        found = attention_cases(causal=True)
    else:
        found = gating_cases()
    return {case.name: case for case in found}
