"""2-D attention (01, 02), the grader's side: its traps, judge, failure figure, inputs and the
probe its pictures are drawn on (``boundary`` and ``hidden``, instructor-only, are not imported
here: the boundary classes and the hidden cases that 01, 02 and 06 share). The kinds built on it,
window_attention and bhsd_attention, take their judge and figure from here."""

from grader.kinds.attention.figures import failure
from grader.kinds.attention.judges import JUDGES
from grader.kinds.attention.probe import probe_case as probe
from grader.kinds.attention.probe import probe_details
from grader.kinds.attention.traps import TRAPS

__all__ = ["JUDGES", "TRAPS", "failure", "probe", "probe_details"]
