"""Sliding-window attention written apart from the exercise's skeleton, in the chapter's names:
both loop bounds computed up front, one `valid` mask per tile, the running maximum started at a
finite value so that a row with nothing visible in a tile never meets exp(-inf - -inf)."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def sliding_window_attn_kernel(
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
    WINDOW,
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
    ).to(tl.float32)

    m_i = tl.full((BLOCK_M,), -1.0e30, tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)

    # Oldest key of the block's first row, newest key of its last row.
    first_key = tl.maximum(0, pid * BLOCK_M + 1 - WINDOW)
    start = first_key - first_key % BLOCK_N
    stop = tl.minimum(N, (pid + 1) * BLOCK_M)
    for n in range(start, stop, BLOCK_N):
        cols = n + tl.arange(0, BLOCK_N)
        col_mask = cols < N
        k = tl.load(
            k_ptr + cols[:, None] * stride_kn + dims[None, :] * stride_kd,
            mask=col_mask[:, None] & dim_mask[None, :],
            other=0.0,
        ).to(tl.float32)
        v = tl.load(
            v_ptr + cols[:, None] * stride_vn + dims[None, :] * stride_vd,
            mask=col_mask[:, None] & dim_mask[None, :],
            other=0.0,
        ).to(tl.float32)

        s = tl.dot(q, tl.trans(k)) * scale
        age = rows[:, None] - cols[None, :]  # how far back the key is: 0 .. WINDOW - 1 is seen
        valid = (age >= 0) & (age < WINDOW) & col_mask[None, :]
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


def sliding_window_attention(q, k, v, window, BLOCK_M=16, BLOCK_N=16):
    M, D = q.shape
    N = k.shape[0]
    out = torch.empty((M, D), device=q.device, dtype=torch.float32)
    BLOCK_D = max(16, triton.next_power_of_2(D))
    grid = (triton.cdiv(M, BLOCK_M),)
    sliding_window_attn_kernel[grid](
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
        window,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_D=BLOCK_D,
    )
    return out
