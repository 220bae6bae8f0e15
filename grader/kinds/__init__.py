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

# fmt: off
KINDS = {
    "split-kv-merge": "grader.kinds.split_kv_merge",
    "moe-dispatch": "grader.kinds.moe_dispatch",
}
# fmt: on
LEGACY = "grader.kinds.traps"  # the traps of the kinds not yet in a home of their own


def home(name: str):
    """The grader's home of interface ``name``: its package, or None."""
    module = KINDS.get(name)
    return importlib.import_module(module) if module else None


@functools.cache
def _traps() -> dict:
    found = {}
    for module in (LEGACY, *KINDS.values()):
        found.update((t.id, t) for t in importlib.import_module(module).TRAPS)
    return found


def __getattr__(name: str):
    if name == "TRAPS":  # every trap by id, in catalogue order
        return _traps()
    raise AttributeError(name)
