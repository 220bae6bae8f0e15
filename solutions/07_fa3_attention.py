"""Showcase 07 (instructors): FlashAttention-3's structure in Gluon, for Hopper GPUs only.

Exercise 04 leaves the schedule to Triton's compiler: every warp loads, multiplies and
exponentiates in turn, and the compiler overlaps what it can. On an H100/H200 that stops near
90% of cuDNN, because the softmax's exponentials (16 per clock per SM) cannot hide behind the
tensor-core matmuls of the same warps. FlashAttention-3 gives each job its own warps, and Gluon
(Triton's lower-level dialect, shipped with Triton 3.6) lets us write that schedule by hand:

* a **producer** partition issues TMA bulk copies of K and V tiles into two rings of
  shared-memory stages, each stage guarded by mbarriers ("full" once its bytes landed, "empty"
  once both consumers are done with it; K and V are released separately, K as soon as its
  scores are in registers);
* two **consumer** warpgroups, each owning 64 query rows of the program's 128, run the online
  softmax of exercise 04 with asynchronous ``wgmma``, software-pipelined: a consumer issues the
  scores of tile j and P @ V of tile j - 1 together, waits only for the scores, and
  exponentiates tile j while P @ V is still on the tensor cores. Between the two consumers the
  warp scheduler does the ping-pong that FlashAttention-3 orders with named barriers;
* ``gl.warp_specialize`` splits the registers: the producer needs few, the consumers get 240;
* the grid is **persistent**: ``fa3_attention`` launches as few programs as take the fewest
  waves of the SMs (``persistent_programs``), and each loops over work items of every head, so
  that its descriptors and barriers are made once; Q has two buffers, so the next query tile's
  Q loads while the consumers still work on this one. An item is a pair of query tiles of one
  head, tile n_m - 1 - j then tile j, which all cost the same when causal (the longer first);
  the items of a head are adjacent and dealt out in the order the programs start, so the
  programs in flight share a few heads' K and V in the L2. The descriptors cover the whole
  (B, H, S, D) tensors: one of each serves every head and still clips at S.

The math is exercise 04's, with the same interface (``attention_fwd_kernel``'s parameters) and
the same host checks. B * H is the grid's second axis, as in 04: under 04's launcher (a program
per query tile, as the grader launches it) each program has at most one work item. Any S works:
the tensor descriptors read zeros past the end and clip the stores, and the last key tile masks
the columns past S. Not a student exercise: it is graded only right or wrong, by exercise 04's
checks (copied in as 04_fast_attention.py, graded as 04 on a Hopper GPU), and ``nox -s bench``
times it. It needs a Hopper GPU (sm_90); in the interpreter the file only says so.
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
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from kata import examples, host

ROWS = 64  # query rows per consumer warpgroup (one wgmma M-tile)
CONSUMERS = 2
# BLOCK_M is the program's query rows (both consumers). BLOCK_N and TMA are fixed: 128-key tiles
# beat 64-key ones by 5-15% on an H200, and every load is a TMA copy. The flag is there so that
# the kernel's parameters are exercise 04's to the letter, and 04's checks can grade it.
CONFIGS = [triton.Config({"BLOCK_M": ROWS * CONSUMERS, "BLOCK_N": 128, "TMA": True}, num_warps=4)]
# The depth of the K/V ring. Three stages do not fit in shared memory at D = 128 (with Q and the
# output staging); at D = 64, autotuning between 2 and 3 picked either, within noise.
STAGES = gl.constexpr(2)
# Query tiles in flight: tile t's Q goes to buffer t % Q_BUFFERS, so the next tile's Q loads
# while the consumers still read this one's. Two beat one by 0.5-7% on an H100 (most at
# S = 1024); a second Q costs 16 KB of shared memory at D = 64 and 32 KB at D = 128.
Q_BUFFERS = gl.constexpr(2)
FIRST, SECOND = gl.constexpr(0), gl.constexpr(1)  # which consumer: its rows start at WHICH * 64


@gluon.jit
def _pair(w, n_m, H):
    """Work item w as (batch, head, high, low, 1 or 2): query tiles high = n_m - 1 - low, then
    low, of head w // ceil(n_m / 2), the longer causal one first; the middle tile of an odd n_m
    is an item alone."""
    n_pairs = (n_m + 1) // 2
    bh = w // n_pairs
    low = w % n_pairs
    high = n_m - 1 - low
    return bh // H, bh % H, high, low, gl.minimum(high - low, 1) + 1


@gluon.jit
def _walk():
    """(first item, step) of this program. The items are dealt to every program of the
    (programs a head, B * H) grid in the order the hardware starts them (axis 0 fastest), so
    that the programs in flight at once work on neighbouring items: the pairs of a few heads,
    whose K and V they share in the L2."""
    along = gl.num_programs(0)
    return gl.program_id(1) * along + gl.program_id(0), along * gl.num_programs(1)


@gluon.jit
def _key_end(m0, S, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr):
    """The end of the keys that the query tile at row m0 reads."""
    if CAUSAL:
        n_hi = gl.minimum(m0 + BLOCK_M, S)
    else:
        n_hi = S
    return n_hi


@gluon.jit
def _producer(
    q_desc,
    k_desc,
    v_desc,
    q_smem,
    k_smem,
    v_smem,
    q_full,
    q_empty,
    k_full,
    v_full,
    k_empty,
    v_empty,
    H,
    S,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    CAUSAL: gl.constexpr,
):
    """For each query tile of this program's items: its Q, then its key and value tiles. ``t``
    counts the query tiles: tile t's Q goes to buffer t % Q_BUFFERS. ``i`` counts the K/V tiles
    streamed over all items: tile i goes to stage i % STAGES, its (i // STAGES)-th use. K and V
    have separate "empty" barriers: a K tile is free once its scores are in registers, while its
    V tile stays in use until the next P @ V has finished."""
    n_m = gl.cdiv(S, BLOCK_M)
    i = 0
    t = 0
    first, step = _walk()
    for w in range(first, (n_m + 1) // 2 * gl.num_programs(1), step):
        b, h, high, low, count = _pair(w, n_m, H)
        for half in range(count):
            m0 = (high - half * (high - low)) * BLOCK_M
            # A Q buffer is free once both consumers have the last scores of the tile that used
            # it before, Q_BUFFERS tiles ago.
            qb = t % Q_BUFFERS
            mbarrier.wait(q_empty.index(qb), ((t // Q_BUFFERS) & 1) ^ 1)  # fresh counts as free
            mbarrier.expect(q_full.index(qb), q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(
                q_desc,
                [b, h, m0, 0],
                q_full.index(qb),
                q_smem.index(qb).reshape(q_desc.block_type.shape),
            )
            for n0 in range(0, _key_end(m0, S, BLOCK_M, CAUSAL), BLOCK_N):
                s = i % STAGES
                parity = ((i // STAGES) & 1) ^ 1
                mbarrier.wait(k_empty.index(s), parity)
                mbarrier.expect(k_full.index(s), k_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    k_desc,
                    [b, h, n0, 0],
                    k_full.index(s),
                    k_smem.index(s).reshape(k_desc.block_type.shape),
                )
                mbarrier.wait(v_empty.index(s), parity)
                mbarrier.expect(v_full.index(s), v_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    v_desc,
                    [b, h, n0, 0],
                    v_full.index(s),
                    v_smem.index(s).reshape(v_desc.block_type.shape),
                )
                i += 1
            t += 1


@gluon.jit
def _scores(
    q, k_smem, k_full, i, s_layout: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr
):
    """Issue q @ k^T for tile i asynchronously; the caller waits for it."""
    mbarrier.wait(k_full.index(i % STAGES), (i // STAGES) & 1)
    zero = gl.zeros([64, BLOCK_N], gl.float32, s_layout)
    return warpgroup_mma(
        q, k_smem.index(i % STAGES).permute((1, 0)), zero, use_acc=False, is_async=True
    )


@gluon.jit
def _softmax(
    scores,
    m_i,
    l_i,
    n0,
    mask_from,
    offs_m,
    S,
    qk_scale,
    s_layout: gl.constexpr,
    BLOCK_N: gl.constexpr,
    CAUSAL: gl.constexpr,
):
    """The online-softmax step of one tile; only tiles reaching mask_from are masked."""
    if n0 + BLOCK_N > mask_from:
        offs_n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if CAUSAL:
            visible = offs_m[:, None] >= offs_n[None, :]
        else:
            visible = (offs_m[:, None] >= 0) & (offs_n[None, :] < S)
        scores = gl.where(visible, scores, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(scores, axis=1) * qk_scale)
    p = gl.exp2(scores * qk_scale - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, alpha, l_i, m_new


@gluon.jit
def _attend(
    q,
    k_smem,
    v_smem,
    k_full,
    v_full,
    k_empty,
    v_empty,
    q_empty,
    c,
    n_tiles,
    row0,
    S,
    qk_scale,
    HEAD_DIM: gl.constexpr,
    CAUSAL: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
):
    """The normalised output of one warpgroup's 64 query rows from row0, over key tiles
    c .. c + n_tiles - 1 of the program's rings. Software-pipelined as in FlashAttention-3: the
    scores of key tile j are computed while P @ V of tile j - 1 is still on the tensor cores,
    and the softmax of tile j runs while that product finishes. Releases Q once its last scores
    are in registers."""
    dtype: gl.constexpr = q.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    rows: gl.constexpr = gl.SliceLayout(1, s_layout)
    o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)
    offs_m = row0 + gl.arange(0, 64, layout=rows)
    # Causal: key tiles reaching past this warpgroup's first row need the mask. Otherwise only
    # a last, partial tile does (its columns past S).
    if CAUSAL:
        mask_from = row0 + 1
    else:
        mask_from = S
    m_i = gl.full([64], float("-inf"), gl.float32, rows)
    l_i = gl.zeros([64], gl.float32, rows)
    acc = gl.zeros([64, HEAD_DIM], gl.float32, o_layout)

    scores = _scores(q, k_smem, k_full, c, s_layout, BLOCK_N, STAGES)
    scores = warpgroup_mma_wait(num_outstanding=0, deps=(scores,))
    mbarrier.arrive(k_empty.index(c % STAGES), count=1)
    p, alpha, l_i, m_i = _softmax(
        scores, m_i, l_i, 0, mask_from, offs_m, S, qk_scale, s_layout, BLOCK_N, CAUSAL
    )
    for j in range(1, n_tiles):
        i = c + j
        prev = i - 1
        scores = _scores(q, k_smem, k_full, i, s_layout, BLOCK_N, STAGES)
        mbarrier.wait(v_full.index(prev % STAGES), (prev // STAGES) & 1)
        acc = warpgroup_mma(
            gl.convert_layout(p.to(dtype), p_layout),
            v_smem.index(prev % STAGES),
            acc,
            is_async=True,
        )
        # The scores were issued first, so waiting for all but one group waits for them only.
        scores = warpgroup_mma_wait(num_outstanding=1, deps=(scores,))
        mbarrier.arrive(k_empty.index(i % STAGES), count=1)
        p, alpha, l_i, m_i = _softmax(
            scores, m_i, l_i, j * BLOCK_N, mask_from, offs_m, S, qk_scale, s_layout, BLOCK_N, CAUSAL
        )
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(v_empty.index(prev % STAGES), count=1)
        acc = acc * gl.convert_layout(alpha, o_rows)[:, None]
    # Every product that reads Q has been waited for: the producer may load the next Q.
    mbarrier.arrive(q_empty, count=1)
    end = c + n_tiles - 1
    mbarrier.wait(v_full.index(end % STAGES), (end // STAGES) & 1)
    acc = warpgroup_mma(
        gl.convert_layout(p.to(dtype), p_layout), v_smem.index(end % STAGES), acc, is_async=True
    )
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    mbarrier.arrive(v_empty.index(end % STAGES), count=1)
    return acc / gl.convert_layout(l_i, o_rows)[:, None]


@gluon.jit
def _consumer(
    o_desc,
    q_smem,
    k_smem,
    v_smem,
    q_full,
    q_empty,
    k_full,
    v_full,
    k_empty,
    v_empty,
    H,
    S,
    sm_scale,
    WHICH: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    CAUSAL: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
):
    """One warpgroup's 64 rows of each query tile of this program's items: ``_attend``, then a
    TMA store through the rank-4 descriptor, which clips the rows past S. ``c`` counts the K/V
    tiles consumed before the query tile (the producer's ``i`` at its start)."""
    dtype: gl.constexpr = o_desc.dtype
    o_smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, HEAD_DIM], dtype)
    o_smem = gl.allocate_shared_memory(dtype, [64, HEAD_DIM], o_smem_layout)
    qk_scale = sm_scale * 1.4426950408889634
    n_m = gl.cdiv(S, BLOCK_M)
    c = 0
    t = 0
    first, step = _walk()
    for w in range(first, (n_m + 1) // 2 * gl.num_programs(1), step):
        b, h, high, low, count = _pair(w, n_m, H)
        for half in range(count):
            m0 = (high - half * (high - low)) * BLOCK_M
            n_tiles = gl.cdiv(_key_end(m0, S, BLOCK_M, CAUSAL), BLOCK_N)
            qb = t % Q_BUFFERS
            mbarrier.wait(q_full.index(qb), (t // Q_BUFFERS) & 1)
            out = _attend(
                q_smem.index(qb).slice(WHICH * 64, 64, dim=0),
                k_smem,
                v_smem,
                k_full,
                v_full,
                k_empty,
                v_empty,
                q_empty.index(qb),
                c,
                n_tiles,
                m0 + WHICH * 64,
                S,
                qk_scale,
                HEAD_DIM,
                CAUSAL,
                BLOCK_N,
                STAGES,
            )
            # The store of the tile before must have read o_smem first; waiting here rather
            # than right after it lets that store overlap this tile's products.
            tma.store_wait(pendings=0)
            o_smem.store(out.to(dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(
                o_desc, [b, h, m0 + WHICH * 64, 0], o_smem.reshape(o_desc.block_type.shape)
            )
            c += n_tiles
            t += 1
    tma.store_wait(pendings=0)


@gluon.jit
def _descriptor_strides(stride_b, stride_h, stride_s, B, H, S, HEAD_DIM: gl.constexpr):
    """A rank-4 descriptor's batch, head and row strides. 04's checks let a dimension of size 1
    have any stride, since it is only read at 0; a descriptor needs every stride a multiple of
    16 bytes, so such a dimension gets the one a contiguous tensor would have."""
    stride_s = gl.where(S > 1, stride_s, HEAD_DIM)
    stride_h = gl.where(H > 1, stride_h, stride_s * S)
    stride_b = gl.where(B > 1, stride_b, stride_h * H)
    return stride_b, stride_h, stride_s


@triton.autotune(configs=CONFIGS, key=["S", "HEAD_DIM", "CAUSAL"])
@gluon.jit
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
    HEAD_DIM: gl.constexpr,
    CAUSAL: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    TMA: gl.constexpr = True,
):
    """Exercise 04's parameters, on a (programs a head, B * H) grid: 04's own (a program per
    query tile) or fewer, each looping over its items of every head (``_walk``)."""
    gl.static_assert(BLOCK_M == 2 * 64, "two consumer warpgroups of 64 rows each")
    gl.static_assert(TMA, "07 loads every tile with a TMA copy")
    dtype: gl.constexpr = q_ptr.dtype.element_ty
    B = gl.num_programs(1) // H
    stride_qb, stride_qh, stride_qs = _descriptor_strides(
        stride_qb, stride_qh, stride_qs, B, H, S, HEAD_DIM
    )
    stride_kb, stride_kh, stride_ks = _descriptor_strides(
        stride_kb, stride_kh, stride_ks, B, H, S, HEAD_DIM
    )
    stride_vb, stride_vh, stride_vs = _descriptor_strides(
        stride_vb, stride_vh, stride_vs, B, H, S, HEAD_DIM
    )
    stride_ob, stride_oh, stride_os = _descriptor_strides(
        stride_ob, stride_oh, stride_os, B, H, S, HEAD_DIM
    )
    # One descriptor per (B, H, S, D) tensor, made once: the block is one head's rows, so a
    # tile past S reads zeros and a store past S is clipped, as per-head descriptors would.
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, BLOCK_N, HEAD_DIM], dtype)
    o_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, 64, HEAD_DIM], dtype)
    q_desc = tma.make_tensor_descriptor(
        q_ptr,
        [B, H, S, HEAD_DIM],
        [stride_qb, stride_qh, stride_qs, 1],
        [1, 1, BLOCK_M, HEAD_DIM],
        q_layout,
    )
    k_desc = tma.make_tensor_descriptor(
        k_ptr,
        [B, H, S, HEAD_DIM],
        [stride_kb, stride_kh, stride_ks, 1],
        [1, 1, BLOCK_N, HEAD_DIM],
        kv_layout,
    )
    v_desc = tma.make_tensor_descriptor(
        v_ptr,
        [B, H, S, HEAD_DIM],
        [stride_vb, stride_vh, stride_vs, 1],
        [1, 1, BLOCK_N, HEAD_DIM],
        kv_layout,
    )
    o_desc = tma.make_tensor_descriptor(
        out_ptr,
        [B, H, S, HEAD_DIM],
        [stride_ob, stride_oh, stride_os, 1],
        [1, 1, 64, HEAD_DIM],
        o_layout,
    )

    # The buffers are 2-D, as the products read them; a TMA copy sees them reshaped to its
    # rank-4 block (the same swizzle: it depends on the rows' bytes only).
    q_smem = gl.allocate_shared_memory(
        dtype,
        [Q_BUFFERS, BLOCK_M, HEAD_DIM],
        gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype),
    )
    ring_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], ring_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], ring_layout)
    bar_layout: gl.constexpr = mbarrier.MBarrierLayout()
    q_full = gl.allocate_shared_memory(gl.int64, [Q_BUFFERS, 1], bar_layout)
    q_empty = gl.allocate_shared_memory(gl.int64, [Q_BUFFERS, 1], bar_layout)
    k_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    for qb in gl.static_range(Q_BUFFERS):
        mbarrier.init(q_full.index(qb), count=1)
        mbarrier.init(q_empty.index(qb), count=2)  # both consumers release Q
    for s in gl.static_range(STAGES):
        mbarrier.init(k_full.index(s), count=1)
        mbarrier.init(v_full.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=2)
        mbarrier.init(v_empty.index(s), count=2)
    fence_async_shared()

    gl.warp_specialize(
        [
            (
                _producer,
                (
                    q_desc,
                    k_desc,
                    v_desc,
                    q_smem,
                    k_smem,
                    v_smem,
                    q_full,
                    q_empty,
                    k_full,
                    v_full,
                    k_empty,
                    v_empty,
                    H,
                    S,
                    BLOCK_M,
                    BLOCK_N,
                    STAGES,
                    CAUSAL,
                ),
            ),
            (
                _consumer,
                (
                    o_desc,
                    q_smem,
                    k_smem,
                    v_smem,
                    q_full,
                    q_empty,
                    k_full,
                    v_full,
                    k_empty,
                    v_empty,
                    H,
                    S,
                    sm_scale,
                    FIRST,
                    HEAD_DIM,
                    CAUSAL,
                    BLOCK_M,
                    BLOCK_N,
                    STAGES,
                ),
            ),
            (
                _consumer,
                (
                    o_desc,
                    q_smem,
                    k_smem,
                    v_smem,
                    q_full,
                    q_empty,
                    k_full,
                    v_full,
                    k_empty,
                    v_empty,
                    H,
                    S,
                    sm_scale,
                    SECOND,
                    HEAD_DIM,
                    CAUSAL,
                    BLOCK_M,
                    BLOCK_N,
                    STAGES,
                ),
            ),
        ],
        [4, 4],
        [240, 240],
    )


def fa3_attention(q, k, v, causal=False):
    """softmax(q k^T / sqrt(D)) v like exercise 04's ``fast_attention``, on Hopper only."""
    if runtime.INTERPRETER:
        raise RuntimeError("07 is written in Gluon for Hopper GPUs; the interpreter cannot run it")
    return host.run_fast_attention(attention_fwd_kernel, q, k, v, causal=causal, persistent=True)


if __name__ == "__main__":
    if runtime.INTERPRETER:
        print("07 FA3-style attention: needs a Hopper GPU (Gluon does not run in the interpreter)")
        sys.exit(0)
    sys.exit(examples.fast_attention_example(fa3_attention))
