"""The chapter's causal flash attention kernel (21.2), written here from the chapter's
description: 21.1's loop with the per-pair mask `valid` on every tile it visits, and key tiles
from `max_col` on skipped with `continue` (which only the CPU interpreter accepts)."""

import math

import torch
import triton
import triton.language as tl


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
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d_idx = tl.arange(0, BLOCK_D)
    row_mask = rows < M
    d_mask = d_idx < D

    q = tl.load(
        q_ptr + rows[:, None] * stride_qm + d_idx[None, :] * stride_qd,
        mask=row_mask[:, None] & d_mask[None, :],
        other=0.0,
    )

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)

    # Keys from here on are in the future of every row of this block.
    max_col = (pid_m + 1) * BLOCK_M
    for n0 in range(0, N, BLOCK_N):
        if n0 >= max_col:
            continue
        cols = n0 + tl.arange(0, BLOCK_N)
        col_mask = cols < N
        k = tl.load(
            k_ptr + cols[:, None] * stride_kn + d_idx[None, :] * stride_kd,
            mask=col_mask[:, None] & d_mask[None, :],
            other=0.0,
        )
        v = tl.load(
            v_ptr + cols[:, None] * stride_vn + d_idx[None, :] * stride_vd,
            mask=col_mask[:, None] & d_mask[None, :],
            other=0.0,
        )

        scores = tl.dot(q, tl.trans(k)) * scale
        valid = (rows[:, None] >= cols[None, :]) & col_mask[None, :]
        scores = tl.where(valid, scores, float("-inf"))

        m_ij = tl.max(scores, 1)
        m_new = tl.maximum(m_i, m_ij)
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = alpha * l_i + tl.sum(p, 1)
        acc = alpha[:, None] * acc + tl.dot(p, v)
        m_i = m_new

    out = acc / l_i[:, None]
    tl.store(
        out_ptr + rows[:, None] * stride_om + d_idx[None, :] * stride_od,
        out,
        mask=row_mask[:, None] & d_mask[None, :],
    )


def causal_flash_attention(q, k, v, BLOCK_M=4, BLOCK_N=4):
    M, D = q.shape
    N = k.shape[0]
    out = torch.empty((M, D), device=q.device, dtype=torch.float32)
    BLOCK_D = triton.next_power_of_2(D)
    grid = (triton.cdiv(M, BLOCK_M),)
    flash_attn_causal_kernel[grid](
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
    )
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    M = N = 20
    D = 8
    q, k, v = torch.randn(M, D), torch.randn(N, D), torch.randn(N, D)
    scores = q @ k.T / math.sqrt(D)
    scores = scores.masked_fill(torch.ones(M, N, dtype=torch.bool).triu(1), float("-inf"))
    ref = torch.softmax(scores, dim=-1) @ v
    out = causal_flash_attention(q, k, v)
    print("max abs diff:", (out - ref).abs().max().item())
    print("allclose:", torch.allclose(out, ref, atol=1e-4))
