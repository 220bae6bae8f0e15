"""Exercise 05 (performance track): MoE top-2 routing at production sizes.

The chapter's gating kernel gives each token its own program: at a million tokens that is a
million tiny programs, each reading one row of E logits. Here one program owns BLOCK_M tokens,
and the job becomes what it should be: reading M * E numbers once, at memory bandwidth. Two
ideas get it there.

* Work inside each thread. The row is read as a few chunks (a quarter of the row, 64 to 128
  bytes: 32 fp32 or 32 bf16 logits at E = 128; half that where it fits E better, or where rows
  are not a multiple of 16 bytes). Every position of a chunk is a *slot*: chunk
  after chunk, each slot keeps the best two logits it has seen, with plain elementwise compares
  and selects in registers. Only at the end do the slots of a row meet, in two short
  reductions: the row's top-1 is the best slot, and its top-2 the best slot once the top-1 has
  been taken out.
* Cheap compares. fp32 logits are compared as floats, with the expert index beside them. For
  16-bit logits one 32-bit integer holds both: the logit's bits, made to sort like the float,
  above the expert's index. A single integer max then keeps value and index together.

The renormalized weights need no softmax at all: with l0 >= l1 the two largest logits, the
softmax's denominator cancels, and w1 = exp(l1 - l0) / (1 + exp(l1 - l0)), w0 = 1 - w1. Ties go
to the lowest expert index (as vLLM's router does).

Reference: ``kata.oracles.top2_gating``. Run the file for a quick check; ``nox -s bench`` times it.
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

# Tokens per program and warps for each row width (BLOCK_E) and logit size, measured on an H200
# (scripts/gating_sweep.py: E = 8, 16, 60, 64, 128, 160 and 256 in fp32 and bf16, a million
# tokens). A tile of 8 to 32 KB keeps enough loads in flight; within that range the choice moved
# the time by a few percent at most. The sweep did not measure rows of 2, 4 or 32 logits, nor
# more than 256: those layouts are guesses from their neighbours.
# fmt: off
LAYOUTS = {  # (BLOCK_E, bits per logit): (BLOCK_M, num_warps)
    (8, 32): (256, 4), (16, 32): (128, 4), (32, 32): (128, 4), (64, 32): (64, 4),
    (128, 32): (64, 8), (256, 32): (16, 8),
    (8, 16): (512, 8), (16, 16): (256, 8), (32, 16): (256, 4), (64, 16): (128, 4),
    (128, 16): (128, 4), (256, 16): (32, 2),
}
# fmt: on
# E = 160 pads its rows to 256 logits, and with 96 of them masked 4 warps beat 8 in fp32 (221
# against 231 us); 8 suit E = 256 (262 against 286 us).
LAYOUTS_BY_E = {(160, 32): (16, 4)}


def _layout(E: int, block_e: int, bits: int) -> tuple[int, int]:
    """(BLOCK_M, num_warps) for rows of E logits of ``bits`` bits, padded to ``block_e``."""
    if (E, bits) in LAYOUTS_BY_E:
        return LAYOUTS_BY_E[E, bits]
    if (block_e, bits) in LAYOUTS:
        return LAYOUTS[block_e, bits]
    if block_e < 8:
        return LAYOUTS[8, bits]
    return (16 if block_e * bits <= 16384 else 8), 8  # rows of 1 KB and more


def _one_layout(configs, named_args, **kwargs):
    """The autotuner's choice, made without timing: the measured layout for this E and logit
    size (the autotuner keys on E and the dtypes)."""
    bits = named_args["logits_ptr"].element_size() * 8
    block_e = kwargs.get("BLOCK_E", named_args.get("BLOCK_E"))
    block_m, warps = _layout(named_args["E"], block_e, bits)
    found = [c for c in configs if c.kwargs["BLOCK_M"] == block_m and c.num_warps == warps]
    return found or configs[:1]


CONFIGS = [
    triton.Config({"BLOCK_M": bm}, num_warps=w)
    for bm, w in sorted({*LAYOUTS.values(), *LAYOUTS_BY_E.values(), (16, 8), (8, 8)})
]
# The interpreter runs one configuration: its autotuner would otherwise time each one (older
# Tritons time even a single pruned configuration), slowly.
if runtime.INTERPRETER:
    CONFIGS = [triton.Config({"BLOCK_M": 16}, num_warps=4)]


@triton.jit
def _better(v0, i0, v1, i1):
    """Combine two (logit, expert) candidates: the larger logit, the lower expert on a tie."""
    take = (v1 > v0) | ((v1 == v0) & (i1 < i0))
    return tl.where(take, v1, v0), tl.where(take, i1, i0)


@triton.jit
def _top2_fp32(chunk_ptrs, cols, E, NCHUNK: tl.constexpr, CHUNK: tl.constexpr):
    """Per slot, the best two logits of the row and their chunks: float compares in registers.

    Chunks arrive in expert order and a later chunk must be strictly larger to win, so on a tie
    the earlier (lower) expert stays ahead.
    """
    t1 = tl.load(chunk_ptrs, mask=cols[None, :] < E, other=float("-inf")).to(tl.float32)
    i1 = tl.zeros(t1.shape, tl.int32)
    # A slot with one chunk has no second candidate yet: -inf at an index past every expert.
    t2 = tl.full(t1.shape, float("-inf"), tl.float32)
    i2 = tl.full(t1.shape, NCHUNK, tl.int32)
    for j in tl.static_range(1, NCHUNK):
        x = tl.load(chunk_ptrs + j * CHUNK, mask=j * CHUNK + cols[None, :] < E, other=float("-inf"))
        x = x.to(tl.float32)
        gt1 = x > t1
        gt2 = x > t2
        t2 = tl.where(gt1, t1, tl.maximum(t2, x))
        i2 = tl.where(gt1, i1, tl.where(gt2, j, i2))
        t1 = tl.where(gt1, x, t1)
        i1 = tl.where(gt1, j, i1)
    # Chunk numbers become expert numbers.
    return t1, i1 * CHUNK + cols[None, :], t2, i2 * CHUNK + cols[None, :]


@triton.jit
def _sort_key(x, col):
    """A 16-bit float and its expert in one int32 that sorts like (logit, -expert)."""
    hi = x.to(tl.int16, bitcast=True).to(tl.int32) << 16
    # Floats are sign and magnitude: a negative one sorts the wrong way round as an integer
    # until its magnitude bits are flipped.
    order = hi ^ ((hi >> 31) & 0x7FFF0000)
    return order | (0xFFFF - col)


@triton.jit
def _from_key(key, dtype: tl.constexpr):
    """The (logit as fp32, expert) pair held in a key of ``_sort_key``."""
    hi = key ^ ((key >> 31) & 0x7FFF0000)
    x = (hi >> 16).to(tl.int16).to(dtype, bitcast=True).to(tl.float32)
    return x, 0xFFFF - (key & 0xFFFF)


@triton.jit
def _top2_16bit(chunk_ptrs, cols, E, NCHUNK: tl.constexpr, CHUNK: tl.constexpr):
    """Per slot, the keys of the best two (logit, expert) pairs: integer max and min only.

    A key holds the logit and its expert, so it serves as both value and index below.
    """
    x = tl.load(chunk_ptrs, mask=cols[None, :] < E, other=float("-inf"))
    k1 = _sort_key(x, cols[None, :])
    k2 = tl.full(k1.shape, -(2**31), tl.int32)  # below every real key
    for j in tl.static_range(1, NCHUNK):
        x = tl.load(chunk_ptrs + j * CHUNK, mask=j * CHUNK + cols[None, :] < E, other=float("-inf"))
        k = _sort_key(x, j * CHUNK + cols[None, :])
        k2 = tl.maximum(k2, tl.minimum(k1, k))
        k1 = tl.maximum(k1, k)
    return k1, k1, k2, k2


@triton.jit
def _pick(t, i):
    """Each row's best slot: (logit, expert), or for keys one integer max (a key is its own
    position)."""
    if t.dtype == tl.int32:
        best = tl.max(t, axis=1)
        return best, best
    else:
        return tl.reduce((t, i), 1, _better)


@triton.autotune(configs=CONFIGS, key=["E"], prune_configs_by={"early_config_prune": _one_layout})
@triton.jit
def moe_top2_gating_fast_kernel(
    logits_ptr,
    weight0_ptr,
    weight1_ptr,
    idx0_ptr,
    idx1_ptr,
    M,
    E: tl.constexpr,
    stride_m,
    BLOCK_E: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    pid = tl.program_id(0)
    # TODO(rows-per-program): This program owns BLOCK_M consecutive tokens, starting at
    # pid * BLOCK_M. Give each row of the tile its own token index.
    rows = pid * BLOCK_M + tl.zeros([BLOCK_M], dtype=tl.int32)

    # A load is as wide as the compiler can prove its addresses aligned. Row r starts at
    # r * stride_m logits. E is a compile-time constant (a model's expert count never changes);
    # of stride_m the compiler knows what Triton specializes: whether it is a multiple of 16.
    # When E is one too, that is all it needs. Otherwise, where stride_m is a multiple of a
    # 16-byte (else an 8-byte) vector as E is, rounding it down to that multiple changes no
    # value but says so, and each thread loads whole vectors instead of one logit at a time:
    # 1.7x faster at E = 8, 1.3-1.5x at E = 60. The choices on E are made while compiling, so
    # a kernel holds at most two copies of the routing (three cost 15 % at E = 128 in fp32).
    VEC: tl.constexpr = 128 // logits_ptr.dtype.element_ty.primitive_bitwidth  # 16 bytes
    HALF: tl.constexpr = VEC // 2
    ALIGN: tl.constexpr = (
        1 if E % 16 == 0 else (VEC if E % VEC == 0 else (HALF if E % HALF == 0 else 1))
    )
    if (ALIGN > 1) and (stride_m % ALIGN == 0):
        _route_tile(
            logits_ptr,
            weight0_ptr,
            weight1_ptr,
            idx0_ptr,
            idx1_ptr,
            rows,
            M,
            E,
            stride_m // ALIGN * ALIGN,
            BLOCK_E,
        )
    else:
        _route_tile(
            logits_ptr, weight0_ptr, weight1_ptr, idx0_ptr, idx1_ptr, rows, M, E, stride_m, BLOCK_E
        )


@triton.jit
def _route_tile(
    logits_ptr,
    weight0_ptr,
    weight1_ptr,
    idx0_ptr,
    idx1_ptr,
    rows,
    M,
    E,
    stride_m,
    BLOCK_E: tl.constexpr,
):
    """Top-2 routing of the tokens ``rows``: their experts and weights, stored."""
    row_ok = rows < M

    # A chunk is a quarter of the row, kept between 64 and 128 bytes: wide enough for several
    # 16-byte loads per thread, few enough slots that the final reductions stay short. Rows of
    # at most 64 bytes (E <= 16 in fp32, <= 32 in bf16) go in 16-byte chunks: one load per slot,
    # and a thread holds whole rows, so picking a row's best needs no other thread.
    BITS: tl.constexpr = logits_ptr.dtype.element_ty.primitive_bitwidth
    WHOLE_ROWS: tl.constexpr = BLOCK_E * BITS <= 512
    CHUNK_BYTES: tl.constexpr = 16 if WHOLE_ROWS else min(max(BLOCK_E * BITS // 32, 64), 128)
    WIDE: tl.constexpr = min(BLOCK_E, CHUNK_BYTES * 8 // BITS)
    # The chunks cover E, not BLOCK_E: every lane past E would cost the compares of a real
    # logit (E = 160 is padded to 256). Chunks are halved (to no less than 32 bytes) where that
    # leaves no lane idle, as where half a chunk divides E and a whole one does not (E = 160 in
    # 5 chunks of 32), or where a row is not a multiple of 16 bytes (E = 60 in bf16): loads of
    # such rows are at most 8 bytes wide, so a 64-byte chunk spreads over 8 threads, and each
    # pick takes three rounds of shuffles, and each of the 8 repeats the row's weights.
    FILLS: tl.constexpr = (E % WIDE != 0) and (E % (WIDE // 2) == 0) and (WIDE * BITS >= 1024)
    NARROW: tl.constexpr = (E * BITS % 128 != 0) and (WIDE * BITS >= 512)
    HALVE: tl.constexpr = FILLS or NARROW
    CHUNK: tl.constexpr = WIDE // 2 if HALVE else WIDE
    NCHUNK: tl.constexpr = (E + CHUNK - 1) // CHUNK
    cols = tl.arange(0, CHUNK)
    # Rows past M read the last token again (they are never stored), so loads need no row mask.
    safe_rows = tl.minimum(rows, M - 1).to(tl.int64)
    chunk_ptrs = logits_ptr + safe_rows[:, None] * stride_m + cols[None, :]
    FP32: tl.constexpr = logits_ptr.dtype.element_ty == tl.float32
    if FP32:
        t1, i1, t2, i2 = _top2_fp32(chunk_ptrs, cols, E, NCHUNK, CHUNK)
    else:
        t1, i1, t2, i2 = _top2_16bit(chunk_ptrs, cols, E, NCHUNK, CHUNK)

    # The first pick: each row's best slot.
    l0, i0 = _pick(t1, i1)
    # TODO(top2-mask): Picking the best slot again finds the top-1 again. The slot that holds
    # the top-1 *position* must offer its second best instead (ties between equal logits must
    # still work, so compare positions, not values).
    rest, rest_idx = t1, i1
    l1, j1 = _pick(rest, rest_idx)
    if not FP32:
        l0, i0 = _from_key(l0, logits_ptr.dtype.element_ty)
        l1, j1 = _from_key(l1, logits_ptr.dtype.element_ty)

    # Renormalized top-2 weights straight from the two logits (the softmax sum cancels).
    e1 = tl.exp(l1 - l0)
    w1 = e1 / (1.0 + e1)
    # Where threads hold whole rows, each already holds the results it stores. Addresses the
    # compiler can prove consecutive it would regroup first, two rows to a thread, through
    # shared memory with a barrier per output (E = 8: a tenth of the instructions); tl.where
    # hides that the rows are consecutive.
    if WHOLE_ROWS:
        rows = tl.where(row_ok, rows, 0)
    tl.store(weight0_ptr + rows, 1.0 - w1, mask=row_ok)
    tl.store(weight1_ptr + rows, w1, mask=row_ok)
    tl.store(idx0_ptr + rows, i0, mask=row_ok)
    tl.store(idx1_ptr + rows, j1, mask=row_ok)


def fast_top2_gating(logits):
    """Top-2 routing of logits (M tokens, E >= 2 experts), any float dtype.

    Returns ``(w0, w1, idx0, idx1)`` like ``moe_top2_gating`` in exercise 03.
    """
    return host.run_fast_gating(moe_top2_gating_fast_kernel, logits)


if __name__ == "__main__":
    sys.exit(examples.fast_gating_example(fast_top2_gating))
