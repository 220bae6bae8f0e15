"""Exercise 05 (performance track): MoE top-2 routing at production sizes.

The chapter's gating kernel gives each token its own program: at a million tokens that is a
million tiny programs, each reading one row of E logits. Here one program owns BLOCK_M tokens
and reads their logits as one (BLOCK_M, BLOCK_E) tile, so every load is wide and the GPU streams
the logits at close to its memory bandwidth: the whole job is reading M * E numbers once.

Each top-k pick is a single max over a packed 64-bit key (the logit's bits, then the expert's
index), instead of a max and an argmax. It also skips work the renormalized weights never needed: with l0 >= l1 the two largest logits,
softmax's denominator cancels, and w1 = exp(l1 - l0) / (1 + exp(l1 - l0)), w0 = 1 - w1.
Ties go to the lowest expert index (as vLLM's router does).

Reference: ``kata.oracles.top2_gating``. Run the file for a quick check; ``nox -s bench`` times it.
"""

import sys
from pathlib import Path

try:  # The runtime picks GPU or interpreter, and must run before triton is imported.
    from kata import runtime
except ModuleNotFoundError:  # run as a script from a checkout of the kata
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kata import runtime

import triton
import triton.language as tl

from kata import examples, host

# Several rows per program; the autotuner picks how many for each E on the GPU. The interpreter
# runs one configuration (it would otherwise "benchmark" them all, slowly).
CONFIGS = [
    triton.Config({"BLOCK_M": bm}, num_warps=w) for bm, w in ((16, 4), (32, 4), (64, 8), (128, 8))
]
if runtime.INTERPRETER:
    CONFIGS = [triton.Config({"BLOCK_M": 16}, num_warps=4)]


@triton.jit
def _unpack_logit(key):
    """The float logit held in the upper 32 bits of a packed key."""
    order = (key >> 32).to(tl.int32)
    bits = tl.where(order < 0, order ^ 0x7FFFFFFF, order)
    return bits.to(tl.float32, bitcast=True)


@triton.autotune(configs=CONFIGS, key=["E"])
@triton.jit
def moe_top2_gating_fast_kernel(
    logits_ptr, weight0_ptr, weight1_ptr, idx0_ptr, idx1_ptr,
    M, E, stride_m,
    BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_E)
    # TODO(rows-per-program): This program owns BLOCK_M consecutive tokens, starting at
    # pid * BLOCK_M. Give each row of the tile its own token index.
    rows = pid * BLOCK_M + tl.zeros([BLOCK_M], dtype=tl.int32)
    row_ok = rows < M
    mask = row_ok[:, None] & (cols[None, :] < E)

    # One wide load of the whole tile. Padded experts become -inf and never win; padded rows
    # read zeros (they are never stored) so that no -inf - -inf = NaN is computed for them.
    ptrs = logits_ptr + rows[:, None].to(tl.int64) * stride_m + cols[None, :]
    logits = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    logits = tl.where(cols[None, :] < E, logits, float("-inf"))

    # Each max/argmax pair is two reductions across the tile; one max over a packed key does
    # both. The float's bits become an int32 that sorts like the float (negative values have
    # their magnitude bits flipped); the low 32 bits hold BLOCK_E - 1 - col, so that among equal
    # logits the lowest expert index gives the largest key.
    bits = logits.to(tl.int32, bitcast=True)
    order = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    packed = (order.to(tl.int64) << 32) | (BLOCK_E - 1 - cols)[None, :].to(tl.int64)

    top1 = tl.max(packed, axis=1)
    i0 = BLOCK_E - 1 - (top1 & 0xFFFFFFFF).to(tl.int32)
    # TODO(top2-mask): A second max over the same keys finds the top-1 again. Take each row's
    # top-1 *position* out of the running first (ties between equal logits must still work).
    rest = packed
    top2 = tl.max(rest, axis=1)
    i1 = BLOCK_E - 1 - (top2 & 0xFFFFFFFF).to(tl.int32)
    l0 = _unpack_logit(top1)
    l1 = _unpack_logit(top2)

    # Renormalized top-2 weights straight from the two logits (the softmax sum cancels).
    e1 = tl.exp(l1 - l0)
    w1 = e1 / (1.0 + e1)
    tl.store(weight0_ptr + rows, 1.0 - w1, mask=row_ok)
    tl.store(weight1_ptr + rows, w1, mask=row_ok)
    tl.store(idx0_ptr + rows, i0.to(tl.int32), mask=row_ok)
    tl.store(idx1_ptr + rows, i1.to(tl.int32), mask=row_ok)


def fast_top2_gating(logits):
    """Top-2 routing of logits (M tokens, E >= 2 experts), any float dtype.

    Returns ``(w0, w1, idx0, idx1)`` like ``moe_top2_gating`` in exercise 03.
    """
    return host.launch_fast_gating(moe_top2_gating_fast_kernel, logits)


if __name__ == "__main__":
    sys.exit(examples.fast_gating_example(fast_top2_gating))
