"""Exercise 01: the core loop of flash attention (chapter 21.1).

Compute softmax(Q K^T * scale) V without ever holding the (M, N) score matrix. Each program owns
BLOCK_M query rows and walks the keys BLOCK_N at a time, keeping three running values per row:
the largest score seen so far ``m_i``, the softmax denominator ``l_i`` and the weighted sum of
values ``acc``. Both sums are kept relative to ``m_i``; whenever the maximum grows, whatever was
summed before must be scaled down by ``alpha = exp(m_old - m_new)``.

Reference: ``kata.oracles.attention`` (float64, whole score matrix).
Run ``python 01_flash_attention_core.py`` for the chapter's worked example.
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


@triton.jit
def flash_attn_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    M,
    N,
    D,
    stride_qm,
    stride_qd,
    stride_kn,
    stride_kd,
    stride_vn,
    stride_vd,
    stride_om,
    stride_od,
    scale,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid_m = tl.program_id(0)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < M
    d_ok = offs_d < D

    # The query block is loaded once and reused against every key block. Padded rows and head
    # dimensions load zeros, which add nothing to the dot products. Values are cast to fp32 right
    # after loading: the CPU interpreter mishandles bf16 arithmetic.
    q_ptrs = q_ptr + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0).to(tl.float32)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    for n0 in range(0, N, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        col_ok = offs_n < N
        kv_mask = col_ok[:, None] & d_ok[None, :]
        k_ptrs = k_ptr + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
        v_ptrs = v_ptr + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
        k = tl.load(k_ptrs, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptrs, mask=kv_mask, other=0.0).to(tl.float32)

        # Scores for this tile; keys past N get -inf so that exp() turns them into exact zeros.
        scores = tl.dot(q, tl.trans(k)) * scale
        scores = tl.where(col_ok[None, :], scores, float("-inf"))

        # Online softmax: move the reference point to the new row maximum. On the first block
        # m_i is -inf and alpha is 0, which also wipes the (empty) sums.
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        # TODO(rescale-acc): Everything already summed into acc was weighted against the old
        # maximum. Bring acc to the new maximum the same way l_i was, before this tile is added.
        acc += tl.dot(p, v)
        m_i = m_new

    out = acc / l_i[:, None]
    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(out_ptrs, out, mask=row_ok[:, None] & d_ok[None, :])


def flash_attention(q, k, v, BLOCK_M=16, BLOCK_N=16):
    """Attention of q (M, D) over k, v (N, D); returns a float32 (M, D) tensor.

    Any floating dtype and any strides are accepted. Blocks are at least 16 wide: both dots
    reduce over a block (``BLOCK_D`` for q @ k^T, ``BLOCK_N`` for p @ v), and a compiled
    ``tl.dot`` needs a reduction dimension of at least 16 (seen with triton 3.6 on an H200).
    The interpreter accepts less, but uses the same blocks so that the two backends agree.
    """
    return host.launch_attention(flash_attn_kernel, q, k, v, block_m=BLOCK_M, block_n=BLOCK_N)


if __name__ == "__main__":
    sys.exit(examples.flash_attention_example(flash_attention))
