"""The attention rows (04, 07 and 01) of ``nox -s bench`` (the convention: ``grader.kinds``): 04 and, on a
Hopper GPU, 07 against SDPA and each of its backends, the chapter's 01 kernel for scale, and the
host time of their wrappers."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kata import runtime
from kata.kinds import bhsd_attention


@triton.jit
def _floor_attention(
    p0, p1, p2, p3, n0, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, n11, n12, n13, x0,
    C0: tl.constexpr, C1: tl.constexpr, C2: tl.constexpr, C3: tl.constexpr, C4: tl.constexpr,
):  # fmt: skip
    pass


def _attention_floor(q, k, v, out, causal):
    """A bare launch with 04's (and 07's) arguments (``_floor_attention``)."""
    H, S, D = q.shape[1:]
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3])
    return lambda: _floor_attention[(1,)](
        q, k, v, out, *strides, H, S, 1.0 / math.sqrt(D), C0=D, C1=causal, C2=128, C3=64, C4=True
    )


def scratch_requests(fn) -> list[int]:
    """The sizes of the descriptor scratch (``bhsd_attention._descriptor_scratch``) that one
    call of ``fn`` asks for: Triton's launcher requests it at every launch of a kernel that makes
    tensor descriptors on the device, and the wrapper's allocator hands it over each time."""
    sizes = []
    allocate = bhsd_attention._descriptor_scratch

    def counting(size: int, alignment: int, stream):
        sizes.append(size)
        return allocate(size, alignment, stream)

    bhsd_attention._descriptor_scratch = counting  # the wrapper names it at every call
    try:
        fn()
    finally:
        bhsd_attention._descriptor_scratch = allocate
    return sizes


def _sdpa_default_kernel(bench, q, k, v, causal) -> str:
    """The name of the CUDA kernel SDPA's default dispatch launches for these inputs."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    names = bench.cuda_kernels(lambda: sdpa(q, k, v, is_causal=causal))
    return max(names, key=len)[:160] if names else "?"


def _attention_cases(bench, quick: bool, graded_only: bool) -> list[tuple]:
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
        cases = [("bfloat16", g["D"], g["causal"], g["S"]) for g in bench.graded("04")[1]]
    if bench.DRY:
        cases = [("float16", 64, c, 128) for c in (False, True)]
    return cases


def _add_references(bench, fns: dict, row: dict, q, k, v) -> None:
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
    row["sdpa_default_kernel"] = _sdpa_default_kernel(bench, q, k, v, causal)

    def forced(backend):
        def run():
            with sdpa_kernel(backend):
                return sdpa(q, k, v, is_causal=causal)

        return run

    bench.add_sdpa_backends(fns, row, forced)
    if S <= 4096 and dt == "bfloat16":

        def naive():
            s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(D))
            if causal:
                s = s.masked_fill(
                    torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1), float("-inf")
                )
            return torch.softmax(s, dim=-1) @ v

        fns["naive"] = naive


def _kernels_to_time(bench, fast, fa3, row: dict, q, k, v) -> dict:
    """04's kernel, 07's where this GPU runs it, and (but in the dry run) the references."""
    causal = row["causal"]
    fns = {"fast": lambda: fast(q, k, v, causal=causal)}
    if fa3 is not None:
        fns["fa3"] = lambda: fa3(q, k, v, causal=causal)
    if not bench.DRY:
        _add_references(bench, fns, row, q, k, v)
    return fns


def _chapter_row(bench) -> dict:
    """The chapter's one-head fp32 kernel, timed on one head of S = 4096, D = 64."""
    chapter = bench.load("01").flash_attention
    q, k, v = (torch.randn(4096, 64, device="cuda") for _ in range(3))
    t = bench.time_ms({"chapter": lambda: chapter(q, k, v, BLOCK_M=64, BLOCK_N=64)}, rounds=3)[
        "chapter"
    ]
    return {
        "kernel": "01 chapter kernel, one head fp32",
        "S": 4096,
        "D": 64,
        "ms": t["ms"],
        "spread": t["spread"],
        "tflops": 4 * 4096 * 4096 * 64 / t["ms"] / 1e9,
    }


ATTENTION_HOST_SHAPE = (1, 8, 128)  # (B, H, S) of the host timings: the GPU waits for the host


def _attention_host(bench, fast, fa3, dtype, D: int, causal: bool) -> dict:
    """Host microseconds per call (``_host_us``) of 04's and 07's wrappers, of SDPA and of a
    bare launch with their arguments, at ATTENTION_HOST_SHAPE with the row's dtype, D and
    causality."""
    B, H, S = (1, 1, 16) if bench.DRY else ATTENTION_HOST_SHAPE
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
        found.update(bench.drop_if_failing(fns, "fa3"))
    found.update({f"{name}_host_us_per_call": us for name, us in bench.host_us(fns).items()})
    return found


def attention_rows(bench, quick: bool, graded_only: bool = False) -> list[dict]:
    module04 = bench.load("04")
    fast = module04.fast_attention
    fa3 = None
    if not bench.DRY and torch.cuda.get_device_capability()[0] == 9:
        fa3 = bench.load("07").fa3_attention
    rows = []
    cases = _attention_cases(bench, quick, graded_only)
    for dt, D, causal, S in cases:
        B, H = (16384 // S, 2048 // D) if not bench.DRY else (1, 2)
        dtype = getattr(torch, dt)
        q, k, v = (torch.randn(B, H, S, D, device=runtime.DEVICE, dtype=dtype) for _ in range(3))
        flops = 4 * B * H * S * S * D / (2 if causal else 1)
        row = {"dtype": dt, "D": D, "S": S, "B": B, "H": H, "causal": causal}
        fns = _kernels_to_time(bench, fast, fa3, row, q, k, v)
        for name, t in bench.time_ms(fns).items():
            row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
            row[f"{name}_tflops"] = flops / t["ms"] / 1e9
        for name in ("fast", "fa3"):
            for base in [b for b in fns if b.startswith("sdpa")]:
                if f"{name}_ms" in row:
                    row[f"{name}_vs_{base}"] = row[f"{base}_ms"] / row[f"{name}_ms"]
        row.update(_attention_host(bench, fast, fa3, dtype, D, causal))
        if dt == "bfloat16":
            shape = {"B": B, "H": H, "S": S, "D": D, "causal": causal}
            graded = bench.as_graded("04", module04.attention_fwd_kernel, shape)
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
            print(bench.graded_line(row["as_graded"]), flush=True)
        del q, k, v, fns  # the timed functions hold the inputs too
    # The chapter's one-head fp32 kernel, for scale (one head of S = 4096, D = 64).
    if not bench.DRY and not graded_only:
        rows.append(_chapter_row(bench))
    return rows


def _attention_host_rows(bench) -> list[dict]:
    """04's wrapper, and 07's where this GPU runs it, against SDPA and a bare launch."""
    rows = []
    B, H, S = (1, 1, 16) if bench.DRY else ATTENTION_HOST_SHAPE
    q, k, v = (torch.randn(B, H, S, 64, device=runtime.DEVICE, dtype=torch.bfloat16) for _ in "qkv")
    if bench.DRY:
        q, k, v = (x.half() for x in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    floor = _attention_floor(q, k, v, torch.empty_like(q), False)
    wrappers = [("04 fast_attention", bench.load("04"))]
    if not bench.DRY and torch.cuda.get_device_capability()[0] == 9:
        wrappers.append(("07 fa3_attention", bench.load("07")))
    for name, module in wrappers:
        fn = getattr(module, name.split()[1])
        fns = {
            "fast": lambda fn=fn: fn(q, k, v),
            "torch": lambda: sdpa(q, k, v),
            "launch_floor": floor,
            # The wrapper's parts (both share kata.kinds.bhsd_attention.run_fast_attention): the
            # checks it makes on every call, its one allocation (the output) and its launch
            # (below), of which the descriptor scratch the launcher allocates is a part.
            "checks": lambda: bhsd_attention.usual_fast_attention_inputs(q, k, v),
            "one_allocation": lambda: torch.empty_like(q),
        }
        shape = {"B": B, "H": H, "S": S, "D": 64, "dtype": str(q.dtype).removeprefix("torch.")}
        failed = bench.drop_if_failing(fns, "fast")
        if failed:  # 07 is a showcase: its failure is reported, and the rest still measured
            rows.append({"wrapper": name, **shape, **failed})
            continue
        out = torch.empty_like(q)
        persistent = name.startswith("07")  # 07's wrapper launches on a persistent grid
        fns["cached_launch"] = lambda module=module, out=out, persistent=persistent: (
            bhsd_attention.cached_attention_launch(
                module.attention_fwd_kernel, q, k, v, out, False, persistent
            )
        )
        sizes = scratch_requests(fns["fast"])
        if sizes:  # the scratch the launch asks for, as the launcher does, every call
            stream = None if bench.DRY else torch.cuda.current_stream().cuda_stream
            fns["descriptor_scratch"] = lambda sizes=sizes, stream=stream: [
                bhsd_attention._descriptor_scratch(n, 128, stream) for n in sizes
            ]
        row = bench.host_row(name, shape, fns)
        row["descriptor_scratch_bytes_per_call"] = sum(sizes)
        rows.append(row)

    return rows


def rows(bench, *, quick: bool, graded_only: bool, copy_tbps: float) -> dict[str, list[dict]]:
    return {"attention": attention_rows(bench, quick, graded_only)}


def host_rows(bench) -> list[dict]:
    return _attention_host_rows(bench)


PANELS = 2  # the bench figure's panels: bf16 TFLOP/s against S, at D = 64 and D = 128


def plot(data: dict, axes: list) -> None:
    for a, D in zip(axes, (64, 128)):
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
        if a.get_legend_handles_labels()[0]:  # a dry run has no bf16 rows to draw
            a.legend(fontsize=6, ncol=2)
