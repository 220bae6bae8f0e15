"""What every kind's host side shares (each kind's checks and launches live in its module of
``kata.kinds``; ``kata.host`` gives them all to the kernel files under one name): the checks of a
tensor and of the tensors' device, and ``launch_cached``, the wrappers' launch decided once per
shape key."""

from __future__ import annotations

import torch
from triton.runtime.autotuner import Autotuner

from kata import runtime


def _require_tensor(name: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a floating-point dtype, got {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(x.shape)}")


def _require_device(**tensors: torch.Tensor) -> torch.device:
    devices = {name: x.device for name, x in tensors.items()}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{name} on {dev}" for name, dev in devices.items())
        raise ValueError(f"tensors must be on one device, got {listed}")
    device = next(iter(devices.values()))
    if device.type != runtime.DEVICE:
        raise ValueError(
            f"tensors are on {device} but kernels run on {runtime.describe()}; "
            f"move them with .to({runtime.DEVICE!r})"
        )
    return device


# ---- the wrappers' own path: a launch decided once per shape key ----------------------------
#
# Each kind's launch_* helpers serve the grader as much as the wrappers: every call goes through
# the kernel as its file defines it (its autotuner and pruning), because the grader pins each
# configuration in turn and counts the launches. Each kind's run_* functions serve the solutions'
# wrappers, which a caller runs in a loop (a decode step every few milliseconds), and there the
# host's time per call is the cost: each does its checks in a few operations, falling back to
# the full check only to raise its message; makes its outputs in one allocation; reads
# nothing back from the GPU unless asked to; and launches through ``launch_cached``.

_LAUNCHES: dict = {}  # (kernel, key) -> (the Triton function to launch, its keyword arguments)
_MAX_LAUNCHES = 1024  # keys are shapes: a caller whose shapes never repeat must not grow it forever
_HALF_DTYPES = (torch.float16, torch.bfloat16)


def launch_cached(kernel, key, grid, args: tuple, constexprs: dict) -> None:
    """``kernel[grid](*args, **constexprs)``, where ``grid(meta)`` maps the launch's keyword
    arguments (with the configuration's BLOCK_M, say) to the grid.

    ``key`` must hold everything the configuration depends on (the autotuner's key and the
    dtypes). The first call for a key goes through ``kernel`` as it is, autotuner included, and
    keeps the configuration the autotuner chose (by timing or, like 05, by pruning to one);
    later calls launch the Triton function under the autotuner with that configuration. The
    autotuner's own dispatch (a dict of every argument, its key, the configuration's keywords
    merged again) is then paid once per key instead of at every call."""
    found = _LAUNCHES.get((kernel, key))
    if found is None:
        kernel[grid](*args, **constexprs)
        if isinstance(kernel, Autotuner):
            found = kernel.fn, {**constexprs, **kernel.best_config.all_kwargs()}
        else:
            found = kernel, constexprs
        if len(_LAUNCHES) >= _MAX_LAUNCHES:
            _LAUNCHES.clear()
        _LAUNCHES[kernel, key] = found
        return
    fn, meta = found
    fn[grid(meta)](*args, **meta)
