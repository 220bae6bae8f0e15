"""Exercise 03: Mixture-of-Experts top-2 gating (chapter 21.3).

For every token (one row of E expert logits) pick the two most probable experts and the weights
that mix their outputs: softmax over the row, the top-1 by max/argmax, the top-2 by max/argmax over
the row with the top-1 taken out, then, as the chapter specifies, both probabilities divided by
their sum so that the two weights of every token add up to one. Among equal probabilities the
lowest expert index comes first, the rule tl.argmax follows (torch.topk promises no order).

Only the routing decision is computed here; sending tokens to their experts (grouping, all-to-all
across GPUs, running the experts, putting tokens back in order) is outside the chapter.

Reference: ``kata.oracles.top2_gating`` and ``torch.topk(torch.softmax(logits, -1), 2)``.
Run ``python 03_moe_gating.py`` for the chapter's worked example.
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


@triton.jit
def moe_top2_gating_kernel(
    logits_ptr,
    weight0_ptr,
    weight1_ptr,
    idx0_ptr,
    idx1_ptr,
    M,
    E,
    stride_m,
    BLOCK_E: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_E)
    col_ok = cols < E

    # Padded experts load -inf: after the softmax they hold probability 0 and can never win.
    logits = tl.load(logits_ptr + row * stride_m + cols, mask=col_ok, other=float("-inf"))
    logits = logits.to(tl.float32)
    e = tl.exp(logits - tl.max(logits, axis=0))
    probs = e / tl.sum(e, axis=0)

    # argmax returns the lowest index among equal maxima, which is the tie rule we want.
    p0 = tl.max(probs, axis=0)
    i0 = tl.argmax(probs, axis=0)
    # TODO(top2-mask): A second max/argmax over the same row finds the top-1 again. Take the
    # top-1 *position* out of the running first (so ties between equal values still work).
    rest = probs
    p1 = tl.max(rest, axis=0)
    i1 = tl.argmax(rest, axis=0)

    # TODO(renormalize): p0 and p1 are shares of all E experts and sum to less than one, by a
    # different amount for every token. Turn them into weights of the two chosen experts only.
    w0 = p0
    w1 = p1

    tl.store(weight0_ptr + row, w0)
    tl.store(weight1_ptr + row, w1)
    tl.store(idx0_ptr + row, i0.to(tl.int32))
    tl.store(idx1_ptr + row, i1.to(tl.int32))


def moe_top2_gating(logits):
    """Top-2 routing of logits (M tokens, E >= 2 experts).

    Returns ``(w0, w1, idx0, idx1)``: float32 weights with ``w0 + w1 == 1`` and int32 expert
    indices with ``w0 >= w1``, each of shape (M,).
    """
    return host.launch_gating(moe_top2_gating_kernel, logits)


if __name__ == "__main__":
    sys.exit(examples.gating_example(moe_top2_gating))
