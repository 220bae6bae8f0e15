"""Timing for the performance track (04, 05), run in the launcher after the correctness cases.

Each shape is timed against its torch counterpart in the same process, in ROUNDS interleaved
rounds (kernel, torch, kernel, torch, ...), each round the median of one
``triton.testing.do_bench`` (warm-up first, L2 flushed between repetitions). A time is the median
of its rounds; its spread, (max - min) / median, is reported with it, and so is the range of
speedups the rounds allow, so that a reader can see whether noise could move a grade. Whether
the output was right is decided elsewhere (the checks); speed only counts for a fully correct
exercise.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import tempfile
from pathlib import Path

SHAPES = {
    # B * S = 16k tokens, H * D = 2048, as in the chapter's SDPA measurements.
    "04_fast_attention": [
        {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": False},
        {"B": 4, "H": 16, "S": 4096, "D": 128, "causal": True},
    ],
    "05_fast_gating": [
        {"M": 2**20, "E": 128, "dtype": "float32"},
        {"M": 2**20, "E": 128, "dtype": "bfloat16"},
    ],
}
POINTS = 10  # per exercise, on top of its correctness points
ROUNDS = 5  # interleaved timing rounds per shape, for the kernel and for torch


def _rounds_ms(mine, ref, rounds: int = ROUNDS) -> tuple[list[float], list[float]]:
    """Per-round median milliseconds of the kernel and of torch, timed in turn."""
    from triton.testing import do_bench

    mine(), ref()  # compile, autotune and warm up outside the timing
    kernel, baseline = [], []
    for _ in range(rounds):
        kernel.append(float(do_bench(mine, warmup=10, rep=40, return_mode="median")))
        baseline.append(float(do_bench(ref, warmup=10, rep=40, return_mode="median")))
    return kernel, baseline


def _summary(kernel: list[float], baseline: list[float]) -> dict:
    import statistics

    k, t = statistics.median(kernel), statistics.median(baseline)
    return {
        "kernel_ms": round(k, 4), "torch_ms": round(t, 4), "speedup": round(t / k, 3),
        "kernel_spread": round((max(kernel) - min(kernel)) / k, 4),
        "torch_spread": round((max(baseline) - min(baseline)) / t, 4),
        # The lowest speedup any pair of rounds shows (fastest torch, slowest kernel) and the
        # highest: a grade that changes inside this range is decided by noise.
        "speedup_range": [round(min(baseline) / max(kernel), 3), round(max(baseline) / min(kernel), 3)],
        "rounds": ROUNDS,
    }  # fmt: skip


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


def measure(stem: str, kernel, launchers: dict, torch) -> dict:
    with gpu_to_ourselves():
        return _measure(stem, kernel, launchers, torch)


def _measure(stem: str, kernel, launchers: dict, torch) -> dict:
    rows = []
    for shape in SHAPES[stem]:
        if stem.startswith("04"):
            q, k, v = (torch.randn(shape["B"], shape["H"], shape["S"], shape["D"], device="cuda",
                                   dtype=torch.bfloat16) for _ in range(3))  # fmt: skip
            out = torch.empty_like(q)
            sdpa = torch.nn.functional.scaled_dot_product_attention

            def mine():
                return launchers["fast_attention"](kernel, q, k, v, causal=shape["causal"], out=out)

            def ref():
                return sdpa(q, k, v, is_causal=shape["causal"])

            label = f"B={shape['B']} H={shape['H']} S={shape['S']} D={shape['D']} bf16" + (
                " causal" if shape["causal"] else ""
            )
            baseline = "torch SDPA"
        else:
            x = torch.randn(
                shape["M"], shape["E"], device="cuda", dtype=getattr(torch, shape["dtype"])
            )
            outs = (torch.empty(shape["M"], device="cuda"), torch.empty(shape["M"], device="cuda"),
                    torch.empty(shape["M"], device="cuda", dtype=torch.int32),
                    torch.empty(shape["M"], device="cuda", dtype=torch.int32))  # fmt: skip

            def mine():
                return launchers["fast_gating"](kernel, x, out=outs)

            def ref():
                w, i = torch.topk(torch.softmax(x.float(), dim=-1), 2, dim=-1)
                return w / w.sum(dim=-1, keepdim=True), i

            label = f"M=1M E={shape['E']} {shape['dtype']}"
            baseline = "torch softmax -> topk -> divide"
        rows.append({"shape": label, "baseline": baseline, **_summary(*_rounds_ms(mine, ref))})
    return {"timed": True, "device": torch.cuda.get_device_name(), "shapes": rows}


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
