"""``nox -s bench`` (GPU): the solution kernels against torch, timed in the same run.

Writes ``reports/bench.json`` and ``reports/bench.png``. Times are medians of
``triton.testing.do_bench`` (warm-up, L2 flushed between repetitions). Attention throughput is
4 * B * H * S^2 * D flops (halved when causal); gating throughput counts the bytes the job must
move: the logits read once, and 16 bytes written per token.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time

from kata import catalogue, runtime  # first: it sets the environment triton reads
import torch
from triton.testing import do_bench


def _load(stem: str):
    return catalogue.load_file(catalogue.SOLUTIONS / f"{stem}.py")


def _ms(fn) -> float:
    fn()  # compile / autotune outside the timing
    torch.cuda.synchronize()
    return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))


def copy_bandwidth() -> float:
    """TB/s of a 2 GiB device-to-device copy, counting bytes read and written."""
    x = torch.empty(2**29, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    ms = _ms(lambda: y.copy_(x))
    return 2 * x.numel() * 4 / ms / 1e9


def attention_rows(quick: bool) -> list[dict]:
    fast = _load("04_fast_attention").fast_attention
    chapter = _load("01_flash_attention_core").flash_attention
    sdpa = torch.nn.functional.scaled_dot_product_attention
    rows = []
    for D in (64, 128):
        for causal in (False, True):
            for S in (1024, 4096) if quick else (1024, 4096, 16384):
                B, H = 16384 // S, 2048 // D
                q, k, v = (
                    torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3)
                )
                flops = 4 * B * H * S * S * D / (2 if causal else 1)
                row = {"D": D, "S": S, "B": B, "H": H, "causal": causal, "dtype": "bfloat16"}
                ref = sdpa(q.float(), k.float(), v.float(), is_causal=causal)
                got = fast(q, k, v, causal=causal)
                row["max_err_vs_fp32"] = float((got.float() - ref).abs().max())
                row["fast_ms"] = _ms(lambda: fast(q, k, v, causal=causal))
                row["sdpa_ms"] = _ms(lambda: sdpa(q, k, v, is_causal=causal))
                if S <= 4096:

                    def naive():
                        s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(D))
                        if causal:
                            s = s.masked_fill(
                                torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1),
                                float("-inf"),
                            )
                        return torch.softmax(s, dim=-1) @ v

                    row["naive_ms"] = _ms(naive)
                for key in ("fast", "sdpa", "naive"):
                    if f"{key}_ms" in row:
                        row[f"{key}_tflops"] = flops / row[f"{key}_ms"] / 1e9
                row["speedup_vs_sdpa"] = row["sdpa_ms"] / row["fast_ms"]
                rows.append(row)
                print(f"attention D={D:<3} S={S:<5} causal={causal!s:<5} fast {row['fast_tflops']:6.0f} "
                      f"TFLOP/s  sdpa {row['sdpa_tflops']:6.0f}  x{row['speedup_vs_sdpa']:.2f}", flush=True)  # fmt: skip
    # The chapter's one-head fp32 kernel, for scale (one head of S = 4096, D = 64).
    q, k, v = (torch.randn(4096, 64, device="cuda") for _ in range(3))
    ms = _ms(lambda: chapter(q, k, v, BLOCK_M=64, BLOCK_N=64))
    rows.append({"kernel": "01 chapter kernel, one head fp32", "S": 4096, "D": 64, "ms": ms,
                 "tflops": 4 * 4096 * 4096 * 64 / ms / 1e9})  # fmt: skip
    return rows


def gating_rows(quick: bool) -> list[dict]:
    fast = _load("05_fast_gating").fast_top2_gating
    chapter = _load("03_moe_gating").moe_top2_gating

    def torch_gating(x):
        p = torch.softmax(x.float(), dim=-1)
        w, i = torch.topk(p, 2, dim=-1)
        return w / w.sum(dim=-1, keepdim=True), i

    rows = []
    M = 2**20
    for dtype in (torch.float32, torch.bfloat16):
        for E in (8, 64, 128, 256) if not quick else (128,):
            x = torch.randn(M, E, device="cuda", dtype=dtype)
            moved = M * E * x.element_size() + M * 16
            row = {"M": M, "E": E, "dtype": str(dtype).removeprefix("torch.")}
            w0, w1, i0, i1 = fast(x)
            tw, ti = torch_gating(x)
            row["indices_agree"] = float(
                ((i0.long() == ti[:, 0]) & (i1.long() == ti[:, 1])).float().mean()
            )
            row["max_weight_err"] = float(
                torch.maximum((w0 - tw[:, 0]).abs(), (w1 - tw[:, 1]).abs()).max()
            )
            row["fast_ms"] = _ms(lambda: fast(x))
            row["torch_ms"] = _ms(lambda: torch_gating(x))
            row["chapter_ms"] = _ms(lambda: chapter(x))
            for key in ("fast", "torch", "chapter"):
                row[f"{key}_tbps"] = moved / row[f"{key}_ms"] / 1e9
            row["speedup_vs_torch"] = row["torch_ms"] / row["fast_ms"]
            rows.append(row)
            print(f"gating M=1M E={E:<3} {row['dtype']:<8} fast {row['fast_ms']:.3f} ms ({row['fast_tbps']:.2f} TB/s)"
                  f"  chapter {row['chapter_ms']:.3f}  torch {row['torch_ms']:.3f}", flush=True)  # fmt: skip
    return rows


def grader_speed() -> dict:
    """`python -m grader --target solutions` twice: a cold Triton cache, then warm."""
    import os
    import tempfile

    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp())
    found = {}
    for label in ("cold", "warm"):
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "grader", "--target", str(catalogue.SOLUTIONS),
                        "--report", "/tmp/bench-grade.json", "--quiet"], cwd=catalogue.ROOT,
                       env=env, check=True, capture_output=True)  # fmt: skip
        found[f"{label}_s"] = round(time.monotonic() - start, 2)
    return found


def plot(data: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, g) = plt.subplots(1, 2, figsize=(11, 4))
    for D in (64, 128):
        for causal, style in ((False, "-"), (True, "--")):
            pts = [
                r
                for r in data["attention"]
                if r.get("D") == D and r.get("causal") == causal and "fast_ms" in r
            ]
            S = [r["S"] for r in pts]
            a.plot(
                S,
                [r["fast_tflops"] for r in pts],
                "o" + style,
                label=f"04, D={D}{' causal' if causal else ''}",
            )
            a.plot(
                S,
                [r["sdpa_tflops"] for r in pts],
                "x" + style,
                alpha=0.6,
                label=f"SDPA, D={D}{' causal' if causal else ''}",
            )
    a.set(
        xscale="log",
        xlabel="sequence length S (B*S = 16k)",
        ylabel="TFLOP/s",
        title="Attention, bf16, H200",
    )
    a.legend(fontsize=7)
    gat = [r for r in data["gating"] if r["dtype"] == "float32"]
    E = [str(r["E"]) for r in gat]
    for i, key in enumerate(("fast", "chapter", "torch")):
        g.bar(
            [x + i * 0.27 for x in range(len(E))], [r[f"{key}_tbps"] for r in gat], 0.27, label=key
        )
    g.axhline(data["copy_tbps"], color="k", ls="--", lw=1, label="copy bandwidth")
    g.set(xticks=range(len(E)), xticklabels=E, xlabel="experts E (M = 1M tokens, fp32)", ylabel="TB/s",
          title="Top-2 gating")  # fmt: skip
    g.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nox -s bench --")
    p.add_argument("--quick", action="store_true", help="fewer sizes")
    p.add_argument("--no-grader", action="store_true", help="skip timing the grader")
    args = p.parse_args(argv)
    if runtime.INTERPRETER:
        print("bench: needs a CUDA GPU (the interpreter's timings mean nothing)", file=sys.stderr)
        return 2
    data = {
        "gpu": torch.cuda.get_device_name(), "versions": runtime.versions(),
        "platform": platform.platform(), "copy_tbps": copy_bandwidth(),
    }  # fmt: skip
    print(
        f"{data['gpu']}: copy bandwidth {data['copy_tbps']:.2f} TB/s; {data['versions']}",
        flush=True,
    )
    data["gating"] = gating_rows(args.quick)
    data["attention"] = attention_rows(args.quick)
    if not args.no_grader:
        data["grader_s"] = grader_speed()
        print(f"grader on solutions: {data['grader_s']}")
    out = catalogue.ROOT / "reports"
    out.mkdir(exist_ok=True)
    (out / "bench.json").write_text(json.dumps(data, indent=2))
    try:
        plot(data, out / "bench.png")
    except ImportError:
        print("bench: matplotlib missing, no plot")
    print(f"wrote {out / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
