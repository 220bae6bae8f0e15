"""Timing for the performance track (04, 05), run in the launcher after the correctness cases.

Each shape is timed against its torch counterpart in the same process, in ROUNDS interleaved
rounds (kernel, torch, kernel, torch, ...), each round the median of one
``triton.testing.do_bench`` (warm-up first, L2 flushed between repetitions): ``interleaved_ms``,
with which ``nox -s bench`` times too. A time is the median of its rounds; its spread,
(max - min) / median, is reported with it, and so is the range of speedups the rounds allow, so
that a reader can see whether noise could move a grade. Whether the output was right is decided
elsewhere (the checks); speed only counts for a fully correct exercise. The checks run on other
shapes and on poisoned buffers, so after the rounds one more call of each side, made exactly
like the timed ones, is compared with torch's (``agreement``): a kernel that does its work only
when checked gets no points for its speed.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from grader.kinds import compare
from kata.kinds.base import f64

POINTS = 10  # per exercise, on top of its correctness points
ROUNDS = 5  # interleaved timing rounds per shape, for the kernel and for torch
WARMUP_MS, REP_MS = 10, 50  # each round: one do_bench(warmup=WARMUP_MS, rep=REP_MS), its median


def interleaved_ms(fns: dict, rounds: int = ROUNDS) -> dict[str, list[float]]:
    """Per-round median milliseconds of each function, the functions timed in turn round after
    round (so that drift of the clocks hits them alike). The one method of the grader's timing
    and of ``nox -s bench``: each round one ``triton.testing.do_bench``, its warm-up first and
    the L2 flushed before each repetition. Call each function once before, to compile and
    autotune it."""
    from triton.testing import do_bench

    found: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            found[name].append(
                float(do_bench(fn, warmup=WARMUP_MS, rep=REP_MS, return_mode="median"))
            )
    return found


def chosen_config(kernel) -> dict | None:
    """The configuration the kernel's autotuner chose for its last launch (None without one)."""
    from triton.runtime.autotuner import Autotuner

    layer = kernel
    while layer is not None and not isinstance(layer, Autotuner):
        layer = getattr(layer, "fn", None)
    config = getattr(layer, "best_config", None)
    if config is None:
        return None
    return {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}


def _summary(kernel: list[float], baseline: list[float]) -> dict:
    import statistics

    k, t = statistics.median(kernel), statistics.median(baseline)
    return {
        "kernel_ms": round(k, 4),
        "torch_ms": round(t, 4),
        "speedup": round(t / k, 3),
        "kernel_spread": round((max(kernel) - min(kernel)) / k, 4),
        "torch_spread": round((max(baseline) - min(baseline)) / t, 4),
        # The lowest speedup any pair of rounds shows (fastest torch, slowest kernel) and the
        # highest: a grade that changes inside this range is decided by noise.
        "speedup_range": [
            round(min(baseline) / max(kernel), 3),
            round(max(baseline) / min(kernel), 3),
        ],
        "rounds": ROUNDS,
    }


def _lock_path() -> Path:
    """One lock per set of visible GPUs: the batch engines pin each worker to its own GPU with
    CUDA_VISIBLE_DEVICES, and timings on different GPUs need not wait for each other."""
    devices = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "-") or "none"
    default = Path(tempfile.gettempdir()) / f"kata-gpu-{devices}.lock"
    return Path(os.environ.get("KATA_TIMING_LOCK", default))


@contextlib.contextmanager
def _flock(path: Path, mode: int):
    """An advisory lock on ``path``, which every user of the machine may open (a file another
    user made 0644 under their umask would otherwise stop this one's grading). A lock that
    cannot be had at all only costs timing accuracy: the grading goes on without it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):  # only the file's owner may widen its mode
            os.fchmod(fd, 0o666)
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # releases the lock


# Exercises are graded at once, one process each, on the one GPU. Their correctness launches may
# share it (a shared lock), but timed rounds must have it to themselves (the exclusive lock). A
# timing first takes the turnstile, which new correctness launches pass through, so that a
# stream of them cannot keep a waiting timing out forever.


@contextlib.contextmanager
def gpu_shared():
    """Around the correctness launches of one exercise: waits while a timing runs or waits."""
    path = _lock_path()
    with _flock(path.with_suffix(".turnstile"), fcntl.LOCK_SH):
        pass
    with _flock(path, fcntl.LOCK_SH):
        yield


@contextlib.contextmanager
def gpu_to_ourselves():
    """Around a timing: waits for the launches under way to finish, and lets none start."""
    path = _lock_path()
    with _flock(path.with_suffix(".turnstile"), fcntl.LOCK_EX), _flock(path, fcntl.LOCK_EX):
        yield


def agreement(interface, ours, theirs, dtype: str | None) -> dict:
    """Whether the kernel's output from a timed call is close to torch's from its baseline call,
    with the tolerance the checks use (``interface.tolerance``): ``agrees_with_torch``,
    ``max_difference`` (the largest absolute difference; None when a NaN or an infinity stands
    against a number) and, when they differ, ``difference``, what differs in words."""
    worst, found = 0.0, None
    for key, got, want in interface.timed_pairs(ours, theirs):
        got64, want64 = f64(got), f64(want)
        distance = compare.distance(got64, want64)
        worst = max(worst, distance)
        if found is not None:
            continue
        if got64.shape != want64.shape:
            found = f"{key} has shape {got64.shape}, torch's {want64.shape}"
            continue
        bad = compare.bad_mask(got64, want64, interface.tolerance(key, dtype))
        if bad.any():
            n_nan = int(np.isnan(got64).sum())
            found = (
                f"{key} differs in {int(bad.sum())} of {bad.size} values, by up to {distance:.3g}"
                + (f" ({n_nan} NaN)" if n_nan else "")
            )
    row = {
        "agrees_with_torch": found is None,
        "max_difference": round(worst, 6) if math.isfinite(worst) else None,
    }
    if found is not None:
        row["difference"] = found
    return row


def time_shape(interface, kernel, shape: dict) -> dict:
    """One timing row: the kernel and the interface's torch baseline on the same inputs of
    ``shape``, in ROUNDS interleaved rounds, then whether the kernel's output agrees with
    torch's (``agreement``). What the grader reports for each timed shape, and what
    ``nox -s bench`` reports beside its own tables for the shapes the grader times."""
    mine, ref, label, baseline = interface.timed(kernel, shape)
    mine(), ref()  # compiles what is not compiled yet, autotunes, warms the caches
    config = chosen_config(kernel)
    found = interleaved_ms({"kernel": mine, "torch": ref})
    row = {"shape": label, "baseline": baseline}
    row.update(_summary(found["kernel"], found["torch"]))
    if config:
        row["config"] = config
    # One more call of each, on the same buffers and with nothing reset in between: the kernel
    # cannot tell it from a timed call, so what it returns is what the timed calls computed.
    ours, theirs = mine(), ref()
    dtype = shape.get("dtype") or _dtype_name(ours)
    row.update(agreement(interface, ours, theirs, dtype))
    return row


def _dtype_name(output) -> str | None:
    """The torch dtype name of the (first) output tensor, e.g. "bfloat16"."""
    first = output[0] if isinstance(output, (tuple, list)) else output
    return str(getattr(first, "dtype", "")).removeprefix("torch.") or None


def measure(interface, shapes, kernel, compile_all=None) -> dict:
    """One timing row per shape (``time_shape``). ``compile_all(shapes)`` first compiles every
    configuration the kernel's autotuner may try, seconds of CPU beside other exercises'
    launches; the autotuner then times them, and the rounds run, with the GPU to ourselves."""
    if compile_all is not None:
        with gpu_shared():
            compile_all(shapes)
    with gpu_to_ourselves():
        rows = [time_shape(interface, kernel, shape) for shape in shapes]
    return {"timed": True, "device": torch.cuda.get_device_name(), "shapes": rows}


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _points(speedups: list[float]) -> int:
    """POINTS at a geometric-mean speedup of 1 (as fast as torch), in proportion below it."""
    return round(POINTS * min(1.0, _geomean(speedups)))


def score(timing: dict | None, correct: bool) -> dict:
    """The performance entry of one exercise: speedups, fast_1 and points (correctness first)."""
    if not timing or not timing.get("timed"):
        reason = (timing or {}).get(
            "reason", "timing needs a CUDA GPU: the interpreter's times mean nothing"
        )
        return {"timed": False, "reason": reason, "points": 0, "max_points": POINTS}
    speedups = [r["speedup"] for r in timing["shapes"]]
    # A row without the key predates the comparison: it is taken as agreeing.
    wrong = [r for r in timing["shapes"] if r.get("agrees_with_torch") is False]
    paid = correct and not wrong
    entry = dict(timing)
    entry.update(
        correct=correct,
        geomean_speedup=round(_geomean(speedups), 3),
        fast_1=sum(s >= 1.0 for s in speedups) / len(speedups) if paid else 0.0,
        points=_points(speedups) if paid else 0,
        max_points=POINTS,
    )
    ranges = [r.get("speedup_range") for r in timing["shapes"]]
    if paid and all(ranges):
        # The points the slowest and the fastest pairing of rounds would give: when the two
        # differ, the timing's noise is large enough to move the grade by that much.
        entry["points_range"] = [
            _points([lo for lo, _ in ranges]),
            _points([hi for _, hi in ranges]),
        ]
    if not correct:
        entry["reason"] = "no performance points until every correctness check passes"
    elif wrong:
        first = wrong[0]
        entry["reason"] = (
            f"the kernel's output on the timed shape {first['shape']} differs from torch's: "
            f"{first.get('difference', 'not close')}; speed counts only for right answers"
        )
    return entry
