"""(B, H, S, D) attention (04), the grader's side: its own traps; its judge and failure figure are 2-D
attention's."""

from grader.kinds.attention.figures import failure
from grader.kinds.attention.judges import JUDGES
from grader.kinds.bhsd_attention.traps import TRAPS

__all__ = ["JUDGES", "TRAPS", "failure"]
