"""The order in which the programs of one launch run, in Triton's CPU interpreter.

On a GPU the programs of a grid run in any order, many at once. Triton's interpreter runs them
one after another, 0, 1, 2, ... (``GridExecutor.__call__``), so a kernel whose programs read
what earlier programs of the same launch stored is right there, and a race on a GPU. The
launcher (``grader.run.launcher.run_reversed``) therefore runs each case a second time with the
programs in reverse order, inside ``reversed_programs()``; a run whose outputs differ from the
natural run's is judged too, under its own label (``label``), and the student is told why
(``WHY``). One verdict on both backends: the judge fails a check if either run is wrong.

``install`` must run in the launcher before the submission is imported (its fingerprint of
Triton's classes then includes the wrapper).
"""

from __future__ import annotations

import contextlib

from grader.model import REVERSED, WHY  # the judge names the run by them too


class _Order:
    """Whether the interpreter's next programs run last first."""

    def __init__(self) -> None:
        self.reverse = False


_order = _Order()


def install() -> None:
    """Let ``reversed_programs`` reverse the interpreter's grids. The interpreter calls
    ``InterpreterBuilder.set_grid_idx(x, y, z)`` before each program, in natural order; while
    reversed, the wrapper gives that program the ids ``(X-1-x, Y-1-y, Z-1-z)`` instead: the
    same programs, each once, the last one first. Installing twice wraps once."""
    from triton.runtime.interpreter import InterpreterBuilder

    original = InterpreterBuilder.__dict__["set_grid_idx"]
    if getattr(original, "kata_order", False):
        return

    def set_grid_idx(self, x, y, z):
        if _order.reverse:
            nx, ny, nz = self.grid_dim
            x, y, z = nx - 1 - x, ny - 1 - y, nz - 1 - z
        return original(self, x, y, z)

    set_grid_idx.kata_order = True
    InterpreterBuilder.set_grid_idx = set_grid_idx


@contextlib.contextmanager
def reversed_programs():
    """Every interpreted launch inside runs its programs in reverse order (``install`` first)."""
    _order.reverse = True
    try:
        yield
    finally:
        _order.reverse = False


def label(config: str | None) -> str:
    """The label of a reversed run: its tile configuration's, and the order."""
    return f"{config}, {REVERSED}" if config else REVERSED


def same(natural: dict, reversed_: dict) -> bool:
    """Whether two runs' outputs (``launcher._arrays``: each output and its unwritten mask) are
    the same, element for element (a NaN equal to a NaN)."""
    import numpy as np

    if natural.keys() != reversed_.keys():
        return False
    for key, a in natural.items():
        b = reversed_[key]
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            return False
    return True


def warning(names: list[str]) -> str:
    """The status warning for the cases whose outputs depended on the order of the programs."""
    shown = ", ".join(names[:5]) + (f" (and {len(names) - 5} more)" if len(names) > 5 else "")
    word = "case" if len(names) == 1 else "cases"
    return (
        f"{word} {shown}: the outputs changed when the programs of the launch ran in reverse "
        f"order (the interpreter runs them one by one, 0, 1, 2, ...; a GPU does not): {WHY}"
    )


def crashed(stopped: str) -> str:
    """Why a case failed when the launcher ended during its reversed run (``stopped``: the
    process's predicate, "was killed by SIGSEGV ...")."""
    return (
        f"the submission's process {stopped}, where with its programs in natural order it "
        f"finished: {WHY}"
    )
