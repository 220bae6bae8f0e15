"""Exercise 03, public checks: what the student handout grades with (TODOs top2-mask and
renormalize)."""

from grader.kinds.gating.inputs import logits, ties
from grader.kinds.gating.traps import TOP2_NOT_MASKED, WEIGHTS_NOT_RENORMALIZED
from grader.model import Case, Check

SKELETON_TRAPS = ("top2-not-masked", "weights-not-renormalized")

# fmt: off
CASES = [
    Case(name="example-6x8", about="6 tokens x 8 experts (the worked example's shape)",
         inputs=logits(921, 6, 8), hidden=False),
    Case(name="exact-ties-e8", about="6 tokens x 8 experts with exact ties", inputs=ties(8),
         hidden=False),
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="public-top2", todo="top2-mask", points=25,
          about="The worked example's shape, and exact ties", cases=("example-6x8", "exact-ties-e8"),
          judge="top2", traps=(TOP2_NOT_MASKED,), hidden=False),
    Check(id="public-renormalized", todo="renormalize", points=25,
          about="The worked example's shape, and exact ties", cases=("example-6x8", "exact-ties-e8"),
          judge="weights", traps=(WEIGHTS_NOT_RENORMALIZED,), hidden=False),
]
# fmt: on
