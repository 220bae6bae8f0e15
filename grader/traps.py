"""The classic wrong answers, one object each: id, the TODO it belongs to, what a student is
told, and the outputs the mistake produces on a case ("forms").

The checks diagnose a failure by matching it against these forms, the validation gallery expects
these ids, and the docs' trap catalogue is written from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from grader.inputs import Case
from kata import oracles

Output = dict[str, np.ndarray]


@dataclass(frozen=True)
class Trap:
    id: str
    todo: str  # the TODO id in the exercise file to revisit
    summary: str  # one line, for tables
    message: str  # what went wrong, in a sentence or two, without the code
    hint: str  # one line for summary tables: what to do, and where
    forms: Callable[[Case, Output], list[Output]]  # outputs this mistake gives (partial dicts)

    def __str__(self) -> str:
        return self.id


# ---- attention: simulations of the wrong kernels, in float64 -------------------------------


def masked_attention(q, k, v, visible: np.ndarray) -> np.ndarray:
    """Attention where row i sees the keys visible[i]; a row that sees none gives NaN (0/0),
    as a kernel would."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    scores = np.where(visible, q @ k.T / np.sqrt(q.shape[1]), -np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = scores.max(axis=1, keepdims=True)
        p = np.exp(scores - np.where(np.isfinite(m), m, 0.0))
        return (p @ v) / p.sum(axis=1, keepdims=True)


def _block_skip(case: Case, M: int, N: int) -> np.ndarray:
    """Keys a kernel that stops its loop after its query block's last row ever loads."""
    stop = np.minimum(N, (np.arange(M) // case.block_m + 1) * case.block_m)
    return np.arange(N)[None, :] < stop[:, None]


def _unrescaled(case: Case, _got: Output) -> list[Output]:
    """Online softmax with l_i rescaled but acc not (the skeleton of 01)."""
    q, k, v = (np.asarray(case.inputs[n], np.float64) for n in "qkv")
    scores = q @ k.T / np.sqrt(q.shape[1])
    m = np.full(len(q), -np.inf)
    l_i = np.zeros(len(q))
    acc = np.zeros_like(q)
    for n0 in range(0, len(k), case.block_n):
        s = scores[:, n0 : n0 + case.block_n]
        m_new = np.maximum(m, s.max(axis=1))
        p = np.exp(s - m_new[:, None])
        l_i = l_i * np.exp(m - m_new) + p.sum(axis=1)
        acc = acc + p @ v[n0 : n0 + case.block_n]
        m = m_new
    return [{"out": acc / l_i[:, None]}]


def _non_causal(case: Case, _got: Output) -> list[Output]:
    q, k, v = (case.inputs[n] for n in "qkv")
    full = np.ones((len(q), len(k)), bool)
    return [
        {"out": oracles.attention(q, k, v)},
        # No mask, but the loop already stops at the block's end: causal by whole tiles only.
        {"out": masked_attention(q, k, v, full & _block_skip(case, len(q), len(k)))},
    ]


def _off_by_one(case: Case, _got: Output) -> list[Output]:
    q, k, v = (case.inputs[n] for n in "qkv")
    rows, cols = np.arange(len(q))[:, None], np.arange(len(k))[None, :]
    one_ahead = rows + 1 >= cols
    return [
        {"out": masked_attention(q, k, v, rows > cols)},  # strict: the diagonal is lost
        {"out": masked_attention(q, k, v, one_ahead)},  # one future key admitted
        {"out": masked_attention(q, k, v, one_ahead & _block_skip(case, len(q), len(k)))},
    ]


# ---- gating: judged on the student's own outputs where the math allows ---------------------


def _top1_twice(case: Case, _got: Output) -> list[Output]:
    _, _, idx0, _ = oracles.top2_gating(case.inputs["logits"])
    return [{"idx0": idx0, "idx1": idx0}]


def _raw_weights(case: Case, got: Output) -> list[Output]:
    """The softmax probabilities of the experts the kernel itself chose, not renormalized."""
    probs = oracles.softmax(case.inputs["logits"])
    E = probs.shape[1]
    i0, i1 = got["idx0"].astype(np.int64), got["idx1"].astype(np.int64)
    if ((i0 < 0) | (i0 >= E) | (i1 < 0) | (i1 >= E)).any():
        return []
    rows = np.arange(len(probs))
    return [{"w0": probs[rows, i0], "w1": probs[rows, i1]}]


ACC_NOT_RESCALED = Trap(
    "acc-not-rescaled", "rescale-acc", "acc was not rescaled when the running max grew",
    "Once the running maximum grows, everything already summed into acc was weighted against "
    "the old maximum and is now too large. l_i was rescaled by alpha but acc was not: revisit "
    "TODO(rescale-acc).",
    "rescale acc by alpha, as l_i is (TODO rescale-acc)",
    _unrescaled,
)  # fmt: skip
CAUSAL_MASK_MISSING = Trap(
    "causal-mask-missing", "causal-mask", "future keys were attended to",
    "This is correct non-causal attention, or causal only tile by tile: query rows also attend "
    "to keys after their own position. Add the per-pair condition (row sees keys up to itself) "
    "in TODO(causal-mask).",
    "hide keys after each row's position (TODO causal-mask)",
    _non_causal,
)  # fmt: skip
CAUSAL_MASK_OFF_BY_ONE = Trap(
    "causal-mask-off-by-one", "causal-mask", "the causal mask is off by one on the diagonal",
    "The mask is one key off on the diagonal: each row must see its own key but not the next "
    "one (a strict comparison drops the diagonal, and row 0 then sees nothing). Check the "
    "comparison in TODO(causal-mask).",
    "row i sees key i, not i + 1 (TODO causal-mask)",
    _off_by_one,
)  # fmt: skip
TOP2_NOT_MASKED = Trap(
    "top2-not-masked", "top2-mask", "the top-1 expert was picked again as top-2",
    "The second max/argmax ran over the same row and found the top-1 expert again, so every "
    "token got the same expert twice. Take the top-1 position out first: TODO(top2-mask).",
    "take the top-1 position out first (TODO top2-mask)",
    _top1_twice,
)  # fmt: skip
WEIGHTS_NOT_RENORMALIZED = Trap(
    "weights-not-renormalized", "renormalize", "weights are raw softmax probabilities",
    "The weights are the raw softmax probabilities of the two chosen experts. They sum to the "
    "top-2 share of all E experts, which is below one by a different amount for every token; "
    "divide by their sum: TODO(renormalize).",
    "make w0 + w1 = 1 per token (TODO renormalize)",
    _raw_weights,
)  # fmt: skip

TRAPS = {
    t.id: t
    for t in (ACC_NOT_RESCALED, CAUSAL_MASK_MISSING, CAUSAL_MASK_OFF_BY_ONE, TOP2_NOT_MASKED,
              WEIGHTS_NOT_RENORMALIZED)
}  # fmt: skip
