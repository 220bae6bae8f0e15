"""MoE dispatch (09), the grader's side: its traps, judges, failure figure and inputs
(``boundary`` holds its boundary classes, instructor-only, and is not imported here)."""

from grader.kinds.moe_dispatch.figures import failure
from grader.kinds.moe_dispatch.judges import JUDGES
from grader.kinds.moe_dispatch.traps import TRAPS

__all__ = ["JUDGES", "TRAPS", "failure"]
