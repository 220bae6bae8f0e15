"""Exercise 04 (performance track), public checks and the shapes timed against torch."""

from grader.inputs import bhsd
from grader.model import Case, Check
from grader.traps import DIAGONAL_STAGE_MISSING, EXP2_CONSTANT_WRONG

SKELETON_TRAPS = ("exp2-constant-wrong", "diagonal-stage-missing")

# Timed on a GPU against torch SDPA in the same process; B * S = 16k tokens, H * D = 2048.
TIMING = (
    {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": False},
    {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": True},
)

CASES = [
    Case(name=f"{tag}-fp16", about=f"B=1, H=2, S=128, D=64, float16, {tag}",
         inputs=bhsd(931 + causal, 1, 2, 128, 64, "float16"), dtype="float16", causal=causal,
         hidden=False)
    for causal, tag in ((False, "full"), (True, "causal"))
]  # fmt: skip

CHECKS = [
    Check(id="public-fast-attention-full", todo="exp2-scale", points=25, about="Non-causal, float16",
          cases=("full-fp16",), judge="output", traps=(EXP2_CONSTANT_WRONG,), hidden=False),
    Check(id="public-fast-attention-causal", todo="causal-stages", points=25,
          about="Causal, float16", cases=("causal-fp16",), judge="output",
          traps=(DIAGONAL_STAGE_MISSING,), requires="exp2-scale", hidden=False),
]  # fmt: skip
