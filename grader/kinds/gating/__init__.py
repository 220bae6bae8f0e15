"""Top-2 gating (03), the grader's side: its traps, judges, failure figure and inputs
(``boundary`` holds its boundary classes, instructor-only, and is not imported here)."""

from grader.kinds.gating.figures import failure
from grader.kinds.gating.judges import JUDGES
from grader.kinds.gating.traps import TRAPS

__all__ = ["JUDGES", "TRAPS", "failure"]
