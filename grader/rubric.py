"""Every hidden check: its points, the TODO it judges, its cases and the traps it can name.

The points of each exercise add up to its share of 100, each TODO earning its own: 25 for
01's rescale, 25 for 02's causal mask, 25 each for 03's top-2 masking and renormalization.
"""

from __future__ import annotations

import numpy as np

from grader.checking import (
    AttentionJudge,
    Check,
    FastAttentionJudge,
    GraderError,
    Top2Judge,
    WeightsJudge,
)
from grader.inputs import Case
from grader.traps import TRAPS
from kata import oracles


def _raw_sums_vary(cases: list[Case]) -> None:
    """The chapter's demonstration: raw top-2 sums fall short of 1 by a per-token amount."""
    for case in cases:
        probs = -np.sort(-oracles.softmax(case.inputs["logits"]), axis=1)
        raw = probs[:, 0] + probs[:, 1]
        if 1.0 - raw.max() < 0.05 or raw.max() - raw.min() < 0.1:
            raise GraderError(
                f"grader self-check: raw top-2 sums of {case.name} span {raw.min():.3f}.."
                f"{raw.max():.3f}; they should stay below 1 and vary from token to token"
            )


T = TRAPS
E01, E02, E03 = "01_flash_attention_core", "02_causal_flash_attention", "03_moe_gating"
E04, E05 = "04_fast_attention", "05_fast_gating"
ATTN, CAUSAL = AttentionJudge(causal=False), AttentionJudge(causal=True)
TOP2, WEIGHTS = Top2Judge(), WeightsJudge()

CHECKS = (
    Check("running-max-grows", E01, "rescale-acc", 10,
          "Several key blocks, each raising the running maximum of every row",
          ("grow-3-blocks", "grow-blocks-16x32"), ATTN, (T["acc-not-rescaled"],)),
    Check("ragged-shapes", E01, "rescale-acc", 10,
          "M, N, D off the tile sizes, one row, one key block, M != N, strides, float16",
          ("single-block", "ragged-37x53-d24", "one-row-d64", "m-gt-n-50x19", "strided",
           "fp16-inputs"), ATTN, (T["acc-not-rescaled"],)),
    Check("large-scores", E01, "rescale-acc", 5,
          "Scores 30x larger than usual: exp() overflows without the running maximum",
          ("scores-30x",), ATTN, (T["acc-not-rescaled"],)),
    Check("causal-square", E02, "causal-mask", 10,
          "M = N with diagonal tiles, including the chapter's 20x20 example",
          ("chapter-20x20", "square-64"), CAUSAL,
          (T["causal-mask-missing"], T["causal-mask-off-by-one"])),
    Check("causal-rectangular", E02, "causal-mask", 10,
          "M != N (top-left alignment), ragged D, one row, strides, float16",
          ("m-lt-n-24x56", "m-gt-n-56x24", "ragged-37x53-d24", "one-row-d64", "strided",
           "fp16-inputs"), CAUSAL, (T["causal-mask-missing"], T["causal-mask-off-by-one"])),
    Check("causal-tiles", E02, "causal-mask", 5,
          "Tiles of 16x32 and 32x16, several key blocks per query block, 30x scores",
          ("tiles-16x32", "tiles-32x16", "grow-blocks-16x32", "scores-30x"), CAUSAL,
          (T["causal-mask-missing"], T["causal-mask-off-by-one"])),
    Check("top2-random", E03, "top2-mask", 10, "Random logits, 8 and 16 experts, strided rows",
          ("random-64x8", "random-33x16", "strided-rows"), TOP2, (T["top2-not-masked"],)),
    Check("top2-padded-experts", E03, "top2-mask", 5,
          "E = 5, 6, 12 (padded to a power of two) with all-negative logits",
          ("negative-e5", "negative-e6", "negative-e12"), TOP2, (T["top2-not-masked"],)),
    Check("top2-ties", E03, "top2-mask", 5,
          "Exact ties: all-zero rows need two distinct experts",
          ("ties-e8", "ties-e5"), TOP2, (T["top2-not-masked"],)),
    Check("top2-two-experts", E03, "top2-mask", 5, "E = 2: both experts, best first",
          ("two-experts",), TOP2, (T["top2-not-masked"],)),
    Check("renormalized-random", E03, "renormalize", 10,
          "Random logits: w0 + w1 = 1 with w = p / (p0 + p1) of the chosen experts",
          ("random-64x8", "random-33x16", "strided-rows"), WEIGHTS,
          (T["weights-not-renormalized"],), proof=_raw_sums_vary),
    Check("renormalized-padded-experts", E03, "renormalize", 5,
          "E = 5, 6, 12 with all-negative logits", ("negative-e5", "negative-e6", "negative-e12"),
          WEIGHTS, (T["weights-not-renormalized"],)),
    # With E = 2 the raw probabilities already sum to one, so that case rides along with ties,
    # where the mistake shows, instead of paying on its own.
    Check("renormalized-ties-and-two-experts", E03, "renormalize", 10,
          "Exact ties (0.5 / 0.5 on all-zero rows), and E = 2",
          ("ties-e8", "ties-e5", "two-experts"), WEIGHTS, (T["weights-not-renormalized"],)),
    # The performance track: correctness first (50 points each, separate from the chapter's
    # 100); grader.timing adds speed on a GPU.
    Check("fast-attention-full", E04, "exp2-scale", 25,
          "Non-causal, float16 and bfloat16, D = 32, 64, 128",
          ("full-fp16-d64", "full-bf16-d128", "full-bf16-d32"), FastAttentionJudge(causal=False)),
    Check("fast-attention-causal", E04, "causal-stages", 25,
          "Causal: unmasked tiles, then the diagonal tiles",
          ("causal-fp16-d64", "causal-bf16-d128", "causal-bf16-d32"), FastAttentionJudge(causal=True)),
    Check("fast-gating-top2", E05, "top2-mask", 25,
          "Many rows per program, rows not a multiple of a tile, bfloat16, padded E, ties",
          ("random-1000x64", "random-333x128", "random-77x8", "bf16-200x64", "negative-e6",
           "ties-e8"), Top2Judge(lowest_index_on_ties=True), (T["top2-not-masked"],)),
    Check("fast-gating-weights", E05, "rows-per-program", 25,
          "Renormalized weights for every token of every tile",
          ("random-1000x64", "random-333x128", "random-77x8", "bf16-200x64", "negative-e6"),
          WEIGHTS),  # the weights come from given code here: no renormalization TODO to name
)  # fmt: skip


def checks_for(stem: str) -> list[Check]:
    return [c for c in CHECKS if c.exercise == stem]


def max_score(stem: str) -> int:
    return sum(c.points for c in checks_for(stem))
