"""Exercise 05 (performance track), public checks and the shapes timed against torch."""

from grader.kinds.gating.inputs import logits
from grader.kinds.gating.traps import TOP2_NOT_MASKED
from grader.kinds.tiled_gating.traps import ONE_TOKEN_PER_TILE
from grader.model import Case, Check

SKELETON_TRAPS = ("one-token-per-tile",)

# Timed on a GPU against torch's softmax -> topk -> divide in the same process.
TIMING = (
    {"M": 2**20, "E": 128, "dtype": "float32"},
    {"M": 2**20, "E": 128, "dtype": "bfloat16"},
)

# fmt: off
CASES = [
    Case(name="random-300x64", about="300 tokens x 64 experts, 64 rows per program",
         inputs=logits(941, 300, 64), config={"BLOCK_M": 64, "num_warps": 4}, hidden=False),
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="public-fast-gating-weights", todo="rows-per-program", points=25,
          about="Many rows per program", cases=("random-300x64",), judge="chosen-weights",
          traps=(ONE_TOKEN_PER_TILE,), hidden=False),
    Check(id="public-fast-gating-top2", todo="top2-mask", points=25, about="Many rows per program",
          cases=("random-300x64",), judge="top2", traps=(TOP2_NOT_MASKED,), hidden=False,
          requires="rows-per-program"),
]
# fmt: on
