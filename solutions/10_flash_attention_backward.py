"""Exercise 10 (extensions track): the backward pass of flash attention, FlashAttention-2 style.

The forward computed ``O = softmax(S) V`` with ``S = Q K^T * scale`` and kept, per query row,
only ``lse = ln sum_j exp(S_ij)``, the natural log of the softmax denominator. Given the
gradient of the loss with respect to the output, ``dO``, the backward returns ``dQ``, ``dK`` and
``dV`` without ever holding the (S, S) matrices of probabilities or their gradients:

* ``P = exp(S - lse)``: one tile of the softmax, recomputed from the scores and the saved lse,
  with no running maximum (the forward already found each row's denominator).
* ``dV = P^T dO`` and ``dP = dO V^T``.
* ``dS = P * (dP - delta)``, the softmax's gradient, where ``delta_i = sum_j P_ij dP_ij``; that
  sum equals ``dO_i . O_i``, a dot product of two rows the backward already has, which the
  first kernel computes for every row before the others start.
* ``S`` is the raw scores ``Q K^T`` times ``scale``, so the gradients of ``Q`` and ``K`` carry
  that factor once: ``dQ = dS K * scale`` and ``dK = dS^T Q * scale``.

Three kernels: ``attn_bwd_preprocess_kernel`` writes delta; ``attn_bwd_dkdv_kernel`` gives one
program to each (batch * head, key block), which walks the query blocks and sums that key
block's ``dK`` and ``dV``; ``attn_bwd_dq_kernel`` gives one program to each query block, which
walks the key blocks and sums ``dQ``. Each output has one program that owns it, so no program
adds into another's rows: no atomics, and the interpreter and the GPU add in the same order.
Causal attention (top-left aligned, as in 02) starts a key block's walk at the query block that
holds its diagonal, and ends a query block's walk after its own last row.

Reference: ``kata.kinds.attention_backward.backward`` (float64, whole matrices).
Run ``python 10_flash_attention_backward.py`` for the worked example.
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

import torch
import triton
import triton.language as tl

from kata import examples
from kata.kinds import attention_backward as backward_kind

# ---- the kernels -------------------------------------------------------------------------------


@triton.jit
def attn_bwd_preprocess_kernel(
    o_ptr,
    do_ptr,
    delta_ptr,
    S,
    D,
    stride_bh,
    stride_s,
    BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """delta_i = sum_d O_id dO_id for BLOCK_M rows of one (batch, head)."""
    bh = tl.program_id(0).to(tl.int64)
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m < S)[:, None] & (offs_d < D)[None, :]
    offs = bh * stride_bh + offs_m[:, None] * stride_s + offs_d[None, :]
    o = tl.load(o_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(delta_ptr + bh * S + offs_m, tl.sum(o * do, axis=1), mask=offs_m < S)


@triton.jit
def attn_bwd_dkdv_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    do_ptr,
    lse_ptr,
    delta_ptr,
    dk_ptr,
    dv_ptr,
    S,
    D,
    stride_bh,
    stride_s,
    scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """dK and dV of BLOCK_N keys of one (batch, head), summed over the query blocks."""
    bh = tl.program_id(0).to(tl.int64)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    col_ok = offs_n < S
    d_ok = offs_d < D
    base = bh * stride_bh
    lse_ptr += bh * S
    delta_ptr += bh * S

    # This program's keys and values stay on chip for the whole walk. Padded keys and head
    # dimensions load zeros; values are cast to fp32 as they load, as in 01.
    kv_mask = col_ok[:, None] & d_ok[None, :]
    kv_offs = base + offs_n[:, None] * stride_s + offs_d[None, :]
    k = tl.load(k_ptr + kv_offs, mask=kv_mask, other=0.0).to(tl.float32)
    v = tl.load(v_ptr + kv_offs, mask=kv_mask, other=0.0).to(tl.float32)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)

    # Causal: query rows above this block's first key see none of its keys, so the walk starts
    # at the query block holding that key (rounded down to a whole query block).
    lo = 0
    if CAUSAL:
        lo = (pid_n * BLOCK_N) // BLOCK_M * BLOCK_M
    for m0 in range(lo, S, BLOCK_M):
        offs_m = m0 + tl.arange(0, BLOCK_M)
        row_ok = offs_m < S
        q_mask = row_ok[:, None] & d_ok[None, :]
        q_offs = base + offs_m[:, None] * stride_s + offs_d[None, :]
        q = tl.load(q_ptr + q_offs, mask=q_mask, other=0.0).to(tl.float32)
        do = tl.load(do_ptr + q_offs, mask=q_mask, other=0.0).to(tl.float32)
        lse = tl.load(lse_ptr + offs_m, mask=row_ok, other=0.0)
        delta = tl.load(delta_ptr + offs_m, mask=row_ok, other=0.0)

        # The pairs that took part in the forward: real rows and keys, and (causal) key <= row.
        visible = row_ok[:, None] & col_ok[None, :]
        if CAUSAL:
            visible = visible & (offs_m[:, None] >= offs_n[None, :])
        qk = tl.dot(q, tl.trans(k), input_precision="ieee")

        # TODO(recompute-p): The forward's probabilities for this tile, recomputed: the scaled
        # scores turned into probabilities with the forward's saved log-sum-exp (one value per
        # query row), and exactly 0 for every pair that is not visible.
        # BEGIN SOLUTION
        p = tl.where(visible, tl.exp(qk * scale - lse[:, None]), 0.0)
        # END SOLUTION
        # BEGIN SKELETON
        # p = tl.where(visible, tl.exp(qk * scale), 0.0)
        # END SKELETON

        dv += tl.dot(tl.trans(p), do, input_precision="ieee")
        dp = tl.dot(do, tl.trans(v), input_precision="ieee")

        # TODO(ds): The gradient with respect to the raw scores q k^T. The softmax's gradient
        # is not p times dp alone: every probability of a row depends on every score of that
        # row, through the denominator. Then the chain rule through the scale.
        # BEGIN SOLUTION
        ds = p * (dp - delta[:, None]) * scale
        # END SOLUTION
        # BEGIN SKELETON
        # ds = p * dp * scale
        # END SKELETON

        dk += tl.dot(tl.trans(ds), q, input_precision="ieee")

    tl.store(dk_ptr + kv_offs, dk, mask=kv_mask)
    tl.store(dv_ptr + kv_offs, dv, mask=kv_mask)


@triton.jit
def attn_bwd_dq_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    do_ptr,
    lse_ptr,
    delta_ptr,
    dq_ptr,
    S,
    D,
    stride_bh,
    stride_s,
    scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """dQ of BLOCK_M query rows of one (batch, head), summed over the key blocks."""
    bh = tl.program_id(0).to(tl.int64)
    pid_m = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < S
    d_ok = offs_d < D
    base = bh * stride_bh

    q_mask = row_ok[:, None] & d_ok[None, :]
    q_offs = base + offs_m[:, None] * stride_s + offs_d[None, :]
    q = tl.load(q_ptr + q_offs, mask=q_mask, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + q_offs, mask=q_mask, other=0.0).to(tl.float32)
    lse = tl.load(lse_ptr + bh * S + offs_m, mask=row_ok, other=0.0)
    delta = tl.load(delta_ptr + bh * S + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # Causal: as in 02, the walk ends after this block's last row; the key tiles beyond it hold
    # only future keys.
    hi = S
    if CAUSAL:
        hi = tl.minimum(S, (pid_m + 1) * BLOCK_M)
    for n0 in range(0, hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        col_ok = offs_n < S
        kv_mask = col_ok[:, None] & d_ok[None, :]
        kv_offs = base + offs_n[:, None] * stride_s + offs_d[None, :]
        k = tl.load(k_ptr + kv_offs, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + kv_offs, mask=kv_mask, other=0.0).to(tl.float32)

        visible = row_ok[:, None] & col_ok[None, :]
        if CAUSAL:
            visible = visible & (offs_m[:, None] >= offs_n[None, :])
        qk = tl.dot(q, tl.trans(k), input_precision="ieee")

        # TODO(recompute-p): The same probabilities as in the dK, dV kernel, for this tile.
        # BEGIN SOLUTION
        p = tl.where(visible, tl.exp(qk * scale - lse[:, None]), 0.0)
        # END SOLUTION
        # BEGIN SKELETON
        # p = tl.where(visible, tl.exp(qk * scale), 0.0)
        # END SKELETON

        dp = tl.dot(do, tl.trans(v), input_precision="ieee")

        # TODO(ds): The same gradient with respect to the raw scores as in the dK, dV kernel.
        # BEGIN SOLUTION
        ds = p * (dp - delta[:, None]) * scale
        # END SOLUTION
        # BEGIN SKELETON
        # ds = p * dp * scale
        # END SKELETON

        dq += tl.dot(ds, k, input_precision="ieee")

    tl.store(dq_ptr + q_offs, dq, mask=q_mask)


# ---- the launcher ------------------------------------------------------------------------------


def flash_attention_backward(q, k, v, o, do, lse, causal=False, BLOCK_M=16, BLOCK_N=16):
    """dQ, dK, dV (float32, shaped like q) of attention over (B, H, S, D) tensors.

    ``o`` is the forward's output and ``lse`` its natural-log log-sum-exp of the scaled scores,
    (B, H, S); ``do`` is the gradient of the loss with respect to ``o``. Any floating dtype; the
    kernels read contiguous copies and compute in fp32 (``kata.kinds.attention_backward.launch``
    checks the inputs and runs the three kernels).
    """
    return backward_kind.launch(
        attn_bwd_preprocess_kernel,
        attn_bwd_dkdv_kernel,
        attn_bwd_dq_kernel,
        q,
        k,
        v,
        o,
        do,
        lse,
        causal=causal,
        block_m=BLOCK_M,
        block_n=BLOCK_N,
    )


# ---- the worked example ------------------------------------------------------------------------


def worked_example() -> int:
    """B=1, H=2, S=37, D=16, seed 0, causal and not: the kernels against the float64
    backward. S=37 is two whole 16-row blocks and a ragged third."""
    B, H, S, D = 1, 2, 37, 16
    print(
        f"10 flash-attention backward: B={B}, H={H}, S={S}, D={D}, seed 0  [{runtime.describe()}]"
    )
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(B, H, S, D) for _ in range(4))
    ok = True
    for causal in (False, True):
        o, lse = backward_kind.forward(q, k, v, causal)
        want = backward_kind.backward(q, k, v, do, causal)
        o, lse = torch.from_numpy(o), torch.from_numpy(lse)
        inputs = [x.to(torch.float32).to(runtime.DEVICE) for x in (q, k, v, o, do, lse)]
        got = flash_attention_backward(*inputs, causal=causal)
        kind = "causal" if causal else "non-causal"
        for name, g in zip(("dq", "dk", "dv"), got):
            ok &= examples.verdict(f"{kind} {name} vs float64", g.cpu(), want[name], 1e-4)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(worked_example())
