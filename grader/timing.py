"""Timing for the performance track (04, 05), run in the launcher after the correctness cases.

Each shape is timed against its torch counterpart in the same process: median of
``triton.testing.do_bench`` (warm-up first, L2 flushed between repetitions). Whether the output
was right is decided elsewhere (the checks); speed only counts for a fully correct exercise.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import tempfile
from pathlib import Path

POINTS = 10  # per exercise, on top of its correctness points


def _median_ms(fn) -> float:
    from triton.testing import do_bench

    fn()
    return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))


@contextlib.contextmanager
def gpu_to_ourselves():
    """Exercises are graded at once, but timings must not share the GPU: one process times
    at a time (an advisory lock on a file every grader process on this machine uses)."""
    path = Path(
        os.environ.get("KATA_TIMING_LOCK", Path(tempfile.gettempdir()) / "kata-timing.lock")
    )
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def measure(interface, shapes, kernel, torch) -> dict:
    with gpu_to_ourselves():
        return {"timed": True, "device": torch.cuda.get_device_name(),
                "shapes": [_time_shape(interface, shape, kernel, torch) for shape in shapes]}  # fmt: skip


def _time_shape(interface, shape: dict, kernel, torch) -> dict:
    """One timing row: the kernel and the interface's torch baseline on the same inputs."""
    mine, ref, label, baseline = interface.timed(torch, kernel, shape)
    kernel_ms, torch_ms = _median_ms(mine), _median_ms(ref)
    return {"shape": label, "baseline": baseline, "kernel_ms": round(kernel_ms, 4),
            "torch_ms": round(torch_ms, 4), "speedup": round(torch_ms / kernel_ms, 3)}  # fmt: skip


def score(timing: dict | None, correct: bool) -> dict:
    """The performance entry of one exercise: speedups, fast_1 and points (correctness first)."""
    if not timing or not timing.get("timed"):
        reason = (timing or {}).get(
            "reason", "timing needs a CUDA GPU: the interpreter's times mean nothing"
        )
        return {"timed": False, "reason": reason, "points": 0, "max_points": POINTS}
    speedups = [r["speedup"] for r in timing["shapes"]]
    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    entry = dict(timing)
    entry.update(
        correct=correct,
        geomean_speedup=round(geo, 3),
        fast_1=sum(s >= 1.0 for s in speedups) / len(speedups) if correct else 0.0,
        points=round(POINTS * min(1.0, geo)) if correct else 0,
        max_points=POINTS,
    )
    if not correct:
        entry["reason"] = "no performance points until every correctness check passes"
    return entry
