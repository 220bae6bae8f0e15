"""03's traps: the classic slips of top-2 gating. Forms are built in float64, on the kernel's
own choices where the mistake only shows through them."""

from __future__ import annotations

import numpy as np

from grader.model import Case, Output, Trap
from kata.kinds.gating import softmax, top2_gating


def _probs32(logits: np.ndarray) -> np.ndarray:
    """The softmax as a kernel computes it, in float32 (small probabilities underflow to 0)."""
    x = np.asarray(logits, np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _top1_twice(case: Case, _got: Output) -> list[Output]:
    _, _, idx0, _ = top2_gating(case.inputs["logits"])
    return [{"idx0": idx0, "idx1": idx0}]


def _fill_too_high(case: Case, _got: Output) -> list[Output]:
    """The top-1 position filled with 0 instead of -inf before the second pick: in probability
    space 0 ties with every probability that underflowed; in logit space it beats every
    negative logit."""
    logits = np.asarray(case.inputs["logits"], np.float32)
    _, _, idx0, _ = top2_gating(logits)
    top1 = np.arange(logits.shape[1])[None, :] == idx0[:, None]
    forms = []
    for values in (_probs32(logits), logits):
        idx1 = np.argmax(np.where(top1, np.float32(0), values), axis=1)  # lowest index on ties
        forms.append({"idx0": idx0, "idx1": idx1})
    return forms


def _highest_index_on_ties(case: Case, _got: Output) -> list[Output]:
    logits = np.asarray(case.inputs["logits"], np.float64)
    *_, idx0, idx1 = top2_gating(logits[:, ::-1])  # mirrored: the last index wins ties
    last = logits.shape[1] - 1
    return [{"idx0": last - idx0, "idx1": last - idx1}]


def _masked_by_value(case: Case, _got: Output) -> list[Output]:
    """The top-1 taken out by value (``probs == p0``), as the kernel computes it: float32
    probabilities padded with 0 to a power of two, and argmax's lowest index among equals (0
    on a row that is all -inf). On a tie every expert sharing the maximum leaves with it."""
    logits = np.asarray(case.inputs["logits"], np.float32)
    M, E = logits.shape
    block = 1 << max(E - 1, 0).bit_length()
    probs = np.zeros((M, block), np.float32)
    probs[:, :E] = _probs32(logits)
    p0 = probs.max(axis=1, keepdims=True)
    idx0 = np.argmax(probs, axis=1)
    idx1 = np.argmax(np.where(probs == p0, np.float32(-np.inf), probs), axis=1)
    return [{"idx0": idx0, "idx1": idx1}]


def _raw_weights(case: Case, got: Output) -> list[Output]:
    """The softmax probabilities of the experts the kernel itself chose, not renormalized."""
    probs = softmax(case.inputs["logits"])
    E = probs.shape[1]
    i0, i1 = got["idx0"].astype(np.int64), got["idx1"].astype(np.int64)
    if ((i0 < 0) | (i0 >= E) | (i1 < 0) | (i1 >= E)).any():
        return []
    rows = np.arange(len(probs))
    return [{"w0": probs[rows, i0], "w1": probs[rows, i1]}]


TOP2_NOT_MASKED = Trap(
    id="top2-not-masked",
    todo="top2-mask",
    summary="the top-1 expert was picked again as top-2",
    message="The second max/argmax ran over the same row and found the top-1 expert again, so "
    "every token got the same expert twice. Take the top-1 position out first: TODO(top2-mask).",
    hint="take the top-1 position out first (TODO top2-mask)",
    why=(
        "`max` and `argmax` are functions of the row: asked twice about the same row, they "
        'give the same answer, so the "second" expert is the first one again and every token '
        "is routed twice to one expert. The top-1 has to leave the candidates before the "
        "second search, and it should leave by **position** (`cols == i0`), not by value: "
        "masking every expert whose probability equals the top-1's also removes the experts "
        "tied with it (the trap `top1-masked-by-value`)."
    ),
    forms=_top1_twice,
    invariant="A token's two experts are different: the top-1 is out of the second search.",
)

TOP1_FILL_TOO_HIGH = Trap(
    id="top1-fill-too-high",
    todo="top2-mask",
    summary="the value put in the top-1's place can still win",
    message="The value put in the top-1's place before the second pick must be below every real "
    "candidate. 0 ties with a probability that underflowed to 0 (and beats every negative "
    "logit), so the top-1 expert can be picked again. Use -inf: TODO(top2-mask).",
    hint="fill the top-1 slot with -inf (TODO top2-mask)",
    why=(
        "The value written into the top-1's slot must lose to every real candidate. 0 does "
        "not. Among probabilities it ties with every probability that underflowed to 0 in "
        "float32 (a logit far above the rest does that to all the others), and argmax, which "
        "takes the lowest index among equal values, can then return the top-1 again. Among "
        "logits, 0 beats every negative logit. -inf always loses; so does any value below "
        "every candidate, such as -1 among probabilities, which are never negative."
    ),
    forms=_fill_too_high,
    invariant="The value put in the top-1's place loses to every real candidate.",
)

TOP1_MASKED_BY_VALUE = Trap(
    id="top1-masked-by-value",
    todo="top2-mask",
    summary="every expert tied with the top-1 was taken out with it",
    message="The top-1 was taken out of the second search by its value (probs == p0), which "
    "also takes out every expert tied with it: on a tie the second expert is the third-best "
    "one, or, on a row where all experts tie, none is left. Take out the position cols == i0: "
    "TODO(top2-mask).",
    hint="mask cols == i0, not probs == p0 (TODO top2-mask)",
    why=(
        "`tl.where(probs == p0, -inf, probs)` removes every expert whose probability equals "
        "the top-1's. Without ties that is the top-1 alone, so random logits pass. With an "
        "exact tie it removes both tied experts: the second pick is the third-best expert "
        "instead of the tied one, and on a row where every expert ties (an all-zero row of "
        'logits) nothing is left but -inf and padding, so the "second" expert is expert 0 '
        "again or a padded one past E. Ties are not exotic: they come from zero or "
        "quantized logits. The top-1 is one position, `i0`, so the mask is `cols == i0`."
    ),
    forms=_masked_by_value,
    invariant="Only the top-1's position leaves the second search: an expert tied with it "
    "can still be picked second.",
)

TIES_NOT_LOWEST_INDEX = Trap(
    id="ties-not-lowest-index",
    todo="top2-mask",
    summary="equal logits went to the highest expert index",
    message="Experts with equal logits must be taken lowest index first (the rule tl.argmax "
    "follows), so that routing is reproducible. Your kernel takes the highest index first: "
    "revisit TODO(top2-mask).",
    hint="ties go to the lowest expert index (TODO top2-mask)",
    why=(
        "When experts have exactly equal logits, the top two are not unique, and a routing "
        "rule must pick. The kata's rule is the one `tl.argmax` follows: among equal values, "
        "the lowest index first. A fixed rule keeps routing reproducible. `torch.topk` does "
        "not define an order among ties, so the grader compares the chosen experts by "
        "probability and applies the index rule only on exact ties. A kernel that takes the "
        "highest index first (for example, `tl.max` over `tl.where(probs == p0, cols, -1)`) "
        "breaks the rule on those rows only."
    ),
    forms=_highest_index_on_ties,
    invariant="Equal logits go to the lowest expert index first.",
)

WEIGHTS_NOT_RENORMALIZED = Trap(
    id="weights-not-renormalized",
    todo="renormalize",
    summary="weights are raw softmax probabilities",
    message="The weights are the raw softmax probabilities of the two chosen experts. They sum "
    "to the top-2 share of all E experts, which is below one by a different amount for every "
    "token; divide by their sum: TODO(renormalize).",
    hint="make w0 + w1 = 1 per token (TODO renormalize)",
    why=(
        "This exercise follows the chapter's specification: the two weights are the chosen "
        "experts' probabilities divided by their sum, so that `w0 + w1 = 1`. Without the "
        "division the weights sum to the top-2 share of all E experts, which falls short of "
        "one by a different amount for every token (a peaked row keeps most of its mass in "
        "its top two, a flat row does not), so no constant factor downstream can repair it. "
        "Whether to renormalize is a model's design choice, and the bug is using weights "
        "other than the ones the model was trained with. The weights are judged on the "
        "experts your kernel chose; while it picks one expert twice they cannot be judged at "
        "all (the check is `blocked`), but the trap is still named."
    ),
    forms=_raw_weights,
    invariant="w0 + w1 = 1 for every token.",
)

# fmt: off
TRAPS = (
    TOP2_NOT_MASKED, TOP1_FILL_TOO_HIGH, TOP1_MASKED_BY_VALUE, TIES_NOT_LOWEST_INDEX,
    WEIGHTS_NOT_RENORMALIZED,
)
# fmt: on
