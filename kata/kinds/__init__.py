"""The kinds of kernel the kata grades: exercises/info.toml's ``interface`` names, one line each,
with the module that is the kind's student-facing home (its parameters, launch, oracle and
tolerance, and its host checks and launches, named in its ``HOST`` for ``kata.host``;
``kata.kinds.base`` and ``kata.kinds.launch`` hold what every kind shares).

Data only, no import of a kind at the top: the manifest reader (``kata.catalogue``) checks names
here before it knows whether torch is installed, and each kind's module imports torch.
"""

from __future__ import annotations

import importlib

# fmt: off
KINDS = {
    "attention": "kata.kinds.attention",
    "window-attention": "kata.kinds.window_attention",
    "gating": "kata.kinds.gating",
    "bhsd-attention": "kata.kinds.bhsd_attention",
    "tiled-gating": "kata.kinds.tiled_gating",
    "split-kv-merge": "kata.kinds.split_kv_merge",
    "moe-dispatch": "kata.kinds.moe_dispatch",
    "attention-backward": "kata.kinds.attention_backward",
}
# fmt: on


def get(name: str):
    """The kind's ``Interface`` object (``INTERFACE`` in its module)."""
    try:
        module = KINDS[name]
    except KeyError:
        raise KeyError(f"no interface {name!r}; known: {', '.join(KINDS)}") from None
    return importlib.import_module(module).INTERFACE


def modules() -> list:
    """Every kind's module, in the registry's order."""
    return [importlib.import_module(m) for m in KINDS.values()]
