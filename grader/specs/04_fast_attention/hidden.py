"""Exercise 04 (performance track), the instructor's checks and gallery."""

from grader.gallery import wrong
from grader.inputs import bhsd
from grader.model import Case, Check
from grader.traps import DIAGONAL_STAGE_MISSING, EXP2_CONSTANT_WRONG


def _cases(causal: bool) -> list[Case]:
    tag = "causal" if causal else "full"
    return [
        Case(name=f"{tag}-fp16-d64", about=f"B=1, H=2, S=128, D=64, float16, {tag}",
             inputs=bhsd(300 + causal, 1, 2, 128, 64, "float16"), dtype="float16", causal=causal),
        Case(name=f"{tag}-bf16-d128", about=f"B=2, H=1, S=256, D=128, bfloat16, {tag}",
             inputs=bhsd(302 + causal, 2, 1, 256, 128, "bfloat16"), dtype="bfloat16",
             causal=causal),
        Case(name=f"{tag}-bf16-d32", about=f"B=1, H=1, S=384, D=32, bfloat16, {tag}",
             inputs=bhsd(304 + causal, 1, 1, 384, 32, "bfloat16"), dtype="bfloat16",
             causal=causal),
    ]  # fmt: skip


CASES = _cases(False) + _cases(True)

CHECKS = [
    Check(id="fast-attention-full", todo="exp2-scale", points=25,
          about="Non-causal, float16 and bfloat16, D = 32, 64, 128",
          cases=("full-fp16-d64", "full-bf16-d128", "full-bf16-d32"), judge="output",
          traps=(EXP2_CONSTANT_WRONG,)),
    Check(id="fast-attention-causal", todo="causal-stages", points=25,
          about="Causal: unmasked tiles, then the diagonal tiles",
          cases=("causal-fp16-d64", "causal-bf16-d128", "causal-bf16-d32"), judge="output",
          traps=(DIAGONAL_STAGE_MISSING,), requires="exp2-scale"),
]  # fmt: skip

REFERENCE = {
    "exp2-scale": "qk_scale = sm_scale * 1.4426950408889634",
    "causal-stages": """\
acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_src, v_src, stride_ks, stride_vs,
                              offs_m, offs_d, pid_m * BLOCK_M, (pid_m + 1) * BLOCK_M, S,
                              qk_scale, BLOCK_N, DIAGONAL, TMA)  # fmt: skip""",
}

GALLERY = [
    wrong("04-exp2-constant-missing", "exp2 without log2(e) in the scale",
          fills={"exp2-scale": "qk_scale = sm_scale"}, traps=["exp2-constant-wrong"],
          breaks="exp2-scale", failed=["fast-attention-full"]),
    wrong("04-diagonal-stage-missing", "the causal loop's second, masked stage left out",
          fills={"causal-stages": ""}, traps=["diagonal-stage-missing"], breaks="causal-stages",
          failed=["fast-attention-causal"]),
]  # fmt: skip
