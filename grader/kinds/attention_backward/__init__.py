"""Flash-attention backward (10), the grader's side: its traps, judges, failure figure and
inputs (``boundary`` holds its boundary classes, instructor-only, and is not imported here)."""

from grader.kinds.attention_backward.figures import failure
from grader.kinds.attention_backward.judges import JUDGES
from grader.kinds.attention_backward.traps import TRAPS

__all__ = ["JUDGES", "TRAPS", "failure"]
