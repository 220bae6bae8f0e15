"""Exercise 08 (extensions track): split-KV decoding, the merge of flash-decoding.

Decoding generates one token at a time: each head has a single query row, and it attends to a
KV cache of thousands of keys. Exercise 01's kernel gives every program a block of query rows,
so a decoding step would launch one program per (sequence, head), each walking its whole cache
alone: 32 heads of one sequence keep 32 of an H200's 132 streaming multiprocessors busy. Split-KV
decoding (flash-decoding) cuts the key axis instead. Program (b, j) runs the online softmax of
row b over split j of its cache only and stores three partials: its split's maximum score m_j,
l_j = sum exp(s - m_j) and acc_j = sum exp(s - m_j) v. A second kernel merges them.

The merge turns a row's NUM_SPLITS partials into its attention output and the log-sum-exp of
its scores, ln sum_n exp(s_n) (a caller merges further with it). It is the online-softmax
invariant of 01, used across programs instead of across loop steps: every partial was measured
against its own maximum, so before any are added, all must be brought to one common maximum,
l_j and acc_j alike. The page (docs/exercises/08_split_kv_decoding.md) explains why; the hints
(nox -s hint -- 08) end with the formula.

Lengths are ragged: sequence c has lengths[c] cached keys (at least one), so its last splits
may hold none. Such an empty split stores m = -inf, l = 0, acc = 0, and exp(-inf - m) = 0 makes
it weigh nothing; split 0 always holds a key, so m is finite. Query rows may share a cache:
GROUP rows per cache (the heads of one group in grouped-query attention).

Reference: ``kata.oracles.decode_attention`` (attention over each cache's own length).
Run ``python 08_split_kv_decoding.py`` for the worked example.
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
def split_kv_partial_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    lengths_ptr,
    m_ptr,
    l_ptr,
    acc_ptr,
    GROUP,
    SPLIT,
    D,
    stride_qb,
    stride_kc,
    stride_kn,
    stride_vc,
    stride_vn,
    stride_mb,
    stride_ab,
    stride_as,
    scale,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # Given: program (b, j) is query row b over keys j * SPLIT .. of its cache, the online
    # softmax of 01 for a single row. No tl.dot: it would compile (only K must be >= 16), but one
    # row fills 1 of an MMA's 16 rows, and this loop is bound by reading K and V, not by flops.
    b = tl.program_id(0)
    j = tl.program_id(1)
    # int64: past 1024 caches of 16k keys x 128, a cache's offset no longer fits in int32.
    cache = (b // GROUP).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    q = tl.load(q_ptr + b * stride_qb + offs_d, mask=d_ok, other=0.0).to(tl.float32)

    length = tl.load(lengths_ptr + cache).to(tl.int32)
    lo = j * SPLIT
    hi = tl.minimum(lo + SPLIT, length)  # an empty split (lo >= hi) runs no step
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for n0 in range(lo, hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        key_ok = offs_n < hi
        kv_mask = key_ok[:, None] & d_ok[None, :]
        k = tl.load(
            k_ptr + cache * stride_kc + offs_n[:, None] * stride_kn + offs_d[None, :],
            mask=kv_mask,
            other=0.0,
        ).to(tl.float32)
        v = tl.load(
            v_ptr + cache * stride_vc + offs_n[:, None] * stride_vn + offs_d[None, :],
            mask=kv_mask,
            other=0.0,
        ).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1) * scale
        s = tl.where(key_ok, s, float("-inf"))
        # Every step holds at least one key of the split, so m_new is finite.
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m_i = m_new

    tl.store(m_ptr + b * stride_mb + j, m_i)
    tl.store(l_ptr + b * stride_mb + j, l_i)
    tl.store(acc_ptr + b * stride_ab + j * stride_as + offs_d, acc, mask=d_ok)


@triton.jit
def split_kv_merge_kernel(
    m_ptr,
    l_ptr,
    acc_ptr,
    out_ptr,
    lse_ptr,
    NUM_SPLITS,
    D,
    stride_mb,
    stride_ab,
    stride_as,
    stride_ob,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # One program per query row: all of its NUM_SPLITS partials at once, one slot per split.
    b = tl.program_id(0)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_ok = offs_s < NUM_SPLITS
    d_ok = offs_d < D
    # Padded slots (BLOCK_S is a power of two, at or above NUM_SPLITS) load as empty splits:
    # m = -inf, l = 0, acc = 0.
    m_j = tl.load(m_ptr + b * stride_mb + offs_s, mask=s_ok, other=float("-inf"))
    l_j = tl.load(l_ptr + b * stride_mb + offs_s, mask=s_ok, other=0.0)
    acc_j = tl.load(
        acc_ptr + b * stride_ab + offs_s[:, None] * stride_as + offs_d[None, :],
        mask=s_ok[:, None] & d_ok[None, :],
        other=0.0,
    )

    # TODO(merge): Each split's partials were measured against its own maximum m_j. Bring them
    # to the row's maximum first, l_j and acc_j by the same factor, then write `out` (the
    # softmax over every key of the row: weighted values over weights) and `lse`, the natural
    # log of the row's denominator sum_n exp(s_n). Empty splits and padded slots must weigh 0.
    # (The lines below average the splits' own results, one vote per split: replace them.)
    filled = l_j > 0
    count = tl.sum(filled.to(tl.float32))
    l_safe = tl.where(filled, l_j, 1.0)
    out = tl.sum(acc_j / l_safe[:, None], axis=0) / count
    lse = tl.sum(tl.where(filled, m_j + tl.log(l_safe), 0.0)) / count

    tl.store(out_ptr + b * stride_ob + offs_d, out, mask=d_ok)
    tl.store(lse_ptr + b, lse)


def split_kv_decoding(q, k, v, lengths, num_splits=None, BLOCK_N=64, *, check_lengths=True):
    """Attention of each query row of q (B, D) over the first ``lengths[c]`` keys of its cache
    c = row // (B // C) in k, v (C, N, D), split ``num_splits`` ways along the keys (None: the
    host's choice); returns ``(out, lse)``, float32 (B, D) and (B,). Raises ValueError for a
    length below 1 or above N; that check waits for the GPU, and ``check_lengths=False`` (a
    decoding loop whose lengths are known good) leaves it out."""
    return host.run_split_kv_decoding(
        split_kv_partial_kernel,
        split_kv_merge_kernel,
        q,
        k,
        v,
        lengths,
        num_splits,
        block_n=BLOCK_N,
        check_lengths=check_lengths,
    )


def _averaged(m, l, acc):  # noqa: E741
    """What the untouched skeleton computes: the non-empty splits' own outputs acc_j / l_j,
    averaged, and their own log-sum-exps m_j + ln l_j, averaged."""
    filled = l > 0
    safe = torch.where(filled, l, torch.ones_like(l))
    count = filled.sum(dim=1)
    out = (acc / safe[:, :, None]).sum(dim=1) / count[:, None]
    lse = torch.where(filled, m + torch.log(safe), torch.zeros_like(m)).sum(dim=1) / count
    return out, lse


def worked_example() -> int:
    """Three caches of N = 80 slots, two query heads each (GQA), D = 16, lengths 80, 33 and 1,
    5 splits of 16 keys, seed 0: both kernels against attention over each length; then the
    skeleton's averaged partials on the same partials."""
    C, group, N, D, splits, block = 3, 2, 80, 16, 5, 16
    lengths = torch.tensor([80, 33, 1])
    print(
        f"08 split-KV decoding: {C} caches x {group} query heads, N={N}, D={D}, "
        f"{splits} splits of {N // splits} keys, lengths {tuple(lengths.tolist())}, seed 0  "
        f"[{runtime.describe()}]"
    )
    torch.manual_seed(0)
    q, k, v = torch.randn(C * group, D), torch.randn(C, N, D), torch.randn(C, N, D)
    dev = [x.to(runtime.DEVICE) for x in (q, k, v, lengths)]
    want = oracles.decode_attention(q, k, v, lengths, group)
    want_lse = oracles.decode_lse(q, k, lengths, group)
    for c, n in enumerate(lengths.tolist()):
        used = -(-n // block)
        held = f"splits 0..{used - 1}" if used > 1 else "split 0"
        print(f"  cache {c}: {n:>2} key{'s' if n > 1 else ' '} in {held}, {splits - used} empty")

    out, lse = (x.cpu() for x in split_kv_decoding(*dev, num_splits=splits, BLOCK_N=block))
    ok = examples.verdict("out vs attention over each length", out, want, 1e-5)
    ok &= examples.verdict("lse vs ln sum exp(scores)", lse, want_lse, 1e-5)
    # The chapter's point again, across programs: partials measured against different maxima
    # cannot be averaged. It uses no TODO, so it fails only if the example itself is broken.
    partials = host.launch_split_kv_partials(split_kv_partial_kernel, *dev, splits, block_n=block)
    avg_out, avg_lse = (x.cpu() for x in _averaged(*partials))
    print("  the partials averaged (the untouched skeleton), on the same partials:")
    ok &= examples.contrast("averaged out vs attention", avg_out, want, 1e-5)
    ok &= examples.contrast("averaged lse vs ln sum exp(scores)", avg_lse, want_lse, 1e-5)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(worked_example())
