"""The public checks, shipped in the student handout instead of the hidden ones.

Same judges, same traps, same points per TODO as grader/rubric.py, but on a few inputs of the
worked examples' kind (seeds of their own). Passing them is a good sign, not the grade: the
instructor's hidden checks add ragged and strided shapes, 30x scores, uneven tiles, padded
experts and more.
"""

from __future__ import annotations

from grader.checking import AttentionJudge, Check, FastAttentionJudge, Top2Judge, WeightsJudge
from grader.inputs import (
    ATTENTION,
    FAST_ATTENTION,
    FAST_GATING,
    GATING,
    Case,
    bhsd,
    growing,
    logits,
    qkv,
    ties,
)
from grader.traps import TRAPS

E01, E02, E03 = "01_flash_attention_core", "02_causal_flash_attention", "03_moe_gating"
E04, E05 = "04_fast_attention", "05_fast_gating"


def cases_for(stem: str) -> dict[str, Case]:
    if stem == E01:
        found = [
            Case("grow-3-blocks", ATTENTION, "M=20, N=48, D=16; every key block raises the row maxima",
                 growing(901, 20, 48, 16, 16)),
            Case("example-17x23", ATTENTION, "M=17, N=23, D=8 (the worked example's shape)",
                 qkv(902, 17, 23, 8)),
        ]  # fmt: skip
    elif stem == E02:
        found = [
            Case("example-20x20", ATTENTION, "M=N=20, D=8 (the worked example's shape)",
                 qkv(911, 20, 20, 8)),
            Case("m-lt-n-24x40", ATTENTION, "M=24, N=40, D=16: fewer queries than keys",
                 qkv(912, 24, 40, 16)),
        ]  # fmt: skip
    elif stem == E04:
        found = [
            Case(f"{tag}-fp16", FAST_ATTENTION, f"B=1, H=2, S=128, D=64, float16, {tag}",
                 bhsd(931 + causal, 1, 2, 128, 64, "float16"), dtype="float16", causal=causal)
            for causal, tag in ((False, "full"), (True, "causal"))
        ]  # fmt: skip
    elif stem == E05:
        found = [
            Case("random-300x64", FAST_GATING, "300 tokens x 64 experts", logits(941, 300, 64))
        ]
    else:
        found = [
            Case("example-6x8", GATING, "6 tokens x 8 experts (the worked example's shape)",
                 logits(921, 6, 8)),
            Case("ties-e8", GATING, "6 tokens x 8 experts with exact ties", ties(8)),
        ]  # fmt: skip
    return {case.name: case for case in found}


T = TRAPS
CHECKS = (
    Check("public-online-softmax", E01, "rescale-acc", 25, "Growing maxima and the example's shape",
          ("grow-3-blocks", "example-17x23"), AttentionJudge(causal=False), (T["acc-not-rescaled"],)),
    Check("public-causal", E02, "causal-mask", 25, "The example's shape, and M < N",
          ("example-20x20", "m-lt-n-24x40"), AttentionJudge(causal=True),
          (T["causal-mask-missing"], T["causal-mask-off-by-one"])),
    Check("public-top2", E03, "top2-mask", 25, "The example's shape, and exact ties",
          ("example-6x8", "ties-e8"), Top2Judge(), (T["top2-not-masked"],)),
    Check("public-renormalized", E03, "renormalize", 25, "The example's shape, and exact ties",
          ("example-6x8", "ties-e8"), WeightsJudge(), (T["weights-not-renormalized"],)),
    Check("public-fast-attention-full", E04, "exp2-scale", 25, "Non-causal, float16",
          ("full-fp16",), FastAttentionJudge(causal=False)),
    Check("public-fast-attention-causal", E04, "causal-stages", 25, "Causal, float16",
          ("causal-fp16",), FastAttentionJudge(causal=True)),
    Check("public-fast-gating-top2", E05, "top2-mask", 25, "Many rows per program",
          ("random-300x64",), Top2Judge(), (T["top2-not-masked"],)),
    Check("public-fast-gating-weights", E05, "rows-per-program", 25, "Many rows per program",
          ("random-300x64",), WeightsJudge()),
)  # fmt: skip


def checks_for(stem: str) -> list[Check]:
    return [c for c in CHECKS if c.exercise == stem]


def max_score(stem: str) -> int:
    return sum(c.points for c in checks_for(stem))
