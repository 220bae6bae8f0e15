"""Exercise 08: split-KV decoding.

Scaffolded from exercise 06 (sliding-window attention) by `nox -s new`: the kernel
below is still that exercise's. Make it this one's: say here what it computes and the
idea its TODOs teach, change the kernel, and move the BEGIN/END SOLUTION markers to the
lines the student writes.
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
def split_kv_decoding_kernel(
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


def split_kv_decoding(q, k, v, window, BLOCK_M=16, BLOCK_N=16):
    """Causal attention of q (M, D) over k, v (N, D) where row i sees keys i - window + 1 .. i
    (top-left aligned); float32 (M, D) out."""
    if int(window) < 1:
        raise ValueError(f"the window must hold at least one key (the row's own), got {window}")
    return host.launch_attention(
        split_kv_decoding_kernel, q, k, v, block_m=BLOCK_M, block_n=BLOCK_N, WINDOW=int(window)
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

    out = split_kv_decoding(*dev, W).cpu()
    ok = examples.verdict(f"kernel, WINDOW={W}, vs windowed oracle", out, windowed, 1e-4)
    # A window of N keys hides nothing that causality does not: 02's task.
    out = split_kv_decoding(*dev, N).cpu()
    ok &= examples.verdict(f"kernel, WINDOW={N}, vs causal oracle", out, causal, 1e-4)
    # The chapter's point again: a right answer to another task (it does not judge the file).
    print("  plain causal attention (the window ignored), on the windowed task:")
    examples.verdict("causal oracle vs windowed oracle", causal, windowed, 1e-4, False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(worked_example())
