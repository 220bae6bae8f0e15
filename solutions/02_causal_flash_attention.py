"""Exercise 02: causal masking inside the flash-attention loop (chapter 21.2).

Query row i may attend to keys 0..i only. Relative to one query block, key tiles come in three
kinds: entirely in the past (every pair visible), on the diagonal (the per-pair mask decides) and
entirely in the future (nothing visible). Future tiles can be skipped without loading them; that
saves work but is not what makes the result causal — the mask is.

Alignment when M != N is top-left: row i sees keys 0..i whatever N is, the same convention as
``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``. (FlashAttention >= 2.1
aligns bottom-right instead: there the last query row sees the last key.)

Reference: ``kata.oracles.attention(q, k, v, causal=True)``.
Run ``python 02_causal_flash_attention.py`` for the chapter's worked example.
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
def flash_attn_causal_kernel(
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

    q_ptrs = q_ptr + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0).to(tl.float32)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # Where the key loop stops. A compiled kernel cannot `continue` past future tiles, so the
    # bound of the loop is where skipping happens.
    # BEGIN SOLUTION
    hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)
    # END SOLUTION
    # BEGIN SKELETON
    # hi = N
    # END SKELETON
    for n0 in range(0, hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        col_ok = offs_n < N
        kv_mask = col_ok[:, None] & d_ok[None, :]
        k_ptrs = k_ptr + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
        v_ptrs = v_ptr + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
        k = tl.load(k_ptrs, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptrs, mask=kv_mask, other=0.0).to(tl.float32)

        # TODO(causal-mask): Query row i may only see keys 0..i; add that condition to `visible`.
        # Optionally, also lower `hi` above: key tiles past this block's last row are all future.
        # BEGIN SOLUTION
        visible = col_ok[None, :] & (offs_m[:, None] >= offs_n[None, :])
        # END SOLUTION
        # BEGIN SKELETON
        # visible = col_ok[None, :]
        # END SKELETON
        scores = tl.dot(q, tl.trans(k)) * scale
        scores = tl.where(visible, scores, float("-inf"))

        # Row i always sees key 0, so the first tile gives every row a finite maximum and
        # later fully masked rows of a tile cannot produce exp(-inf - -inf) = NaN.
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new

    out = acc / l_i[:, None]
    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(out_ptrs, out, mask=row_ok[:, None] & d_ok[None, :])


def causal_flash_attention(q, k, v, BLOCK_M=16, BLOCK_N=16):
    """Causal attention of q (M, D) over k, v (N, D), top-left aligned; float32 (M, D) out."""
    return host.launch_attention(
        flash_attn_causal_kernel, q, k, v, block_m=BLOCK_M, block_n=BLOCK_N
    )


if __name__ == "__main__":
    sys.exit(examples.causal_attention_example(causal_flash_attention, __file__))
