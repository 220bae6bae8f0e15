"""What every kind's host side shares (each kind's checks and launches live in its module of
``kata.kinds``; ``kata.host`` gives them all to the kernel files under one name): the checks of a
tensor and of the tensors' device, and ``launch_cached``, the wrappers' launch decided once per
shape key."""

from __future__ import annotations

import inspect

import torch
import triton
from triton import knobs
from triton.runtime import driver
from triton.runtime.autotuner import Autotuner
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

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
# nothing back from the GPU unless asked to; and launches through ``launch_cached``, which
# launches anything but a Triton kernel or autotuner (the grader's stand-ins, ``Pinned`` and
# ``Recorder`` of ``grader.run.launcher``, should one reach it) as given.

_LAUNCHES: dict = {}  # (kernel, key) -> its launch; (kernel, key, specialization) -> compiled
_MAX_LAUNCHES = 1024  # keys are shapes: a caller whose shapes never repeat must not grow it forever
_HALF_DTYPES = (torch.float16, torch.bfloat16)

# The Triton versions whose ``JITFunction.run`` ends in the call ``_direct`` repeats (it is
# internal to Triton): under any other, every launch goes through ``JITFunction.run``.
DIRECT_LAUNCH_TRITON = ("3.6.",)
# [None, or the driver's (current device, current stream) functions], decided at the first launch
# (``JITFunction.run`` looks both up through ``driver.active`` at every call).
_DIRECT: list = []


def _direct_launches():
    if not _DIRECT:
        if runtime.BACKEND == "cuda" and triton.__version__.startswith(DIRECT_LAUNCH_TRITON):
            _DIRECT.append((driver.active.get_current_device, driver.active.get_current_stream))
        else:
            _DIRECT.append(None)
    return _DIRECT[0]


def cdiv(a: int, b: int) -> int:
    """``triton.cdiv`` for host code that runs at every call: Triton's is a constexpr function,
    whose call from Python runs an import and two comprehensions before the arithmetic."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """``triton.next_power_of_2`` for n >= 1, without the constexpr function's cost (``cdiv``)."""
    return 1 << (n - 1).bit_length()


def _specialization(device: int, args: tuple, values: list) -> tuple:
    """A key that tells apart the compiled kernels Triton would pick for ``args`` of one shape
    key (which holds their dtypes): the device, each tensor's address modulo 16 (Triton
    specialises on 16-byte alignment; ``values`` holds the addresses) and each int's value
    (specialised on being 1, dividing by 16, and its size); floats are not specialised. Other
    arguments are kept as they are, and ``_direct`` keeps a launch direct only where each
    argument is a tensor, an int or a float."""
    return (
        device,
        *[v & 15 if type(a) is torch.Tensor else None if type(a) is float else v
          for a, v in zip(args, values)],
    )  # fmt: skip


_PLAIN = (torch.Tensor, int, float)
_ABSENT = object()
_KERNELS = (JITFunction, Autotuner, InterpretedFunction)  # what launch_cached keeps launches of


def _direct(compiled, fn, meta: dict, args: tuple):
    """How to launch the compiled kernel as ``JITFunction.run`` does, or None where the launch
    was not a compiled kernel (the interpreter's): ``(call, head, tail, seen)``, and the launch
    is ``call(*grid, stream, *head, *arguments, *tail)``, each tensor passed as its address.

    ``call`` is the launcher's C function where the kernel needs no scratch memory (the
    launcher's Python ``__call__`` only allocates scratch, then calls it), else the launcher."""
    if not (hasattr(compiled, "packed_metadata") and hasattr(compiled, "function")):
        return None
    if any(type(a) not in _PLAIN for a in args):
        return None
    while not isinstance(fn, JITFunction):  # under a heuristics decorator, say
        fn = getattr(fn, "fn", None)
        if fn is None:
            return None
    bound = inspect.signature(fn.fn).bind(
        *args, **{k: v for k, v in meta.items() if k in fn.arg_names}
    )
    bound.apply_defaults()
    tail = tuple(bound.arguments.values())[len(args) :]  # the constexprs, as Triton passes them
    # The module globals the kernel read, each with the object bound to it now: Triton has just
    # compared their values with those it compiled with (it keeps deep copies, never the same
    # objects), so a global rebound after this sends the launch back through Triton, which
    # compares again (and raises if the value differs).
    seen = tuple(
        (g, name, g.get(name, _ABSENT)) for (name, _), (_, g) in fn.used_global_vals.items()
    )
    launcher = compiled.run
    hooks_and_metadata = (compiled.packed_metadata, None, None, None)
    if (
        getattr(launcher, "global_scratch_size", 1) == 0
        and getattr(launcher, "profile_scratch_size", 1) == 0
        and hasattr(launcher, "launch")
    ):
        head = (compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl,
                None, None, *hooks_and_metadata)  # fmt: skip
        return launcher.launch, head, tail, seen
    return launcher, (compiled.function, *hooks_and_metadata), tail, seen


def _remember(key, value) -> None:
    if len(_LAUNCHES) >= _MAX_LAUNCHES:
        _LAUNCHES.clear()
    _LAUNCHES[key] = value


def launch_cached(kernel, key, grid, args: tuple, constexprs: dict) -> None:
    """``kernel[grid](*args, **constexprs)``, where ``grid(meta)`` maps the launch's keyword
    arguments (with the configuration's BLOCK_M, say) to the grid.

    ``key`` must hold everything the configuration depends on (the autotuner's key and the
    dtypes). The first call for a key goes through ``kernel`` as it is, autotuner included, and
    keeps the configuration the autotuner chose (by timing or, like 05, by pruning to one). The
    autotuner's own dispatch (a dict of every argument, its key, the configuration's keywords
    merged again) is then paid once per key instead of at every call.

    Later calls launch the compiled kernel Triton returned for the same specialisation
    (``_specialization``: alignment, dtypes, the ints' classes, the current device) through its
    launcher, as ``JITFunction.run`` ends, without what it does before at every call: bind and
    specialise every argument, hash them into its cache key, compare each global the kernel
    read with its value now (here: is it still the object read), and build launch metadata for
    hooks. Each tensor goes to the launcher as its address, read once for the key: handed a
    tensor, the launcher would read it again and ask the driver whether it is device memory
    (the caller's checks have said so). Launch hooks (a profiler's) and untested Triton versions
    take ``JITFunction.run`` every time."""
    if not isinstance(kernel, _KERNELS):  # the grader's stand-ins: as given
        kernel[grid](*args, **constexprs)
        return
    found = _LAUNCHES.get((kernel, key))
    driven = _direct_launches()
    spec = direct = None
    hooks = knobs.runtime.launch_enter_hook.calls or knobs.runtime.launch_exit_hook.calls
    if driven and not hooks:
        values = [a.data_ptr() if type(a) is torch.Tensor else a for a in args]
        spec = _specialization(driven[0](), args, values)
        direct = _LAUNCHES.get((kernel, key, spec))
    if found is None:
        compiled = kernel[grid](*args, **constexprs)
        if isinstance(kernel, Autotuner):
            found = kernel.fn, {**constexprs, **kernel.best_config.all_kwargs()}
        else:
            found = kernel, constexprs
        _remember((kernel, key), found)
        if spec is not None:
            _remember((kernel, key, spec), _direct(compiled, *found, args))
        return
    fn, meta = found
    if direct is not None and direct[3] and any(g.get(n) is not v for g, n, v in direct[3]):
        direct = None
    if direct is None:
        compiled = fn[grid(meta)](*args, **meta)
        if spec is not None:
            _remember((kernel, key, spec), _direct(compiled, fn, meta, args))
        return
    call, head, tail, _ = direct
    g = grid(meta)
    call(g[0], g[1] if len(g) > 1 else 1, g[2] if len(g) > 2 else 1, driven[1](spec[0]), *head,
         *values, *tail)  # fmt: skip
