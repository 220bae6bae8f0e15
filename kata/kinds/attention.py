"""2-D attention (01, 02): the chapter's flash attention kernel, causal or not.

Its oracle holds the whole (M, N) score matrix in float64, which is exactly what flash attention
avoids; at the small sizes used for checking that costs nothing and leaves no room for a shared
mistake. The kinds built on it (window_attention, bhsd_attention, split_kv_merge's decode
reference) call this oracle.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch
import triton

from kata import catalogue, runtime
from kata.examples import contrast, draw_qkv, header, row, verdict
from kata.kinds.base import Interface, f64, poisoned
from kata.kinds.launch import _require_device, _require_tensor

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
        launch_attention(
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


# ---- the chapter's worked examples (21.1, 21.2), run by 01's and 02's files ----------------


def flash_attention_example(flash_attention) -> int:
    """21.1: M=17, N=23, D=8 (not multiples of any block) against naive attention."""
    header("21.1 flash attention core: M=17, N=23, D=8, seed 0")
    q, k, v, dev = draw_qkv(17, 23, 8)
    out = flash_attention(*dev).cpu()
    ok = verdict(
        "kernel vs naive softmax attention",
        out,
        attention(q, k, v),
        1e-4,
        chapter="about 2e-07 (with 4 x 4 blocks), allclose",
    )
    return 0 if ok else 1


def causal_attention_example(causal_flash_attention, caller: str | None = None) -> int:
    """21.2: M=N=20, D=8; the causal kernel, and the non-causal kernel on the causal task."""
    header("21.2 causal flash attention: M=N=20, D=8, seed 0")
    q, k, v, dev = draw_qkv(20, 20, 8)
    causal_ref = attention(q, k, v, causal=True)
    full_ref = attention(q, k, v)
    causal = causal_flash_attention(*dev).cpu()
    ok = verdict("causal kernel vs causal oracle", causal, causal_ref, 1e-4, chapter="allclose")
    # Row 0 sees key 0 alone: its softmax is the single weight 1, so its output is v[0] itself.
    print("  row 0 may see key 0 only, so its causal output is v[0] exactly:")
    row("v[0]", v[0])
    row("causal kernel, out[0]", causal[0], f"   equal to v[0]: {torch.equal(causal[0], v[0])}")

    # The non-causal kernel of 21.1 (the sibling file 01) is bug-free, yet wrong for this task.
    # This part demonstrates the chapter's point; it does not judge this file, so it does not
    # change the exit status (an unfinished 01 would otherwise fail a finished 02).
    folder = Path(caller or sys.argv[0]).resolve().parent
    sibling = folder / catalogue.EXERCISE_LIST[0].filename
    if sibling.exists():
        noncausal = catalogue.load_file(sibling).flash_attention(*dev).cpu()
        print(
            f"  the non-causal kernel from {sibling.parent.name}/{sibling.name}, on the causal task:"
        )
        row("non-causal kernel, out[0]", noncausal[0], "   a blend of all 20 rows of v")
        contrast(
            "non-causal kernel vs causal oracle",
            noncausal,
            causal_ref,
            1e-4,
            chapter="of order 1, not float noise; not allclose",
        )
        if not verdict(
            "non-causal kernel vs non-causal oracle", noncausal, full_ref, 1e-4, chapter="allclose"
        ):
            print(f"  (that kernel is not right yet even for its own task: finish {sibling.name})")
    return 0 if ok else 1


# ---- host side: checks and launches (``kata.host`` gives them to the kernel files) ----------

# What kata.host gives the kernel files, by name.
HOST = (
    "check_attention_inputs",
    "attention_blocks",
    "launch_attention",
)


def check_attention_inputs(q, k, v) -> None:
    """Raise TypeError/ValueError naming the first problem with q (M, D), k and v (N, D)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        _require_tensor(name, x)
    if q.shape[1] != k.shape[1]:
        raise ValueError(
            f"q and k must share the head dimension, got {q.shape[1]} and {k.shape[1]}"
        )
    if k.shape[0] != v.shape[0]:
        raise ValueError(f"k and v must have the same length, got {k.shape[0]} and {v.shape[0]}")
    if v.shape[1] != q.shape[1]:
        raise ValueError(f"v must have head dimension {q.shape[1]} like q, got {v.shape[1]}")
    if q.shape[1] == 0:
        raise ValueError("the head dimension D must be at least 1")
    if k.shape[0] == 0 and q.shape[0] > 0:
        raise ValueError("k and v are empty: attention over no keys is undefined")
    _require_device(q=q, k=k, v=v)


def attention_blocks(D: int, block_m: int = 16, block_n: int = 16) -> tuple[int, int, int]:
    """Block sizes for a head dimension D. A compiled tl.dot needs its inner (K) dimension to be
    at least 16 (Triton 3.6 on an H200); BLOCK_D is K of q @ k^T and BLOCK_N of p @ v, and all
    three stay >= 16 so that both backends run the same tiles."""
    block_d = max(runtime.MIN_DOT_BLOCK, triton.next_power_of_2(D))
    return block_m, block_n, block_d


def launch_attention(kernel, q, k, v, *, block_m: int = 16, block_n: int = 16, out=None, **extra):
    """Check the inputs, then run an attention ``kernel`` with the chapter's signature.

    ``out`` may be a preallocated (M, D) float32 tensor (the grader passes one filled with a
    poison value). ``extra`` keyword arguments go to the kernel as they are: an interface with
    more parameters than the chapter's (a sliding ``WINDOW``, say) passes them by name.
    """
    check_attention_inputs(q, k, v)
    M, D = q.shape
    N = k.shape[0]
    if out is None:
        out = torch.empty((M, D), dtype=torch.float32, device=q.device)
    if M == 0:
        return out
    BLOCK_M, BLOCK_N, BLOCK_D = attention_blocks(D, block_m, block_n)
    grid = (triton.cdiv(M, BLOCK_M),)
    kernel[grid](
        q,
        k,
        v,
        out,
        M,
        N,
        D,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        out.stride(0),
        out.stride(1),
        1.0 / math.sqrt(D),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_D=BLOCK_D,
        **extra,
    )
    return out
