"""What the grader knows about each kind of kernel (an interface of exercises/info.toml), one
folder per kind: its traps (the classic wrong answers a check can name, with the forms each
mistake outputs), its judges, its failure figure, its inputs, its boundary classes
(instructor-only) and its pictures for the HTML report. ``base``, ``compare`` and ``svg`` hold
what the kinds share; none of them imports a kind, nor a stage above.

One line per kind below, the kind's name and its home. A home's package gives ``TRAPS`` (a
tuple, in catalogue order), ``JUDGES`` (judge name -> class) and ``failure(judge, case, got)``
(its figure), and may give ``probe(causal)`` (a case the pictures of a failure are drawn on)
with ``probe_details(case, got)``; ``<home>.pictures`` draws, when the kind has pictures.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util

# In the catalogue's order: docs/traps.md lists the traps so.
# fmt: off
KINDS = {
    "attention": "grader.kinds.attention",
    "gating": "grader.kinds.gating",
    "bhsd-attention": "grader.kinds.bhsd_attention",
    "tiled-gating": "grader.kinds.tiled_gating",
    "window-attention": "grader.kinds.window_attention",
    "split-kv-merge": "grader.kinds.split_kv_merge",
    "moe-dispatch": "grader.kinds.moe_dispatch",
    "attention-backward": "grader.kinds.attention_backward",
}
# fmt: on


def home(name: str):
    """The grader's home of interface ``name``: its package."""
    return importlib.import_module(KINDS[name])


def probe(name: str, causal: bool):
    """The case a failing check's pictures are drawn on, for a kind that has one; else None."""
    make = getattr(home(name), "probe", None)
    return make(causal) if make else None


def pictures(name: str):
    """The module that draws the kind's pictures for the HTML report, or None: imported only
    by the report, which needs markupsafe."""
    module = KINDS.get(name)
    if module is None or importlib.util.find_spec(f"{module}.pictures") is None:
        return None
    return importlib.import_module(f"{module}.pictures")


@functools.cache
def _traps() -> dict:
    found = {}
    for module in KINDS.values():
        found.update((t.id, t) for t in importlib.import_module(module).TRAPS)
    return found


def __getattr__(name: str):
    if name == "TRAPS":  # every trap by id, in catalogue order
        return _traps()
    raise AttributeError(name)
