"""Fixtures shared by the repository's tests: the backend's device, kernel files loaded by path,
and random inputs that are the same numbers on every backend."""

import functools
import tempfile
from pathlib import Path

import pytest
import torch

# kata.runtime picks the GPU or Triton's interpreter; the kernel files import it before triton.
from kata import catalogue, runtime, skeletons

# The untouched skeletons, written once per test session: tests never read the working copy of
# exercises/, which a student edits (the README's test command passes in a solved checkout).
SKELETONS = Path(tempfile.mkdtemp(prefix="kata-skeletons-"))


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "slow: runs Python in a subprocess (a few seconds each)")
    for ex in catalogue.ALL_EXERCISES:
        (SKELETONS / ex.filename).write_text(skeletons.pristine(ex.stem).text)


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
