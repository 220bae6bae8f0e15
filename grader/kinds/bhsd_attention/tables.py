"""The attention figures of the docs from the H200 bench run (the convention: ``grader.kinds``):
performance.md's attention table, 07's table, and the fields the tags derive from a row."""

from __future__ import annotations

from kata.authoring import bench_docs


def attention_table(data: dict) -> str:
    head = (
        "| dtype | D | S | B x H | causal | 04 TFLOP/s | 07 TFLOP/s | SDPA default | cuDNN | flash "
        "| efficient | **04 / default** | 04 / cuDNN | 04 / flash | **07 / default** | 07 / cuDNN "
        "| 04 spread | 07 spread | default spread | naive | 04 max err | 07 max err |"
    )
    lines = [head, "|" + "---|" * head.count(" |")]
    dtype = {v: k for k, v in bench_docs.DTYPES.items()}
    for r in data["attention"]:
        if "kernel" in r:
            continue
        naive = f"{r['naive_tflops']:.0f}" if r.get("naive_tflops") else "-"
        cells = [
            dtype[r["dtype"]],
            r["D"],
            r["S"],
            f"{r['B']} x {r['H']}",
            "yes" if r["causal"] else "no",
            *(f"{r[k]:.0f}" for k in ("fast_tflops", "fa3_tflops", "sdpa_tflops")),
            *(f"{r[k]:.0f}" for k in ("sdpa_cudnn_tflops", "sdpa_flash_tflops")),
            f"{r['sdpa_efficient_tflops']:.0f}",
            f"**{bench_docs.ratio(r['fast_vs_sdpa'])}**",
            bench_docs.ratio(r["fast_vs_sdpa_cudnn"]),
            bench_docs.ratio(r["fast_vs_sdpa_flash"]),
            f"**{bench_docs.ratio(r['fa3_vs_sdpa'])}**",
            bench_docs.ratio(r["fa3_vs_sdpa_cudnn"]),
            *(bench_docs.percent(r[k]) for k in ("fast_spread", "fa3_spread", "sdpa_spread")),
            naive,
            f"{r['fast_max_err_vs_fp32']:.1e}",
            f"{r['fa3_max_err_vs_fp32']:.1e}",
        ]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines) + "\n"


def fa3_table(data: dict) -> str:
    """07's page: bf16 at S >= 4096, 07 against 04 and SDPA's default."""
    lines = [
        "| D | S | causal | 07 TFLOP/s | 04 TFLOP/s | SDPA default (cuDNN) | **07 / cuDNN default** |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in data["attention"]:
        if "kernel" in r or r["dtype"] != "bfloat16" or r["S"] < 4096:
            continue
        lines.append(
            f"| {r['D']} | {r['S']} | {'yes' if r['causal'] else 'no'} | {r['fa3_tflops']:.0f} "
            f"| {r['fast_tflops']:.0f} | {r['sdpa_tflops']:.0f} | {bench_docs.ratio(r['fa3_vs_sdpa'])} |"
        )
    return "\n".join(lines) + "\n"


TABLES = {"h200-attention": attention_table, "h200-fa3": fa3_table}

DERIVED = {
    "fa3_over_fast_pct": lambda r, data: (r["fa3_tflops"] / r["fast_tflops"] - 1) * 100,
    "fast_behind_sdpa_pct": lambda r, data: (1 - r["fast_vs_sdpa"]) * 100,
    "fast_vs_naive": lambda r, data: r["naive_ms"] / r["fast_ms"],
    "fast_spread_pct": lambda r, data: r["fast_spread"] * 100,
    "fa3_spread_pct": lambda r, data: r["fa3_spread"] * 100,
    "sdpa_spread_pct": lambda r, data: r["sdpa_spread"] * 100,
}
