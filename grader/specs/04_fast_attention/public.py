"""Exercise 04 (performance track), public checks and the shapes timed against torch."""

from grader.kinds.bhsd_attention.inputs import bhsd
from grader.kinds.bhsd_attention.traps import DIAGONAL_STAGE_MISSING, EXP2_CONSTANT_WRONG
from grader.model import Case, Check

SKELETON_TRAPS = ("exp2-constant-wrong", "diagonal-stage-missing")

# Timed on a GPU against torch SDPA in the same process; B * S = 16k tokens, H * D = 2048.
TIMING = (
    {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": False},
    {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": True},
)

# The grader pins the tiles (the kernel's autotuner would pick its own): the non-causal case runs
# with 64x64 tensor-descriptor tiles, the causal one with 128x64 pointer loads, whose diagonal
# spans two key tiles. The causal case spans three 128-row query tiles: a kernel without the
# diagonal stage leaves only the first tile empty (0/0 = NaN) and gets the rest measurably
# wrong, which names the trap (an all-NaN output names none: it says nothing a NaN-filled buffer
# would not).
TILES = {
    False: {"BLOCK_M": 64, "BLOCK_N": 64, "TMA": True, "num_warps": 4, "num_stages": 2},
    True: {"BLOCK_M": 128, "BLOCK_N": 64, "TMA": False, "num_warps": 8, "num_stages": 3},
}
# fmt: off
CASES = [
    Case(name=f"{tag}-fp16", about=f"B=1, H=2, S={S}, D=64, float16, {tag}",
         inputs=bhsd(931 + causal, 1, 2, S, 64, "float16"), dtype="float16", causal=causal,
         config=TILES[causal], hidden=False)
    for causal, tag, S in ((False, "full", 128), (True, "causal", 384))
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="public-fast-attention-full", todo="exp2-scale", points=25, about="Non-causal, float16",
          cases=("full-fp16",), judge="output", traps=(EXP2_CONSTANT_WRONG,), hidden=False),
    Check(id="public-fast-attention-causal", todo="causal-stages", points=25,
          about="Causal, float16", cases=("causal-fp16",), judge="output",
          traps=(DIAGONAL_STAGE_MISSING,), requires="exp2-scale", hidden=False),
]
# fmt: on
