"""Exercise 04 (performance track): batched multi-head attention that is fast on a GPU.

The same online softmax as 01 and the same causal rule as 02, written the way fast kernels are:

* q, k, v are (B, H, S, D) in bf16 or fp16; the dot products run on tensor cores with fp32
  accumulation, and P is cast back to the input type before P @ V.
* exp2 instead of exp: exp(x) = exp2(x * log2(e)), so log2(e) is folded into the softmax scale
  once and every exponential becomes the GPU's native exp2.
* Causal attention splits the key loop in two stages: tiles left of the diagonal need no mask
  at all, only the diagonal tile does, and tiles right of it are never visited.
* Block sizes, warps and pipeline stages are autotuned per (S, D, causal).

Reference: ``kata.oracles.attention`` per (batch, head), and
``torch.nn.functional.scaled_dot_product_attention``.
"""

import sys
from pathlib import Path

try:  # The runtime picks GPU or interpreter, and must run before triton is imported.
    from kata import runtime
except ModuleNotFoundError:  # run as a script from a checkout of the kata
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kata import runtime

import triton
import triton.language as tl

from kata import examples, host

CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
    for bm, bn, w, s in (
        (128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3), (128, 32, 4, 4),
    )
]  # fmt: skip
if runtime.INTERPRETER:  # one configuration: the interpreter would time them all, slowly
    CONFIGS = [triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4, num_stages=1)]
# The CPU interpreter gets bf16 arithmetic wrong (it keeps raw 16-bit patterns), so there the
# tiles are widened to fp32 as they load; compiled kernels keep 16-bit tiles for tensor cores.
UPCAST = tl.constexpr(runtime.INTERPRETER)


@triton.jit
def _attend_tiles(
    acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, lo, hi, qk_scale,
    BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
):  # fmt: skip
    """The online-softmax loop over key tiles [lo, hi) for one query tile (base-2 exponent)."""
    for n0 in tl.range(lo, hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_base + offs_n[None, :] * stride_kn + offs_d[:, None])  # (D, BLOCK_N)
        if UPCAST:
            k = k.to(tl.float32)
        s = tl.dot(q, k)
        if MASKED:
            s = tl.where(offs_m[:, None] >= offs_n[None, :], s * qk_scale, float("-inf"))
        else:
            s = s * qk_scale
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :])
        if UPCAST:
            v = v.to(tl.float32)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(configs=CONFIGS, key=["S", "HEAD_DIM", "CAUSAL"])
@triton.jit
def attention_fwd_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr,
    stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
    stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
    H, S, sm_scale,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # Query tiles vary fastest, so neighbouring programs share one (batch, head)'s keys in L2.
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = q_ptr + b.to(tl.int64) * stride_qb + h * stride_qh
    k_base = k_ptr + b.to(tl.int64) * stride_kb + h * stride_kh
    v_base = v_ptr + b.to(tl.int64) * stride_vb + h * stride_vh
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :])
    if UPCAST:
        q = q.to(tl.float32)

    # TODO(exp2-scale): exp2(x) is exp(x * ln 2). For the loop's exp2 to compute the softmax's
    # exp, fold the conversion factor into the scale that multiplies every score.
    qk_scale = sm_scale
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # Stage 1: key tiles wholly left of this query tile's diagonal, no mask needed.
        acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs,
                                      offs_m, offs_d, 0, pid_m * BLOCK_M, qk_scale,
                                      BLOCK_N, False)  # fmt: skip
        # TODO(causal-stages): Stage 2 covers the diagonal: the key tiles from this query
        # tile's first row to its last, where only pairs with key <= query are visible.
    else:
        acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_vs,
                                      offs_m, offs_d, 0, S, qk_scale, BLOCK_N, False)  # fmt: skip
    out = acc / l_i[:, None]
    o_base = out_ptr + b.to(tl.int64) * stride_ob + h * stride_oh
    tl.store(
        o_base + offs_m[:, None] * stride_os + offs_d[None, :], out.to(out_ptr.dtype.element_ty)
    )


def fast_attention(q, k, v, causal=False):
    """softmax(q k^T / sqrt(D)) v for (B, H, S, D) bf16/fp16 tensors, optionally causal.

    S must be a multiple of 128 and D one of 16, 32, 64, 128 (the tiles are not masked); the
    last dimension must be contiguous. Returns a tensor like q.
    """
    return host.launch_fast_attention(attention_fwd_kernel, q, k, v, causal=causal)


if __name__ == "__main__":
    sys.exit(examples.fast_attention_example(fast_attention))
