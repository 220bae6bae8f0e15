"""Decide once, before any kernel is defined, where kernels run.

Every entry point (a kernel file, the grader's commands, the tests) calls ``configure()`` before
it defines or imports a ``@triton.jit`` function: Triton reads ``TRITON_INTERPRET`` when a
kernel is decorated. Importing this module does nothing else. ``configure`` picks one of two
backends and prepares the environment Triton reads:

* ``cuda``: kernels are compiled for the GPU. fp32 ``tl.dot`` defaults to TF32 on NVIDIA GPUs,
  which misses the chapter's 1e-4 tolerance, so ``TRITON_F32_DEFAULT=ieee`` is set unless the
  caller already chose a precision.
* ``interpreter``: Triton's CPU interpreter (``TRITON_INTERPRET=1``), for machines without CUDA.

``configure("cuda")``, or ``KATA_DEVICE=auto|cuda|interpreter`` when no device is passed, forces
a choice (``auto`` is the default). A pre-set ``TRITON_INTERPRET=1`` is honoured as a request for
the interpreter. The choice is written to ``KATA_DEVICE`` so that child processes make the same
one; ``BACKEND``, ``DEVICE`` and ``INTERPRETER`` hold it in this process.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

CHOICES = ("auto", "cuda", "interpreter")
# The grader's own: kernels are made for Triton's compiler, to be compiled for a GPU this
# machine need not have, and never launched (grader.run.launcher --compile).
COMPILER = "compiler"
ROOT = Path(__file__).resolve().parents[1]


class BackendError(RuntimeError):
    """The requested backend cannot be used on this machine."""


def _cuda_available() -> bool:
    # Without an NVIDIA driver there is no CUDA GPU, and asking torch would cost its import
    # (over a second: the grader and every tool start here).
    drivers = ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/dxg")  # /dev/dxg: WSL 2
    if sys.platform.startswith("linux") and not any(os.path.exists(d) for d in drivers):
        return False
    import torch

    return torch.cuda.is_available()


def _why_no_cuda() -> str:
    """Why torch sees no CUDA GPU here, as far as can be told."""
    drivers = ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/dxg")
    if sys.platform.startswith("linux") and not any(os.path.exists(d) for d in drivers):
        return "no NVIDIA driver on this machine"
    import torch

    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a build without CUDA"
    return "the driver and torch's CUDA do not agree, or CUDA_VISIBLE_DEVICES hides the GPUs"


def _select(device: str | None) -> str:
    requested = (device or os.environ.get("KATA_DEVICE", "auto")).strip().lower() or "auto"
    if requested == COMPILER:
        return COMPILER
    if requested not in CHOICES:
        named = f"--device {requested}" if device else f"KATA_DEVICE={requested!r}"
        raise BackendError(f"{named} is not one of {', '.join(CHOICES)}")
    if requested == "auto" and os.environ.get("TRITON_INTERPRET", "0") == "1":
        requested = "interpreter"
    if requested == "cuda":
        if not _cuda_available():
            named = "--device cuda" if device else "KATA_DEVICE=cuda (set in the environment)"
            raise BackendError(
                f"{named} was requested but torch sees no CUDA GPU ({_why_no_cuda()}); "
                "without one, kernels run in Triton's interpreter: --device interpreter or auto"
            )
        return "cuda"
    if requested == "interpreter" or not _cuda_available():
        return "interpreter"
    return "cuda"


def interpreter_fault() -> str | None:
    """Why Triton's interpreter cannot run here, or None. Triton's interpreter before 3.9 turns
    loop bounds into ints in a way numpy >= 2.4 rejects ("only 0-dimensional arrays can be
    converted to Python scalars", triton issue #9171): every kernel with a loop fails."""
    from importlib import metadata

    try:
        triton_v = tuple(int(x) for x in metadata.version("triton").split(".")[:2])
        numpy_v = tuple(int(x) for x in metadata.version("numpy").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return None
    if triton_v < (3, 9) and numpy_v >= (2, 4):
        return (
            f"triton {'.'.join(map(str, triton_v))}'s interpreter fails with numpy "
            f"{'.'.join(map(str, numpy_v))} (triton issue #9171); use triton >= 3.9 or numpy < 2.4"
        )
    return None


def _warn_old_interpreter() -> None:
    """Say up front why the interpreter will fail, instead of failing inside every kernel."""
    fault = interpreter_fault()
    if fault:
        print(f"kata: {fault}", file=sys.stderr)


def _use_the_kata_environment() -> None:
    """``python3 exercises/01_....py`` from a fresh clone runs a Python without torch. Rerun the
    file with the kata's environment when the README's set-up has made it; otherwise say in one
    line what to run, instead of a double traceback ending in "No module named 'torch'". Only
    for a kernel file run as a script: the grader and the tests report missing packages
    themselves (kata.environment, their one home)."""
    from kata import environment

    missing = environment.missing(("torch", "triton"))
    script = getattr(sys.modules.get("__main__"), "__file__", None) or ""
    if not missing or not re.fullmatch(r"\d\d_\w+\.py", Path(script).name):
        return
    from kata import commands

    environment.rerun(Path(script).name, [script, *sys.argv[1:]])
    run = environment.step(commands.nox("run", Path(script).name[:2]))
    raise SystemExit(
        f"{Path(script).name} needs {' and '.join(missing)}, which {sys.executable} "
        f"does not have. Run {run}: it installs them and runs this example."
    )


_CHOSEN: dict[str, object] = {}  # BACKEND, DEVICE, INTERPRETER once configure() has run


def configure(device: str | None = None) -> str:
    """Choose the backend for this process and prepare the environment Triton reads; returns
    it (``cuda``, ``interpreter`` or ``compiler``). ``device`` is ``auto``, ``cuda`` or
    ``interpreter`` (``None``: ``KATA_DEVICE``, else ``auto``). Once chosen, the choice stands:
    a later call returns it, and one that asks for another backend raises ``BackendError``."""
    if _CHOSEN:
        backend = _CHOSEN["BACKEND"]
        if device not in (None, "auto", backend):
            raise BackendError(f"the backend is already {backend}; it cannot become {device}")
        return backend
    _use_the_kata_environment()
    backend = _select(device)
    if backend == "interpreter":
        if os.environ.get("TRITON_INTERPRET") != "1":
            os.environ["TRITON_INTERPRET"] = "1"
            if (device or os.environ.get("KATA_DEVICE", "auto")) == "auto":
                print(
                    "kata: no CUDA GPU found; kernels run in Triton's CPU interpreter "
                    "(TRITON_INTERPRET=1)",
                    file=sys.stderr,
                )
        _warn_old_interpreter()
    else:  # cuda, or the grader's compiler: kernels are made for the compiler
        os.environ["TRITON_INTERPRET"] = "0"
        os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")
    os.environ["KATA_DEVICE"] = backend  # child processes choose the same
    _CHOSEN.update(
        BACKEND=backend,
        DEVICE="cuda" if backend == "cuda" else "cpu",
        INTERPRETER=backend == "interpreter",
    )
    return backend


def __getattr__(name: str):
    """``BACKEND``, ``DEVICE`` and ``INTERPRETER``, once ``configure()`` has chosen them."""
    if name not in ("BACKEND", "DEVICE", "INTERPRETER"):
        raise AttributeError(f"module 'kata.runtime' has no attribute {name!r}")
    if not _CHOSEN:
        raise AttributeError(
            f"kata.runtime.{name} is not chosen yet: call kata.runtime.configure() first "
            "(before any kernel is defined)"
        )
    return _CHOSEN[name]


# The smallest inner (K) dimension a compiled tl.dot accepts (Triton 3.6 on an H200; M and N may
# be smaller). The interpreter takes any size; the kata's tiles keep every dimension >= 16 on
# both backends, so that their results are comparable.
MIN_DOT_BLOCK = 16


def describe() -> str:
    """A one-line name of the backend, e.g. ``cuda: NVIDIA H200`` or ``interpreter: cpu``."""
    backend = __getattr__("BACKEND")
    if backend == "interpreter":
        return "interpreter: cpu"
    if backend == COMPILER:
        return "compiler only: nothing is launched"
    import torch

    return f"cuda: {torch.cuda.get_device_name()}"


def versions() -> dict[str, str]:
    """Python, torch and triton versions, read without importing triton's compiler."""
    from importlib import metadata

    found = {"python": sys.version.split()[0]}
    for name in ("torch", "triton"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "missing"
    return found
