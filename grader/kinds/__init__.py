"""What the grader knows about each kind of kernel (an interface of exercises/info.toml), one
folder per kind: its traps (the classic wrong answers a check can name, with the forms each
mistake outputs), its judges, its failure figure, its inputs and its boundary classes
(instructor-only). ``base`` and ``compare`` hold what the kinds share.

One line per kind below, the kind's name and its home. A home's package gives ``TRAPS`` (a
tuple, in catalogue order), ``JUDGES`` (judge name -> class) and ``failure(judge, case, got)``
(its figure), and may give ``probe(causal)`` (a case the picture of a failure is drawn on).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util

# fmt: off
KINDS = {
    "gating": "grader.kinds.gating",
    "tiled-gating": "grader.kinds.tiled_gating",
    "split-kv-merge": "grader.kinds.split_kv_merge",
    "moe-dispatch": "grader.kinds.moe_dispatch",
}
# fmt: on
LEGACY = "grader.kinds.traps"  # TRAPS_OF: the traps of the kinds not yet in a home of their own
# The catalogue's order (docs/traps.md lists the traps so).
ORDER = (
    "attention", "gating", "bhsd-attention", "tiled-gating", "window-attention",
    "split-kv-merge", "moe-dispatch",
)  # fmt: skip


# The pictures of the kinds not yet in a home of their own.
PICTURES = {
    "attention": "grader.kinds.attention",
    "window-attention": "grader.kinds.attention",
    "bhsd-attention": "grader.kinds.attention",
}


def pictures(name: str):
    """The module that draws the kind's pictures for the HTML report, or None: imported only
    by the report, which needs markupsafe."""
    module = KINDS.get(name) or PICTURES.get(name)
    if module is None or importlib.util.find_spec(f"{module}.pictures") is None:
        return None
    return importlib.import_module(f"{module}.pictures")


def home(name: str):
    """The grader's home of interface ``name``: its package, or None."""
    module = KINDS.get(name)
    return importlib.import_module(module) if module else None


@functools.cache
def _traps() -> dict:
    found = {}
    legacy = importlib.import_module(LEGACY).TRAPS_OF
    for name in ORDER:
        found.update((t.id, t) for t in (home(name).TRAPS if name in KINDS else legacy[name]))
    return found


def __getattr__(name: str):
    if name == "TRAPS":  # every trap by id, in catalogue order
        return _traps()
    raise AttributeError(name)
