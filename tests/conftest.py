"""Fixtures shared by the repository's tests: the backend's device, kernel files loaded by path,
and random inputs that are the same numbers on every backend."""

import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from kata import catalogue, runtime, skeletons

# The GPU, or Triton's interpreter without one, for every test (kernel files choose the same).
runtime.configure()

# The untouched skeletons, written once per test session: tests never read the working copy of
# exercises/, which a student edits (the README's test command passes in a solved checkout).
SKELETONS = Path(tempfile.mkdtemp(prefix="kata-skeletons-"))


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "slow: runs Python in a subprocess (a few seconds each)")
    config.addinivalue_line(
        "markers",
        "e2e: a class, a bundle or a browser end to end (`nox -s e2e`, not `nox -s tests`)",
    )
    for ex in catalogue.ALL_EXERCISES:
        (SKELETONS / ex.filename).write_text(skeletons.pristine(ex.stem).text)


# Runs kernel files as scripts, one after another in one Python: torch and triton are imported
# once, not once per file. Each file sees itself as __main__ with its own path in sys.argv[0].
_EXAMPLES = """
import contextlib, io, json, runpy, sys
done = {}
for path in sys.argv[1:]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    done[path] = [code, out.getvalue()]
print(json.dumps(done))
"""


def endless_01() -> str:
    """01's solution with a loop that never ends in its TODO region (the grader runs only region
    code of a submission, so a loop at module level would never run)."""
    text = (catalogue.SOLUTIONS / catalogue.find("01").filename).read_text()
    right = "        acc = acc * alpha[:, None] + tl.dot(p, v)\n"
    assert right in text
    return text.replace(
        right, "        k0 = 0\n        while k0 < 1:\n            acc = acc * alpha[:, None]\n"
    )


def run_examples(paths: list[Path], **env: str) -> dict[Path, tuple[int, str]]:
    """``{path: (exit status, what it printed)}`` for each kernel file run as a script, in one
    child Python with ``env`` added to its environment."""
    root = str(catalogue.ROOT)
    child = {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
        **env,
    }
    proc = subprocess.run(
        [sys.executable, "-c", _EXAMPLES, *map(str, paths)],
        cwd=root,
        env=child,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode:
        raise RuntimeError(f"the worked examples did not run: {proc.stderr[-2000:]}")
    done = json.loads(proc.stdout.strip().splitlines()[-1])
    return {Path(path): (code, out) for path, (code, out) in done.items()}


@functools.cache
def _load(folder: str, exercise: str):
    ex = catalogue.find(exercise)
    root = catalogue.SOLUTIONS if folder == "solutions" else SKELETONS
    return catalogue.load_file(root / ex.filename)


@pytest.fixture(scope="session")
def skeleton_dir() -> Path:
    """A folder holding every untouched skeleton under its exercise's file name."""
    return SKELETONS


@pytest.fixture(scope="session")
def device() -> str:
    """Where kernels run: ``cuda`` on a GPU, ``cpu`` under Triton's interpreter."""
    return runtime.DEVICE


@pytest.fixture(scope="session")
def solution():
    """``solution("01")``: the module of ``solutions/01_*.py``, imported once per session."""
    return functools.partial(_load, "solutions")


@pytest.fixture(scope="session")
def exercise():
    """``exercise("01")``: the module of exercise 01's untouched skeleton (the frozen copy)."""
    return functools.partial(_load, "exercises")


@pytest.fixture(scope="session")
def randn(device):
    """``randn(*shape, seed=0, scale=1.0, shift=0.0, dtype=torch.float32)``: normal samples drawn
    in float64 on the CPU (the same numbers on every backend), then cast and moved to the
    device."""

    def draw(*shape, seed=0, scale=1.0, shift=0.0, dtype=torch.float32):
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(*shape, generator=gen, dtype=torch.float64) * scale + shift
        return x.to(dtype).to(device)

    return draw


@pytest.fixture(scope="session")
def growing(device):
    """``growing(M, N, D, block_n, seed=0)``: float32 q, k, v on the device whose scores rise by
    about 3 from each key block of ``block_n`` keys to the next, for every query row, so that
    every block raises the running maximum and ``alpha = exp(m_old - m_new)`` is far from 1."""

    def make(M, N, D, block_n, seed=0):
        gen = torch.Generator().manual_seed(seed)
        q = torch.randn(M, D, generator=gen, dtype=torch.float64).abs() + 0.5  # positive rows
        k = 0.5 * torch.randn(N, D, generator=gen, dtype=torch.float64)
        step = 3.0 * D**0.5 / float(q.sum(dim=1).mean())  # raises each score by ~3 per block
        k += (torch.arange(N, dtype=torch.float64) // block_n)[:, None] * step
        v = torch.randn(N, D, generator=gen, dtype=torch.float64)
        return tuple(x.to(torch.float32).to(device) for x in (q, k, v))

    return make
