"""Exercise 01, public checks: what the student handout grades with (TODO rescale-acc)."""

from grader.kinds.attention.inputs import growing, qkv
from grader.kinds.attention.traps import (
    ACC_NOT_RESCALED,
    ACC_RESCALED_AFTER_ADD,
    ALPHA_APPLIED_TWICE,
)
from grader.model import Case, Check

SKELETON_TRAPS = ("acc-not-rescaled",)

# fmt: off
CASES = [
    Case(name="growing-maxima", about="M=20, N=48, D=16; every key block raises the row maxima",
         inputs=growing(901, 20, 48, 16, 16), hidden=False),
    Case(name="example-17x23", about="M=17, N=23, D=8 (the worked example's shape)",
         inputs=qkv(902, 17, 23, 8), hidden=False),
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="public-online-softmax", todo="rescale-acc", points=25,
          about="Growing maxima and the worked example's shape",
          cases=("growing-maxima", "example-17x23"), judge="output",
          traps=(ACC_NOT_RESCALED, ACC_RESCALED_AFTER_ADD, ALPHA_APPLIED_TWICE),
          hidden=False),
]
# fmt: on
