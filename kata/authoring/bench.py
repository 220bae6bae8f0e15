"""``nox -s bench`` (GPU): the solution kernels against torch, timed in the same run.

Writes ``reports/bench.json`` and ``reports/bench.png``. Every time is the median of ROUNDS
rounds, each round the median of one ``triton.testing.do_bench`` (warm-up first, L2 flushed
between repetitions), by the grader's own timing function (``grader.run.timing.interleaved_ms``);
the rounds' spread, (max - min) / median, is recorded beside it. A kernel and its baselines are
timed round after round in turn, so drift hits them alike. Attention throughput is
4 * B * H * S^2 * D flops (halved when causal), against SDPA's default backend and each backend
torch offers (cuDNN, FlashAttention-2, memory-efficient); gating throughput counts the bytes the
job must move: the logits read once, and 16 bytes written per token. MoE dispatch (09, the
extensions track) is timed against its torch equivalent at 64k tokens."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from kata import runtime

# Run as a script, the backend is chosen before Triton is first imported (kata.host imports
# it): a Triton imported before TRITON_INTERPRET is set runs the interpreter's kernels
# half-patched, and the dry run failed ("Cannot call @triton.jit'd outside of the scope of a
# kernel"). Imported as a module, it chooses nothing (the importer has).
if __name__ == "__main__":
    runtime.configure()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from grader.run import timing  # noqa: E402
from kata import catalogue, host  # noqa: E402

ROUNDS = timing.ROUNDS
DRY = False  # --dry-run: tiny shapes in the interpreter, to test this script (times meaningless)
GRAPH_REP_MS = 50  # each round of a CUDA-graph timing: do_bench_cudagraph(rep=GRAPH_REP_MS)
HOST_CALLS = 200  # calls per round of a host timing


def _load(number: str):
    """A reference kernel file by its number: an exercise of the manifest, or a showcase (07)."""
    try:
        name = catalogue.find(number).filename
    except KeyError:
        (path,) = catalogue.SOLUTIONS.glob(f"{number}_*.py")
        name = path.name
    return catalogue.load_file(catalogue.SOLUTIONS / name)


def _time(fns: dict, rounds: int = ROUNDS) -> dict:
    """{name: {"ms": median, "spread": (max-min)/median, "rounds": [...]}}, rounds interleaved,
    timed by the grader's own method (``grader.run.timing.interleaved_ms``)."""
    for fn in fns.values():
        fn()  # compile / autotune outside the timing
    if DRY:
        found = {name: [1.0] * rounds for name in fns}
    else:
        torch.cuda.synchronize()
        found = timing.interleaved_ms(fns, rounds)
    out = {}
    for name, ms in found.items():
        med = statistics.median(ms)
        out[name] = {
            "ms": med,
            "spread": (max(ms) - min(ms)) / med,
            "rounds": [round(x, 5) for x in ms],
        }
    return out


def _graph_time(fns: dict, rounds: int = ROUNDS) -> dict:
    """{name: {"ms", "spread"}} of the GPU's time alone: each round one
    ``triton.testing.do_bench_cudagraph`` (the calls captured in a CUDA graph and replayed, so
    no launch waits for the host; the L2 is not flushed), the functions timed in turn."""
    for fn in fns.values():
        fn()  # compile / autotune before the capture
    if DRY:
        found = {name: [1.0] * rounds for name in fns}
    else:
        from triton.testing import do_bench_cudagraph

        found = {name: [] for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                found[name].append(
                    float(do_bench_cudagraph(fn, rep=GRAPH_REP_MS, return_mode="median"))
                )
    return {
        name: {"ms": statistics.median(ms), "spread": (max(ms) - min(ms)) / statistics.median(ms)}
        for name, ms in found.items()
    }


def _sync() -> None:
    if not DRY:
        torch.cuda.synchronize()


def _host_us(fns: dict, calls: int = HOST_CALLS, rounds: int = ROUNDS) -> dict:
    """{name: host microseconds per call}. How it is measured: ``calls`` calls back to back,
    their wall time (``time.perf_counter``, the GPU synchronised before and after) divided by
    ``calls``; the median of ``rounds`` such rounds, the functions taken in turn, after two
    warm-up calls each (compiling, autotuning, filling the wrappers' caches). The shapes are
    small enough that a kernel takes less GPU time than its launch takes host time: the GPU
    waits for the host, and the wall time is the host's. (Were the GPU the bottleneck, the
    launch queue would fill and the figure would become the GPU's time: the graph-timed
    figures beside it tell which.)"""
    if DRY:
        calls, rounds = 2, 1
    for fn in fns.values():
        fn()
        fn()
    found = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            _sync()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            _sync()
            found[name].append((time.perf_counter() - start) / calls * 1e6)
    return {name: statistics.median(us) for name, us in found.items()}


def _same_size_copy(moved_bytes: int):
    """A device-to-device fp32 copy that reads and writes ``moved_bytes`` in all: the limit a
    memory-bound kernel moving that many bytes is held to."""
    src = torch.empty(max(1, moved_bytes // 8), dtype=torch.float32, device=runtime.DEVICE)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


# The floor of a wrapper's host time: a bare Triton launch of a kernel that does nothing, on a
# grid of one program, with the same arguments as the wrapper's launch (the same tensors, ints
# and constexprs: Triton's launch path binds and specialises each one, so its cost grows with
# their number). One per launch signature: 05's, 04's (and 07's), 08's two, 09's.


@triton.jit
def _floor_gating(p0, p1, p2, p3, p4, n0, N1: tl.constexpr, n2, C0: tl.constexpr, C1: tl.constexpr):
    pass


@triton.jit
def _floor_attention(
    p0, p1, p2, p3, n0, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, n11, n12, n13, x0,
    C0: tl.constexpr, C1: tl.constexpr, C2: tl.constexpr, C3: tl.constexpr, C4: tl.constexpr,
):  # fmt: skip
    pass


@triton.jit
def _floor_split_partials(
    p0, p1, p2, p3, p4, p5, p6, n0, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, x0,
    C0: tl.constexpr, C1: tl.constexpr,
):  # fmt: skip
    pass


@triton.jit
def _floor_split_merge(
    p0, p1, p2, p3, p4, n0, n1, n2, n3, n4, n5, C0: tl.constexpr, C1: tl.constexpr
):  # fmt: skip
    pass


@triton.jit
def _floor_dispatch(p0, p1, p2, p3, p4, n0, n1, n2, n3, C0: tl.constexpr, C1: tl.constexpr):
    pass


def _gating_floor(x, outs):
    """A bare launch with 05's arguments (``_floor_gating``)."""
    M, E = x.shape
    return lambda: _floor_gating[(1,)](
        x, *outs, M, E, x.stride(0), C0=triton.next_power_of_2(E), C1=16
    )


def _attention_floor(q, k, v, out, causal):
    """A bare launch with 04's (and 07's) arguments (``_floor_attention``)."""
    H, S, D = q.shape[1:]
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3])
    return lambda: _floor_attention[(1,)](
        q, k, v, out, *strides, H, S, 1.0 / math.sqrt(D), C0=D, C1=causal, C2=128, C3=64, C4=True
    )


def _graded(number: str) -> tuple:
    """(interface, the shapes the grader times) of a performance exercise."""
    from grader import specs

    spec = specs.load(catalogue.find(number).stem)
    return spec.interface, [dict(shape) for shape in spec.timing]


def _as_graded(number: str, kernel, shape: dict) -> dict | None:
    """The grader's timing row for ``shape`` (``grader.run.timing.time_shape``: the same calls, the
    same pairing with torch) when the grader times that shape, else None."""
    interface, shapes = _graded(number)
    if DRY or shape not in shapes:
        return None
    return timing.time_shape(interface, kernel, torch, shape)


def gpu_state() -> dict:
    """The GPU's name, clocks, power and temperature as nvidia-smi reports them now."""
    fields = "name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu"
    try:
        line = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
        return dict(zip(fields.split(","), (x.strip() for x in line.split(","))))
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": repr(e)}


def copy_bandwidth() -> dict:
    """TB/s of a 2 GiB device-to-device copy, counting bytes read and written."""
    n = 2**12 if DRY else 2**29
    x = torch.empty(n, dtype=torch.float32, device=runtime.DEVICE)
    y = torch.empty_like(x)
    t = _time({"copy": lambda: y.copy_(x)})["copy"]
    return {"tbps": 2 * n * 4 / t["ms"] / 1e9, "ms": t["ms"], "spread": t["spread"]}


def _sdpa_backends() -> dict:
    from torch.nn.attention import SDPBackend

    return {
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
    }


def _sdpa_default_kernel(q, k, v, causal) -> str:
    """The name of the CUDA kernel SDPA's default dispatch launches for these inputs."""
    from torch.profiler import ProfilerActivity, profile

    sdpa = torch.nn.functional.scaled_dot_product_attention
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        sdpa(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
    names = [e.key for e in prof.key_averages() if e.device_type.name == "CUDA"]
    return max(names, key=len)[:160] if names else "?"


def _attention_cases(quick: bool, graded_only: bool) -> list[tuple]:
    """(dtype, D, causal, S) of each attention row: the sweep, 04's graded shapes, or the dry
    run's two."""
    cases = [
        (dt, D, causal, S)
        for dt in ("bfloat16", "float16")
        for D in (64, 128)
        for causal in (False, True)
        for S in ((1024, 4096) if quick else (1024, 4096, 16384))
        if dt == "bfloat16" or S >= 4096
    ]
    if graded_only:
        cases = [("bfloat16", g["D"], g["causal"], g["S"]) for g in _graded("04")[1]]
    if DRY:
        cases = [("float16", 64, c, 128) for c in (False, True)]
    return cases


def _add_references(fns: dict, row: dict, q, k, v) -> None:
    """Check 04's and 07's outputs against SDPA in fp32 (a kernel that raises is reported and
    dropped), and add SDPA, each of its backends and, where it fits, naive attention to time."""
    from torch.nn.attention import sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    dt, D, causal, S = row["dtype"], row["D"], row["causal"], row["S"]
    ref = sdpa(q.float(), k.float(), v.float(), is_causal=causal)
    for name in list(fns):
        try:
            row[f"{name}_max_err_vs_fp32"] = float((fns[name]().float() - ref).abs().max())
        except Exception as e:  # noqa: BLE001 (07 is a showcase: report, carry on)
            row[f"{name}_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            del fns[name]
    del ref
    fns["sdpa"] = lambda: sdpa(q, k, v, is_causal=causal)
    row["sdpa_default_kernel"] = _sdpa_default_kernel(q, k, v, causal)
    for name, backend in _sdpa_backends().items():

        def run(backend=backend):
            with sdpa_kernel(backend):
                return sdpa(q, k, v, is_causal=causal)

        try:
            run()
            fns[f"sdpa_{name}"] = run
        except RuntimeError as e:
            row[f"sdpa_{name}_error"] = str(e).splitlines()[0][:160]
    if S <= 4096 and dt == "bfloat16":

        def naive():
            s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(D))
            if causal:
                s = s.masked_fill(
                    torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1), float("-inf")
                )
            return torch.softmax(s, dim=-1) @ v

        fns["naive"] = naive


def _kernels_to_time(fast, fa3, row: dict, q, k, v) -> dict:
    """04's kernel, 07's where this GPU runs it, and (but in the dry run) the references."""
    causal = row["causal"]
    fns = {"fast": lambda: fast(q, k, v, causal=causal)}
    if fa3 is not None:
        fns["fa3"] = lambda: fa3(q, k, v, causal=causal)
    if not DRY:
        _add_references(fns, row, q, k, v)
    return fns


def _chapter_row() -> dict:
    """The chapter's one-head fp32 kernel, timed on one head of S = 4096, D = 64."""
    chapter = _load("01").flash_attention
    q, k, v = (torch.randn(4096, 64, device="cuda") for _ in range(3))
    t = _time({"chapter": lambda: chapter(q, k, v, BLOCK_M=64, BLOCK_N=64)}, rounds=3)["chapter"]
    return {
        "kernel": "01 chapter kernel, one head fp32",
        "S": 4096,
        "D": 64,
        "ms": t["ms"],
        "spread": t["spread"],
        "tflops": 4 * 4096 * 4096 * 64 / t["ms"] / 1e9,
    }


ATTENTION_HOST_SHAPE = (1, 8, 128)  # (B, H, S) of the host timings: the GPU waits for the host


def _attention_host(fast, fa3, dtype, D: int, causal: bool) -> dict:
    """Host microseconds per call (``_host_us``) of 04's and 07's wrappers, of SDPA and of a
    bare launch with their arguments, at ATTENTION_HOST_SHAPE with the row's dtype, D and
    causality."""
    B, H, S = (1, 1, 16) if DRY else ATTENTION_HOST_SHAPE
    q, k, v = (torch.randn(B, H, S, D, device=runtime.DEVICE, dtype=dtype) for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    fns = {
        "fast": lambda: fast(q, k, v, causal=causal),
        "torch": lambda: sdpa(q, k, v, is_causal=causal),
        "launch_floor": _attention_floor(q, k, v, torch.empty_like(q), causal),
    }
    found = {"host_shape": {"B": B, "H": H, "S": S}}
    if fa3 is not None:
        fns["fa3"] = lambda: fa3(q, k, v, causal=causal)
        found.update(_drop_if_failing(fns, "fa3"))
    found.update({f"{name}_host_us_per_call": us for name, us in _host_us(fns).items()})
    return found


def _drop_if_failing(fns: dict, name: str) -> dict:
    """Run ``fns[name]`` once; if it raises (07 is a showcase), drop it from ``fns`` and return
    ``{name}_host_error``, else nothing."""
    try:
        fns[name]()
    except Exception as e:  # noqa: BLE001 (report, carry on)
        del fns[name]
        return {f"{name}_host_error": f"{type(e).__name__}: {str(e)[:200]}"}
    return {}


def attention_rows(quick: bool, graded_only: bool = False) -> list[dict]:
    module04 = _load("04")
    fast = module04.fast_attention
    fa3 = None
    if not DRY and torch.cuda.get_device_capability()[0] == 9:
        fa3 = _load("07").fa3_attention
    rows = []
    cases = _attention_cases(quick, graded_only)
    for dt, D, causal, S in cases:
        B, H = (16384 // S, 2048 // D) if not DRY else (1, 2)
        dtype = getattr(torch, dt)
        q, k, v = (torch.randn(B, H, S, D, device=runtime.DEVICE, dtype=dtype) for _ in range(3))
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        row = {"dtype": dt, "D": D, "S": S, "B": B, "H": H, "causal": causal}
        fns = _kernels_to_time(fast, fa3, row, q, k, v)
        for name, t in _time(fns).items():
            row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
            row[f"{name}_tflops"] = flops / t["ms"] / 1e9
        for name in ("fast", "fa3"):
            for base in [b for b in fns if b.startswith("sdpa")]:
                if f"{name}_ms" in row:
                    row[f"{name}_vs_{base}"] = row[f"{base}_ms"] / row[f"{name}_ms"]
        row.update(_attention_host(fast, fa3, dtype, D, causal))
        if dt == "bfloat16":
            shape = {"B": B, "H": H, "S": S, "D": D, "causal": causal}
            graded = _as_graded("04", module04.attention_fwd_kernel, shape)
            if graded:
                row["as_graded"] = graded
        rows.append(row)
        print(
            f"attention {dt:<8} D={D:<3} S={S:<5} causal={causal!s:<5} 04 {row['fast_tflops']:5.0f} TFLOP/s"
            + (f"  07 {row['fa3_tflops']:5.0f}" if "fa3_tflops" in row else "")
            + "".join(f"  {b} {row[b + '_tflops']:4.0f}" for b in fns if b.startswith("sdpa"))
            + (f"  04/sdpa x{row['fast_vs_sdpa']:.2f}" if "fast_vs_sdpa" in row else "")
            + f"  host us/call: 04 {row['fast_host_us_per_call']:.1f}, SDPA "
            f"{row['torch_host_us_per_call']:.1f}, bare launch {row['launch_floor_host_us_per_call']:.1f}",
            flush=True,
        )
        if "as_graded" in row:
            print(_graded_line(row["as_graded"]), flush=True)
        del q, k, v, fns  # the timed functions hold the inputs too
    # The chapter's one-head fp32 kernel, for scale (one head of S = 4096, D = 64).
    if not DRY and not graded_only:
        rows.append(_chapter_row())
    return rows


# Expert counts of deployed MoE models: Mixtral and Grok-1 route over 8, Qwen1.5-MoE over 60,
# DeepSeek-V2 over 160 and DeepSeek-V3 over 256.
EXPERTS = (8, 16, 60, 64, 128, 160, 256)
DECODE_M = 4096  # tokens of a decode step: launch-bound


def _torch_gating(x):
    p = torch.softmax(x.float(), dim=-1)
    w, i = torch.topk(p, 2, dim=-1)
    return w / w.sum(dim=-1, keepdim=True), i


def _gating_outputs(M: int) -> tuple:
    return tuple(
        torch.empty(M, device=runtime.DEVICE, dtype=t)
        for t in (torch.float32, torch.float32, torch.int32, torch.int32)
    )


def _experts() -> tuple:
    """The expert counts of the gating and decode rows: one in the dry run (the interpreter is
    slow, and every E takes the same path through this script)."""
    return EXPERTS[:1] if DRY else EXPERTS


def _graph_vs_copy(fns: dict, moved: int) -> dict:
    """``{name}_graph_ms`` and ``{name}_graph_spread`` of each function and of a copy of the
    same bytes (``same_size_copy``), all timed under CUDA graphs (``_graph_time``), and
    ``fast_pct_of_same_size_copy``: the copy's time over 05's, in percent (100: 05 moves its
    bytes as fast as a copy does)."""
    row = {}
    for name, t in _graph_time({**fns, "same_size_copy": _same_size_copy(moved)}).items():
        row[f"{name}_graph_ms"], row[f"{name}_graph_spread"] = t["ms"], t["spread"]
    row["fast_pct_of_same_size_copy"] = 100 * row["same_size_copy_graph_ms"] / row["fast_graph_ms"]
    return row


def gating_rows(quick: bool, copy_tbps: float, graded_only: bool = False) -> list[dict]:
    module = _load("05")
    fast, kernel = module.fast_top2_gating, module.moe_top2_gating_fast_kernel
    chapter = _load("03").moe_top2_gating

    rows = []
    M = 300 if DRY else 2**20
    for dtype in (torch.float32, torch.bfloat16):
        for E in (128,) if quick or graded_only else _experts():
            x = torch.randn(M, E, device=runtime.DEVICE, dtype=dtype)
            if DRY:
                x = x.float()
            moved = M * E * x.element_size() + M * 16
            row = {
                "M": M,
                "E": E,
                "dtype": str(dtype).removeprefix("torch."),
                "mb_moved": moved / 1e6,
            }
            w0, w1, i0, i1 = fast(x)
            top = torch.topk(x.double(), 2, dim=-1).values
            row["top2_values_agree"] = float(
                (
                    (x.gather(1, i0.long()[:, None])[:, 0].double() == top[:, 0])
                    & (x.gather(1, i1.long()[:, None])[:, 0].double() == top[:, 1])
                    & (i0 != i1)
                )
                .float()
                .mean()
            )
            w1_ref = torch.exp(top[:, 1] - top[:, 0]) / (1 + torch.exp(top[:, 1] - top[:, 0]))
            row["max_weight_err_vs_fp64"] = float(
                torch.maximum(
                    (w1.double() - w1_ref).abs(), (w0.double() - (1 - w1_ref)).abs()
                ).max()
            )
            tw, ti = _torch_gating(x)
            row["indices_agree_with_torch"] = float(
                ((i0.long() == ti[:, 0]) & (i1.long() == ti[:, 1])).float().mean()
            )
            # 05 is timed as the grader times it: its launch into outputs made once. Making four
            # outputs at every call costs more host time than the kernel takes at E = 8, and a
            # round then times the host.
            outs = _gating_outputs(M)
            fns = {"fast": lambda: host.launch_fast_gating(kernel, x, out=outs)}
            if not graded_only:
                fns["chapter"] = lambda: chapter(x)
            fns["torch"] = lambda: _torch_gating(x)
            for name, t in _time(fns).items():
                row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
                row[f"{name}_tbps"] = moved / t["ms"] / 1e9
            row["fast_config"] = None if DRY else timing.chosen_config(kernel)
            row["fast_pct_of_copy"] = 100 * row["fast_tbps"] / copy_tbps
            row.update(_graph_vs_copy({"fast": fns["fast"], "torch": fns["torch"]}, moved))
            row["speedup_vs_torch"] = row["torch_ms"] / row["fast_ms"]
            if "chapter_ms" in row:
                row["speedup_vs_chapter"] = row["chapter_ms"] / row["fast_ms"]
            graded = _as_graded("05", kernel, {"M": M, "E": E, "dtype": row["dtype"]})
            if graded:
                row["as_graded"] = graded
            rows.append(row)
            print(
                f"gating M=1M E={E:<3} {row['dtype']:<8} 05 {row['fast_ms'] * 1e3:6.1f} us "
                f"({row['fast_tbps']:.2f} TB/s, {row['fast_pct_of_copy']:.0f}% of copy, spread "
                f"{100 * row['fast_spread']:.1f}%; graphed {row['fast_graph_ms'] * 1e3:.1f} us, "
                f"{row['fast_pct_of_same_size_copy']:.0f}% of a same-size copy)  "
                + (f"chapter {row['chapter_ms']:.3f} ms  " if "chapter_ms" in row else "")
                + f"torch {row['torch_ms']:.3f} ms",
                flush=True,
            )
            if graded:
                print(_graded_line(graded), flush=True)
            del top, w1_ref, tw, ti
    return rows


def decode_rows() -> list[dict]:
    """A decode step's batch (DECODE_M tokens), where a launch costs more than the work: per
    call, the GPU's time eagerly (as above) and under CUDA graphs beside a copy of the same
    bytes, and the host's time (``_host_us``) of 05 as a caller runs it (``fast_top2_gating``:
    its checks, its outputs, its launch), of torch, and of a bare launch with 05's arguments
    (the floor)."""
    module = _load("05")
    fast = module.fast_top2_gating
    rows = []
    M = 64 if DRY else DECODE_M
    for dtype in (torch.float32, torch.bfloat16):
        for E in _experts():
            x = torch.randn(M, E, device=runtime.DEVICE, dtype=dtype)
            if DRY:
                x = x.float()
            moved = M * E * x.element_size() + M * 16
            fns = {"fast": lambda: fast(x), "torch": lambda: _torch_gating(x)}
            row = {"M": M, "E": E, "dtype": str(dtype).removeprefix("torch.")}
            for name, t in _time(fns).items():
                row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
            row.update(_graph_vs_copy(fns, moved))
            floor = {"launch_floor": _gating_floor(x, _gating_outputs(M))}
            for name, us in _host_us({**fns, **floor}).items():
                row[f"{name}_host_us_per_call"] = us
            row["speedup_vs_torch"] = row["torch_ms"] / row["fast_ms"]
            row["host_speedup_vs_torch"] = (
                row["torch_host_us_per_call"] / row["fast_host_us_per_call"]
            )
            row["fast_host_over_launch_floor"] = (
                row["fast_host_us_per_call"] / row["launch_floor_host_us_per_call"]
            )
            rows.append(row)
            print(
                f"decode M={M} E={E:<3} {row['dtype']:<8} 05 {row['fast_ms'] * 1e3:5.1f} us GPU "
                f"({row['fast_graph_ms'] * 1e3:5.1f} graphed), "
                f"{row['fast_host_us_per_call']:5.1f} us/call host; torch {row['torch_ms'] * 1e3:5.1f} "
                f"us GPU ({row['torch_graph_ms'] * 1e3:5.1f} graphed), "
                f"{row['torch_host_us_per_call']:5.1f} us/call; bare launch "
                f"{row['launch_floor_host_us_per_call']:5.1f} us/call",
                flush=True,
            )
    return rows


# Split-KV decoding (08): (B sequences, H heads, N cached keys, D) per row; one query row per
# (sequence, head). Batch 1 is where splitting the keys matters: 32 rows for 132 SMs.
SPLIT_KV_SHAPES = (
    (1, 32, 32768, 128),
    (8, 32, 16384, 128),
    (32, 32, 16384, 128),
    (32, 32, 32768, 128),
)


def _torch_merge(m, l, acc):  # noqa: E741
    top = m.amax(dim=1, keepdim=True)
    w = torch.exp(m - top)
    total = (w * l).sum(dim=1)
    return (w[:, :, None] * acc).sum(dim=1) / total[:, None], top[:, 0] + torch.log(total)


def split_kv_rows(quick: bool) -> list[dict]:
    """08: the whole decode (the given partial kernel and the reference merge, through
    ``SplitKVMerge.timed``) against torch SDPA, one query row per (sequence, head) over the
    whole cache; the same decode unsplit (one program per row); and the merge alone against
    the merge written in torch. Throughput counts the K and V bytes read once."""
    from kata import interfaces

    module = _load("08")
    interface = interfaces.get("split-kv-merge")
    merge = module.split_kv_merge_kernel
    shapes = [(1, 2, 256, 16)] if DRY else SPLIT_KV_SHAPES[: 2 if quick else None]
    rows = []
    for dtype in ("bfloat16", "float32"):
        for B, H, N, D in shapes:
            if dtype == "float32" and B * H * N > 8 * 32 * 16384 and not DRY:
                continue  # fp32 K and V of 17 and 34 GB there: the bf16 rows say what they would
            shape = {"B": B, "H": H, "N": N, "D": D, "dtype": dtype}
            decode, sdpa, label, _ = interface.timed(torch, merge, shape)
            splits = host.default_num_splits(B * H, N)
            unsplit, _, _, _ = interface.timed(torch, merge, {**shape, "splits": 1})
            moved = 2 * B * H * N * D * (2 if dtype == "bfloat16" else 4)
            row = {**shape, "mb_moved": moved / 1e6}
            row["max_err_vs_sdpa"] = float(
                (decode()[0].float() - sdpa().float().reshape(B * H, D)).abs().max()
            )
            fns = {"decode": decode, "decode_unsplit": unsplit, "sdpa": sdpa}
            for name, t in _time(fns).items():
                row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
                row[f"{name}_tbps"] = moved / t["ms"] / 1e9
            row["speedup_vs_sdpa"] = row["sdpa_ms"] / row["decode_ms"]
            row["speedup_vs_unsplit"] = row["decode_unsplit_ms"] / row["decode_ms"]
            # The merge alone, on the partials of this decode.
            q = torch.randn(B * H, D, device=runtime.DEVICE, dtype=getattr(torch, dtype))
            kv = [torch.randn(B * H, N, D, device=runtime.DEVICE, dtype=q.dtype) for _ in "kv"]
            lengths = torch.full((B * H,), N, dtype=torch.int32, device=runtime.DEVICE)
            m, l, acc = host.launch_split_kv_partials(  # noqa: E741
                module.split_kv_partial_kernel, q, *kv, lengths, splits
            )
            del q, kv
            row["splits"] = m.shape[1]  # a whole number of key tiles each: maybe fewer than asked
            outs = (torch.empty(B * H, D, device=m.device), torch.empty(B * H, device=m.device))
            fns = {
                "merge": lambda: host.launch_split_kv_merge(
                    merge, m, l, acc, out=outs[0], lse=outs[1]
                ),
                "torch_merge": lambda: _torch_merge(m, l, acc),
            }
            for name, t in _time(fns).items():
                row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
            rows.append(row)
            print(
                f"split-KV {label}: decode {row['decode_ms'] * 1e3:7.1f} us "
                f"({row['decode_tbps']:.2f} TB/s), unsplit {row['decode_unsplit_ms'] * 1e3:7.1f} us, "
                f"SDPA {row['sdpa_ms'] * 1e3:7.1f} us (x{row['speedup_vs_sdpa']:.2f}); merge "
                f"{row['merge_ms'] * 1e3:.1f} us, torch merge {row['torch_merge_ms'] * 1e3:.1f} us; "
                f"max err {row['max_err_vs_sdpa']:.1e}",
                flush=True,
            )
            del decode, unsplit, sdpa, fns  # their caches, before the next row makes its own
    return rows


# 09, MoE dispatch: a training step's batch of tokens, top-2, over Mixtral's 8 experts and
# Qwen1.5-MoE's 60; capacity factor 1.25, uniform random routing.
DISPATCH_SHAPES = ((65536, 2, 8), (65536, 2, 60))
DISPATCH_BLOCK = 1024  # pairs per step of each program's loops


def dispatch_rows() -> list[dict]:
    """09's kernel (one program per expert, so E programs) against its interface's torch
    baseline (stable sort, counts, cumsums, scatter), on the same routing; both give the same
    four outputs, checked once before timing. Both are timed as called, outputs made once for
    the kernel, and its ids checked once outside the timing (the range check synchronises)."""
    import math

    from kata import interfaces

    module = _load("09")
    interface = interfaces.get("moe-dispatch")
    rows = []
    for M, K, E in ((300, 2, 8),) if DRY else DISPATCH_SHAPES:
        capacity = math.ceil(1.25 * M * K / E)
        idx = torch.rand(M, E, device=runtime.DEVICE).topk(K, dim=-1).indices.int()
        host.check_dispatch_input(idx, E, capacity)
        outs = host.dispatch_buffers(M, K, E, idx.device)
        kernel = module.moe_dispatch_kernel

        def run(idx=idx, E=E, capacity=capacity, outs=outs, kernel=kernel):
            return host.launch_moe_dispatch(
                kernel, idx, E, capacity, block=DISPATCH_BLOCK, out=outs, check_ids=False
            )

        got, want = run(), interface.baseline(torch, idx, E, capacity)
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
            "torch": lambda idx=idx, E=E, c=capacity: interface.baseline(torch, idx, E, c),
        }
        for name, timed in _time(fns).items():
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


def _host_row(wrapper: str, shape: dict, fns: dict) -> dict:
    row = {"wrapper": wrapper, **shape}
    for name, us in _host_us(fns).items():
        row[f"{name}_host_us_per_call"] = us
    row["fast_host_over_launch_floor"] = (
        row["fast_host_us_per_call"] / row["launch_floor_host_us_per_call"]
    )
    print(
        f"host {wrapper:<22} {shape}: "
        + ", ".join(f"{name} {row[name + '_host_us_per_call']:.1f}" for name in fns)
        + " us/call",
        flush=True,
    )
    return row


def host_rows() -> list[dict]:
    """Host microseconds per call (``_host_us``) of each wrapper of the performance track and
    the extensions (04, 05, 07 where this GPU runs it, 08, 09), of its torch equivalent and of a
    bare Triton launch with the same arguments (the floor), on small shapes; for 05 also its
    parts (its checks, its one allocation), for 08 and 09 also the call with their syncing
    value checks (``fast_checked``)."""
    return [*_attention_host_rows(), _gating_host_row(), _split_kv_host_row(), _dispatch_host_row()]


def _attention_host_rows() -> list[dict]:
    """04's wrapper, and 07's where this GPU runs it, against SDPA and a bare launch."""
    rows = []
    B, H, S = (1, 1, 16) if DRY else ATTENTION_HOST_SHAPE
    q, k, v = (torch.randn(B, H, S, 64, device=runtime.DEVICE, dtype=torch.bfloat16) for _ in "qkv")
    if DRY:
        q, k, v = (x.half() for x in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    floor = _attention_floor(q, k, v, torch.empty_like(q), False)
    wrappers = [("04 fast_attention", _load("04").fast_attention)]
    if not DRY and torch.cuda.get_device_capability()[0] == 9:
        wrappers.append(("07 fa3_attention", _load("07").fa3_attention))
    for name, fn in wrappers:
        fns = {
            "fast": lambda fn=fn: fn(q, k, v),
            "torch": lambda: sdpa(q, k, v),
            "launch_floor": floor,
        }
        shape = {"B": B, "H": H, "S": S, "D": 64, "dtype": str(q.dtype).removeprefix("torch.")}
        failed = _drop_if_failing(fns, "fast")
        if failed:  # 07 is a showcase: its failure is reported, and the rest still measured
            rows.append({"wrapper": name, **shape, **failed})
            continue
        rows.append(_host_row(name, shape, fns))

    return rows


def _gating_host_row() -> dict:
    """05's wrapper, its parts, torch's path and a bare launch."""
    M, E = (64, 8) if DRY else (DECODE_M, 8)
    x = torch.randn(M, E, device=runtime.DEVICE)
    fast = _load("05").fast_top2_gating
    fns = {
        "fast": lambda: fast(x),
        "torch": lambda: _torch_gating(x),
        "launch_floor": _gating_floor(x, _gating_outputs(M)),
        # 05's parts: the checks it makes on every call, and its one allocation.
        "checks": lambda: host._usual_gating_input(x),
        "one_allocation": lambda: host.gating_outputs(M, x.device),
        "four_allocations": lambda: _gating_outputs(M),
    }
    return _host_row("05 fast_top2_gating", {"M": M, "E": E, "dtype": "float32"}, fns)


def _split_kv_host_row() -> dict:
    """08's wrapper (two launches), with and without its syncing checks, against SDPA."""
    from kata import interfaces

    module = _load("08")
    B, H, N, D = (1, 2, 256, 16) if DRY else (1, 32, 1024, 128)
    shape = {"B": B, "H": H, "N": N, "D": D, "dtype": "bfloat16"}
    _, sdpa_decode, _, _ = interfaces.get("split-kv-merge").timed(
        torch, module.split_kv_merge_kernel, shape
    )
    q = torch.randn(B * H, D, device=runtime.DEVICE, dtype=torch.bfloat16)
    kv = [torch.randn(B * H, N, D, device=runtime.DEVICE, dtype=q.dtype) for _ in "kv"]
    lengths = torch.full((B * H,), N, dtype=torch.int32, device=runtime.DEVICE)
    decode = module.split_kv_decoding
    m, l, acc = host.launch_split_kv_partials(  # noqa: E741
        module.split_kv_partial_kernel, q, *kv, lengths
    )
    Sp = m.shape[1]
    out, lse = torch.empty(B * H, D, device=q.device), torch.empty(B * H, device=q.device)
    ints = (1, triton.cdiv(N, Sp), D, q.stride(0), *kv[0].stride()[:2], *kv[1].stride()[:2])

    def floor_08():  # two launches, as the wrapper makes
        _floor_split_partials[(1,)](
            q, *kv, lengths, m, l, acc, *ints, Sp, Sp * D, D, 0.5, C0=64, C1=max(16, D)
        )
        _floor_split_merge[(1,)](m, l, acc, out, lse, Sp, D, Sp, Sp * D, D, D, C0=16, C1=D)

    fns = {
        "fast": lambda: decode(q, *kv, lengths, check_lengths=False),
        "fast_checked": lambda: decode(q, *kv, lengths),
        "torch": sdpa_decode,
        "launch_floor": floor_08,
    }
    return _host_row("08 split_kv_decoding", shape, fns)


def _dispatch_host_row() -> dict:
    """09's wrapper, with and without its syncing checks, against its torch equivalent."""
    from kata import interfaces

    module = _load("09")
    M, K, E = (300, 2, 8) if DRY else (512, 2, 8)  # one block of pairs
    capacity = math.ceil(1.25 * M * K / E)
    idx = torch.rand(M, E, device=runtime.DEVICE).topk(K, dim=-1).indices.int()
    dispatch = module.moe_dispatch
    outs = host.dispatch_buffers(M, K, E, idx.device)
    baseline = interfaces.get("moe-dispatch").baseline
    fns = {
        "fast": lambda: dispatch(idx, E, capacity, DISPATCH_BLOCK, check_ids=False),
        "fast_checked": lambda: dispatch(idx, E, capacity, DISPATCH_BLOCK),
        "torch": lambda: baseline(torch, idx, E, capacity),
        "launch_floor": lambda: _floor_dispatch[(1,)](
            idx, *outs, M, K, E, capacity, C0=DISPATCH_BLOCK, C1=E
        ),
    }
    return _host_row("09 moe_dispatch", {"M": M, "K": K, "E": E}, fns)


def _graded_line(g: dict) -> str:
    return (
        f"    as graded: {g['shape']}  kernel {g['kernel_ms']:.4f} ms ({100 * g['kernel_spread']:.1f}%)"
        f"  torch {g['torch_ms']:.4f} ms ({100 * g['torch_spread']:.1f}%)  x{g['speedup']:.3f}"
        f" ({g['speedup_range'][0]:.3f}-{g['speedup_range'][1]:.3f})  {g.get('config')}"
    )


def grader_speed() -> dict:
    """`python -m grader --target solutions` twice: a cold Triton cache, then warm."""
    import tempfile

    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp())
    found = {}
    for label in ("cold", "warm"):
        start = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "grader",
                "--target",
                str(catalogue.SOLUTIONS),
                "--report",
                "/tmp/bench-grade.json",
                "--quiet",
            ],
            cwd=catalogue.ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode:  # the timings above are kept; the grader's failure is recorded
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {**found, "error": f"exit {done.returncode}: " + " | ".join(tail)}
        found[f"{label}_s"] = round(time.monotonic() - start, 2)
    return found


def plot(data: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for a, D in zip(axes[:2], (64, 128)):
        for causal, style in ((False, "-"), (True, "--")):
            pts = [
                r
                for r in data["attention"]
                if r.get("D") == D
                and r.get("causal") == causal
                and r.get("dtype") == "bfloat16"
                and "fast_ms" in r
            ]
            S = [r["S"] for r in pts]
            tag = " causal" if causal else ""
            for key, mark, label in (
                ("fast", "o", "04"),
                ("fa3", "s", "07 (Gluon)"),
                ("sdpa", "x", "SDPA default"),
                ("sdpa_cudnn", "+", "SDPA cuDNN"),
                ("sdpa_flash", "v", "SDPA flash"),
            ):
                if pts and f"{key}_tflops" in pts[0]:
                    a.plot(
                        S,
                        [r[f"{key}_tflops"] for r in pts],
                        mark + style,
                        label=label + tag,
                        alpha=1.0 if key in ("fast", "fa3") else 0.55,
                    )
        a.set(
            xscale="log",
            xlabel="sequence length S (B*S = 16k)",
            ylabel="TFLOP/s",
            title=f"Attention, bf16, D = {D}",
        )
        a.legend(fontsize=6, ncol=2)
    g = axes[2]
    gat = data["gating"]
    labels = [f"{r['E']}\n{'fp32' if r['dtype'] == 'float32' else 'bf16'}" for r in gat]
    for i, key in enumerate(("fast", "chapter", "torch")):
        g.bar(
            [x + i * 0.27 for x in range(len(gat))],
            [r.get(f"{key}_tbps", 0) for r in gat],
            0.27,
            label={"fast": "05", "chapter": "03 (chapter)", "torch": "torch"}[key],
        )
    g.axhline(data["copy"]["tbps"], color="k", ls="--", lw=1, label="copy bandwidth")
    g.set(
        xticks=range(len(gat)),
        xticklabels=labels,
        xlabel="experts E (M = 1M tokens)",
        ylabel="TB/s",
        title="Top-2 gating",
    )
    g.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    global DRY
    p = argparse.ArgumentParser(prog="nox -s bench --")
    p.add_argument("--quick", action="store_true", help="fewer sizes")
    p.add_argument(
        "--graded-shapes",
        action="store_true",
        help="only the shapes the grader times, each also timed as the grader does",
    )
    p.add_argument("--no-grader", action="store_true", help="skip timing the grader")
    p.add_argument("--dry-run", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=str(catalogue.ROOT / "reports"), help="folder for the results")
    args = p.parse_args(argv)
    DRY = args.dry_run
    runtime.configure()
    if runtime.INTERPRETER and not DRY:
        print("bench: needs a CUDA GPU (the interpreter's timings mean nothing)", file=sys.stderr)
        return 2
    data = {
        "gpu": "interpreter" if DRY else torch.cuda.get_device_name(),
        "versions": runtime.versions(),
        "platform": platform.platform(),
        "method": f"median of {ROUNDS} rounds of do_bench(warmup={timing.WARMUP_MS}, "
        f"rep={timing.REP_MS}, median), L2 flushed (grader.run.timing.interleaved_ms); "
        "spread = (max - min) / median over the rounds",
        "graph_method": f"*_graph_ms: median of {ROUNDS} rounds of do_bench_cudagraph("
        f"rep={GRAPH_REP_MS}, median), no L2 flush: the GPU's time without the host's; "
        "same_size_copy: an fp32 copy reading and writing the row's bytes, timed the same way",
        "host_method": f"*_host_us_per_call: median of {ROUNDS} rounds of {HOST_CALLS} calls "
        "back to back, wall time (GPU synchronised before and after) / calls, after 2 warm-up "
        "calls, on shapes where the GPU waits for the host; launch_floor: a bare Triton launch "
        "of an empty kernel with the wrapper's arguments",
        "gpu_state_before": {} if DRY else gpu_state(),
    }
    data["copy"] = copy_bandwidth()
    print(
        f"{data['gpu']}: copy bandwidth {data['copy']['tbps']:.2f} TB/s; {data['versions']}; "
        f"{data['gpu_state_before']}",
        flush=True,
    )
    data["gating"] = gating_rows(args.quick, data["copy"]["tbps"], args.graded_shapes)
    if not args.quick and not args.graded_shapes:
        data["decode"] = decode_rows()
    data["attention"] = attention_rows(args.quick, args.graded_shapes)
    if not args.graded_shapes:
        data["split_kv"] = split_kv_rows(args.quick)
        data["dispatch"] = dispatch_rows()
        data["host"] = host_rows()
    data["gpu_state_after"] = {} if DRY else gpu_state()
    data["triton"] = triton.__version__
    if not args.no_grader and not DRY:
        data["grader_s"] = grader_speed()
        print(f"grader on solutions: {data['grader_s']}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(data, indent=2))
    try:
        plot(data, out / "bench.png")
    except ImportError:
        print("bench: matplotlib missing, no plot")
    print(f"wrote {out / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
