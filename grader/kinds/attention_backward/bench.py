"""10's rows of ``nox -s bench`` (the convention: ``grader.kinds``): the reference backward (all
three kernels of the solution, through ``AttentionBackward.timed``) against torch SDPA's
backward through autograd, both from the same q, k, v, dO, O and lse."""

from __future__ import annotations

from kata.kinds import attention_backward

# (B, H, S, D): a training step's shapes, short and long sequences, D = 64 and 128.
SHAPES = ((4, 16, 1024, 64), (2, 16, 4096, 64), (4, 16, 1024, 128), (1, 16, 8192, 128))
DRY_SHAPE = (1, 1, 32, 16)  # --dry-run: the interpreter, fp32 (times meaningless)


def rows(bench, *, quick: bool, graded_only: bool, copy_tbps: float) -> dict[str, list[dict]]:
    return {} if graded_only else {"attention_backward": backward_rows(bench, quick)}


def host_rows(bench) -> list[dict]:
    return []


def backward_rows(bench, quick: bool) -> list[dict]:
    """One row per (shape, dtype, causal): the median milliseconds of each side, the speedup,
    and the largest difference of dq, dk, dv from SDPA's."""
    kernel = bench.load("10").attn_bwd_dkdv_kernel
    interface = attention_backward.INTERFACE
    shapes = [DRY_SHAPE] if bench.DRY else SHAPES[:2] if quick else SHAPES
    dtypes = ("float32",) if bench.DRY else ("bfloat16", "float16")
    found = []
    for B, H, S, D in shapes:
        for dtype in dtypes:
            for causal in (False, True):
                shape = {"B": B, "H": H, "S": S, "D": D, "dtype": dtype, "causal": causal}
                ours, theirs, label, baseline = interface.timed(kernel, shape)
                err = max(float((a - b.float()).abs().max()) for a, b in zip(ours(), theirs()))
                row = {**shape, "baseline": baseline, "max_err_vs_sdpa": err}
                for name, t in bench.time_ms({"ours": ours, "torch": theirs}).items():
                    row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
                row["speedup_vs_torch"] = row["torch_ms"] / row["ours_ms"]
                found.append(row)
                print(
                    f"backward {label}: {row['ours_ms'] * 1e3:8.1f} us, SDPA's "
                    f"{row['torch_ms'] * 1e3:8.1f} us (x{row['speedup_vs_torch']:.2f}); "
                    f"max err {err:.1e}",
                    flush=True,
                )
    return found
