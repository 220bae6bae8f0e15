"""The split-KV rows of ``nox -s bench`` (the convention: ``grader.kinds``): 08's whole decode
against SDPA and unsplit, its merge against torch's, and the host time of its wrapper."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kata import runtime
from kata.kinds import split_kv_merge


@triton.jit
def _floor_split_partials(
    p0, p1, p2, p3, p4, p5, p6, n0, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, x0,
    C0: tl.constexpr, C1: tl.constexpr,
):  # fmt: skip
    pass


@triton.jit
def _floor_split_merge(
    p0, p1, p2, p3, p4, n0, n1, n2, n3, n4, n5, C0: tl.constexpr, C1: tl.constexpr
):  # fmt: skip
    pass


# Split-KV decoding (08): (B sequences, H heads, N cached keys, D) per row; one query row per
# (sequence, head). Batch 1 is where splitting the keys matters: 32 rows for 132 SMs.
SPLIT_KV_SHAPES = (
    (1, 32, 32768, 128),
    (8, 32, 16384, 128),
    (32, 32, 16384, 128),
    (32, 32, 32768, 128),
)


def _torch_merge(m, l, acc):  # noqa: E741
    top = m.amax(dim=1, keepdim=True)
    w = torch.exp(m - top)
    total = (w * l).sum(dim=1)
    return (w[:, :, None] * acc).sum(dim=1) / total[:, None], top[:, 0] + torch.log(total)


def split_kv_rows(bench, quick: bool) -> list[dict]:
    """08: the whole decode (the given partial kernel and the reference merge, through
    ``SplitKVMerge.timed``) against torch SDPA, one query row per (sequence, head) over the
    whole cache; the same decode unsplit (one program per row); and the merge alone against
    the merge written in torch. Throughput counts the K and V bytes read once."""
    module = bench.load("08")
    interface = split_kv_merge.INTERFACE
    merge = module.split_kv_merge_kernel
    shapes = [(1, 2, 256, 16)] if bench.DRY else SPLIT_KV_SHAPES[: 2 if quick else None]
    rows = []
    for dtype in ("bfloat16", "float32"):
        for B, H, N, D in shapes:
            if dtype == "float32" and B * H * N > 8 * 32 * 16384 and not bench.DRY:
                continue  # fp32 K and V of 17 and 34 GB there: the bf16 rows say what they would
            shape = {"B": B, "H": H, "N": N, "D": D, "dtype": dtype}
            decode, sdpa, label, _ = interface.timed(merge, shape)
            splits = split_kv_merge.default_num_splits(B * H, N)
            unsplit, _, _, _ = interface.timed(merge, {**shape, "splits": 1})
            moved = 2 * B * H * N * D * (2 if dtype == "bfloat16" else 4)
            row = {**shape, "mb_moved": moved / 1e6}
            row["max_err_vs_sdpa"] = float(
                (decode()[0].float() - sdpa().float().reshape(B * H, D)).abs().max()
            )
            fns = {"decode": decode, "decode_unsplit": unsplit, "sdpa": sdpa}
            for name, t in bench.time_ms(fns).items():
                row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
                row[f"{name}_tbps"] = moved / t["ms"] / 1e9
            row["speedup_vs_sdpa"] = row["sdpa_ms"] / row["decode_ms"]
            row["speedup_vs_unsplit"] = row["decode_unsplit_ms"] / row["decode_ms"]
            # The merge alone, on the partials of this decode.
            q = torch.randn(B * H, D, device=runtime.DEVICE, dtype=getattr(torch, dtype))
            kv = [torch.randn(B * H, N, D, device=runtime.DEVICE, dtype=q.dtype) for _ in "kv"]
            lengths = torch.full((B * H,), N, dtype=torch.int32, device=runtime.DEVICE)
            m, l, acc = split_kv_merge.launch_split_kv_partials(  # noqa: E741
                module.split_kv_partial_kernel, q, *kv, lengths, splits
            )
            del q, kv
            row["splits"] = m.shape[1]  # a whole number of key tiles each: maybe fewer than asked
            outs = (torch.empty(B * H, D, device=m.device), torch.empty(B * H, device=m.device))
            fns = {
                "merge": lambda: split_kv_merge.launch_split_kv_merge(
                    merge, m, l, acc, out=outs[0], lse=outs[1]
                ),
                "torch_merge": lambda: _torch_merge(m, l, acc),
            }
            for name, t in bench.time_ms(fns).items():
                row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
            rows.append(row)
            print(
                f"split-KV {label}: decode {row['decode_ms'] * 1e3:7.1f} us "
                f"({row['decode_tbps']:.2f} TB/s), unsplit {row['decode_unsplit_ms'] * 1e3:7.1f} us, "
                f"SDPA {row['sdpa_ms'] * 1e3:7.1f} us (x{row['speedup_vs_sdpa']:.2f}); merge "
                f"{row['merge_ms'] * 1e3:.1f} us, torch merge {row['torch_merge_ms'] * 1e3:.1f} us; "
                f"max err {row['max_err_vs_sdpa']:.1e}",
                flush=True,
            )
            del decode, unsplit, sdpa, fns  # their caches, before the next row makes its own
    return rows


def _split_kv_host_row(bench) -> dict:
    """08's wrapper (two launches), with and without its syncing checks, against SDPA."""
    module = bench.load("08")
    B, H, N, D = (1, 2, 256, 16) if bench.DRY else (1, 32, 1024, 128)
    shape = {"B": B, "H": H, "N": N, "D": D, "dtype": "bfloat16"}
    _, sdpa_decode, _, _ = split_kv_merge.INTERFACE.timed(module.split_kv_merge_kernel, shape)
    q = torch.randn(B * H, D, device=runtime.DEVICE, dtype=torch.bfloat16)
    kv = [torch.randn(B * H, N, D, device=runtime.DEVICE, dtype=q.dtype) for _ in "kv"]
    lengths = torch.full((B * H,), N, dtype=torch.int32, device=runtime.DEVICE)
    decode = module.split_kv_decoding
    m, l, acc = split_kv_merge.launch_split_kv_partials(  # noqa: E741
        module.split_kv_partial_kernel, q, *kv, lengths
    )
    Sp = m.shape[1]
    out, lse = torch.empty(B * H, D, device=q.device), torch.empty(B * H, device=q.device)
    ints = (1, triton.cdiv(N, Sp), D, q.stride(0), *kv[0].stride()[:2], *kv[1].stride()[:2])

    def floor_08():  # two launches, as the wrapper makes
        _floor_split_partials[(1,)](
            q, *kv, lengths, m, l, acc, *ints, Sp, Sp * D, D, 0.5, C0=64, C1=max(16, D)
        )
        _floor_split_merge[(1,)](m, l, acc, out, lse, Sp, D, Sp, Sp * D, D, D, C0=16, C1=D)

    fns = {
        "fast": lambda: decode(q, *kv, lengths, check_lengths=False),
        "fast_checked": lambda: decode(q, *kv, lengths),
        "torch": sdpa_decode,
        "launch_floor": floor_08,
    }
    return bench.host_row("08 split_kv_decoding", shape, fns)


def rows(bench, *, quick: bool, graded_only: bool, copy_tbps: float) -> dict[str, list[dict]]:
    return {} if graded_only else {"split_kv": split_kv_rows(bench, quick)}


def host_rows(bench) -> list[dict]:
    return [_split_kv_host_row(bench)]
