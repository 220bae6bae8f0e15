"""The float64 references, by name (``oracles.attention``, ``oracles.top2_gating``, ...), for the
exercises' worked examples: each lives with its kind in ``kata/kinds/``, and this module finds
it there, so that a file keeps one import whatever its kind."""

from __future__ import annotations

from kata import kinds


def __getattr__(name: str):
    if not name.startswith("_"):
        for module in kinds.modules():
            found = getattr(module, name, None)
            if callable(found) and getattr(found, "__module__", None) == module.__name__:
                return found
    raise AttributeError(f"no oracle {name!r} in kata/kinds/")
