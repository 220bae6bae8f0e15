"""Exercise 08 (extensions track), public checks: what the student handout grades with
(TODO merge)."""

from grader.kinds.split_kv_merge.inputs import decode_case
from grader.kinds.split_kv_merge.traps import (
    LSE_BASE_2,
    LSE_MISSING_MAX,
    MERGE_ACC_NOT_RESCALED,
    MERGE_L_NOT_RESCALED,
    SPLIT_PARTIALS_AVERAGED,
)
from grader.model import Check

SKELETON_TRAPS = ("split-partials-averaged",)

# fmt: off
CASES = [
    decode_case(981, 16, 5, 16, lengths=[80, 33, 1], group=2, name="example-5x16",
             what="the worked example's shape, two query rows per cache", hidden=False),
    decode_case(982, 32, 4, 24, lengths=[128, 127, 97], name="full-4x32",
                what="every split holds keys", hidden=False),
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="public-merge", todo="merge", points=17,
          about="out: the worked example's shape (empty splits), and splits that all hold keys",
          cases=("example-5x16", "full-4x32"), judge="output",
          traps=(SPLIT_PARTIALS_AVERAGED, MERGE_L_NOT_RESCALED, MERGE_ACC_NOT_RESCALED),
          hidden=False),
    Check(id="public-lse", todo="merge", points=8,
          about="lse: the same partials", cases=("example-5x16", "full-4x32"), judge="lse",
          traps=(LSE_MISSING_MAX, LSE_BASE_2, SPLIT_PARTIALS_AVERAGED, MERGE_L_NOT_RESCALED),
          hidden=False),
]
# fmt: on
