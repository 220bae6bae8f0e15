"""The inputs the hidden checks feed to a kernel, built deterministically from fixed seeds.

Each case is chosen to expose something: key blocks whose scores grow so that a missing rescale
shows, ragged and strided shapes, 30x scores that overflow without a running max, M != N for the
causal alignment, padded expert rows with all-negative logits, exact ties, E = 2.
"""

from __future__ import annotations

import numpy as np

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
    round_to,
    ties,
)

__all__ = ["ATTENTION", "GATING", "Case", "attention_cases", "cases_for", "gating_cases"]


def attention_cases(causal: bool) -> list[Case]:
    """Cases for 01 (causal=False) and 02 (causal=True); seeds differ between the two."""
    base = 100 if causal else 0
    cases = [
        Case("grow-3-blocks", ATTENTION, "M=20, N=48, D=16; every key block raises the row maxima",
             growing(base + 1, 20, 48, 16, 16)),
        Case("grow-blocks-16x32", ATTENTION,
             "M=40, N=96, D=32, 16x32 tiles; every key block raises the row maxima",
             growing(base + 2, 40, 96, 32, 32), block_m=16, block_n=32),
        Case("single-block", ATTENTION, "M=5, N=7, D=8: one key block, smaller than a tile",
             qkv(base + 3, 5, 7, 8)),
        Case("ragged-37x53-d24", ATTENTION, "M=37, N=53, D=24: nothing is a multiple of a tile",
             qkv(base + 4, 37, 53, 24)),
        Case("one-row-d64", ATTENTION, "M=1, N=40, D=64: a single query row",
             qkv(base + 5, 1, 40, 64)),
        Case("m-gt-n-50x19", ATTENTION, "M=50, N=19, D=8: more queries than keys",
             qkv(base + 6, 50, 19, 8)),
        Case("strided", ATTENTION,
             "M=33, N=45, D=24 with q transposed in memory and k, v every other column",
             qkv(base + 7, 33, 45, 24), layout={"q": "transposed", "k": "sliced", "v": "sliced"}),
        Case("fp16-inputs", ATTENTION, "M=24, N=40, D=16, q/k/v in float16",
             qkv(base + 8, 24, 40, 16, dtype=np.float16)),
        Case("scores-30x", ATTENTION, "M=24, N=64, D=16, scores 30x larger than usual",
             qkv(base + 9, 24, 64, 16, magnitude=30.0)),
    ]  # fmt: skip
    if causal:
        cases += [
            Case("chapter-20x20", ATTENTION, "M=N=20, D=8: the chapter's causal example shape",
                 qkv(base + 10, 20, 20, 8)),
            Case("square-64", ATTENTION, "M=N=64, D=16: four diagonal tiles",
                 qkv(base + 11, 64, 64, 16)),
            Case("m-lt-n-24x56", ATTENTION, "M=24, N=56, D=16: fewer queries than keys",
                 qkv(base + 12, 24, 56, 16)),
            Case("m-gt-n-56x24", ATTENTION, "M=56, N=24, D=24: more queries than keys",
                 qkv(base + 13, 56, 24, 24)),
            Case("tiles-16x32", ATTENTION, "M=N=48, D=16, 16-row by 32-key tiles",
                 qkv(base + 14, 48, 48, 16), block_m=16, block_n=32),
            Case("tiles-32x16", ATTENTION, "M=N=48, D=16, 32-row by 16-key tiles",
                 qkv(base + 15, 48, 48, 16), block_m=32, block_n=16),
        ]  # fmt: skip
    return cases


def gating_cases() -> list[Case]:
    return [
        Case("random-64x8", GATING, "64 tokens x 8 experts, random logits", logits(200, 64, 8)),
        Case("random-33x16", GATING, "33 tokens x 16 experts, random logits", logits(201, 33, 16)),
        Case("strided-rows", GATING, "20 tokens x 8 experts, every other row of a larger tensor",
             logits(202, 20, 8), layout={"logits": "row-sliced"}),
        Case("negative-e5", GATING, "16 tokens x 5 experts (padded to 8), all logits negative",
             logits(203, 16, 5, shift=-8.0)),
        Case("negative-e6", GATING, "16 tokens x 6 experts (padded to 8), all logits negative",
             logits(204, 16, 6, shift=-8.0)),
        Case("negative-e12", GATING, "16 tokens x 12 experts (padded to 16), all logits negative",
             logits(205, 16, 12, shift=-8.0)),
        Case("ties-e8", GATING, "6 tokens x 8 experts with exact ties (all-zero rows, shared maxima)",
             ties(8)),
        Case("ties-e5", GATING, "6 tokens x 5 experts with exact ties (all-zero rows, shared maxima)",
             ties(5)),
        Case("two-experts", GATING, "16 tokens x 2 experts", logits(206, 16, 2, scale=2.0)),
    ]  # fmt: skip


def fast_attention_cases() -> list[Case]:
    """04: small (B, H, S, D) problems; S a multiple of 128 as the exercise requires."""
    found = []
    for causal in (False, True):
        tag = "causal" if causal else "full"
        found += [
            Case(f"{tag}-fp16-d64", FAST_ATTENTION, f"B=1, H=2, S=128, D=64, float16, {tag}",
                 bhsd(300 + causal, 1, 2, 128, 64, "float16"), dtype="float16", causal=causal),
            Case(f"{tag}-bf16-d128", FAST_ATTENTION, f"B=2, H=1, S=256, D=128, bfloat16, {tag}",
                 bhsd(302 + causal, 2, 1, 256, 128, "bfloat16"), dtype="bfloat16", causal=causal),
            Case(f"{tag}-bf16-d32", FAST_ATTENTION, f"B=1, H=1, S=384, D=32, bfloat16, {tag}",
                 bhsd(304 + causal, 1, 1, 384, 32, "bfloat16"), dtype="bfloat16", causal=causal),
        ]  # fmt: skip
    return found


def fast_gating_cases() -> list[Case]:
    """05: many rows per program, so row counts that are not multiples of a tile matter."""
    bf = {"logits": round_to(logits(403, 200, 64)["logits"], "bfloat16")}
    return [
        Case("random-1000x64", FAST_GATING, "1000 tokens x 64 experts", logits(400, 1000, 64)),
        Case("random-333x128", FAST_GATING, "333 tokens x 128 experts", logits(401, 333, 128)),
        Case("random-77x8", FAST_GATING, "77 tokens x 8 experts", logits(402, 77, 8)),
        Case("bf16-200x64", FAST_GATING, "200 tokens x 64 experts, bfloat16", bf, dtype="bfloat16"),
        Case("negative-e6", FAST_GATING, "40 tokens x 6 experts (padded), all logits negative",
             logits(404, 40, 6, shift=-8.0)),
        Case("ties-e8", FAST_GATING, "exact ties: lowest index first", ties(8)),
    ]  # fmt: skip


def cases_for(stem: str) -> dict[str, Case]:
    """All cases of one exercise, by name."""
    if stem.startswith("04"):
        return {case.name: case for case in fast_attention_cases()}
    if stem.startswith("05"):
        return {case.name: case for case in fast_gating_cases()}
    if stem.startswith("01"):
        found = attention_cases(causal=False)
    elif stem.startswith("02"):
        found = attention_cases(causal=True)
    else:
        found = gating_cases()
    return {case.name: case for case in found}
