"""Input checks and launch helpers shared by the exercise files and the grader.

The exercise files call these so that every submission validates input the same way, and the
grader calls the launch helpers with the *student's* kernel and its own block sizes, so that it
never depends on a student's host code.

Each kind keeps its own checks and launches in its module of ``kata.kinds`` (listed in its
``HOST``), and what they share is in ``kata.kinds.launch``; this module only gives them all under
one name, ``host.launch_attention(...)``, without naming a kind: a name is looked up in the
kinds' registry the first time it is asked for, then kept here.
"""

from __future__ import annotations

from kata import kinds
from kata.kinds.launch import (  # noqa: F401 (given to the kernel files and the tests)
    _HALF_DTYPES,
    _LAUNCHES,
    _MAX_LAUNCHES,
    _require_device,
    _require_tensor,
    launch_cached,
)


def __getattr__(name: str):
    for module in kinds.modules():
        if name in getattr(module, "HOST", ()):
            value = globals()[name] = getattr(module, name)  # kept: the next call reads it here
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted({*globals(), *(n for m in kinds.modules() for n in getattr(m, "HOST", ()))})
