"""Exercise 06 (extensions track): causal attention over a sliding window of keys.

Query row i sees only the WINDOW most recent keys, i - WINDOW + 1 .. i (itself included): the
causal mask of exercise 02 gets a second, lower edge. Local attention of this kind (Longformer,
Mistral 7B) caps what one row costs at WINDOW keys, however long the sequence grows.

Relative to one query block (rows r0 .. r0 + BLOCK_M - 1), key tiles now come in five kinds:
entirely before every row's window (skipped: nothing there is visible), on the window's lower
edge (the per-pair mask decides), inside every row's window, on the diagonal (the mask decides
again), and entirely in the future (skipped, as in 02). Skipping is what makes the cost
O(M * WINDOW) instead of O(M * N); the per-pair mask is what makes the answer right.

A row's window can begin after the first tile the loop visits, so, unlike in 02, a row may see
no key at all in a tile; the given code keeps such a row out of exp(-inf - -inf) = NaN.

Alignment is top-left, as in 02: row i sees keys max(0, i - WINDOW + 1) .. i whatever N is, and
WINDOW >= M is plain causal attention. (For M = N, FlashAttention's window_size=(WINDOW - 1, 0)
is the same mask; it aligns bottom-right when M != N.)

Reference: ``kata.oracles.attention(q, k, v, window=WINDOW)``.
Run ``python 06_sliding_window_attention.py`` for the worked example.
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

from kata import examples, host, oracles


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

    # The key loop runs over tiles lo .. hi. As in 02, it ends after this block's last row (the
    # tiles beyond hold only future keys); a compiled kernel cannot `continue`, so the bounds
    # are where skipping happens.
    hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)
    lo = 0
    for n0 in range(lo, hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        col_ok = offs_n < N
        kv_mask = col_ok[:, None] & d_ok[None, :]
        k_ptrs = k_ptr + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
        v_ptrs = v_ptr + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
        k = tl.load(k_ptrs, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptrs, mask=kv_mask, other=0.0).to(tl.float32)

        # TODO(window-mask): Row i may only see the WINDOW keys i - WINDOW + 1 .. i. `visible`
        # below already hides padded and future keys; add the window's lower edge. Then raise
        # `lo` above the loop, so that key tiles left of every row's window are never loaded.
        visible = col_ok[None, :] & (offs_m[:, None] >= offs_n[None, :])
        scores = tl.dot(q, tl.trans(k)) * scale
        scores = tl.where(visible, scores, float("-inf"))

        # A row whose window begins in a later tile sees nothing here: its maximum is still
        # -inf, and exp(-inf - -inf) would be NaN. Such a row is measured against 0 instead
        # (its p and alpha are then 0) until a tile holds one of its keys. Every row sees at
        # least its own key, so it ends with a finite maximum.
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_ref)
        p = tl.exp(scores - m_ref[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new

    out = acc / l_i[:, None]
    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(out_ptrs, out, mask=row_ok[:, None] & d_ok[None, :])


def sliding_window_attention(q, k, v, window, BLOCK_M=16, BLOCK_N=16):
    """Causal attention of q (M, D) over k, v (N, D) where row i sees keys i - window + 1 .. i
    (top-left aligned); float32 (M, D) out."""
    if int(window) < 1:
        raise ValueError(f"the window must hold at least one key (the row's own), got {window}")
    return host.launch_attention(
        sliding_window_attn_kernel, q, k, v, block_m=BLOCK_M, block_n=BLOCK_N, WINDOW=int(window)
    )


def worked_example() -> int:
    """M = N = 48, D = 16, WINDOW = 10, seed 0: the kernel against the windowed oracle; then
    plain causal attention (the window ignored, what the untouched skeleton computes)."""
    M = N = 48
    D, W = 16, 10
    print(
        f"06 sliding-window attention: M=N={M}, D={D}, WINDOW={W}, seed 0  [{runtime.describe()}]"
    )
    torch.manual_seed(0)
    q, k, v = torch.randn(M, D), torch.randn(N, D), torch.randn(N, D)
    dev = [x.to(runtime.DEVICE) for x in (q, k, v)]
    windowed, causal = oracles.attention(q, k, v, window=W), oracles.attention(q, k, v, causal=True)

    out = sliding_window_attention(*dev, W).cpu()
    ok = examples.verdict(f"kernel, WINDOW={W}, vs windowed oracle", out, windowed, 1e-4)
    # A window of N keys hides nothing that causality does not: 02's task.
    out = sliding_window_attention(*dev, N).cpu()
    ok &= examples.verdict(f"kernel, WINDOW={N}, vs causal oracle", out, causal, 1e-4)
    # The chapter's point again: a right answer to another task. It uses no TODO, so it fails
    # only if the example itself is broken (the two oracles agree).
    print("  plain causal attention (the window ignored), on the windowed task:")
    ok &= examples.contrast("causal oracle vs windowed oracle", causal, windowed, 1e-4)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(worked_example())
