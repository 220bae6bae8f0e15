"""10's rows of ``nox -s bench`` (the convention: ``grader.kinds``): the reference backward (all
three kernels of the solution, through ``AttentionBackward.problem``) against torch SDPA's
backward through autograd, from the default dispatch's forward and from each backend's
(``bench.sdpa_backends``), all from the same q, k, v and dO."""

from __future__ import annotations

import functools

from kata.kinds import attention_backward

# (B, H, S, D): a training step's shapes, short and long sequences, D = 64 and 128.
SHAPES = ((4, 16, 1024, 64), (2, 16, 4096, 64), (4, 16, 1024, 128), (1, 16, 8192, 128))
DRY_SHAPE = (1, 1, 32, 16)  # --dry-run: the interpreter, fp32 (times meaningless)


def rows(bench, *, quick: bool, graded_only: bool, copy_tbps: float) -> dict[str, list[dict]]:
    return {} if graded_only else {"attention_backward": backward_rows(bench, quick)}


def host_rows(bench) -> list[dict]:
    return []


def backward_rows(bench, quick: bool) -> list[dict]:
    """One row per (shape, dtype, causal): the median milliseconds and TFLOP/s of each side (ours,
    torch's default, and each SDPA backend that runs here), the speedups (torch's time / ours),
    and the largest difference of dq, dk, dv from the default's."""
    kernel = bench.load("10").attn_bwd_dkdv_kernel
    interface = attention_backward.INTERFACE
    shapes = [DRY_SHAPE] if bench.DRY else SHAPES[:2] if quick else SHAPES
    dtypes = ("float32",) if bench.DRY else ("bfloat16", "float16")
    found = []
    for B, H, S, D in shapes:
        for dtype in dtypes:
            for causal in (False, True):
                shape = {"B": B, "H": H, "S": S, "D": D, "dtype": dtype, "causal": causal}
                p = interface.problem(kernel, shape)
                # SDPA's backward from the default dispatch's forward, or from a backend's.
                sdpa = functools.partial(
                    attention_backward.sdpa_backward, p["q"], p["k"], p["v"], p["do"], causal
                )
                ours, theirs = p["ours"], sdpa()
                err = max(float((a - b.float()).abs().max()) for a, b in zip(ours(), theirs()))
                row = {**shape, "baseline": attention_backward.BASELINE, "max_err_vs_sdpa": err}
                if not bench.DRY:  # which backend the default chose, by its kernels' names
                    kernels = bench.cuda_kernels(theirs)
                    row["sdpa_default_kernels"] = [name[:160] for name in kernels[:3]]
                fns = {"ours": ours, "torch": theirs}
                bench.add_sdpa_backends(fns, row, sdpa)
                # FlashAttention-2's count: the backward's five S x S x D matmuls are 2.5 times
                # the forward's two, 4 * B * H * S^2 * D flops, halved when causal.
                flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
                for name, t in bench.time_ms(fns).items():
                    row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
                    row[f"{name}_tflops"] = flops / t["ms"] / 1e9
                row["speedup_vs_torch"] = row["torch_ms"] / row["ours_ms"]
                backends = [name for name in fns if name.startswith("sdpa_")]
                for name in backends:
                    row[f"speedup_vs_{name}"] = row[f"{name}_ms"] / row["ours_ms"]
                found.append(row)
                print(
                    f"backward {p['label']}: {row['ours_ms'] * 1e3:8.1f} us "
                    f"{row['ours_tflops']:4.0f} TFLOP/s, SDPA's {row['torch_ms'] * 1e3:8.1f} us "
                    f"(x{row['speedup_vs_torch']:.2f})"
                    + "".join(
                        f", {b.removeprefix('sdpa_')} x{row['speedup_vs_' + b]:.2f}"
                        for b in backends
                    )
                    + f"; max err {err:.1e}",
                    flush=True,
                )
                del p, sdpa, ours, theirs, fns  # the calls hold the inputs and graphs
    return found
