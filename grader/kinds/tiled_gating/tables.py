"""The gating figures of the docs from the H200 bench run (the convention: ``grader.kinds``):
performance.md's gating table, and the fields the tags derive from a row."""

from __future__ import annotations

from kata.authoring import bench_docs


def gating_table(data: dict) -> str:
    head = (
        "| E | dtype | MB moved | 05 us | 05 TB/s | **% of copy** | 05 spread | 03 (chapter) ms "
        "| torch ms | **05 vs torch** | 05 vs 03 | top-2 values right | max weight err "
        "| indices = torch's |"
    )
    lines = [head, "|" + "---|" * head.count(" |")]
    dtype = {v: k for k, v in bench_docs.DTYPES.items()}
    for r in data["gating"]:
        agree = r["indices_agree_with_torch"] * 100
        cells = [
            r["E"],
            dtype[r["dtype"]],
            f"{r['mb_moved']:.0f}",
            f"{r['fast_ms'] * 1000:.1f}",
            f"{r['fast_tbps']:.2f}",
            f"**{r['fast_pct_of_copy']:.0f}%**",
            bench_docs.percent(r["fast_spread"]),
            f"{r['chapter_ms']:.3f}",
            f"{r['torch_ms']:.3f}",
            f"**{r['speedup_vs_torch']:.0f}x**",
            f"{r['speedup_vs_chapter']:.1f}x",
            f"{r['top2_values_agree'] * 100:.0f}%",
            f"{r['max_weight_err_vs_fp64']:.1e}",
            "100%" if agree == 100 else f"{agree:.2f}%",
        ]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines) + "\n"


TABLES = {"h200-gating": gating_table}

DERIVED = {
    "fast_us": lambda r, data: r["fast_ms"] * 1000,
    "floor_ms": lambda r, data: r["mb_moved"] / (data["copy"]["tbps"] * 1000),  # at copy speed
    "indices_agree_pct": lambda r, data: r["indices_agree_with_torch"] * 100,
    "top2_agree_pct": lambda r, data: r["top2_values_agree"] * 100,
}
