"""Causal flash attention, written as the chapter (21.2) writes it: future key tiles skipped
with `continue` (which only the CPU interpreter accepts), the per-pair mask on the rest."""

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
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    row_mask = rows < M
    dim_mask = dims < D

    q = tl.load(
        q_ptr + rows[:, None] * stride_qm + dims[None, :] * stride_qd,
        mask=row_mask[:, None] & dim_mask[None, :],
        other=0.0,
    )

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)

    # Keys past this block's last row are in every row's future.
    max_col = (pid + 1) * BLOCK_M
    for start in range(0, N, BLOCK_N):
        if start >= max_col:
            continue
        cols = start + tl.arange(0, BLOCK_N)
        col_mask = cols < N
        k = tl.load(
            k_ptr + cols[:, None] * stride_kn + dims[None, :] * stride_kd,
            mask=col_mask[:, None] & dim_mask[None, :],
            other=0.0,
        )
        v = tl.load(
            v_ptr + cols[:, None] * stride_vn + dims[None, :] * stride_vd,
            mask=col_mask[:, None] & dim_mask[None, :],
            other=0.0,
        )

        s = tl.dot(q, tl.trans(k)) * scale
        valid = (rows[:, None] >= cols[None, :]) & col_mask[None, :]
        s = tl.where(valid, s, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = alpha * l_i + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc += tl.dot(p, v)
        m_i = m_new

    out = acc / l_i[:, None]
    tl.store(
        out_ptr + rows[:, None] * stride_om + dims[None, :] * stride_od,
        out,
        mask=row_mask[:, None] & dim_mask[None, :],
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
