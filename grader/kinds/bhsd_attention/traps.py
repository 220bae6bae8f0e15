"""04's traps: the exp2 constant, and the causal diagonal stage missing, replayed head by head
on the (B, H, S, D) inputs."""

from __future__ import annotations

import math

import numpy as np

from grader.kinds.attention.traps import _qkv, masked_attention
from grader.model import Case, Output, Trap
from kata.kinds.attention import attention


def _per_head(case: Case, attend) -> np.ndarray:
    q, k, v = _qkv(case)
    out = np.empty(q.shape)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            out[b, h] = attend(q[b, h], k[b, h], v[b, h])
    return out


def _exp2_base(case: Case, _got: Output) -> list[Output]:
    """exp2 of scores scaled without log2(e) is exp of scores times ln 2; with the inverse
    constant, times ln(2)^2."""
    return [
        {"out": _per_head(case, lambda q, k, v, f=f: attention(q * f, k, v, case.causal))}
        for f in (math.log(2), math.log(2) ** 2)
    ]


def _no_diagonal(case: Case, _got: Output) -> list[Output]:
    """Causal attention without the diagonal stage: each query tile of BLOCK_M rows sees only
    the keys before it (its first tile sees nothing: 0/0). BLOCK_M is the autotuner's choice,
    so every plausible one is a form, with the exp2 scale right or still missing."""
    S = case.inputs["q"].shape[2]
    rows, cols = np.arange(S)[:, None], np.arange(S)[None, :]
    forms = []
    for block_m in (16, 32, 64, 128, 256):
        seen = cols < rows // block_m * block_m
        for f in (1.0, math.log(2)):
            attend = lambda q, k, v, seen=seen, f=f: masked_attention(q * f, k, v, seen)  # noqa: E731
            forms.append({"out": _per_head(case, attend)})
    return forms


EXP2_CONSTANT_WRONG = Trap(
    id="exp2-constant-wrong",
    todo="exp2-scale",
    summary="exp2 ran without log2(e) in the scale",
    message="The loop computes exp2, so the scale must carry log2(e) = 1.4427 for exp2 to equal "
    "softmax's exp. Without it (or with its inverse) every score is effectively multiplied by "
    "ln 2 (or ln(2)^2): a softmax at the wrong temperature. Revisit TODO(exp2-scale).",
    hint="qk_scale = sm_scale * log2(e) (TODO exp2-scale)",
    why=(
        "`exp(x) = exp2(x * log2(e))`, so a loop that calls `exp2` must carry `log2(e) = "
        "1/ln(2)` in its scale. Without it, `exp2(s)` equals `exp(s * ln 2)`: every score is "
        "multiplied by ln 2 = 0.693 (by ln(2)^2 with the inverse constant), a softmax at a "
        "higher temperature, flatter than the right one, with no NaN or overflow to give it "
        "away. Fold the constant into the scale once, outside the loop; `alpha` and `p` then "
        "come out exactly as in 01."
    ),
    forms=_exp2_base,
    invariant="exp2(x * log2(e)) = exp(x): the scale carries log2(e).",
)

DIAGONAL_STAGE_MISSING = Trap(
    id="diagonal-stage-missing",
    todo="causal-stages",
    summary="the causal loop never visits the diagonal tiles",
    message="Stage 1 only covers keys left of each query tile; the keys of the tile's own rows "
    "(the diagonal stage, with the mask) were never visited, so rows miss their own and nearby "
    "keys and the first tile sees no key at all. Revisit TODO(causal-stages).",
    hint="add the masked diagonal stage (TODO causal-stages)",
    why=(
        "The fast kernel runs its causal loop in two stages: first the key tiles wholly "
        "before the query tile's rows, which need no mask, then the tiles that hold the "
        "diagonal, with the mask. Without the second stage, every row misses its own key and "
        "the keys just before it inside its tile, and the first query tile of each head "
        "visits no key at all: its sums stay 0 and its rows end as 0/0 = NaN."
    ),
    forms=_no_diagonal,
    invariant="Every query row visits every key up to its own position, the diagonal tile included.",
)

TRAPS = (EXP2_CONSTANT_WRONG, DIAGONAL_STAGE_MISSING)
