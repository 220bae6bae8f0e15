"""10's bench rows: the reference backward (all three kernels of the solution, through
``AttentionBackward.timed``) against torch SDPA's backward through autograd, on a GPU.

No bench convention for the kinds exists yet (kata/authoring/bench.py times 01-09 itself), so
this module only offers ``rows(quick)``; nothing calls it. Run on a GPU:
``python -c "from grader.kinds.attention_backward import bench; print(bench.rows(True))"``.
"""

from __future__ import annotations

import statistics

# (B, H, S, D): a training step's shapes, short and long sequences, D = 64 and 128.
SHAPES = ((4, 16, 1024, 64), (2, 16, 4096, 64), (4, 16, 1024, 128), (1, 16, 8192, 128))
ROUNDS = 10


def rows(quick: bool) -> list[dict]:
    """One row per (shape, dtype, causal): the median milliseconds of each side over ``ROUNDS``
    interleaved rounds (the grader's timing), the speedup, and the largest difference of dq,
    dk, dv from SDPA's (both start from the same q, k, v, dO)."""
    import torch

    from grader.run import timing
    from kata import catalogue
    from kata.kinds import get

    interface = get("attention-backward")
    module = catalogue.load_file(catalogue.SOLUTIONS / "10_flash_attention_backward.py")
    found = []
    for B, H, S, D in SHAPES[:2] if quick else SHAPES:
        for dtype in ("bfloat16", "float16"):
            for causal in (False, True):
                shape = {"B": B, "H": H, "S": S, "D": D, "dtype": dtype, "causal": causal}
                ours, theirs, label, baseline = interface.timed(
                    torch, module.attn_bwd_dkdv_kernel, shape
                )
                mine, sdpa = ours(), theirs()  # compiles outside the timing
                err = max(float((a - b.float()).abs().max()) for a, b in zip(mine, sdpa))
                torch.cuda.synchronize()
                ms = timing.interleaved_ms({"ours": ours, "torch": theirs}, ROUNDS)
                row = {**shape, "label": label, "baseline": baseline, "max_err_vs_sdpa": err}
                for name, times in ms.items():
                    row[f"{name}_ms"] = statistics.median(times)
                row["speedup_vs_torch"] = row["torch_ms"] / row["ours_ms"]
                found.append(row)
    return found
