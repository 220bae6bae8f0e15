"""Exercise 02, public checks: what the student handout grades with (TODO causal-mask)."""

from grader.kinds.attention.inputs import qkv
from grader.kinds.attention.traps import CAUSAL_MASK_MISSING, CAUSAL_MASK_OFF_BY_ONE
from grader.model import Case, Check

SKELETON_TRAPS = ("causal-mask-missing",)

# fmt: off
CASES = [
    Case(name="example-20x20", about="M=N=20, D=8 (the worked example's shape)",
         inputs=qkv(911, 20, 20, 8), causal=True, hidden=False),
    Case(name="m-lt-n-24x40", about="M=24, N=40, D=16: fewer queries than keys",
         inputs=qkv(912, 24, 40, 16), causal=True, hidden=False),
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="public-causal", todo="causal-mask", points=25,
          about="The worked example's shape, and M < N", cases=("example-20x20", "m-lt-n-24x40"),
          judge="output", traps=(CAUSAL_MASK_MISSING, CAUSAL_MASK_OFF_BY_ONE), hidden=False),
]
# fmt: on
