"""What the grader knows about each kind of kernel (an interface of exercises/info.toml), one
folder per kind: its traps (the classic wrong answers a check can name, with the forms each
mistake outputs), its judges, its failure figure, its inputs, its boundary classes
(instructor-only) and its pictures for the HTML report. ``base``, ``compare`` and ``svg`` hold
what the kinds share; none of them imports a kind, nor a stage above.

One line per kind below, the kind's name and its home. A home's package gives ``TRAPS`` (a
tuple, in catalogue order), ``JUDGES`` (judge name -> class) and ``failure(judge, case, got)``
(its figure), and may give ``probe(causal)`` (a case the pictures of a failure are drawn on)
with ``probe_details(case, got)``; ``<home>.pictures`` draws, when the kind has pictures.

A kind timed by ``nox -s bench`` (kata/authoring/bench.py) has ``<home>.bench``, imported only
by the bench (it imports torch and Triton, and may define ``@triton.jit`` floor kernels). It
gives two functions, and the bench calls them in this registry's order:

- ``rows(bench, *, quick: bool, graded_only: bool, copy_tbps: float) -> dict[str, list[dict]]``:
  the kind's sections of ``bench.json``, each key a section (``"attention"``), each value its
  rows; a section the run leaves out (``--quick``, ``--graded-shapes``) is simply not returned.
- ``host_rows(bench) -> list[dict]``: the kind's rows of the shared ``"host"`` section (one per
  wrapper, made by ``bench.host_row``), or ``[]``; called unless ``--graded-shapes``.
- optionally ``PANELS`` (an int) and ``plot(data, axes)``: the kind's panels of
  ``reports/bench.png``, drawn on its ``PANELS`` matplotlib axes from the whole run's ``data``.

``bench`` is the running bench module itself, passed in rather than imported (run as a script
it is ``__main__``, and an import would give a second copy whose ``DRY`` is never set). It
gives the shared tools: ``DRY``, ``time_ms(fns)``, ``graph_ms(fns)``, ``host_us(fns)``,
``host_row(wrapper, shape, fns)``, ``drop_if_failing(fns, name)``, ``same_size_copy(bytes)``,
``sdpa_backends()``, ``add_sdpa_backends(fns, row, make)``, ``cuda_kernels(call)``,
``load(number)``, ``graded(number)``, ``as_graded(number, kernel, shape)``, ``graded_line(row)``.

The docs' figures from the H200 run (kata/authoring/bench_docs.py) come from
``<home>.tables`` where a kind has one, a module without torch: ``TABLES`` (a generated
section's marker name -> ``fn(data) -> str``) and ``DERIVED`` (a derived field's name ->
``fn(row, data)``).
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


def _part(name: str, part: str):
    module = f"{KINDS[name]}.{part}"
    return importlib.import_module(module) if importlib.util.find_spec(module) else None


def benches() -> list:
    """The ``bench`` module of each kind that has one, in the registry's order."""
    return [m for m in (_part(name, "bench") for name in KINDS) if m is not None]


def tables() -> list:
    """The ``tables`` module of each kind that has one, in the registry's order."""
    return [m for m in (_part(name, "tables") for name in KINDS) if m is not None]


def __getattr__(name: str):
    if name == "TRAPS":  # every trap by id, in catalogue order
        return _traps()
    raise AttributeError(name)
