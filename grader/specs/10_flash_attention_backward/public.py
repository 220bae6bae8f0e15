"""Exercise 10 (extensions track), public checks: what the student handout grades with (TODOs
recompute-p and ds)."""

from grader.kinds.attention_backward.inputs import backward_inputs
from grader.kinds.attention_backward.traps import (
    CAUSAL_MASK_MISSING_IN_BACKWARD,
    DELTA_MISSING,
    DV_FROM_UNMASKED_P,
    P_NOT_NORMALIZED_BY_LSE,
    SCALE_DOUBLED,
    SCALE_DROPPED,
)
from grader.model import Case, Check

SKELETON_TRAPS = ("p-not-normalized-by-lse", "delta-missing")

# Built from the inputs module, not the boundary classes: the handout leaves boundary.py out.
# fmt: off
CASES = [
    Case(name="example-37", hidden=False,
         about="B=1, H=2, S=37 (five keys past two 16-key tiles), D=16, non-causal, 16x16 "
         "tiles: the worked example's shape", inputs=backward_inputs(1001, 1, 2, 37, 16, False)),
    Case(name="example-37-causal", hidden=False, causal=True,
         about="B=1, H=2, S=37 (five keys past two 16-key tiles), D=16, causal, 16x16 tiles: "
         "the worked example's shape, causal", inputs=backward_inputs(1002, 1, 2, 37, 16, True)),
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="public-dv", todo="recompute-p", points=12,
          about="dV: the worked example's shape, causal and not",
          cases=("example-37", "example-37-causal"), judge="dv",
          traps=(P_NOT_NORMALIZED_BY_LSE, CAUSAL_MASK_MISSING_IN_BACKWARD, DV_FROM_UNMASKED_P),
          hidden=False),
    Check(id="public-dqdk", todo="ds", points=13, requires="recompute-p",
          about="dQ and dK: the worked example's shape, causal and not",
          cases=("example-37", "example-37-causal"), judge="dqdk",
          traps=(DELTA_MISSING, SCALE_DROPPED, SCALE_DOUBLED), hidden=False),
]
# fmt: on
