"""Tiled top-2 gating (05), the grader's side: its own trap and judge; its figure, inputs and
boundary classes are gating's."""

from grader.kinds.gating.figures import failure
from grader.kinds.tiled_gating.judges import JUDGES
from grader.kinds.tiled_gating.traps import TRAPS

__all__ = ["JUDGES", "TRAPS", "failure"]
