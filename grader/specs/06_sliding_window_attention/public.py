"""Exercise 06 (extensions track), public checks: what the student handout grades with
(TODO window-mask)."""

from grader.kinds.attention.inputs import qkv
from grader.kinds.window_attention.traps import WINDOW_IGNORED, WINDOW_OFF_BY_ONE
from grader.model import Case, Check

SKELETON_TRAPS = ("window-ignored",)

# fmt: off
CASES = [
    Case(name="example-48x48-w10", about="M=N=48, D=16, WINDOW=10 (the worked example's shape)",
         inputs=qkv(961, 48, 48, 16), causal=True, window=10, hidden=False),
    Case(name="m-lt-n-24x40-w7", about="M=24, N=40, D=16, WINDOW=7: fewer queries than keys",
         inputs=qkv(962, 24, 40, 16), causal=True, window=7, hidden=False),
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="public-window", todo="window-mask", points=25,
          about="The worked example's shape, and M < N",
          cases=("example-48x48-w10", "m-lt-n-24x40-w7"), judge="output",
          traps=(WINDOW_IGNORED, WINDOW_OFF_BY_ONE), hidden=False),
]
# fmt: on
