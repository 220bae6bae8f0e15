"""04 on a GPU: the grader's timing against the bench's, in one process, on the same tensors.

    python scripts/timing_diag.py --out DIR [--reports A.json B.json ...]

For each shape the grader times (exercise 04's public spec): the autotuner's
choice in a quiet process, with its timing of every configuration; then ROUNDS interleaved
rounds of the bench's call (``fast_attention``, a new output each call), the grader's call
(``host.launch_fast_attention`` into a preallocated output, as ``interfaces.timed`` makes it),
the same under the grader's launch counter (``launcher.Watch``), and SDPA; every configuration
the autotuner may pick, pinned; and what the autotuner picks when it times its configurations
while another process streams memory as a second exercise's grading does (05's autotuning).
``--reports`` prints the 04 rows of grader reports made in the same session beside these.
Writes ``DIR/timing_diag.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402

from grader import specs  # noqa: E402
from grader.run import launcher, timing  # noqa: E402
from kata import catalogue, host, runtime  # noqa: E402

runtime.configure()  # a script: the backend is chosen before any kernel file is loaded

BUSY = """
import sys, time
sys.path.insert(0, {root!r})
from kata import catalogue
import torch, triton
fast = catalogue.load_file({file!r}).fast_top2_gating
x = torch.randn(2**20, 128, device="cuda")
fast(x)
end = time.time() + {seconds}
while time.time() < end:
    triton.testing.do_bench(lambda: fast(x), warmup=5, rep=40)
"""


def stats(ms: list[float]) -> dict:
    med = statistics.median(ms)
    return {"ms": med, "spread": (max(ms) - min(ms)) / med, "rounds": ms}


def tuner_of(kernel):
    layer = kernel
    while layer is not None and not hasattr(layer, "configs"):
        layer = getattr(layer, "fn", None)
    return layer


def diag_shape(shape: dict, module, busy_seconds: float) -> dict:
    kernel = module.attention_fwd_kernel
    tuner = tuner_of(kernel)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    B, H, S, D, causal = (shape[k] for k in ("B", "H", "S", "D", "causal"))
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
    out_buf = torch.empty_like(q)

    def bench_call():
        return module.fast_attention(q, k, v, causal=causal)

    def grader_call():
        return host.launch_fast_attention(kernel, q, k, v, causal=causal, out=out_buf)

    def ref():
        return sdpa(q, k, v, is_causal=causal)

    row: dict = {"shape": shape}
    # Every configuration the autotuner may pick, compiled at once as the grader now does.
    rec = launcher.Recorder()
    host.launch_fast_attention(rec, q, k, v, causal=causal, out=out_buf)
    configs = launcher.own_configs(kernel, *rec.calls[0])
    start = time.monotonic()
    launcher._compile_launches(kernel, [(*rec.calls[0], c) for c in configs])
    row["compile_s"] = time.monotonic() - start
    bench_call(), ref()
    torch.cuda.synchronize()
    row["quiet_choice"] = timing.chosen_config(kernel)
    row["quiet_configs_timings"] = {
        str(c): t for c, t in (getattr(tuner, "configs_timings", None) or {}).items()
    }
    got = timing.interleaved_ms({"bench_call": bench_call, "grader_call": grader_call, "sdpa": ref})
    # The same call under the grader's launch counter (it wraps JITFunction.run).
    from triton.runtime.jit import JITFunction

    original = JITFunction.__dict__["run"]
    launcher.Watch(False)
    try:
        watched = timing.interleaved_ms({"grader_call_watched": grader_call, "sdpa": ref})
    finally:
        JITFunction.run = original
    row["interleaved"] = {n: stats(ms) for n, ms in got.items()}
    row["watched"] = {n: stats(ms) for n, ms in watched.items()}
    # Every configuration the autotuner may pick, pinned.
    pinned = {}
    for c in configs:
        pinned[launcher.config_label(c)] = functools.partial(
            host.launch_fast_attention,
            launcher.Pinned(kernel, c),
            q,
            k,
            v,
            causal=causal,
            out=out_buf,
        )
    for fn in pinned.values():
        fn()
    torch.cuda.synchronize()
    row["pinned"] = {n: stats(ms) for n, ms in timing.interleaved_ms(pinned, rounds=3).items()}
    # The autotuner timing its configurations beside another process's memory traffic.
    busy = subprocess.Popen(
        [
            sys.executable,
            "-c",
            BUSY.format(
                root=str(ROOT),
                file=str(catalogue.SOLUTIONS / catalogue.find("05").filename),
                seconds=busy_seconds,
            ),
        ]
    )
    time.sleep(8)  # its start and first compile
    choices = []
    for _ in range(3):
        if busy.poll() is not None:
            break
        tuner.cache.clear()
        bench_call()
        torch.cuda.synchronize()
        choices.append(launcher.config_label(timing.chosen_config(kernel)))
    busy.kill()
    busy.wait()
    row["busy_choices"] = choices
    tuner.cache.clear()
    bench_call()  # a quiet choice again
    torch.cuda.synchronize()
    row["quiet_choice_again"] = timing.chosen_config(kernel)
    i = row["interleaved"]
    print(
        f"{shape}: quiet choice {launcher.config_label(row['quiet_choice'])}; "
        f"again {launcher.config_label(row['quiet_choice_again'])}; beside traffic {choices}",
        flush=True,
    )
    for name in ("bench_call", "grader_call", "sdpa"):
        print(
            f"   {name:<20} {i[name]['ms']:.4f} ms (spread {100 * i[name]['spread']:.1f}%)"
            f"  x{i['sdpa']['ms'] / i[name]['ms']:.3f} of SDPA",
            flush=True,
        )
    w = row["watched"]
    print(
        f"   grader_call_watched  {w['grader_call_watched']['ms']:.4f} ms "
        f"(spread {100 * w['grader_call_watched']['spread']:.1f}%)  SDPA {w['sdpa']['ms']:.4f}"
    )
    for name, t in sorted(row["pinned"].items(), key=lambda kv: kv[1]["ms"]):
        print(f"   pinned {name:<60} {t['ms']:.4f} ms  x{i['sdpa']['ms'] / t['ms']:.3f}")
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="reports")
    p.add_argument("--reports", nargs="*", default=[])
    p.add_argument("--busy-seconds", type=float, default=40)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    found: dict = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "shapes": [],
    }
    print(found, flush=True)
    spec = specs.load(catalogue.find("04").stem)
    module = catalogue.load_file(catalogue.SOLUTIONS / catalogue.find("04").filename)
    for shape in spec.timing:
        found["shapes"].append(diag_shape(shape, module, args.busy_seconds))
    for path in args.reports:
        try:
            report = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            print(f"{path}: {e}")
            continue
        found.setdefault("reports", {})[path] = report.get("performance")
        exercises = report.get("exercises", [])
        for ex in exercises if isinstance(exercises, list) else exercises.values():
            perf = ex.get("performance") or {}
            for r in perf.get("shapes", []):
                print(
                    f"{Path(path).name} {ex.get('id')}: {r.get('shape')} kernel {r.get('kernel_ms')} ms "
                    f"({100 * r.get('kernel_spread', 0):.1f}%) torch {r.get('torch_ms')} ms "
                    f"x{r.get('speedup')} {r.get('speedup_range')} config {r.get('config')}"
                )
            if ex.get("output"):
                print(f"   output: {ex['output'][-1500:]}")
    (out / "timing_diag.json").write_text(json.dumps(found, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
