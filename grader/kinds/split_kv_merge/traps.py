"""08's traps: the classic slips of the split-KV merge, replayed in float32 the way 08's merge
kernel computes (an underflow to 0/0 is part of what the mistake produces)."""

from __future__ import annotations

import math

import numpy as np

from grader.model import Case, Output, Trap


def _partials(case: Case):
    S = case.params["NUM_SPLITS"]
    return (np.asarray(case.inputs[n][:, :S], np.float32) for n in ("m", "l", "acc"))


def merged(case: Case, *, shift: bool = True, rescale_l: bool = True, rescale_acc: bool = True):
    """``(out, lse, m, L)``: the merge of 08 in float32 as a kernel computes it, with one
    mistake switched on. ``shift=False``: the weights are exp(m_j) itself, not exp(m_j - m)
    (exp overflows and underflows: inf / inf and 0 / 0 come out NaN); ``rescale_l=False``: the
    denominator adds the l_j unweighted; ``rescale_acc=False``: the numerator adds the acc_j
    unweighted."""
    m, l, acc = _partials(case)  # noqa: E741
    with np.errstate(all="ignore"):
        top = m.max(axis=1) if shift else np.zeros(len(m), np.float32)
        w = np.exp(m - top[:, None])
        total = (w * l).sum(axis=1) if rescale_l else l.sum(axis=1)
        num = (w[:, :, None] * acc).sum(axis=1) if rescale_acc else acc.sum(axis=1)
        return num / total[:, None], top + np.log(total), top, total


def _averaged(case: Case, _got: Output) -> list[Output]:
    """The non-empty splits' own outputs acc_j / l_j averaged; their own log-sum-exps
    m_j + ln l_j averaged."""
    m, l, acc = _partials(case)  # noqa: E741
    filled = l > 0
    count = filled.sum(axis=1)
    safe = np.where(filled, l, np.float32(1))
    with np.errstate(all="ignore"):
        out = (acc / safe[:, :, None]).sum(axis=1) / count[:, None]
        lse = np.where(filled, m + np.log(safe), np.float32(0)).sum(axis=1) / count
    return [{"out": out}, {"lse": lse}]


def _unshifted(case: Case, _got: Output) -> list[Output]:
    out, lse, _, _ = merged(case, shift=False)
    return [{"out": out}, {"lse": lse}]


def _l_not_rescaled(case: Case, _got: Output) -> list[Output]:
    out, lse, _, _ = merged(case, rescale_l=False)
    return [{"out": out}, {"lse": lse}]


def _acc_not_rescaled(case: Case, _got: Output) -> list[Output]:
    return [{"out": merged(case, rescale_acc=False)[0]}]


def _lse_without_max(case: Case, _got: Output) -> list[Output]:
    _, _, _, total = merged(case)
    return [{"lse": np.log(total)}]


def _lse_base_2(case: Case, _got: Output) -> list[Output]:
    """log2 of the denominator after a natural m, or the whole log-sum-exp in base 2."""
    _, lse, top, total = merged(case)
    return [{"lse": top + np.log2(total)}, {"lse": lse * np.float32(math.log2(math.e))}]


SPLIT_PARTIALS_AVERAGED = Trap(
    id="split-partials-averaged",
    todo="merge",
    summary="the splits' own results were averaged",
    message="The splits' own results were averaged: acc_j / l_j for out (and m_j + ln l_j for "
    "lse), one vote per split. Each is a softmax over its own split's keys, measured against "
    "its own maximum; a split whose scores are higher must count for more, in proportion to "
    "exp(m_j) l_j. Bring every split to one common maximum, the row's largest m_j, l_j and "
    "acc_j alike, before adding its partials: TODO(merge).",
    hint="bring every split to the largest m_j (TODO merge)",
    why=(
        "Each split's `acc_j / l_j` is a right answer to a smaller question: attention over "
        "that split's keys alone. The whole row's softmax gives split `j` the share "
        "`exp(m_j) l_j / sum_i exp(m_i) l_i` of its weight, so averaging the splits' outputs "
        "(one vote each) is right only when every split holds the same softmax mass, and a "
        "split of much higher scores should decide nearly alone. It is the online-softmax "
        "invariant of exercise 01 ([`acc-not-rescaled`](#acc-not-rescaled)) across programs: "
        "partials "
        "measured against different maxima must be brought to one reference point, the row's "
        "largest `m_j`, before they are added. Averaging each split's log-sum-exp `m_j + ln "
        "l_j` fails the same way: the log of a sum is not the mean of the logs. The untouched "
        "skeleton does both, over the splits that hold keys."
    ),
    forms=_averaged,
    invariant="Split j counts in proportion to its share of the softmax, exp(m_j) l_j.",
)
MERGE_NO_MAX_SHIFT = Trap(
    id="merge-no-max-shift",
    todo="merge",
    summary="the merge weights were exp(m_j), not exp(m_j - m)",
    message="The splits were weighted by exp(m_j) itself (or measured from 0) instead of "
    "exp(m_j - m), m the row's largest m_j. Exact on ordinary scores, but exp() overflows "
    "float32 past 88.7 and underflows below -103: rows whose scores are large come out inf / "
    "inf, rows whose scores are all very negative 0 / 0, both NaN. Measure from the row's "
    "maximum, the largest m_j, and nothing else: TODO(merge).",
    hint="exp(m_j - m) with m the largest m_j (TODO merge)",
    why=(
        "`sum_j exp(m_j) acc_j / sum_j exp(m_j) l_j` is the right answer in exact arithmetic, "
        "and so is `ln sum_j exp(m_j) l_j`. In float32, `exp(x)` is inf from x = 88.7 on and "
        "0 below about -103, so a row whose scores sit near +200 divides inf by inf, and one "
        "whose scores all sit near -150 divides 0 by 0: NaN either way (and lse inf or -inf). "
        "Scores that large are not exotic: attention logits can grow large in training, the "
        "reason some models cap or normalize them (Gemma 2 soft-caps its logits; ViT-22B "
        "normalizes q and k, QK-norm, because its logits diverged). The partials were stored against their own maxima precisely so that no "
        "`exp()` of a raw score is ever taken; the merge must keep that promise by measuring "
        "from the largest `m_j`, where the largest weight is exactly 1. A maximum taken "
        "with 0 (`max(m, 0)`), or padded slots loaded as 0 instead of -inf, fails the same way "
        "on rows whose scores are all very negative: there the reference point is 0 again. "
        "So does a point between the maxima, such as their mean: it keeps every `exp()` in "
        "range while the splits' maxima lie within about 88 of it, and overflows once one "
        "split's maximum lies 200 above the others. The checks that can see it use such rows "
        "beside ordinary ones."
    ),
    forms=_unshifted,
    invariant="Every exp() of the merge has an argument <= 0: the largest weight is exactly 1.",
)
MERGE_L_NOT_RESCALED = Trap(
    id="merge-l-not-rescaled",
    todo="merge",
    summary="acc_j was rescaled for the merge, l_j was not",
    message="The acc_j were weighted by exp(m_j - m), but the denominator added the l_j as "
    "they were. Each l_j is measured against its own split's maximum, like its acc_j: both "
    "need the same factor, or numerator and denominator count different keys differently. "
    "TODO(merge).",
    hint="weight l_j by exp(m_j - m) too (TODO merge)",
    why=(
        "`acc_j` and `l_j` are the numerator and the denominator of one split's softmax, "
        "both measured from `m_j`. Bringing only the numerators to the row's maximum and "
        "dividing by the plain sum of the `l_j` divides by too much (every factor "
        "`exp(m_j - m)` is at most 1), by a different amount on every row: the outputs shrink "
        "toward 0, and `m + ln sum_j l_j` overstates the log-sum-exp. It is 01's invariant "
        "again: everything that was summed against an old reference point is rescaled, `l` "
        "as much as `acc`."
    ),
    forms=_l_not_rescaled,
    invariant="l_j and acc_j are brought to the row's maximum by the same factor.",
)
MERGE_ACC_NOT_RESCALED = Trap(
    id="merge-acc-not-rescaled",
    todo="merge",
    summary="l_j was rescaled for the merge, acc_j was not",
    message="The denominator weighted each l_j by exp(m_j - m), but the acc_j were added as "
    "they were, each still measured against its own split's maximum: splits of lower scores "
    "count for too much. Apply the same factor to acc_j: TODO(merge).",
    hint="weight acc_j by exp(m_j - m) too (TODO merge)",
    why=(
        "The merge's version of 01's [`acc-not-rescaled`](#acc-not-rescaled). Every term of "
        "`acc_j` carries `exp(s - m_j)`; against the row's maximum it should carry `exp(s - "
        "m)`, smaller by `exp(m_j - m)`. Without that factor the splits whose maximum is below "
        "the row's are overweighted, and the output can leave the range of the values in `v`, "
        "which no weighted average can do. Invisible only when every split has the same "
        "maximum."
    ),
    forms=_acc_not_rescaled,
    invariant="acc_j and l_j are brought to the row's maximum by the same factor.",
)
LSE_MISSING_MAX = Trap(
    id="lse-missing-max",
    todo="merge",
    summary="lse was stored as ln L, without the maximum m",
    message="lse was stored as the log of the merged denominator alone. That sum was measured "
    "from the row's maximum m (it is sum_n exp(s_n - m)), so the log-sum-exp of the scores is "
    "m + ln L: add m back. TODO(merge).",
    hint="lse = m + ln L (TODO merge)",
    why=(
        "The merged denominator `L = sum_j exp(m_j - m) l_j` is `sum_n exp(s_n - m)`: the "
        "softmax's denominator measured from the row's maximum, which is what keeps it "
        "finite. The log-sum-exp a caller needs (to merge this result with attention over "
        "other keys, or for the backward pass) is `ln sum_n exp(s_n) = m + ln L`. Storing "
        "`ln L` alone drops the reference point: it lies in `[0, ln N]` whatever the scores "
        "are, off by exactly `m`, so the checks use rows whose maximum is far from 0."
    ),
    forms=_lse_without_max,
    invariant="lse = ln sum_n exp(s_n) = m + ln L: the reference point is added back.",
)
LSE_BASE_2 = Trap(
    id="lse-base-2",
    todo="merge",
    summary="lse mixes log2 and the natural log",
    message="lse is in the wrong base: the log2 of the denominator added to a natural m, or "
    "the whole log-sum-exp in base 2. The log-sum-exp is the natural log, ln sum_n exp(s_n) = "
    "m + ln L: use tl.log, or divide a base-2 result by log2(e). TODO(merge).",
    hint="natural log: m + tl.log(L) (TODO merge)",
    why=(
        "Fast kernels work in base 2 (`exp2`, with log2(e) folded into the scale, as in "
        "exercise 04), and their log-sum-exp comes out in base 2 too. "
        "The interface asks for the natural one, ln sum_n exp(s_n), like torch's "
        "`logsumexp`. `m + log2(L)` mixes the two (too large by 0.44 ln L), and a whole base-2 "
        "result is too large by a factor log2(e) = 1.4427. Both are exact formulas in the "
        "wrong unit, so nothing but a comparison with the natural log catches them. It happens "
        "in production: FlashInfer's kernels returned a base-2 log-sum-exp where "
        "FlashAttention's is natural ([flashinfer#2113]"
        "(https://github.com/flashinfer-ai/flashinfer/issues/2113)), and vLLM's merge, which "
        "expects the natural one, needed a fix ([vllm#28840]"
        "(https://github.com/vllm-project/vllm/pull/28840))."
    ),
    forms=_lse_base_2,
    invariant="lse is a natural log: ln sum_n exp(s_n).",
)

# fmt: off
TRAPS = (
    SPLIT_PARTIALS_AVERAGED, MERGE_NO_MAX_SHIFT, MERGE_L_NOT_RESCALED, MERGE_ACC_NOT_RESCALED,
    LSE_MISSING_MAX, LSE_BASE_2,
)
# fmt: on
