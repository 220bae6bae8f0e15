"""Exercise 09 (extensions track), public checks: what the student handout grades with
(TODOs dest-slot and capacity-drop)."""

from grader.kinds.moe_dispatch.inputs import routing
from grader.kinds.moe_dispatch.traps import (
    CAPACITY_NOT_APPLIED,
    CAPACITY_OFF_BY_ONE,
    DISPATCH_INCLUSIVE_RANK,
    DISPATCH_NOT_GROUPED,
    DISPATCH_OFFSETS_INCLUSIVE,
    DISPATCH_RANK_RESTARTS,
)
from grader.model import Case, Check, Forbidden

SKELETON_TRAPS = ("dispatch-not-grouped", "capacity-not-applied")

# An atomic counter gives the pairs of an expert rows in the order the threads reach it: token
# order in the CPU interpreter, which runs lanes in order, any order on a GPU. The two backends
# would grade it differently, so both refuse it before it runs.
FORBIDDEN = (
    Forbidden(
        prefix="atomic_",
        trap="dispatch-not-token-order",
        why="an atomic counter hands out rows in whatever order the GPU's threads reach it, so "
        "the layout would change from run to run (the CPU interpreter happens to run them in "
        "order); rank each pair by the pairs before it with a prefix sum, TODO(dest-slot)",
    ),
)

# fmt: off
CASES = [
    Case(name="example-e8-m40", about="40 tokens x 2 over E=8, nothing dropped (CAPACITY=80)",
         inputs=routing(961, 40, 8), params={"E": 8, "CAPACITY": 80, "BLOCK": 16},
         hidden=False),
    Case(name="skewed-e8-m48-c16",
         about="48 tokens x 2 over E=8, CAPACITY=16: expert 3 takes half the tokens",
         inputs=routing(962, 48, 8, hot=3), params={"E": 8, "CAPACITY": 16, "BLOCK": 16},
         hidden=False),
]
# fmt: on

# fmt: off
CHECKS = [
    Check(id="public-slots", todo="dest-slot", points=25,
          about="Nothing dropped: every pair's row", cases=("example-e8-m40",),
          judge="dispatch-slots", hidden=False,
          traps=(DISPATCH_NOT_GROUPED, DISPATCH_OFFSETS_INCLUSIVE, DISPATCH_INCLUSIVE_RANK,
                 DISPATCH_RANK_RESTARTS)),
    Check(id="public-capacity", todo="capacity-drop", points=25, requires="dest-slot",
          about="One expert over its capacity", cases=("skewed-e8-m48-c16",),
          judge="dispatch-capacity", traps=(CAPACITY_OFF_BY_ONE, CAPACITY_NOT_APPLIED),
          hidden=False),
]
# fmt: on
