"""2-D attention's traps (01, 02): the classic slips of the online softmax and of the causal
mask. Each trap is one object: the checks name it, the validation gallery expects it, and the
docs' trap catalogue (docs/traps.md) is generated from the catalogue of every kind.

A trap's *forms* are what the mistaken kernel outputs on a case. Attention mistakes are replayed
in float32, tile by tile, the way a kernel computes (an underflow to 0/0 is part of what the
mistake produces); the rest in float64. Gating forms are built on the kernel's own choices where
the mistake only shows through them.
"""

from __future__ import annotations

import math

import numpy as np

from grader.model import Case, Output, Trap
from kata.kinds.attention import attention


def masked_attention(q, k, v, visible: np.ndarray) -> np.ndarray:
    """float64 attention where row i sees the keys visible[i]; a row that sees none gives NaN
    (0/0), as a kernel would."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    scores = np.where(visible, q @ k.T / np.sqrt(q.shape[1]), -np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = scores.max(axis=1, keepdims=True)
        p = np.exp(scores - np.where(np.isfinite(m), m, 0.0))
        return (p @ v) / p.sum(axis=1, keepdims=True)


def online_softmax(
    case: Case,
    visible: np.ndarray | None = None,
    *,
    m_init: float = -np.inf,
    running_max: bool = True,
    rescale_acc: bool = True,
    mask_after_exp: bool = False,
    skip_future: bool = False,
    fixed_reference: bool = False,
    rescale: str = "before",
) -> np.ndarray:
    """The flash loop of 01/02 in float32, with one mistake switched on.

    ``visible``: the mask (None: every key); ``m_init``: where the running maximum starts;
    ``running_max=False``: each tile's own maximum is the reference point; ``rescale_acc=False``:
    l_i follows the new maximum, acc does not; ``mask_after_exp``: the mask zeroes p after the
    maximum and the exponential took every key into account; ``skip_future``: the key loop of
    each query block stops after its last row (the solution's ``hi``); ``fixed_reference``:
    the reference point stays ``m_init`` (no running maximum at all); ``rescale``: when acc
    meets alpha, ``"before"`` the tile is added (right), ``"after"`` it (the new tile scaled
    down too), or ``"twice"`` (alpha squared).
    """
    q, k, v = (np.asarray(case.inputs[n], np.float32) for n in "qkv")
    M, N = len(q), len(k)
    scores = (q @ k.T) * np.float32(1.0 / math.sqrt(q.shape[1]))
    visible = np.ones((M, N), bool) if visible is None else visible
    out = np.empty((M, q.shape[1]))
    bm, bn = case.block_m, case.block_n
    with np.errstate(all="ignore"):
        for r0 in range(0, M, bm) if skip_future else (0,):
            rows = slice(r0, r0 + bm) if skip_future else slice(0, M)
            hi = min(N, r0 + bm) if skip_future else N
            m = np.full(len(scores[rows]), m_init, np.float32)
            l_i = np.zeros_like(m)
            acc = np.zeros((len(m), q.shape[1]), np.float32)
            for n0 in range(0, hi, bn):
                s = scores[rows, n0 : n0 + bn]
                seen = visible[rows, n0 : n0 + bn]
                if not mask_after_exp:
                    s = np.where(seen, s, np.float32(-np.inf))
                if fixed_reference:
                    m_new = m
                else:
                    m_new = np.maximum(m, s.max(axis=1)) if running_max else s.max(axis=1)
                alpha = np.exp(m - m_new)
                p = np.exp(s - m_new[:, None])
                if mask_after_exp:
                    p = np.where(seen, p, np.float32(0))
                l_i = l_i * alpha + p.sum(axis=1)
                tile = p @ v[n0 : n0 + bn]
                if not rescale_acc:
                    acc = acc + tile
                elif rescale == "after":
                    acc = (acc + tile) * alpha[:, None]
                elif rescale == "twice":
                    acc = acc * alpha[:, None] * alpha[:, None] + tile
                else:
                    acc = acc * alpha[:, None] + tile
                m = m_new
            out[rows] = acc / l_i[:, None]
    return out


def _grid(case: Case) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(len(case.inputs["q"]))[:, None], np.arange(len(case.inputs["k"]))[None, :]


def _causal(case: Case) -> np.ndarray:
    rows, cols = _grid(case)
    return rows >= cols


def _qkv(case: Case):
    return (case.inputs[n] for n in "qkv")


def _unrescaled(case: Case, _got: Output) -> list[Output]:
    return [{"out": online_softmax(case, rescale_acc=False)}]


def _rescaled_after_add(case: Case, _got: Output) -> list[Output]:
    return [{"out": online_softmax(case, rescale="after")}]


def _alpha_twice(case: Case, _got: Output) -> list[Output]:
    return [{"out": online_softmax(case, rescale="twice")}]


def _max_from_zero(case: Case, _got: Output) -> list[Output]:
    return [{"out": online_softmax(case, m_init=0.0)}]


def _not_running_max(case: Case, _got: Output) -> list[Output]:
    """Each tile's own maximum as the reference point, or none at all (exp of raw scores)."""
    return [
        {"out": online_softmax(case, running_max=False)},
        {"out": online_softmax(case, m_init=0.0, fixed_reference=True)},
    ]


def _block_skip(case: Case) -> np.ndarray:
    """Keys a kernel whose loop stops after its query block's last row ever loads."""
    rows, cols = _grid(case)
    return cols < (rows // case.block_m + 1) * case.block_m


def _non_causal(case: Case, _got: Output) -> list[Output]:
    q, k, v = _qkv(case)
    return [
        {"out": attention(q, k, v)},
        # No mask, but the loop already stops at the block's end: causal by whole tiles only.
        {"out": masked_attention(q, k, v, _block_skip(case))},
    ]


def _off_by_one(case: Case, _got: Output) -> list[Output]:
    rows, cols = _grid(case)
    one_ahead = rows + 1 >= cols
    q, k, v = _qkv(case)
    return [
        {"out": masked_attention(q, k, v, rows > cols)},  # strict: the diagonal is lost
        {"out": masked_attention(q, k, v, one_ahead)},  # one future key admitted
        {"out": masked_attention(q, k, v, one_ahead & _block_skip(case))},
    ]


def _after_exp(case: Case, _got: Output) -> list[Output]:
    return [
        {"out": online_softmax(case, _causal(case), mask_after_exp=True, skip_future=skip)}
        for skip in (True, False)
    ]


def _bottom_right(case: Case, _got: Output) -> list[Output]:
    rows, cols = _grid(case)
    br = rows + (len(case.inputs["k"]) - len(case.inputs["q"])) >= cols
    q, k, v = _qkv(case)
    return [{"out": masked_attention(q, k, v, br & skip)} for skip in (True, _block_skip(case))]


ACC_NOT_RESCALED = Trap(
    id="acc-not-rescaled",
    todo="rescale-acc",
    summary="acc was not rescaled when the running max grew",
    message="Once the running maximum grows, everything already summed into acc was weighted "
    "against the old maximum and is now too large. l_i was rescaled by alpha but acc was not: "
    "revisit TODO(rescale-acc).",
    hint="rescale acc by alpha, as l_i is (TODO rescale-acc)",
    why=(
        "`l_i` and `acc` are the denominator and the numerator of one weighted average, and "
        "every term in them is an `exp(score - m)` measured from the running maximum `m` of "
        "the moment it was added. When a later key block raises the maximum, `alpha = "
        "exp(m_old - m_new)` moves `l_i` to the new reference point. Without the same factor, "
        "each earlier term of `acc` stays too large by `exp(m_now - m_then)`, the product of "
        "every `alpha` it missed. The output then leans toward the early keys, and can even "
        "leave the range of the values in `v`, which no weighted average can do. The mistake "
        "is invisible while no later block raises a row's maximum (one key block, or the "
        "row's largest score in its first block), so the checks use keys whose every block "
        "raises it. The [guide's hand example](guide.md#why-acc-needs-the-same-alpha-as-l_i) "
        "works one row through."
    ),
    forms=_unrescaled,
    invariant="acc and l_i are always weighted against the same running maximum m_i.",
)

ACC_RESCALED_AFTER_ADD = Trap(
    id="acc-rescaled-after-add",
    todo="rescale-acc",
    summary="acc was rescaled after the new tile was added",
    message="acc was multiplied by alpha after this tile's p @ v was added to it. That tile is "
    "already weighted against the new maximum, so it was scaled down as well, and every tile "
    "ends up too small by the alpha of its own step. Rescale what acc held before, then add "
    "the tile: TODO(rescale-acc).",
    hint="rescale acc, then add the tile (TODO rescale-acc)",
    why=(
        "`alpha = exp(m_old - m_new)` converts the terms summed so far from the old reference "
        "point to the new one. The tile being added now was computed against `m_new` already "
        "(`p = exp(scores - m_new)`), so it must not be converted again. Writing `acc = (acc + "
        "p @ v) * alpha` converts it anyway: each tile comes out too small by the `alpha` of the "
        "step that added it, while `l_i`, rescaled before its own sum was added, does not. The "
        "mistake is invisible while no later block raises a row's maximum (every `alpha` is "
        "then 1 after the first tile), which is why the checks use keys whose every block "
        "raises it."
    ),
    forms=_rescaled_after_add,
    invariant="Each tile is added to acc already weighted against the running maximum; only what acc held before is rescaled.",
)

ALPHA_APPLIED_TWICE = Trap(
    id="alpha-applied-twice",
    todo="rescale-acc",
    summary="acc was multiplied by alpha twice",
    message="acc was multiplied by alpha twice (alpha squared) when the running maximum grew, "
    "while l_i was multiplied once: the earlier tiles now weigh too little against the "
    "denominator. One factor of alpha moves acc to the new maximum: TODO(rescale-acc).",
    hint="multiply acc by alpha once, as l_i (TODO rescale-acc)",
    why=(
        "Moving from one reference point to another is one multiplication: every term of "
        "`acc` and `l_i` carries `exp(score - m_old)`, and `alpha = exp(m_old - m_new)` turns "
        "that into `exp(score - m_new)`. A second factor of `alpha` (say, `acc * alpha` written "
        "where acc was already rescaled, or `alpha` applied to both `acc` and `p`) measures the "
        "earlier terms against a maximum that was never reached. Like the missing rescale, it "
        "only shows when a later block raises a row's maximum."
    ),
    forms=_alpha_twice,
    invariant="acc and l_i are rescaled by the same factor, alpha, once per tile.",
)

RUNNING_MAX_NOT_FROM_NEG_INF = Trap(
    id="running-max-not-from-neg-inf",
    todo="rescale-acc",
    summary="the running maximum starts above some rows' scores",
    message="The running maximum must start at -inf (or below every score). Started at 0, it "
    "stays the reference point of rows whose scores are all far below 0, exp() underflows for "
    "every key, and the row ends as 0/0. It is given code, just above TODO(rescale-acc).",
    hint="start m_i at -inf, not 0 (TODO rescale-acc)",
    why=(
        "The running maximum is the reference point of every `exp()`. Started at 0, it stays "
        "0 for a row whose scores all lie far below zero. Below about -104, `exp()` "
        "underflows to 0 in float32, so every key of that row adds 0 to `l_i` and to `acc`, "
        "and the row ends as 0/0 = NaN. On ordinary scores the mistake changes nothing, "
        "because any fixed reference point cancels in the final division. Start at -inf (or "
        "at any value below every real score, such as -1e30): on the first tile, `alpha = "
        "exp(-inf - m_new) = 0` then clears the empty sums."
    ),
    forms=_max_from_zero,
    invariant="The running maximum starts below every score (at -inf), so the first tile's maximum becomes the reference point.",
)

REFERENCE_NOT_RUNNING_MAX = Trap(
    id="reference-not-running-max",
    todo="rescale-acc",
    summary="the reference point of exp() is not the running maximum",
    message="The reference point of every exp() must be the running maximum, max(m_i, tile "
    "max). With another one (each tile's own maximum, or none at all), a score far above the "
    "reference, or alpha = exp(m_old - m_new) when a row's maximum falls, overflows and the "
    "row ends as inf or NaN. Revisit TODO(rescale-acc) and the lines around it.",
    hint="m_new = max(m_i, tile max) (TODO rescale-acc)",
    why=(
        "Moving the reference point is exact arithmetic; only overflow can break it. That is "
        "why the reference must be the running maximum `max(m_i, tile max)`: no score ever "
        "lies above it, so no `exp()` exceeds 1. With each tile's own maximum instead, `alpha "
        "= exp(m_old - m_new)` is above 1 whenever a row's maximum falls from one tile to the "
        "next, and overflows to inf once the fall passes about 88 (float32's `exp` overflows "
        "just above 88.7). With no reference at all (`exp(score)`), any score above about 88 "
        "overflows. Both variants are exact on ordinary scores, so only large scores, or a "
        "maximum that falls far, expose them."
    ),
    forms=_not_running_max,
    invariant="Every exp() is taken relative to the running maximum, so no exponent is ever positive.",
)

CAUSAL_MASK_MISSING = Trap(
    id="causal-mask-missing",
    todo="causal-mask",
    summary="future keys were attended to",
    message="This is correct non-causal attention, or causal only tile by tile: query rows also "
    "attend to keys after their own position. Add the per-pair condition (row sees keys up to "
    "itself) in TODO(causal-mask).",
    hint="hide keys after each row's position (TODO causal-mask)",
    why=(
        "Causality is a property of each (row, key) pair: row `i` may see keys `0..i`. Only a "
        "per-pair test enforces it. Lowering the loop bound `hi` skips the tiles that lie "
        "wholly in the future, which saves work, but the tiles that cross the diagonal still "
        "hold future keys for most of their rows, and without the per-pair test those keys "
        "count. The plain non-causal kernel is not buggy: it matches the non-causal oracle, "
        "because it computes a different task. The grader recognises both forms, the kernel "
        "with no mask at all and the kernel whose loop stops at the end of the query block "
        "with no per-pair mask."
    ),
    forms=_non_causal,
    invariant="Query row i gives weight 0 to every key after position i.",
)

CAUSAL_MASK_OFF_BY_ONE = Trap(
    id="causal-mask-off-by-one",
    todo="causal-mask",
    summary="the causal mask is off by one on the diagonal",
    message="The mask is one key off on the diagonal: each row must see its own key but not the "
    "next one (a strict comparison drops the diagonal, and row 0 then sees nothing). Check the "
    "comparison in TODO(causal-mask).",
    hint="row i sees key i, not i + 1 (TODO causal-mask)",
    why=(
        "The diagonal is exactly where `<` and `<=` disagree. A strict comparison (`key < "
        "row`) hides each row's own key, so row 0 sees no key at all: all its scores are "
        "-inf, `m_new` stays -inf, and `alpha = exp(-inf - (-inf))` is NaN, which then "
        "spreads through the row. One key too generous (`key <= row + 1`) lets every row see "
        "its next key. The right condition, `key <= row`, also guarantees that every row "
        "meets a real score in the first tile it visits."
    ),
    forms=_off_by_one,
    invariant="Row i sees key i itself, and no key after it.",
)

CAUSAL_MASK_AFTER_EXP = Trap(
    id="causal-mask-after-exp",
    todo="causal-mask",
    summary="future keys were masked after the maximum and exp",
    message="The mask was applied after the row maximum and the exponential saw every key. "
    "When a future key scores far above the visible ones, it becomes the reference point, the "
    "visible keys underflow to 0, and the row is lost. Mask before the max and the exp, not "
    "after: TODO(causal-mask).",
    hint="mask scores before the max and exp (TODO causal-mask)",
    why=(
        "The mask must act on the scores, before the row maximum and the exponential. Zeroing "
        "`p` after them looks equivalent, and is exact on ordinary scores, because the "
        "reference point cancels. But the maximum has then been taken over the hidden keys "
        "too. When a future key scores far above every visible one, it becomes the reference "
        "point, `exp()` of every visible score underflows to 0, both sums stay 0, and the row "
        "ends as 0/0 = NaN. Set hidden scores to -inf (or to a finite value far below every "
        "real score) before `tl.max`."
    ),
    forms=_after_exp,
    invariant="A hidden key never reaches the row maximum or the exponential.",
)

CAUSAL_BOTTOM_RIGHT = Trap(
    id="causal-bottom-right",
    todo="causal-mask",
    summary="the causal mask is aligned bottom-right",
    message="The mask is aligned bottom-right (the last query sees the last key, as in "
    "FlashAttention >= 2.1). This exercise uses the chapter's top-left alignment, like torch's "
    "is_causal=True: row i sees keys 0..i whatever N is. Revisit TODO(causal-mask).",
    hint="row i sees keys 0..i whatever N is (TODO causal-mask)",
    why=(
        'When M != N, "the diagonal" needs a convention. The chapter, the kata and torch\'s '
        "`scaled_dot_product_attention(is_causal=True)` align it top-left: row `i` sees keys "
        "`0..i`, whatever N is. FlashAttention 2.1 and later align it bottom-right: row `i` "
        "sees keys `0..i + (N - M)`, so that the last query sees the last key. The two agree "
        "only when M = N, so square cases cannot tell them apart; the rectangular ones can. "
        "The [guide](guide.md#alignment-when-m--n) draws both masks for M=3, N=5."
    ),
    forms=_bottom_right,
    invariant="The mask is aligned top-left: row i sees keys 0..i, whatever N is.",
)

# fmt: off
TRAPS = (
    ACC_NOT_RESCALED, ACC_RESCALED_AFTER_ADD, ALPHA_APPLIED_TWICE,
    RUNNING_MAX_NOT_FROM_NEG_INF, REFERENCE_NOT_RUNNING_MAX,
    CAUSAL_MASK_MISSING, CAUSAL_MASK_OFF_BY_ONE, CAUSAL_MASK_AFTER_EXP, CAUSAL_BOTTOM_RIGHT,
)
# fmt: on
