"""What every kind of kernel shares: the ``Interface`` base, the poison an output buffer holds
before the kernel runs, and the memory layouts a case may ask its inputs in.

An interface knows the kernel's parameters (fixed by the chapter, so that a kernel from the book
drops into a submission), how the grader launches it on a case (through ``kata.host``, with the
grader's own block sizes and outputs poisoned so that unwritten elements show), what it writes,
what right means (a float64 oracle and a tolerance per output and input dtype), and what torch
does instead (the baseline the performance track is timed against).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

# ---- poison: what an output buffer holds before the kernel runs --------------------------------
# A NaN with a payload no arithmetic produces (computed NaNs are 0x7FC00000 or 0x7FFFFFFF), so
# that "never written" and "written as NaN" can be told apart bit for bit.
POISON_BITS = {"float32": 0x7FC0BEEF, "float16": 0x7EEF, "bfloat16": 0x7FEF}
INDEX_POISON = -1_588_444_911  # an int32 no kernel writes by accident


def poisoned(shape, dtype: str, device):
    """A tensor of ``shape`` and ``dtype`` (a torch dtype name) full of the poison value."""
    if dtype == "int32":
        return torch.full(shape, INDEX_POISON, dtype=torch.int32, device=device)
    int_type = torch.int32 if dtype == "float32" else torch.int16  # every payload is positive
    raw = torch.full(shape, POISON_BITS[dtype], dtype=int_type, device=device)
    return raw.view(getattr(torch, dtype))


def unwritten(tensor):
    """Which elements of a poisoned tensor still hold the poison."""
    if tensor.dtype == torch.int32:
        return tensor == INDEX_POISON
    name = str(tensor.dtype).removeprefix("torch.")
    int_type = torch.int32 if name == "float32" else torch.int16
    return tensor.view(int_type) == POISON_BITS[name]


def _tensor(array, layout: str | None, device):
    """Put a NumPy array on the device with the requested memory layout."""
    t = torch.from_numpy(array)
    if layout == "transposed":  # column-major: strides (1, rows)
        return t.t().contiguous().to(device).t()
    if layout == "sliced":  # every other column of a wider tensor: strides (2 * cols, 2)
        buf = torch.zeros(t.shape[0], 2 * t.shape[1], dtype=t.dtype, device=device)
        buf[:, ::2] = t.to(device)
        return buf[:, ::2]
    if layout == "row-sliced":  # every other row: strides (2 * cols, 1)
        buf = torch.zeros(2 * t.shape[0], t.shape[1], dtype=t.dtype, device=device)
        buf[::2] = t.to(device)
        return buf[::2]
    if layout == "padded":  # inside a buffer wider in its trailing axes, NaN around it (08)
        pad = (0, 3) if t.dim() == 2 else (0, 1, 8)
        wider = [n + p for n, p in zip(t.shape, pad)]
        buf = torch.full(wider, float("nan"), dtype=t.dtype, device=device)
        view = buf[tuple(slice(n) for n in t.shape)]
        view.copy_(t.to(device))
        return view
    if layout is not None:
        raise ValueError(f"unknown layout {layout!r}")
    return t.to(device)


def f64(x) -> np.ndarray:
    """An array or a torch tensor as a float64 NumPy array, for the oracles."""
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


# ---- the interface -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Interface:
    """What every interface has. ``launch`` runs in the launcher (the student's process) and
    returns torch tensors; ``expected`` runs in the grader, in float64 NumPy."""

    name: str
    params: tuple[str, ...]
    outputs: tuple[str, ...]  # what the kernel writes, in the order of its pointers
    judges: tuple[str, ...]  # the judges (the kind's grader home) its checks may use
    about: str
    # A trap's form must sit this many absolute tolerances from the right answer on some case,
    # or the check could pay for the mistake (grader.judge.checking.prove_traps_visible).
    separation: float = 100.0
    # The kernel picks its tiles with an autotuner: every case pins a configuration, or runs
    # under each one the kernel offers (grader.run.launcher), so that both backends run the same.
    autotuned: bool = False

    def inputs(self, case, device) -> dict:
        ins = {k: _tensor(a, case.layout.get(k), device) for k, a in case.inputs.items()}
        if case.dtype:
            ins = {k: v.to(getattr(torch, case.dtype)) for k, v in ins.items()}
        return ins

    def launch(self, kernel, case, device) -> dict:
        raise NotImplementedError

    def expected(self, case) -> dict:
        raise NotImplementedError

    def tolerance(self, key: str, dtype: str | None) -> tuple[float, float]:
        """(atol, rtol) for output ``key`` when the inputs are ``dtype`` (None: float32)."""
        raise NotImplementedError

    def timed_pairs(self, ours, theirs) -> list[tuple[str, object, object]]:
        """(key, kernel's, torch's) for each output, from one timed call of each side
        (``timed``): what the grader compares, with ``tolerance(key, ...)``, after timing, so
        that a kernel which skips work when timed earns nothing for its speed. By default the
        kernel's outputs (one tensor or a tuple) pair with torch's in ``outputs``' order."""
        ours = tuple(ours) if isinstance(ours, (tuple, list)) else (ours,)
        theirs = tuple(theirs) if isinstance(theirs, (tuple, list)) else (theirs,)
        if not len(ours) == len(theirs) == len(self.outputs):
            raise ValueError(
                f"{self.name}: {len(ours)} kernel outputs and {len(theirs)} torch outputs "
                f"for the {len(self.outputs)} outputs {self.outputs}"
            )
        return list(zip(self.outputs, ours, theirs))

    def exact(self, key: str) -> bool:
        """Whether output ``key`` is compared exactly even where its values are not integers
        (an integer output always is)."""
        return False
