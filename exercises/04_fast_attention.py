"""Exercise 04 (performance track): batched multi-head attention that is fast on a GPU.

The same online softmax as 01 and the same causal rule as 02, written the way fast kernels are:

* q, k, v are (B, H, S, D) in bf16 or fp16; the dot products run on tensor cores with fp32
  accumulation, and P is cast back to the input type before P @ V.
* exp2 instead of exp: exp(x) = exp2(x * log2(e)), so log2(e) is folded into the softmax scale
  once and every exponential becomes the GPU's native exp2.
* Causal attention splits the key loop in two stages: tiles left of the diagonal need no mask
  at all, only the tiles on it do (the BLOCK_M keys at this query tile's own rows: two key
  tiles at 128 x 64), and tiles right of it are never visited. The query tiles with the most
  work start first, so the short ones fill in at the end.
* Any S: only the last key tile masks the columns past S.
* Two ways to bring K and V tiles in, chosen by the autotuner with the block sizes, warps and
  pipeline stages per (S, D, causal): plain pointer loads, or tensor descriptors (Hopper's TMA
  engine copies a whole tile into shared memory in one instruction). A program makes its
  descriptors on the device, which costs a few microseconds: that pays off only when the key
  loop is long.

Reference: ``kata.oracles.attention`` per (batch, head), and
``torch.nn.functional.scaled_dot_product_attention``.
"""

import sys
from pathlib import Path

try:
    from kata import runtime
except ModuleNotFoundError:  # run as a script from a checkout of the kata
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kata import runtime

# The GPU, or Triton's CPU interpreter without one: chosen before any kernel is defined.
runtime.configure()

import triton
import triton.language as tl

from kata import examples, host

# fmt: off
CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "TMA": tma}, num_warps=w, num_stages=s)
    for bm, bn, w, s, tma in (
        (128, 64, 4, 3, False), (128, 64, 8, 3, False), (64, 64, 4, 3, False), (128, 128, 8, 3, False),
        (128, 64, 4, 2, True), (64, 64, 4, 2, True), (64, 128, 4, 2, True),
    )
]
# fmt: on


def _whole_key_tiles(configs, named_args, **kwargs):
    """The causal stages split keys at multiples of BLOCK_M and step by BLOCK_N, so for causal
    attention BLOCK_N must divide BLOCK_M, or stage 1 would load (unmasked) keys that belong to
    the diagonal."""
    causal = kwargs.get("CAUSAL", named_args.get("CAUSAL"))
    return [c for c in configs if not causal or c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0]


if runtime.INTERPRETER:  # one configuration: the interpreter would time them all, slowly
    CONFIGS = [
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "TMA": True}, num_warps=4, num_stages=1)
    ]
# The CPU interpreter gets bf16 arithmetic wrong (it keeps raw 16-bit patterns), so there the
# tiles are widened to fp32 as they load; compiled kernels keep 16-bit tiles for tensor cores.
UPCAST = tl.constexpr(runtime.INTERPRETER)
# What a key tile needs masked: nothing, the causal diagonal, or the columns past S.
NO_MASK, DIAGONAL, PAST_S = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)


@triton.jit
def _load_tile(
    src, row0, offs_d, stride, n_rows, BLOCK: tl.constexpr, TMA: tl.constexpr, MASKED: tl.constexpr
):
    """Rows [row0, row0 + BLOCK) of a head's (S, D) matrix: a descriptor, or a base pointer."""
    if TMA:
        tile = src.load([row0, 0])  # rows past S arrive as zeros
    else:
        offs = row0 + tl.arange(0, BLOCK)
        ptrs = src + offs[:, None] * stride + offs_d[None, :]
        if MASKED:
            tile = tl.load(ptrs, mask=offs[:, None] < n_rows, other=0.0)
        else:
            tile = tl.load(ptrs)
    if UPCAST:
        tile = tile.to(tl.float32)
    return tile


@triton.jit
def _attend_tiles(
    acc,
    l_i,
    m_i,
    q,
    k_src,
    v_src,
    stride_kn,
    stride_vn,
    offs_m,
    offs_d,
    lo,
    hi,
    S,
    qk_scale,
    BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,
    TMA: tl.constexpr,
):
    """The online-softmax loop over key tiles [lo, hi) for one query tile (base-2 exponent)."""
    for n0 in tl.range(lo, hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        k = _load_tile(k_src, n0, offs_d, stride_kn, S, BLOCK_N, TMA, MASK != NO_MASK)
        s = tl.dot(q, k.T)
        if MASK == DIAGONAL:
            s = tl.where(offs_m[:, None] >= offs_n[None, :], s, float("-inf"))
        if MASK == PAST_S:
            s = tl.where(offs_n[None, :] < S, s, float("-inf"))
        # The scale is positive, so the row maximum can be taken before scaling; then scaling
        # and subtracting it is one fused multiply-add per score.
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = _load_tile(v_src, n0, offs_d, stride_vn, S, BLOCK_N, TMA, MASK != NO_MASK)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(
    configs=CONFIGS,
    key=["S", "HEAD_DIM", "CAUSAL"],
    prune_configs_by={"early_config_prune": _whole_key_tiles},
)
@triton.jit
def attention_fwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    stride_qb,
    stride_qh,
    stride_qs,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    stride_ob,
    stride_oh,
    stride_os,
    H,
    S,
    sm_scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    TMA: tl.constexpr = False,
):
    # Query tiles vary fastest, so neighbouring programs share one (batch, head)'s keys in L2.
    pid_m = tl.program_id(0)
    if CAUSAL:  # the last query tiles see the most keys: start them first
        pid_m = tl.num_programs(0) - 1 - pid_m
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = q_ptr + b.to(tl.int64) * stride_qb + h * stride_qh
    k_src = k_ptr + b.to(tl.int64) * stride_kb + h * stride_kh
    v_src = v_ptr + b.to(tl.int64) * stride_vb + h * stride_vh
    if TMA:  # one descriptor per (S, D) matrix of this head; rows past S read as zeros
        k_src = tl.make_tensor_descriptor(
            k_src, shape=[S, HEAD_DIM], strides=[stride_ks, 1], block_shape=[BLOCK_N, HEAD_DIM]
        )
        v_src = tl.make_tensor_descriptor(
            v_src, shape=[S, HEAD_DIM], strides=[stride_vs, 1], block_shape=[BLOCK_N, HEAD_DIM]
        )
    q_mask = offs_m[:, None] < S
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :], mask=q_mask, other=0.0)
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
        acc, l_i, m_i = _attend_tiles(
            acc,
            l_i,
            m_i,
            q,
            k_src,
            v_src,
            stride_ks,
            stride_vs,
            offs_m,
            offs_d,
            0,
            pid_m * BLOCK_M,
            S,
            qk_scale,
            BLOCK_N,
            NO_MASK,
            TMA,
        )
        # TODO(causal-stages): Stage 2 covers the diagonal: the key tiles from this query
        # tile's first row to its last, where only pairs with key <= query are visible.
        # (Keys past S need no mask of their own: they lie right of every real query.)
    else:
        # Whole key tiles without a mask; a last, partial tile masks the columns past S.
        s_full = S - S % BLOCK_N
        acc, l_i, m_i = _attend_tiles(
            acc,
            l_i,
            m_i,
            q,
            k_src,
            v_src,
            stride_ks,
            stride_vs,
            offs_m,
            offs_d,
            0,
            s_full,
            S,
            qk_scale,
            BLOCK_N,
            NO_MASK,
            TMA,
        )
        acc, l_i, m_i = _attend_tiles(
            acc,
            l_i,
            m_i,
            q,
            k_src,
            v_src,
            stride_ks,
            stride_vs,
            offs_m,
            offs_d,
            s_full,
            S,
            S,
            qk_scale,
            BLOCK_N,
            PAST_S,
            TMA,
        )
    out = acc / l_i[:, None]
    o_base = out_ptr + b.to(tl.int64) * stride_ob + h * stride_oh
    tl.store(
        o_base + offs_m[:, None] * stride_os + offs_d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=q_mask,
    )


def fast_attention(q, k, v, causal=False):
    """softmax(q k^T / sqrt(D)) v for (B, H, S, D) bf16/fp16 tensors, optionally causal.

    D must be one of 16, 32, 64, 128; any S >= 1. The last dimension must be contiguous and the
    other strides multiples of 16 bytes (what a tensor descriptor needs). Returns a tensor like q.
    """
    return host.run_fast_attention(attention_fwd_kernel, q, k, v, causal=causal)


if __name__ == "__main__":
    sys.exit(examples.fast_attention_example(fast_attention))
