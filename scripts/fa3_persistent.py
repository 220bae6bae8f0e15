"""Experiment (issue 29, item 3): showcase 07's persistent grid, beside the one it replaced.

07 launched one program per (128-row query tile, batch * head) until issue 29; each built four
tensor descriptors on the device, initialised its barriers and loaded Q before its first
product, and at S = 1024 had only 8 key tiles to spread that over. Two persistent schedules were
tried, with the same math and partitions (07's ``_attend`` and ``_key_end``):

* **within a head** (``within_head_fwd_kernel`` here, 07 at commit ce50bbc): a few programs a
  head, each looping over every so-many-th item of its own head (a query tile; a pair of them
  when causal), with per-head descriptors. On an H100 it ran 1.32-1.44x the tile grid at
  D = 64, S = 1024 but 0.76x at D = 128, where the 132 heads in flight (one program each) hold
  66 MB of K and V, more than the 50 MB L2;
* **over every head** (07 now): every program loops over items of every head, an item a pair
  of query tiles of one head (tile n_m - 1 - j then tile j), the pairs of a head adjacent and
  dealt out in the order the programs start, so that the programs in flight share a few heads'
  K and V in the L2; one rank-4 descriptor per tensor serves every head.

The checks run 07 on 1 and 2 programs a head and at its own count, into NaN, against SDPA in
fp32 with 04's tolerance and bit for bit against 07 on its tile grid (04's launch, as the
grader's), at ragged S and at strides that 04's host checks allow and a rank-4 descriptor cannot
take as given. The timings put 07 (at its count and at 1, 2 and 4 programs a head) beside the
within-head schedule (at 1, 2 and 4), 07 on its tile grid, and cuDNN. Usage:

    python3 scripts/fa3_persistent.py --out DIR   # Hopper GPU: check, then time
    python3 scripts/fa3_persistent.py --check-only   # Hopper GPU: the checks alone
    python3 scripts/fa3_persistent.py --compile-only [--out DIR]   # no GPU: sm_90 by ptxas

Both write DIR/fa3_persistent.json when --out is given. S is compiled at 1000 and 1024 only:
Triton specialises an integer on its divisibility by 16, so S = 4096 compiles as 1024 does.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kata import runtime  # noqa: E402

# Chosen before any kernel is defined: the compile-only mode makes kernels for Triton's compiler
# (no GPU needed), the GPU mode for the GPU. Triton reads the choice when a kernel is decorated.
if __name__ == "__main__":
    runtime.configure("compiler" if "--compile-only" in sys.argv else None)
else:
    runtime.configure()

import torch  # noqa: E402
import triton  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (  # noqa: E402
    fence_async_shared,
    mbarrier,
    tma,
)

from kata.authoring import bench  # noqa: E402
from kata.authoring.sass import disassemble  # noqa: E402
from kata.kinds import bhsd_attention  # noqa: E402

FA3 = bench.load("07")  # the partitions' shared steps and the configuration are 07's
CONFIG = FA3.CONFIGS[0]
STAGES = FA3.STAGES
FIRST, SECOND = FA3.FIRST, FA3.SECOND


@gluon.jit
def _item(w, n_m, CAUSAL: gl.constexpr):
    """Work item w of a head with n_m query tiles as (first tile, last tile, 1 or 2 tiles).
    Causal: tiles n_m - 1 - w and w, the longer first, so that every item costs n_m + 1 key
    tiles (the middle tile of an odd n_m is an item alone). Otherwise tile w alone."""
    if CAUSAL:
        first = n_m - 1 - w
    else:
        first = w
    return first, w, gl.minimum(first - w, 1) + 1


@gluon.jit
def _within_head_producer(
    q_desc,
    k_desc,
    v_desc,
    q_smem,
    k_smem,
    v_smem,
    q_full,
    q_empty,
    k_full,
    v_full,
    k_empty,
    v_empty,
    S,
    n_items,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    CAUSAL: gl.constexpr,
):
    """For each query tile of this program: its Q, then its key and value tiles. ``i`` counts
    the K/V tiles streamed over all items: tile i goes to stage i % STAGES, its (i // STAGES)-th
    use. K and V have separate "empty" barriers: a K tile is free once its scores are in
    registers, while its V tile stays in use until the next iteration's P @ V has finished."""
    n_m = gl.cdiv(S, BLOCK_M)
    i = 0
    n_queries = 0
    for w in range(gl.program_id(0), n_items, gl.num_programs(0)):
        first, last, count = _item(w, n_m, CAUSAL)
        for t in range(count):
            m0 = (first + t * (last - first)) * BLOCK_M
            # Q's one buffer is free once both consumers have the last scores of the tile before.
            mbarrier.wait(q_empty, (n_queries & 1) ^ 1)  # a fresh barrier counts as released
            mbarrier.expect(q_full, q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [m0, 0], q_full, q_smem)
            for n0 in range(0, FA3._key_end(m0, S, BLOCK_M, CAUSAL), BLOCK_N):
                s = i % STAGES
                parity = ((i // STAGES) & 1) ^ 1
                mbarrier.wait(k_empty.index(s), parity)
                mbarrier.expect(k_full.index(s), k_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(k_desc, [n0, 0], k_full.index(s), k_smem.index(s))
                mbarrier.wait(v_empty.index(s), parity)
                mbarrier.expect(v_full.index(s), v_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(v_desc, [n0, 0], v_full.index(s), v_smem.index(s))
                i += 1
            n_queries += 1


@gluon.jit
def _within_head_consumer(
    o_desc,
    q_smem,
    k_smem,
    v_smem,
    q_full,
    q_empty,
    k_full,
    v_full,
    k_empty,
    v_empty,
    S,
    n_items,
    sm_scale,
    WHICH: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    CAUSAL: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
):
    """One warpgroup's 64 rows of each query tile of this program. ``c`` counts the K/V tiles
    consumed before the query tile (the producer's ``i`` at its start)."""
    o_smem = gl.allocate_shared_memory(o_desc.dtype, [64, HEAD_DIM], o_desc.layout)
    q = q_smem.slice(WHICH * 64, 64, dim=0)
    qk_scale = sm_scale * 1.4426950408889634
    n_m = gl.cdiv(S, BLOCK_M)
    c = 0
    n_queries = 0
    for w in range(gl.program_id(0), n_items, gl.num_programs(0)):
        first, last, count = _item(w, n_m, CAUSAL)
        for t in range(count):
            m0 = (first + t * (last - first)) * BLOCK_M
            n_tiles = gl.cdiv(FA3._key_end(m0, S, BLOCK_M, CAUSAL), BLOCK_N)
            mbarrier.wait(q_full, n_queries & 1)
            out = FA3._attend(
                q,
                k_smem,
                v_smem,
                k_full,
                v_full,
                k_empty,
                v_empty,
                q_empty,
                c,
                n_tiles,
                m0 + WHICH * 64,
                S,
                qk_scale,
                HEAD_DIM,
                CAUSAL,
                BLOCK_N,
                STAGES,
            )
            # Through shared memory to a TMA store, which clips the rows past S. The store of
            # the tile before must have read o_smem first; waiting here rather than right after
            # it lets that store overlap this tile's products.
            tma.store_wait(pendings=0)
            o_smem.store(out.to(o_desc.dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(o_desc, [m0 + WHICH * 64, 0], o_smem)
            c += n_tiles
            n_queries += 1
    tma.store_wait(pendings=0)


@triton.autotune(configs=FA3.CONFIGS, key=["S", "HEAD_DIM", "CAUSAL"])
@gluon.jit
def within_head_fwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    stride_qb,
    stride_qh,
    stride_qs,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    stride_ob,
    stride_oh,
    stride_os,
    H,
    S,
    sm_scale,
    HEAD_DIM: gl.constexpr,
    CAUSAL: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    TMA: gl.constexpr = True,
):
    gl.static_assert(BLOCK_M == 2 * 64, "two consumer warpgroups of 64 rows each")
    gl.static_assert(TMA, "07 loads every tile with a TMA copy")
    dtype: gl.constexpr = q_ptr.dtype.element_ty
    bh = gl.program_id(1)
    b, h = bh // H, bh % H
    n_m = gl.cdiv(S, BLOCK_M)
    if CAUSAL:  # pairs of query tiles
        n_items = (n_m + 1) // 2
    else:
        n_items = n_m

    # One descriptor per (S, D) matrix of this head, made on the device, once per program.
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    o_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, HEAD_DIM], dtype)
    q_desc = tma.make_tensor_descriptor(
        q_ptr + b.to(gl.int64) * stride_qb + h * stride_qh,
        [S, HEAD_DIM],
        [stride_qs, 1],
        [BLOCK_M, HEAD_DIM],
        q_layout,
    )
    k_desc = tma.make_tensor_descriptor(
        k_ptr + b.to(gl.int64) * stride_kb + h * stride_kh,
        [S, HEAD_DIM],
        [stride_ks, 1],
        [BLOCK_N, HEAD_DIM],
        kv_layout,
    )
    v_desc = tma.make_tensor_descriptor(
        v_ptr + b.to(gl.int64) * stride_vb + h * stride_vh,
        [S, HEAD_DIM],
        [stride_vs, 1],
        [BLOCK_N, HEAD_DIM],
        kv_layout,
    )
    o_desc = tma.make_tensor_descriptor(
        out_ptr + b.to(gl.int64) * stride_ob + h * stride_oh,
        [S, HEAD_DIM],
        [stride_os, 1],
        [64, HEAD_DIM],
        o_layout,
    )

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    bar_layout: gl.constexpr = mbarrier.MBarrierLayout()
    q_full = gl.allocate_shared_memory(gl.int64, [1], bar_layout)
    q_empty = gl.allocate_shared_memory(gl.int64, [1], bar_layout)
    k_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    mbarrier.init(q_full, count=1)
    mbarrier.init(q_empty, count=2)  # both consumers release Q, as every stage
    for s in gl.static_range(STAGES):
        mbarrier.init(k_full.index(s), count=1)
        mbarrier.init(v_full.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=2)
        mbarrier.init(v_empty.index(s), count=2)
    fence_async_shared()

    # The partitions' arguments are written out: a tuple held in a variable would lose its
    # constexpr entries (BLOCK_N, STAGES, ...), which the layouts need.
    gl.warp_specialize(
        [
            (
                _within_head_producer,
                (
                    q_desc,
                    k_desc,
                    v_desc,
                    q_smem,
                    k_smem,
                    v_smem,
                    q_full,
                    q_empty,
                    k_full,
                    v_full,
                    k_empty,
                    v_empty,
                    S,
                    n_items,
                    BLOCK_M,
                    BLOCK_N,
                    STAGES,
                    CAUSAL,
                ),
            ),
            (
                _within_head_consumer,
                (
                    o_desc,
                    q_smem,
                    k_smem,
                    v_smem,
                    q_full,
                    q_empty,
                    k_full,
                    v_full,
                    k_empty,
                    v_empty,
                    S,
                    n_items,
                    sm_scale,
                    FIRST,
                    HEAD_DIM,
                    CAUSAL,
                    BLOCK_M,
                    BLOCK_N,
                    STAGES,
                ),
            ),
            (
                _within_head_consumer,
                (
                    o_desc,
                    q_smem,
                    k_smem,
                    v_smem,
                    q_full,
                    q_empty,
                    k_full,
                    v_full,
                    k_empty,
                    v_empty,
                    S,
                    n_items,
                    sm_scale,
                    SECOND,
                    HEAD_DIM,
                    CAUSAL,
                    BLOCK_M,
                    BLOCK_N,
                    STAGES,
                ),
            ),
        ],
        [4, 4],
        [240, 240],
    )


# ---- host side ---------------------------------------------------------------------------------


# The kernels checked, timed and compiled: 07 first, then the schedule it replaced.
KERNELS = {"fa3": FA3.attention_fwd_kernel, "within_head": within_head_fwd_kernel}


def launch_args(q, k, v, out, causal: bool) -> tuple:
    """(positional arguments, keywords) of one launch, as 04's grader passes them."""
    B, H, S, D = q.shape
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3])
    return (q, k, v, out, *strides, H, S, 1.0 / math.sqrt(D)), {"HEAD_DIM": D, "CAUSAL": causal}


def launch(kernel, q, k, v, out, causal: bool, programs: int | None) -> None:
    """``kernel`` on ``programs`` programs a head, or on its tile grid (a program per query
    tile, 04's launch) for 0; None: 07's own count (``persistent_programs``)."""
    bhsd_attention.cached_attention_launch(
        kernel, q, k, v, out, causal, programs != 0, programs=programs or None
    )


# ---- compile only: sm_90 on a machine without a GPU --------------------------------------------

COMPILE_CASES = [
    (D, causal, S) for D in (64, 128) for causal in (False, True) for S in (1000, 1024)
]


def _ptxas_report(ptx: str) -> dict:
    """Registers per thread, spill bytes and warnings from Triton's own ptxas, run again on the
    PTX with -v (Triton keeps no log when ptxas succeeds)."""
    from triton.backends.nvidia.compiler import get_ptxas

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        log = subprocess.run(
            [get_ptxas(90).path, "-v", "--gpu-name=sm_90a", str(src), "-o", str(src) + ".o"],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
    used = re.search(r"Used (\d+) registers", log)
    stores = re.search(r"(\d+) bytes spill stores", log)
    loads = re.search(r"(\d+) bytes spill loads", log)
    return {
        "registers": int(used.group(1)) if used else None,
        "spill_store_bytes": int(stores.group(1)) if stores else None,
        "spill_load_bytes": int(loads.group(1)) if loads else None,
        "ptxas_warnings": [line.strip() for line in log.splitlines() if "warning" in line.lower()],
    }


def _sass_counts(cubin: bytes) -> dict:
    """Counts in the SASS (Triton's bundled cuobjdump) that tell whether the products stay
    asynchronous and where registers spill: wgmma instructions, waits that leave one wgmma
    group in flight (07's pipelining), and local-memory loads and stores."""
    sass = disassemble(cubin)
    return {
        "hgmma": len(re.findall(r"\bHGMMA\.", sass)),
        "wgmma_waits_le_1": len(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1\b", sass)),
        "local_loads": len(re.findall(r"\bLDL\b", sass)),
        "local_stores": len(re.findall(r"\bSTL\b", sass)),
    }


def compile_sm90(kernel, args: tuple, kwargs: dict) -> dict:
    """Compile one launch of a Gluon kernel for sm_90 as its first launch would, without a GPU;
    its shared memory, warps, ptxas's registers, spills and warnings, and setmaxnreg's counts."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    kwargs = {**kwargs, "debug": False}
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(
        backend, kwargs, bound, specialization, options
    )
    # A Gluon kernel needs Gluon's source class: Triton's own sends it through the passes of
    # plain Triton's layouts, which did not finish in 10 minutes.
    src = GluonASTSource(kernel, signature, constexprs, attrs)
    compiled = triton.compile(src, target=target, options=options.__dict__)
    ptx = compiled.asm["ptx"]
    return {
        **_sass_counts(compiled.asm["cubin"]),
        "shared_bytes": compiled.metadata.shared,
        "warps": compiled.metadata.num_warps,
        # Each partition's registers, as warp specialization sets them (inc / dec to N).
        "setmaxnreg": sorted(
            set(re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32\s+(\d+)", ptx))
        ),
        **_ptxas_report(ptx),
    }


def compile_only(kernels: dict = KERNELS, dims: tuple = (64, 128)) -> list[dict]:
    """``kernels`` (07 and the within-head kernel) at every COMPILE_CASES shape of ``dims``
    (bf16, B = 2, H = 3), as their launches would compile them for an H100 / H200."""
    rows = []
    for D, causal, S in COMPILE_CASES:
        if D not in dims:
            continue
        q = torch.empty(2, 3, S, D, dtype=torch.bfloat16)
        args, kwargs = launch_args(q, q, q, q, causal)
        kwargs.update(CONFIG.all_kwargs())
        row = {"D": D, "causal": causal, "S": S}
        for name, kernel in kernels.items():
            try:
                row[name] = compile_sm90(kernel.fn, args, kwargs)
            except Exception as e:  # noqa: BLE001 (report where it fails, go on)
                row[name] = {"error": f"{type(e).__name__}: {str(e)[:2000]}"}
        rows.append(row)
        print(_compile_line(row), flush=True)
    return rows


def _compile_line(row: dict) -> str:
    parts = [f"D={row['D']:<3} causal={row['causal']!s:<5} S={row['S']:<5}"]
    for name, r in row.items():
        if name in ("D", "causal", "S"):
            continue
        if "error" in r:
            parts.append(f"{name}: FAILED {r['error'][:300]}")
            continue
        parts.append(
            f"{name}: {r['registers']} regs, setmaxnreg {r['setmaxnreg']}, spills "
            f"{r['spill_store_bytes']}/{r['spill_load_bytes']} B, {r['shared_bytes']} B shared, "
            f"{r['warps']} warps, {r['hgmma']} HGMMA ({r['wgmma_waits_le_1']} waits leave one in "
            f"flight), {r['local_loads']} LDL / {r['local_stores']} STL, "
            f"{len(r['ptxas_warnings'])} ptxas warnings"
        )
        parts += [f"    {w}" for w in r["ptxas_warnings"]]
    return "\n  ".join(parts)


# ---- GPU: check against SDPA and the tile grid, then time beside cuDNN ------------------------

TIMED_S = (1024, 4096)  # the bench's quick attention rows, B * S = 16384 and H * D = 2048


# A launch that has not finished in this long is taken for a deadlock of the barriers (the
# first launch of a shape includes its compilation, a few seconds).
HANG_S = 120
SWEEP = (1, 2, 4)  # programs a head at which both schedules are also timed


def _check_cases(kernels: dict, dims: tuple) -> list[dict]:
    """Each check's kernel, shape, programs a head (None: 07's count) and layout. First ragged
    S on 1 and 2 programs a head: a program runs items of several heads and of unequal length
    back to back (S = 1100 has an odd count of query tiles, whose middle one is an item alone),
    where a barrier's phase would go wrong first. Then, for 07, strides that 04's host checks
    allow and a rank-4 descriptor cannot take as given: a batch of one with a batch stride of
    7 elements, and K and V shared by every head (head stride 0). Then the timed shapes. 07's
    cases are those of the first of ``kernels``."""
    subject = next(iter(kernels))
    cases = []
    for D in dims:
        for causal in (False, True):
            shape = {"D": D, "causal": causal}
            for kernel in kernels:
                cases += [
                    {**shape, "kernel": kernel, "B": 3, "H": 5, "S": S, "programs": p}
                    for S in (1000, 1100)
                    for p in (1, 2)
                ]
            cases += [
                {
                    **shape,
                    "kernel": subject,
                    "B": 1,
                    "H": 3,
                    "S": 383,
                    "programs": 1,
                    "layout": "batch-stride-7",
                },
                {
                    **shape,
                    "kernel": subject,
                    "B": 2,
                    "H": 3,
                    "S": 383,
                    "programs": 1,
                    "layout": "kv-shared-by-heads",
                },
            ]
            cases += [
                {
                    **shape,
                    "kernel": subject,
                    "B": 16384 // S,
                    "H": 2048 // D,
                    "S": S,
                    "programs": None,
                }
                for S in TIMED_S
            ]
    return [{"layout": None, **case} for case in cases]


def _inputs(B, H, S, D, layout):
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
    if layout == "batch-stride-7":  # B = 1: the batch stride is never stepped
        q, k, v = (torch.as_strided(x, x.shape, (7, *x.stride()[1:])) for x in (q, k, v))
    elif layout == "kv-shared-by-heads":
        k, v = (x[:, :1].expand(B, H, S, D) for x in (k, v))
    return q, k, v


def _hung(label: str) -> None:
    print(
        f"\nfa3_persistent: {label} did not finish in {HANG_S} s: taken for a deadlock", flush=True
    )
    os._exit(3)


def check(kernels: dict = KERNELS, dims: tuple = (64, 128)) -> list[dict]:
    """Each case's output (into a NaN-filled tensor, so that a skipped tile shows) against SDPA
    in fp32 with 04's grader's tolerance, and bit for bit against 07 on its tile grid."""
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    atol, rtol = bhsd_attention.INTERFACE.tolerance("out", "bfloat16")
    block_m = CONFIG.kwargs["BLOCK_M"]
    rows = []
    for case in _check_cases(kernels, dims):
        D, causal, B, H, S, layout = (case[k] for k in ("D", "causal", "B", "H", "S", "layout"))
        torch.manual_seed(0)
        q, k, v = _inputs(B, H, S, D, layout)
        out, tiles = (torch.full_like(q, float("nan")) for _ in range(2))
        programs = case["programs"] or bhsd_attention.programs_per_head(q, block_m)
        label = (
            f"{case['kernel']} D={D} causal={causal} B={B} H={H} S={S} {layout or ''} "
            f"on {programs} a head"
        )
        watchdog = threading.Timer(HANG_S, _hung, (label,))
        watchdog.start()
        launch(kernels[case["kernel"]], q, k, v, out, causal, case["programs"])
        torch.cuda.synchronize()
        watchdog.cancel()
        launch(FA3.attention_fwd_kernel, q, k, v, tiles, causal, 0)
        ref = sdpa(q.float(), k.float(), v.float(), is_causal=causal)
        err = (out.float() - ref).abs()
        row = {
            **case,
            "programs": programs,
            "max_err_vs_fp32": float(err.nan_to_num(float("inf")).max()),
            "within_tolerance": bool((err <= atol + rtol * ref.abs()).all()),
            "tolerance": [atol, rtol],
            "tile_grid_max_err_vs_fp32": float((tiles.float() - ref).abs().max()),
            "equal_to_tile_grid": bool(torch.equal(out, tiles)),
        }
        if case["programs"] is None:  # 07's wrapper: its own output, the same launch
            row["wrapper_equal"] = bool(torch.equal(FA3.fa3_attention(q, k, v, causal), out))
        rows.append(row)
        print(
            f"check {label:<72} max err {row['max_err_vs_fp32']:.1e} (tile grid "
            f"{row['tile_grid_max_err_vs_fp32']:.1e})"
            + ("" if row["equal_to_tile_grid"] else "  NOT EQUAL TO THE TILE GRID")
            + ("" if row.get("wrapper_equal", True) else "  WRAPPER DIFFERS")
            + ("" if row["within_tolerance"] else "  OUT OF TOLERANCE"),
            flush=True,
        )
    return rows


def passed(row: dict) -> bool:
    return row["within_tolerance"] and row["equal_to_tile_grid"] and row.get("wrapper_equal", True)


def time_rows() -> list[dict]:
    """07 at its count and at SWEEP's, the within-head schedule at SWEEP's, 07 on its tile grid
    and SDPA's cuDNN backend, timed in turn by the bench's own helper."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    rows = []
    for D in (64, 128):
        for causal in (False, True):
            for S in TIMED_S:
                B, H = 16384 // S, 2048 // D
                q, k, v = (
                    torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in "qkv"
                )
                out = torch.empty_like(q)

                def cudnn(q=q, k=k, v=v, causal=causal):
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        return sdpa(q, k, v, is_causal=causal)

                fns = {
                    "fa3": lambda q=q, k=k, v=v, c=causal: FA3.fa3_attention(q, k, v, causal=c),
                    "fa3_tile_grid": lambda q=q, k=k, v=v, c=causal, o=out: launch(
                        FA3.attention_fwd_kernel, q, k, v, o, c, 0
                    ),
                    "sdpa_cudnn": cudnn,
                }
                n_m = triton.cdiv(S, CONFIG.kwargs["BLOCK_M"])
                for name, kernel in KERNELS.items():
                    items = (n_m + 1) // 2 if causal or name == "fa3" else n_m
                    for p in (p for p in SWEEP if p <= items):
                        fns[f"{name}_p{p}"] = functools.partial(
                            launch, kernel, q, k, v, out, causal, p
                        )
                flops = 4 * B * H * S * S * D / (2 if causal else 1)
                row = {"D": D, "causal": causal, "B": B, "H": H, "S": S}
                row["programs_per_head"] = bhsd_attention.programs_per_head(
                    q, CONFIG.kwargs["BLOCK_M"]
                )
                for name, t in bench.time_ms(fns).items():
                    row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
                    row[f"{name}_tflops"] = flops / t["ms"] / 1e9
                row["fa3_vs_cudnn"] = row["sdpa_cudnn_ms"] / row["fa3_ms"]
                row["fa3_vs_tile_grid"] = row["fa3_tile_grid_ms"] / row["fa3_ms"]
                within = [
                    row[f"within_head_p{p}_ms"] for p in SWEEP if f"within_head_p{p}_ms" in row
                ]
                row["fa3_vs_best_within_head"] = min(within) / row["fa3_ms"]
                for name in KERNELS:
                    for p in SWEEP:
                        if f"{name}_p{p}_ms" in row:
                            row[f"{name}_p{p}_vs_tile_grid"] = (
                                row["fa3_tile_grid_ms"] / row[f"{name}_p{p}_ms"]
                            )
                rows.append(row)
    return rows


def sweep(row: dict, name: str) -> str:
    return ", ".join(
        f"{row[f'{name}_p{p}_vs_tile_grid']:.2f}x" if f"{name}_p{p}_vs_tile_grid" in row else "-"
        for p in SWEEP
    )


def table(rows: list[dict]) -> str:
    lines = [
        "| D | causal | S | B x H | 07 TFLOP/s | cuDNN | 07 / cuDNN | 07 / tile grid "
        "| 07 / best within a head | 07 at 1, 2, 4 a head / tile grid (07's count) "
        "| within a head at 1, 2, 4 / tile grid | spreads (07, cuDNN) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['D']} | {'yes' if r['causal'] else 'no'} | {r['S']} | {r['B']} x {r['H']} "
            f"| {r['fa3_tflops']:.0f} | {r['sdpa_cudnn_tflops']:.0f} "
            f"| **{r['fa3_vs_cudnn']:.2f}x** | {r['fa3_vs_tile_grid']:.2f}x "
            f"| {r['fa3_vs_best_within_head']:.2f}x "
            f"| {sweep(r, 'fa3')} ({r['programs_per_head']}) | {sweep(r, 'within_head')} "
            f"| {r['fa3_spread']:.1%}, {r['sdpa_cudnn_spread']:.1%} |"
        )
    return "\n".join(lines)


def on_gpu(timed: bool = True) -> dict:
    """Refuse anywhere but a Hopper GPU; else check, and time only if every check passed."""
    if runtime.BACKEND != "cuda":
        sys.exit(
            f"fa3_persistent: needs a Hopper GPU (sm_90); kernels here run on {runtime.describe()}"
            " (Gluon does not run in the interpreter). Without a GPU: --compile-only"
        )
    major, minor = torch.cuda.get_device_capability()
    if major != 9:
        sys.exit(
            f"fa3_persistent: needs a Hopper GPU (sm_90); {torch.cuda.get_device_name()} is "
            f"sm_{major}{minor}"
        )
    result = {
        "device": torch.cuda.get_device_name(),
        "gpu": bench.gpu_state(),
        "versions": runtime.versions(),
        "checks": check(),
    }
    if not all(passed(r) for r in result["checks"]):
        print("fa3_persistent: a check failed, so nothing was timed")
    elif timed:
        result["timings"] = time_rows()
        print(table(result["timings"]))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="folder for fa3_persistent.json")
    parser.add_argument(
        "--compile-only", action="store_true", help="compile for sm_90 on the CPU, launch nothing"
    )
    parser.add_argument(
        "--check-only", action="store_true", help="on the GPU: the checks, no timings"
    )
    args = parser.parse_args(argv)
    if args.compile_only:
        result = {"versions": runtime.versions(), "compiled": compile_only()}
    else:
        result = on_gpu(timed=not args.check_only)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "fa3_persistent.json").write_text(json.dumps(result, indent=1) + "\n")
    if "checks" in result and not all(passed(r) for r in result["checks"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
