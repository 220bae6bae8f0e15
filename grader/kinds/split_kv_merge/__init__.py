"""The split-KV merge (08), the grader's side: its traps, judges, failure figure and inputs
(``boundary`` holds its boundary classes, instructor-only, and is not imported here)."""

from grader.kinds.split_kv_merge.figures import failure
from grader.kinds.split_kv_merge.judges import JUDGES
from grader.kinds.split_kv_merge.traps import TRAPS

__all__ = ["JUDGES", "TRAPS", "failure"]
