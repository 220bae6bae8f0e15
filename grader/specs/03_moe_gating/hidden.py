"""Exercise 03, the instructor's checks and gallery (TODOs top2-mask and renormalize).

The two TODOs are judged apart: the top-2 checks look only at the indices, the renormalization
checks only at the weights, on the tokens where the kernel chose two distinct, valid experts
(the weights of one expert taken twice say nothing about renormalizing). Hostile cases: all
negative logits with padded experts (a 0 fill beats them), one logit 200 above the rest (in
float32 the other probabilities underflow to exactly 0, which a 0 fill ties with), exact ties
(the lowest index wins, as tl.argmax does). Every weights check also gets logits beyond
float32's exp range (``grader.kinds.gating.boundary.extremes``): near +100, near -120, both in one row, tied
there. Weights from exp() of raw logits come out inf / inf or 0 / 0 on them; when the given
softmax is what drops the maximum, the renormalization checks, the only judges of the weights,
charge it all the same. Strided rows are given code: a 0-point note.
"""

import numpy as np

from grader.kinds.gating import boundary
from grader.kinds.gating.inputs import dominant, logits, ties
from grader.kinds.gating.traps import (
    TIES_NOT_LOWEST_INDEX,
    TOP1_FILL_TOO_HIGH,
    TOP1_MASKED_BY_VALUE,
    TOP2_NOT_MASKED,
    WEIGHTS_NOT_RENORMALIZED,
)
from grader.model import Case, Check, right, wrong
from kata.kinds.gating import softmax


def _raw_sums_vary(cases: list[Case]) -> None:
    """The chapter's demonstration: raw top-2 sums fall short of 1 by a per-token amount."""
    from grader.model import GraderError

    for case in cases:
        probs = -np.sort(-softmax(case.inputs["logits"]), axis=1)
        raw = probs[:, 0] + probs[:, 1]
        if 1.0 - raw.max() < 0.05 or raw.max() - raw.min() < 0.1:
            raise GraderError(
                f"grader self-check: raw top-2 sums of {case.name} span {raw.min():.3f}.."
                f"{raw.max():.3f}; they should stay below 1 and vary from token to token"
            )


# fmt: off
CASES = [
    Case(name="random-64x8", about="64 tokens x 8 experts, random logits", inputs=logits(200, 64, 8)),
    Case(name="random-33x16", about="33 tokens x 16 experts, random logits",
         inputs=logits(201, 33, 16)),
    Case(name="two-experts", about="16 tokens x 2 experts", inputs=logits(206, 16, 2, scale=2.0)),
    Case(name="negative-e5", about="16 tokens x 5 experts (padded to 8), all logits negative",
         inputs=logits(203, 16, 5, shift=-8.0)),
    Case(name="negative-e6", about="16 tokens x 6 experts (padded to 8), all logits negative",
         inputs=logits(204, 16, 6, shift=-8.0)),
    Case(name="negative-e12", about="16 tokens x 12 experts (padded to 16), all logits negative",
         inputs=logits(205, 16, 12, shift=-8.0)),
    Case(name="dominant-e8",
         about="16 tokens x 8 experts, one logit 200 above the rest (often at expert 0)",
         inputs=dominant(207, 16, 8)),
    Case(name="dominant-e6", about="16 tokens x 6 experts (padded), one logit 200 above the rest",
         inputs=dominant(208, 16, 6)),
    Case(name="ties-e8", about="6 tokens x 8 experts with exact ties (all-zero rows, shared maxima)",
         inputs=ties(8)),
    Case(name="ties-e5", about="6 tokens x 5 experts with exact ties (all-zero rows, shared maxima)",
         inputs=ties(5)),
    boundary.extremes(209, 16, 8),
    boundary.extremes(210, 12, boundary.experts(8)[1]),
    boundary.extremes(211, 10, 2, kinds=("high", "low", "mixed", "tie-high", "tie-low")),
    Case(name="rows-sliced-20x8", about="20 tokens x 8 experts, every other row of a larger tensor",
         inputs=logits(202, 20, 8), layout={"logits": "row-sliced"}, twin="rows-plain-20x8"),
    Case(name="rows-plain-20x8", about="the strided case's numbers, contiguous",
         inputs=logits(202, 20, 8)),
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="top2-random", todo="top2-mask", points=10,
          about="Random logits, 8 and 16 experts, and E = 2",
          cases=("random-64x8", "random-33x16", "two-experts"), judge="top2",
          traps=(TOP2_NOT_MASKED,)),
    Check(id="top2-padded-experts", todo="top2-mask", points=5,
          about="E = 5, 6, 12 (padded to a power of two) with all-negative logits",
          cases=("negative-e5", "negative-e6", "negative-e12"), judge="top2",
          traps=(TOP2_NOT_MASKED,)),
    Check(id="top2-dominant-logit", todo="top2-mask", points=5,
          about="One logit 200 above the rest: the others' probabilities underflow to 0",
          cases=("dominant-e8", "dominant-e6", "negative-e6"), judge="top2",
          traps=(TOP2_NOT_MASKED, TOP1_FILL_TOO_HIGH)),
    Check(id="top2-ties", todo="top2-mask", points=5,
          about="Exact ties: distinct experts, the lowest index first",
          cases=("ties-e8", "ties-e5"), judge="top2",
          traps=(TOP2_NOT_MASKED, TOP1_MASKED_BY_VALUE, TIES_NOT_LOWEST_INDEX)),
    Check(id="renormalized-random", todo="renormalize", points=10,
          about="Random logits: w0 + w1 = 1 with w = p / (p0 + p1) of the chosen experts",
          cases=("random-64x8", "random-33x16", "extreme-logits-16x8"),
          judge="weights", traps=(WEIGHTS_NOT_RENORMALIZED,), proof=_raw_sums_vary),
    Check(id="renormalized-padded-experts", todo="renormalize", points=5,
          about="E = 5, 6, 12 with all-negative logits; E = 9 with logits out of exp's range",
          cases=("negative-e5", "negative-e6", "negative-e12", "extreme-logits-12x9"),
          judge="weights", traps=(WEIGHTS_NOT_RENORMALIZED,)),
    # With E = 2 the raw probabilities already sum to one, so that case rides along with ties,
    # where the mistake shows, instead of paying on its own.
    Check(id="renormalized-ties-and-two-experts", todo="renormalize", points=10,
          about="Exact ties (0.5 / 0.5 on all-zero rows), and E = 2",
          cases=("ties-e8", "ties-e5", "two-experts", "extreme-logits-10x2"), judge="weights",
          traps=(WEIGHTS_NOT_RENORMALIZED,)),
    Check(id="strided-rows", todo=None, points=0,
          about="Note on given code: every other row of a larger tensor",
          cases=("rows-sliced-20x8",), judge="twin", contract=True),
]
# fmt: on

REFERENCE = {
    "top2-mask": 'rest = tl.where(cols == i0, float("-inf"), probs)',
    "renormalize": "total = p0 + p1\nw0 = p0 / total\nw1 = p1 / total",
}
_MASK_TOP1 = 'rest = tl.where(cols == i0, float("-inf"), probs)'
# The two chosen logits, for weights computed from them instead of from p0 and p1.
_LOGITS = """\
l0 = tl.max(logits, axis=0)
l1 = tl.max(tl.where(cols == i1, logits, float("-inf")), axis=0)
"""

# fmt: off
GALLERY = [
    wrong("03-top2-not-masked", "the second max/argmax finds the top-1 again; the right "
          "renormalization cannot be judged (blocked, not paid, not failed)",
          fills={"top2-mask": "rest = probs"}, traps=["top2-not-masked"], breaks="top2-mask",
          failed=["top2-random", "top2-padded-experts", "top2-dominant-logit", "top2-ties"]),
    wrong("03-not-renormalized", "raw softmax probabilities as weights",
          fills={"renormalize": "w0 = p0\nw1 = p1"}, traps=["weights-not-renormalized"],
          breaks="renormalize", failed=["renormalized-random", "renormalized-padded-experts"]),
    wrong("03-top1-twice-swapped-weights", "top-1 twice, and a renormalization that swaps the "
          "weights: symmetric when both experts are one, so it is blocked, never paid",
          fills={"top2-mask": "rest = probs", "renormalize": "w0 = p1 / (p0 + p1)\nw1 = p0 / (p0 + p1)"},
          traps=["top2-not-masked"], score="zero"),
    wrong("03-swapped-renormalization", "w0 and w1 swapped inside the renormalization",
          fills={"renormalize": "w0 = p1 / (p0 + p1)\nw1 = p0 / (p0 + p1)"},
          breaks="renormalize", failed=["renormalized-random"]),
    wrong("03-weights-from-raw-logits", "the two chosen logits' softmax from exp() of the raw "
          "logits: exact until exp overflows past 88 or underflows below -103",
          fills={"renormalize": _LOGITS + "e0, e1 = tl.exp(l0), tl.exp(l1)\nw0 = e0 / (e0 + e1)\n"
                                          "w1 = e1 / (e0 + e1)"},
          failed=["renormalized-random", "renormalized-padded-experts",
                  "renormalized-ties-and-two-experts"], breaks="renormalize"),
    wrong("03-top1-fill-zero", "the top-1 slot filled with 0: ties with probabilities that "
          "underflowed to 0", fills={"top2-mask": "rest = tl.where(cols == i0, 0.0, probs)"},
          traps=["top1-fill-too-high"], breaks="top2-mask", failed=["top2-dominant-logit"]),
    wrong("03-top1-masked-by-value", "masks every expert equal to the top-1 value: wrong on "
          "exact ties", fills={"top2-mask": 'rest = tl.where(probs == p0, float("-inf"), probs)'},
          traps=["top1-masked-by-value"], breaks="top2-mask", failed=["top2-ties"]),
    wrong("03-ties-highest-index", "picks the highest index among equal maxima",
          edits=[("i0 = tl.argmax(probs, axis=0)", "i0 = tl.max(tl.where(probs == p0, cols, -1), axis=0)"),
                 ("i1 = tl.argmax(rest, axis=0)", "i1 = tl.max(tl.where(rest == p1, cols, -1), axis=0)")],
          traps=["ties-not-lowest-index"], failed=["top2-ties"]),
    wrong("03-zero-padded-experts", "padded experts load 0, which beats all-negative logits "
          "when E < BLOCK_E", edits=[('mask=col_ok, other=float("-inf"))', "mask=col_ok, other=0.0)")],
          failed=["top2-padded-experts"]),
    wrong("03-swapped-weights", "w0 and w1 stored the wrong way round",
          edits=[("tl.store(weight0_ptr + row, w0)", "tl.store(weight0_ptr + row, w1)"),
                 ("tl.store(weight1_ptr + row, w1)", "tl.store(weight1_ptr + row, w0)")],
          failed=["renormalized-random"]),
    right("03-finite-top1-mask", "top-1 masked with -1 (below any probability) instead of -inf",
          fills={"top2-mask": "rest = tl.where(cols == i0, -1.0, probs)"}),
    right("03-top1-first-of-its-value", "the top-1's position found by value, the lowest "
          "index holding p0, and only that one taken out (the twin of 03-top1-masked-by-value)",
          fills={"top2-mask": "first = tl.min(tl.where(probs == p0, cols, BLOCK_E), axis=0)\n"
                              'rest = tl.where(cols == first, float("-inf"), probs)'}),
    right("03-renormalize-one-minus", "w1 as 1 - w0",
          fills={"renormalize": "w0 = p0 / (p0 + p1)\nw1 = 1.0 - w0"}),
    right("03-weights-from-logit-gap", "the weights from the two chosen logits' gap, as 05 "
          "computes them: exp(l1 - l0) never overflows",
          fills={"renormalize": _LOGITS + "e1 = tl.exp(l1 - l0)\nw0 = 1.0 / (1.0 + e1)\n"
                                          "w1 = e1 / (1.0 + e1)"}),
    # Two verdicts a red-team probe found in v4, refused by the region rules on both backends.
    wrong("03-tie-break-right", "the top-1 taken out by an argmax told to prefer the highest "
          "index: the interpreter ignores tie_break_left, a GPU takes another slot on ties",
          fills={"top2-mask": 'rest = tl.where(cols == tl.argmax(probs, axis=0, tie_break_left=False), float("-inf"), probs)'},
          score="zero", traps=[], expect={"error": "tie_break_left"}),
    wrong("03-nan-mask", "the top-1 masked with NaN: the interpreter's argmax skips it, a GPU's "
          "compares it in reduction order", fills={"top2-mask": 'rest = tl.where(cols == i0, float("nan"), probs)'},
          score="zero", traps=[], expect={"error": "float\\(\"nan\"\\)"}),
    wrong("03-neighbour-write", "renormalize also writes the next row's weight while it is "
          "still poisoned: right in every sequential order, a race on a GPU",
          fills={"renormalize": "total = p0 + p1\nw0 = p0 / total\nw1 = p1 / total\nnxt_ok = row + 1 < M\n"
                                "seen = tl.load(weight0_ptr + row + 1, mask=nxt_ok, other=0.0)\n"
                                "tl.store(weight0_ptr + row + 1, tl.where(seen != seen, 0.0, seen), mask=nxt_ok)"},
          score="zero", traps=[], expect={"error": "writes an output"}),
    right("03-chapter", "the chapter's own kernel: its own names, torch.topk's check",
          file="chapter.py", integrity=True),
]
# fmt: on
