"""The MoE dispatch rows of ``nox -s bench`` (the convention: ``grader.kinds``): 09 against its
torch equivalent at 64k tokens, and the host time of its wrapper."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kata import runtime
from kata.kinds import moe_dispatch


@triton.jit
def _floor_dispatch(p0, p1, p2, p3, p4, n0, n1, n2, n3, C0: tl.constexpr, C1: tl.constexpr):
    pass


# 09, MoE dispatch: a training step's batch of tokens, top-2, over Mixtral's 8 experts and
# Qwen1.5-MoE's 60; capacity factor 1.25, uniform random routing.
DISPATCH_SHAPES = ((65536, 2, 8), (65536, 2, 60))
DISPATCH_BLOCK = 1024  # pairs per step of each program's loops


def dispatch_rows(bench) -> list[dict]:
    """09's kernel (one program per expert, so E programs) against its interface's torch
    baseline (stable sort, counts, cumsums, scatter), on the same routing; both give the same
    four outputs, checked once before timing. Both are timed as called, outputs made once for
    the kernel, and its ids checked once outside the timing (the range check synchronises)."""
    module = bench.load("09")
    interface = moe_dispatch.INTERFACE
    rows = []
    for M, K, E in ((300, 2, 8),) if bench.DRY else DISPATCH_SHAPES:
        capacity = math.ceil(1.25 * M * K / E)
        idx = torch.rand(M, E, device=runtime.DEVICE).topk(K, dim=-1).indices.int()
        moe_dispatch.check_dispatch_input(idx, E, capacity)
        outs = moe_dispatch.dispatch_buffers(M, K, E, idx.device)
        kernel = module.moe_dispatch_kernel

        def run(idx=idx, E=E, capacity=capacity, outs=outs, kernel=kernel):
            return moe_dispatch.launch_moe_dispatch(
                kernel, idx, E, capacity, block=DISPATCH_BLOCK, out=outs, check_ids=False
            )

        got, want = run(), interface.baseline(idx, E, capacity)
        filled = int(want[0].sum())
        agrees = all(bool(torch.equal(g, w)) for g, w in zip(got[:3], want[:3]))
        agrees = agrees and bool(torch.equal(got[3][:filled], want[3][:filled]))
        row = {
            "M": M,
            "K": K,
            "E": E,
            "capacity": capacity,
            "block": DISPATCH_BLOCK,
            "dropped": M * K - filled,
            "agrees_with_torch": agrees,
        }
        fns = {
            "kernel": run,
            "torch": lambda idx=idx, E=E, c=capacity: interface.baseline(idx, E, c),
        }
        for name, timed in bench.time_ms(fns).items():
            row[f"{name}_ms"], row[f"{name}_spread"] = timed["ms"], timed["spread"]
        row["speedup_vs_torch"] = row["torch_ms"] / row["kernel_ms"]
        rows.append(row)
        print(
            f"dispatch M={M} K={K} E={E:<3} capacity={capacity} 09 {row['kernel_ms'] * 1e3:7.1f} "
            f"us (spread {100 * row['kernel_spread']:.1f}%)  torch {row['torch_ms'] * 1e3:7.1f} "
            f"us  {row['speedup_vs_torch']:.2f}x  agrees: {agrees}",
            flush=True,
        )
    return rows


def _dispatch_host_row(bench) -> dict:
    """09's wrapper, with and without its syncing checks, against its torch equivalent."""
    module = bench.load("09")
    M, K, E = (300, 2, 8) if bench.DRY else (512, 2, 8)  # one block of pairs
    capacity = math.ceil(1.25 * M * K / E)
    idx = torch.rand(M, E, device=runtime.DEVICE).topk(K, dim=-1).indices.int()
    dispatch = module.moe_dispatch
    outs = moe_dispatch.dispatch_buffers(M, K, E, idx.device)
    baseline = moe_dispatch.INTERFACE.baseline
    fns = {
        "fast": lambda: dispatch(idx, E, capacity, DISPATCH_BLOCK, check_ids=False),
        "fast_checked": lambda: dispatch(idx, E, capacity, DISPATCH_BLOCK),
        "torch": lambda: baseline(idx, E, capacity),
        "launch_floor": lambda: _floor_dispatch[(1,)](
            idx, *outs, M, K, E, capacity, C0=DISPATCH_BLOCK, C1=E
        ),
    }
    return bench.host_row("09 moe_dispatch", {"M": M, "K": K, "E": E}, fns)


def rows(bench, *, quick: bool, graded_only: bool, copy_tbps: float) -> dict[str, list[dict]]:
    return {} if graded_only else {"dispatch": dispatch_rows(bench)}


def host_rows(bench) -> list[dict]:
    return [_dispatch_host_row(bench)]
