"""Experiment (issue 29, item 3): 07 with its query tile's Q in two buffers instead of one.

Profiled on an H100 at D = 64, S = 1024, causal (``docs/measurements/h100_attention_ncu_persistent.json``),
07 spent 2.35 cycles per issued instruction in long-scoreboard stalls to cuDNN's 0.52, 1.8 of
its 3.3 extra cycles. An item there is short (query tiles j and 7 - j read 9 key tiles
together), and each query tile begins by waiting for its Q: with one buffer, the producer may
load the next Q only once both consumers have the last scores of the tile before. With two,
it loads the next Q as soon as it has queued the current tile's last K and V, so that Q is
there when the consumers turn to it. Everything else is 07's: the same partitions, ``_attend``,
``_pair`` and ``_walk``, 07's count of programs a head. A second Q costs 16 KB of shared memory
at D = 64 and 32 KB at D = 128 (then 229,480 of the 232,448 bytes a block may have on sm_90).

The checks run the variant into NaN at ragged S (1000 and 1100, on 1 and 2 programs a head, so
that a program runs items of several heads and both buffers turn over) and at the timed shapes
at 07's count, each against SDPA in fp32 with 04's tolerance and bit for bit against 07 on its
tile grid. The timings put the variant beside 07 and SDPA's cuDNN backend, in one process.

    python3 scripts/fa3_q_buffers.py --out DIR                    # Hopper GPU: check, then time
    python3 scripts/fa3_q_buffers.py --compile-only [--out DIR]   # no GPU: sm_90 by ptxas

Not yet run on a GPU: written, and compiled for sm_90 on the CPU (Triton 3.6: 168 registers and
the spills of 07 at every compile shape, 114,792 and 229,480 bytes of shared memory at D = 64
and 128), in the session that took the profile, whose GPU time was spent.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from kata import runtime  # noqa: E402

# Before any kernel is defined, as in fa3_persistent.py (which this script borrows from).
runtime.configure("compiler" if "--compile-only" in sys.argv else None)

import fa3_persistent as persistent  # noqa: E402
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
from kata.kinds import bhsd_attention  # noqa: E402

FA3 = persistent.FA3
CONFIG = FA3.CONFIGS[0]
STAGES = FA3.STAGES
Q_BUFFERS = gl.constexpr(2)


@gluon.jit
def _q2_producer(
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
    H,
    S,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
    CAUSAL: gl.constexpr,
):
    """07's producer, but query tile t's Q goes to buffer t % Q_BUFFERS, its
    (t // Q_BUFFERS)-th use, so it waits only for the tile Q_BUFFERS before to be done with it."""
    n_m = gl.cdiv(S, BLOCK_M)
    i = 0
    t = 0
    first, step = FA3._walk()
    for w in range(first, (n_m + 1) // 2 * gl.num_programs(1), step):
        b, h, high, low, count = FA3._pair(w, n_m, H)
        for half in range(count):
            m0 = (high - half * (high - low)) * BLOCK_M
            qb = t % Q_BUFFERS
            mbarrier.wait(q_empty.index(qb), ((t // Q_BUFFERS) & 1) ^ 1)
            mbarrier.expect(q_full.index(qb), q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(
                q_desc,
                [b, h, m0, 0],
                q_full.index(qb),
                q_smem.index(qb).reshape(q_desc.block_type.shape),
            )
            for n0 in range(0, FA3._key_end(m0, S, BLOCK_M, CAUSAL), BLOCK_N):
                s = i % STAGES
                parity = ((i // STAGES) & 1) ^ 1
                mbarrier.wait(k_empty.index(s), parity)
                mbarrier.expect(k_full.index(s), k_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    k_desc,
                    [b, h, n0, 0],
                    k_full.index(s),
                    k_smem.index(s).reshape(k_desc.block_type.shape),
                )
                mbarrier.wait(v_empty.index(s), parity)
                mbarrier.expect(v_full.index(s), v_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    v_desc,
                    [b, h, n0, 0],
                    v_full.index(s),
                    v_smem.index(s).reshape(v_desc.block_type.shape),
                )
                i += 1
            t += 1


@gluon.jit
def _q2_consumer(
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
    H,
    S,
    sm_scale,
    WHICH: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    CAUSAL: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    STAGES: gl.constexpr,
):
    """07's consumer, reading query tile t's Q from buffer t % Q_BUFFERS."""
    dtype: gl.constexpr = o_desc.dtype
    o_smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, HEAD_DIM], dtype)
    o_smem = gl.allocate_shared_memory(dtype, [64, HEAD_DIM], o_smem_layout)
    qk_scale = sm_scale * 1.4426950408889634
    n_m = gl.cdiv(S, BLOCK_M)
    c = 0
    t = 0
    first, step = FA3._walk()
    for w in range(first, (n_m + 1) // 2 * gl.num_programs(1), step):
        b, h, high, low, count = FA3._pair(w, n_m, H)
        for half in range(count):
            m0 = (high - half * (high - low)) * BLOCK_M
            n_tiles = gl.cdiv(FA3._key_end(m0, S, BLOCK_M, CAUSAL), BLOCK_N)
            qb = t % Q_BUFFERS
            mbarrier.wait(q_full.index(qb), (t // Q_BUFFERS) & 1)
            out = FA3._attend(
                q_smem.index(qb).slice(WHICH * 64, 64, dim=0),
                k_smem,
                v_smem,
                k_full,
                v_full,
                k_empty,
                v_empty,
                q_empty.index(qb),
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
            tma.store_wait(pendings=0)
            o_smem.store(out.to(dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(
                o_desc, [b, h, m0 + WHICH * 64, 0], o_smem.reshape(o_desc.block_type.shape)
            )
            c += n_tiles
            t += 1
    tma.store_wait(pendings=0)


@triton.autotune(configs=FA3.CONFIGS, key=["S", "HEAD_DIM", "CAUSAL"])
@gluon.jit
def q2_fwd_kernel(
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
    """07's ``attention_fwd_kernel`` with Q in two buffers."""
    gl.static_assert(BLOCK_M == 2 * 64, "two consumer warpgroups of 64 rows each")
    gl.static_assert(TMA, "07 loads every tile with a TMA copy")
    dtype: gl.constexpr = q_ptr.dtype.element_ty
    B = gl.num_programs(1) // H
    stride_qb, stride_qh, stride_qs = FA3._descriptor_strides(
        stride_qb, stride_qh, stride_qs, B, H, S, HEAD_DIM
    )
    stride_kb, stride_kh, stride_ks = FA3._descriptor_strides(
        stride_kb, stride_kh, stride_ks, B, H, S, HEAD_DIM
    )
    stride_vb, stride_vh, stride_vs = FA3._descriptor_strides(
        stride_vb, stride_vh, stride_vs, B, H, S, HEAD_DIM
    )
    stride_ob, stride_oh, stride_os = FA3._descriptor_strides(
        stride_ob, stride_oh, stride_os, B, H, S, HEAD_DIM
    )
    # One descriptor per (B, H, S, D) tensor, made once: the block is one head's rows, so a
    # tile past S reads zeros and a store past S is clipped, as per-head descriptors would.
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, BLOCK_M, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, BLOCK_N, HEAD_DIM], dtype)
    o_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, 64, HEAD_DIM], dtype)
    q_desc = tma.make_tensor_descriptor(
        q_ptr,
        [B, H, S, HEAD_DIM],
        [stride_qb, stride_qh, stride_qs, 1],
        [1, 1, BLOCK_M, HEAD_DIM],
        q_layout,
    )
    k_desc = tma.make_tensor_descriptor(
        k_ptr,
        [B, H, S, HEAD_DIM],
        [stride_kb, stride_kh, stride_ks, 1],
        [1, 1, BLOCK_N, HEAD_DIM],
        kv_layout,
    )
    v_desc = tma.make_tensor_descriptor(
        v_ptr,
        [B, H, S, HEAD_DIM],
        [stride_vb, stride_vh, stride_vs, 1],
        [1, 1, BLOCK_N, HEAD_DIM],
        kv_layout,
    )
    o_desc = tma.make_tensor_descriptor(
        out_ptr,
        [B, H, S, HEAD_DIM],
        [stride_ob, stride_oh, stride_os, 1],
        [1, 1, 64, HEAD_DIM],
        o_layout,
    )

    # The buffers are 2-D, as the products read them; a TMA copy sees them reshaped to its
    # rank-4 block (the same swizzle: it depends on the rows' bytes only).
    q_smem = gl.allocate_shared_memory(
        dtype,
        [Q_BUFFERS, BLOCK_M, HEAD_DIM],
        gl.NVMMASharedLayout.get_default_for([BLOCK_M, HEAD_DIM], dtype),
    )
    ring_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], ring_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], ring_layout)
    bar_layout: gl.constexpr = mbarrier.MBarrierLayout()
    q_full = gl.allocate_shared_memory(gl.int64, [Q_BUFFERS, 1], bar_layout)
    q_empty = gl.allocate_shared_memory(gl.int64, [Q_BUFFERS, 1], bar_layout)
    k_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    for qb in gl.static_range(Q_BUFFERS):
        mbarrier.init(q_full.index(qb), count=1)
        mbarrier.init(q_empty.index(qb), count=2)  # both consumers release Q
    for s in gl.static_range(STAGES):
        mbarrier.init(k_full.index(s), count=1)
        mbarrier.init(v_full.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=2)
        mbarrier.init(v_empty.index(s), count=2)
    fence_async_shared()

    gl.warp_specialize(
        [
            (
                _q2_producer,
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
                    H,
                    S,
                    BLOCK_M,
                    BLOCK_N,
                    STAGES,
                    CAUSAL,
                ),
            ),
            (
                _q2_consumer,
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
                    H,
                    S,
                    sm_scale,
                    FA3.FIRST,
                    HEAD_DIM,
                    CAUSAL,
                    BLOCK_M,
                    BLOCK_N,
                    STAGES,
                ),
            ),
            (
                _q2_consumer,
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
                    H,
                    S,
                    sm_scale,
                    FA3.SECOND,
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


# ---- compile only ----------------------------------------------------------------------------


def _compiled(found: dict) -> str:
    if "error" in found:
        return f"FAILED {found['error'][:300]}"
    return (
        f"{found['registers']} regs, spills {found['spill_store_bytes']}/"
        f"{found['spill_load_bytes']} B, {found['shared_bytes']} B shared, "
        f"{found['wgmma_waits_le_1']} waits leave a wgmma in flight"
    )


def compile_only() -> list[dict]:
    """07 and the variant at fa3_persistent.py's compile shapes (bf16, B = 2, H = 3)."""
    rows = []
    for D, causal, S in persistent.COMPILE_CASES:
        q = torch.empty(2, 3, S, D, dtype=torch.bfloat16)
        args, kwargs = persistent.launch_args(q, q, q, q, causal)
        kwargs.update(CONFIG.all_kwargs())
        row = {"D": D, "causal": causal, "S": S}
        for name, kernel in (("fa3", FA3.attention_fwd_kernel.fn), ("q2", q2_fwd_kernel.fn)):
            try:
                found = persistent.compile_sm90(kernel, args, kwargs)
            except Exception as e:  # noqa: BLE001 (report where it fails, go on)
                found = {"error": f"{type(e).__name__}: {str(e)[:2000]}"}
            row[name] = found
            print(f"D={D} causal={causal} S={S} {name}: {_compiled(found)}", flush=True)
        rows.append(row)
    return rows


# ---- GPU: check against SDPA and 07's tile grid, then time beside 07 and cuDNN ---------------


def check() -> list[dict]:
    """The variant into NaN, against SDPA in fp32 with 04's tolerance, and bit for bit against
    07 on its tile grid: ragged S on 1 and 2 programs a head, then the timed shapes on 07's
    count."""
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    atol, rtol = bhsd_attention.INTERFACE.tolerance("out", "bfloat16")
    cases = [
        {"D": D, "causal": causal, "B": 3, "H": 5, "S": S, "programs": p}
        for D in (64, 128)
        for causal in (False, True)
        for S in (1000, 1100)
        for p in (1, 2)
    ]
    cases += [
        {"D": D, "causal": causal, "B": 16384 // S, "H": 2048 // D, "S": S, "programs": None}
        for D in (64, 128)
        for causal in (False, True)
        for S in persistent.TIMED_S
    ]
    rows = []
    for case in cases:
        D, causal, B, H, S, programs = (case[k] for k in ("D", "causal", "B", "H", "S", "programs"))
        torch.manual_seed(0)
        q, k, v = persistent._inputs(B, H, S, D, None)
        out, tiles = (torch.full_like(q, float("nan")) for _ in range(2))
        label = f"q2 D={D} causal={causal} B={B} H={H} S={S} on {programs or '07s count'}"
        watchdog = threading.Timer(persistent.HANG_S, persistent._hung, (label,))
        watchdog.start()
        persistent.launch(q2_fwd_kernel, q, k, v, out, causal, programs)
        torch.cuda.synchronize()
        watchdog.cancel()
        persistent.launch(FA3.attention_fwd_kernel, q, k, v, tiles, causal, 0)
        ref = sdpa(q.float(), k.float(), v.float(), is_causal=causal)
        err = (out.float() - ref).abs()
        row = {
            **case,
            "max_err_vs_fp32": float(err.nan_to_num(float("inf")).max()),
            "within_tolerance": bool((err <= atol + rtol * ref.abs()).all()),
            "equal_to_tile_grid": bool(torch.equal(out, tiles)),
        }
        rows.append(row)
        print(
            f"check {label:<60} max err {row['max_err_vs_fp32']:.1e}"
            + ("" if row["equal_to_tile_grid"] else "  NOT EQUAL TO THE TILE GRID")
            + ("" if row["within_tolerance"] else "  OUT OF TOLERANCE"),
            flush=True,
        )
    return rows


def time_rows() -> list[dict]:
    """07 (its wrapper), the variant on 07's count and SDPA's cuDNN backend, timed in turn."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    rows = []
    for D in (64, 128):
        for causal in (False, True):
            for S in persistent.TIMED_S:
                B, H = 16384 // S, 2048 // D
                q, k, v = (
                    torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in "qkv"
                )
                out = torch.empty_like(q)

                def cudnn(q=q, k=k, v=v, causal=causal):
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        return sdpa(q, k, v, is_causal=causal)

                fns = {
                    "fa3": functools.partial(FA3.fa3_attention, q, k, v, causal=causal),
                    "q2": functools.partial(
                        persistent.launch, q2_fwd_kernel, q, k, v, out, causal, None
                    ),
                    "sdpa_cudnn": cudnn,
                }
                row = {"D": D, "causal": causal, "B": B, "H": H, "S": S}
                for name, t in bench.time_ms(fns).items():
                    row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
                row["q2_vs_fa3"] = row["fa3_ms"] / row["q2_ms"]
                row["q2_vs_cudnn"] = row["sdpa_cudnn_ms"] / row["q2_ms"]
                row["fa3_vs_cudnn"] = row["sdpa_cudnn_ms"] / row["fa3_ms"]
                rows.append(row)
                print(
                    f"D={D} causal={causal} S={S}: q2 / 07 {row['q2_vs_fa3']:.3f}x, q2 / cuDNN "
                    f"{row['q2_vs_cudnn']:.3f}x, 07 / cuDNN {row['fa3_vs_cudnn']:.3f}x "
                    f"(spreads {row['q2_spread']:.1%}, {row['fa3_spread']:.1%}, "
                    f"{row['sdpa_cudnn_spread']:.1%})",
                    flush=True,
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="folder for fa3_q_buffers.json")
    parser.add_argument(
        "--compile-only", action="store_true", help="compile for sm_90 on the CPU, launch nothing"
    )
    args = parser.parse_args(argv)
    result: dict = {"versions": runtime.versions()}
    if args.compile_only:
        result["compiled"] = compile_only()
    else:
        if runtime.BACKEND != "cuda" or torch.cuda.get_device_capability()[0] != 9:
            sys.exit("fa3_q_buffers: needs a Hopper GPU (sm_90). Without one: --compile-only")
        result["device"] = torch.cuda.get_device_name()
        result["checks"] = check()
        good = all(r["within_tolerance"] and r["equal_to_tile_grid"] for r in result["checks"])
        if good:
            result["timings"] = time_rows()
        else:
            print("fa3_q_buffers: a check failed, so nothing was timed")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "fa3_q_buffers.json").write_text(json.dumps(result, indent=1) + "\n")
    checks = result.get("checks", [])
    return 0 if all(r["within_tolerance"] and r["equal_to_tile_grid"] for r in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
