"""Sliding-window attention (06), the grader's side: its own traps; its judge and failure figure are 2-D
attention's."""

from grader.kinds.attention.figures import failure
from grader.kinds.attention.judges import JUDGES
from grader.kinds.window_attention.traps import TRAPS

__all__ = ["JUDGES", "TRAPS", "failure"]
