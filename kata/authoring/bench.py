"""``nox -s bench`` (GPU): the solution kernels against torch, timed in the same run.

Writes ``reports/bench.json`` and ``reports/bench.png``. Every time is the median of ROUNDS
rounds, each round the median of one ``triton.testing.do_bench`` (warm-up first, L2 flushed
between repetitions), by the grader's own timing function (``grader.run.timing.interleaved_ms``);
the rounds' spread, (max - min) / median, is recorded beside it. A kernel and its baselines are
timed round after round in turn, so drift hits them alike. Attention throughput is
4 * B * H * S^2 * D flops (halved when causal), against SDPA's default backend and each backend
torch offers (cuDNN, FlashAttention-2, memory-efficient); the backward (10) counts 2.5 times
the forward's flops, against SDPA's backward from the default and from each backend. Gating
throughput counts the bytes the job must move: the logits read once, and 16 bytes written per
token. MoE dispatch (09, the extensions track) is timed against its torch equivalent at 64k
tokens.

The rows are the kinds': each kind's ``grader/kinds/<kind>/bench.py`` makes its sections and its
host rows (the convention is in ``grader.kinds``); this module holds the timing they share, the
run's header, the figure and the command line."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from kata import runtime

# Run as a script, the backend is chosen before Triton is first imported (this module imports
# it): a Triton imported before TRITON_INTERPRET is set runs the interpreter's kernels
# half-patched, and the dry run failed ("Cannot call @triton.jit'd outside of the scope of a
# kernel"). Imported as a module, it chooses nothing (the importer has).
if __name__ == "__main__":
    runtime.configure()

import triton  # noqa: E402

from grader import kinds  # noqa: E402
from grader.run import timing  # noqa: E402
from kata import catalogue  # noqa: E402

ROUNDS = timing.ROUNDS
DRY = False  # --dry-run: tiny shapes in the interpreter, to test this script (times meaningless)
GRAPH_REP_MS = 50  # each round of a CUDA-graph timing: do_bench_cudagraph(rep=GRAPH_REP_MS)
HOST_CALLS = 200  # calls per round of a host timing


def load(number: str):
    """A reference kernel file by its number: an exercise of the manifest, or a showcase (07)."""
    try:
        name = catalogue.find(number).filename
    except KeyError:
        (path,) = catalogue.SOLUTIONS.glob(f"{number}_*.py")
        name = path.name
    return catalogue.load_file(catalogue.SOLUTIONS / name)


def time_ms(fns: dict, rounds: int = ROUNDS) -> dict:
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


def graph_ms(fns: dict, rounds: int = ROUNDS) -> dict:
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


def host_us(fns: dict, calls: int = HOST_CALLS, rounds: int = ROUNDS) -> dict:
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


def same_size_copy(moved_bytes: int):
    """A device-to-device fp32 copy that reads and writes ``moved_bytes`` in all: the limit a
    memory-bound kernel moving that many bytes is held to."""
    src = torch.empty(max(1, moved_bytes // 8), dtype=torch.float32, device=runtime.DEVICE)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def graded(number: str) -> tuple:
    """(interface, the shapes the grader times) of a performance exercise."""
    from grader import specs

    spec = specs.load(catalogue.find(number).stem)
    return spec.interface, [dict(shape) for shape in spec.timing]


def as_graded(number: str, kernel, shape: dict) -> dict | None:
    """The grader's timing row for ``shape`` (``grader.run.timing.time_shape``: the same calls, the
    same pairing with torch) when the grader times that shape, else None."""
    interface, shapes = graded(number)
    if DRY or shape not in shapes:
        return None
    return timing.time_shape(interface, kernel, shape)


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
    t = time_ms({"copy": lambda: y.copy_(x)})["copy"]
    return {"tbps": 2 * n * 4 / t["ms"] / 1e9, "ms": t["ms"], "spread": t["spread"]}


def drop_if_failing(fns: dict, name: str) -> dict:
    """Run ``fns[name]`` once; if it raises (07 is a showcase), drop it from ``fns`` and return
    ``{name}_host_error``, else nothing."""
    try:
        fns[name]()
    except Exception as e:  # noqa: BLE001 (report, carry on)
        del fns[name]
        return {f"{name}_host_error": f"{type(e).__name__}: {str(e)[:200]}"}
    return {}


def sdpa_backends() -> dict:
    """The backends SDPA can be forced to (``torch.nn.attention.sdpa_kernel``), keyed by the name
    their rows use (``sdpa_<name>_ms``)."""
    from torch.nn.attention import SDPBackend

    return {
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
    }


def cuda_kernels(call) -> list[str]:
    """The names of the CUDA kernels one ``call`` launches, read with the torch profiler, the
    one that ran longest first."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    return [e.key for e in sorted(kernels, key=lambda e: -e.device_time_total)]


def add_sdpa_backends(fns: dict, row: dict, make) -> None:
    """Add ``sdpa_<name>`` to ``fns`` for each of ``sdpa_backends()``: ``make(backend)`` gives
    its call, run once here. A backend that raises on this machine, shape or dtype (cuDNN and
    memory-efficient have no CPU kernel; cuDNN refuses some shapes) is left out, the first line
    of its error in ``row["sdpa_<name>_error"]``."""
    for name, backend in sdpa_backends().items():
        try:
            call = make(backend)
            call()
        except RuntimeError as e:  # torch's refusals; anything else is the bench's own bug
            row[f"sdpa_{name}_error"] = str(e).partition("\n")[0][:160]
        else:
            fns[f"sdpa_{name}"] = call


def host_row(wrapper: str, shape: dict, fns: dict) -> dict:
    """A row of the ``host`` section: ``wrapper``'s shape and each function's host microseconds
    per call (``host_us``); ``fns`` holds ``fast`` and ``launch_floor`` at least."""
    row = {"wrapper": wrapper, **shape}
    for name, us in host_us(fns).items():
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


def graded_line(g: dict) -> str:
    """The printed line of a row's ``as_graded`` timing."""
    return (
        f"    as graded: {g['shape']}  kernel {g['kernel_ms']:.4f} ms ({100 * g['kernel_spread']:.1f}%)"
        f"  torch {g['torch_ms']:.4f} ms ({100 * g['torch_spread']:.1f}%)  x{g['speedup']:.3f}"
        f" ({g['speedup_range'][0]:.3f}-{g['speedup_range'][1]:.3f})  {g.get('config')}"
        + ("" if g.get("agrees_with_torch", True) else f"  DIFFERS FROM TORCH: {g['difference']}")
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
    """One figure of every kind's panels (``PANELS`` and ``plot(data, axes)`` of its bench
    module), side by side, in the registry's order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawers = [m for m in kinds.benches() if getattr(m, "PANELS", 0)]
    count = sum(m.PANELS for m in drawers)
    fig, axes = plt.subplots(1, count, figsize=(5 * count, 4.2), squeeze=False)
    first = 0
    for m in drawers:
        m.plot(data, list(axes[0][first : first + m.PANELS]))
        first += m.PANELS
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
    p.add_argument(
        "--host-only",
        action="store_true",
        help="only the host rows (a wrapper's microseconds per call and their parts, about 1 min)",
    )
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
    this = sys.modules[__name__]  # the kinds' tools: this module, as it runs (see grader.kinds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # What is measured so far, kind by kind, so a run stopped by a time limit keeps its rows.
    partial = out / "bench.partial.json"
    benches = kinds.benches()
    if not args.graded_shapes:  # first: a minute, and what a run cut short most wants kept
        data["host"] = [row for kind in benches for row in kind.host_rows(this)]
        partial.write_text(json.dumps(data, indent=2))
    for kind in [] if args.host_only else benches:
        start = time.monotonic()
        data.update(
            kind.rows(
                this,
                quick=args.quick,
                graded_only=args.graded_shapes,
                copy_tbps=data["copy"]["tbps"],
            )
        )
        partial.write_text(json.dumps(data, indent=2))
        print(f"{kind.__name__}: {time.monotonic() - start:.0f} s", flush=True)
    data["gpu_state_after"] = {} if DRY else gpu_state()
    data["triton"] = triton.__version__
    if not args.no_grader and not args.host_only and not DRY:
        data["grader_s"] = grader_speed()
        print(f"grader on solutions: {data['grader_s']}")
    (out / "bench.json").write_text(json.dumps(data, indent=2))
    partial.unlink(missing_ok=True)
    try:
        if not args.host_only:
            plot(data, out / "bench.png")
    except ImportError:
        print("bench: matplotlib missing, no plot")
    print(f"wrote {out / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
