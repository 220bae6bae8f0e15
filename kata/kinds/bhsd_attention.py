"""(B, H, S, D) attention (04, performance track): flash attention in float16 / bfloat16,
causal or not, autotuned, and the torch SDPA baseline it is timed against."""

from __future__ import annotations

import math

import numpy as np
import torch
import triton

from kata import runtime
from kata.examples import header, verdict
from kata.kinds.attention import attention
from kata.kinds.base import Interface, poisoned
from kata.kinds.launch import _HALF_DTYPES, _require_device, cdiv, launch_cached

# fmt: off
PARAMS = (
    "q_ptr", "k_ptr", "v_ptr", "out_ptr", "stride_qb", "stride_qh", "stride_qs", "stride_kb",
    "stride_kh", "stride_ks", "stride_vb", "stride_vh", "stride_vs", "stride_ob", "stride_oh",
    "stride_os", "H", "S", "sm_scale", "HEAD_DIM", "CAUSAL", "BLOCK_M", "BLOCK_N", "TMA",
)
# fmt: on


class BHSDAttention(Interface):
    """04: q, k, v (B, H, S, D) in float16 / bfloat16; out like q; causal per case."""

    def launch(self, kernel, case, device):
        ins = self.inputs(case, device)
        out = poisoned(tuple(ins["q"].shape), case.dtype or "float32", device)
        launch_fast_attention(kernel, ins["q"], ins["k"], ins["v"], causal=case.causal, out=out)
        return {"out": out}

    def expected(self, case):
        q, k, v = (case.inputs[n] for n in "qkv")
        B, H = q.shape[:2]
        out = np.empty(q.shape)
        for b in range(B):
            for h in range(H):
                out[b, h] = attention(q[b, h], k[b, h], v[b, h], causal=case.causal)
        return {"out": out}

    def tolerance(self, key, dtype):
        return (1e-2, 1e-2)  # P is rounded to 16 bits before P @ V, and out is 16-bit

    def baseline(self, q, k, v, causal):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def timed(self, kernel, shape: dict):
        """(kernel call, torch call, label, baseline name) on one random bf16 problem of
        ``shape``: B, H, S, D and causal."""
        B, H, S, D, causal = (shape[k] for k in ("B", "H", "S", "D", "causal"))
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
        out = torch.empty_like(q)
        label = f"B={B} H={H} S={S} D={D} bf16" + (" causal" if causal else "")
        return (
            lambda: launch_fast_attention(kernel, q, k, v, causal=causal, out=out),
            lambda: self.baseline(q, k, v, causal),
            label,
            "torch SDPA",
        )


INTERFACE = BHSDAttention(
    "bhsd-attention",
    PARAMS,
    ("out",),
    ("output",),
    "(B, H, S, D) attention in float16 / bfloat16, causal or not",
    separation=10.0,  # 100 x its 1e-2 would ask for differences of 1
    autotuned=True,
)


# ---- the worked example, run by 04's (and 07's) file --------------------------------------------


def fast_attention_example(fast_attention) -> int:
    """Exercise 04: small (B, H, S, D) fp16 inputs, causal and not, against float64."""
    header("04 fast attention: B=1, H=2, S=256, D=64, float16, seed 0")
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 256, 64).half() for _ in range(3))
    ok = True
    for causal in (False, True):
        out = fast_attention(*(x.to(runtime.DEVICE) for x in (q, k, v)), causal=causal).cpu()
        want = np.stack([attention(q[0, h], k[0, h], v[0, h], causal=causal) for h in range(2)])
        label = "causal" if causal else "non-causal"
        ok &= verdict(f"{label} kernel vs float64 oracle", out[0].float(), want, 1e-2)
    return 0 if ok else 1


# ---- host side: checks and launches (``kata.host`` gives them to the kernel files) ----------

# What kata.host gives the kernel files, by name.
HOST = (
    "FAST_HEAD_DIMS",
    "FAST_ALIGN_BYTES",
    "check_fast_attention_inputs",
    "launch_fast_attention",
    "run_fast_attention",
)


FAST_HEAD_DIMS = (16, 32, 64, 128)
FAST_ALIGN_BYTES = 16  # what a TMA tensor descriptor needs of the base address and the strides


def check_fast_attention_inputs(q, k, v) -> None:
    """(B, H, S, D) bf16/fp16 tensors of one shape; unit-stride D, other strides 16-byte multiples."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dtype not in (torch.float16, torch.bfloat16):
            raise TypeError(f"{name} must be float16 or bfloat16, got {x.dtype}")
        if x.dim() != 4:
            raise ValueError(
                f"{name} must be 4-D (batch, heads, seq, head_dim), got {tuple(x.shape)}"
            )
        if x.stride(3) != 1:
            raise ValueError(f"{name}'s last dimension must be contiguous (stride 1)")
    if not (q.shape == k.shape == v.shape):
        raise ValueError(
            f"q, k, v must have one shape, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    B, H, S, D = q.shape
    if D not in FAST_HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {FAST_HEAD_DIMS}, got {D}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        size = x.element_size()
        if x.data_ptr() % FAST_ALIGN_BYTES or any(
            (st * size) % FAST_ALIGN_BYTES for st, n in zip(x.stride()[:3], x.shape[:3]) if n > 1
        ):
            raise ValueError(
                f"{name} must start at a {FAST_ALIGN_BYTES}-byte boundary and have batch, head and "
                f"sequence strides that are multiples of {FAST_ALIGN_BYTES} bytes (a tensor "
                f"descriptor's rule), got strides {tuple(x.stride())}; pass x.contiguous()"
            )
    _require_device(q=q, k=k, v=v)


_SCRATCH: dict = {}  # (device, stream, bytes) -> the descriptor scratch kept for that stream


def _descriptor_scratch(size: int, alignment: int, stream):
    """Global memory where kernels write the tensor descriptors they make on the device. Triton's
    launcher asks for it at every launch of such a kernel; a new ``torch.empty`` each time cost
    4-6 us of host time, so one buffer per device, stream and size is kept and reused: the
    launches on one stream run one after another. Not while a CUDA graph is captured: graphs
    captured on one stream may be replayed at once, so each gets its own, from its pool."""
    if runtime.DEVICE != "cuda" or torch.cuda.is_current_stream_capturing():
        return torch.empty(size, dtype=torch.int8, device=runtime.DEVICE)
    key = (torch.cuda.current_device(), stream, size)
    found = _SCRATCH.get(key)
    if found is None:
        found = _SCRATCH[key] = torch.empty(size, dtype=torch.int8, device="cuda")
    return found


def launch_fast_attention(kernel, q, k, v, *, causal: bool = False, out=None):
    """Check the inputs, then run ``attention_fwd_kernel``; ``out`` may be preallocated like q."""
    check_fast_attention_inputs(q, k, v)
    B, H, S, D = q.shape
    if out is None:
        out = torch.empty_like(q)
    if q.numel() == 0:
        return out
    triton.set_allocator(_descriptor_scratch)
    grid = lambda meta: (triton.cdiv(S, meta["BLOCK_M"]), B * H)  # noqa: E731
    kernel[grid](
        q,
        k,
        v,
        out,
        q.stride(0),
        q.stride(1),
        q.stride(2),
        k.stride(0),
        k.stride(1),
        k.stride(2),
        v.stride(0),
        v.stride(1),
        v.stride(2),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        H,
        S,
        1.0 / math.sqrt(D),
        HEAD_DIM=D,
        CAUSAL=causal,
    )
    return out


def usual_fast_attention_inputs(q, k, v) -> bool:
    """True when ``check_fast_attention_inputs`` would pass q, k, v, told in a few operations for
    the usual case: contiguous tensors of one fp16/bf16 dtype and one shape, 16-byte aligned
    (contiguous strides are multiples of D >= 16 elements, so they are aligned too)."""
    return (
        type(q) is torch.Tensor
        and type(k) is torch.Tensor
        and type(v) is torch.Tensor
        and q.dtype in _HALF_DTYPES
        and q.dtype == k.dtype == v.dtype
        and q.dim() == 4
        and q.shape == k.shape == v.shape
        and q.shape[3] in FAST_HEAD_DIMS
        and q.is_contiguous()
        and k.is_contiguous()
        and v.is_contiguous()
        and not (q.data_ptr() | k.data_ptr() | v.data_ptr()) % FAST_ALIGN_BYTES
        and q.device == k.device == v.device
        and q.device.type == runtime.DEVICE
    )


def run_fast_attention(kernel, q, k, v, causal: bool = False, persistent: bool = False):
    """``launch_fast_attention`` for a wrapper (04's ``fast_attention``, 07's
    ``fa3_attention``): the same checks and result, the launch cached per (S, D, causal, dtype),
    the autotuner's key. ``persistent``: the kernel loops over work items (07's), so it gets
    ``persistent_programs`` programs per head instead of one per query tile."""
    if not usual_fast_attention_inputs(q, k, v):
        check_fast_attention_inputs(q, k, v)
    out = torch.empty_like(q)
    if out.numel():
        cached_attention_launch(kernel, q, k, v, out, causal, persistent)
    return out


_SMS: dict = {}  # device index -> SMs: asking torch costs microseconds
_PROGRAMS: dict = {}  # persistent_programs' arguments -> its answer


def persistent_programs(S: int, BH: int, block_m: int, sms: int) -> int:
    """How many programs per (batch, head) 07's persistent kernel gets. Its work items are
    pairs of query tiles, ceil(n_m / 2) a head, which all cost the same when causal, and every
    program loops over every so-many-th item of every head. The programs run in waves of
    ``sms`` (one an SM at a time): the count chosen takes the fewest waves times items per
    program, and of those the fewest programs, since each pays its setup (descriptors,
    barriers, the first Q) once. With a program per item, the grid is that of a kernel that is
    not persistent, so no count does worse than that one."""
    key = (S, BH, block_m, sms)
    found = _PROGRAMS.get(key)
    if found is None:
        items = (cdiv(S, block_m) + 1) // 2
        found = _PROGRAMS[key] = min(
            range(1, items + 1), key=lambda p: (cdiv(p * BH, sms) * cdiv(items, p), p)
        )
    return found


def _sms(device: int) -> int:
    found = _SMS.get(device)
    if found is None:
        found = _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return found


def programs_per_head(q, block_m: int) -> int:
    """``persistent_programs`` for q's shape on q's device."""
    B, H, S, D = q.shape
    return persistent_programs(S, B * H, block_m, _sms(q.get_device()))


def cached_attention_launch(
    kernel, q, k, v, out, causal: bool, persistent: bool = False, programs: int | None = None
) -> None:
    """``run_fast_attention``'s launch alone (the bench times it apart). ``programs``: per
    head when ``persistent``, instead of ``persistent_programs``' choice (to time others)."""
    B, H, S, D = q.shape
    BH = B * H
    triton.set_allocator(_descriptor_scratch)
    if persistent and programs:
        grid = lambda meta: (programs, BH)  # noqa: E731
    elif persistent:
        grid = lambda meta: (programs_per_head(q, meta["BLOCK_M"]), BH)  # noqa: E731
    else:
        grid = lambda meta: (cdiv(S, meta["BLOCK_M"]), BH)  # noqa: E731
    launch_cached(
        kernel,
        (S, D, causal, q.dtype),
        grid,
        (
            q,
            k,
            v,
            out,
            *q.stride()[:3],
            *k.stride()[:3],
            *v.stride()[:3],
            *out.stride()[:3],
            H,
            S,
            1.0 / math.sqrt(D),
        ),
        {"HEAD_DIM": D, "CAUSAL": causal},
    )


_SPLIT_PLANS: dict = {}  # (B, N, D, num_splits, block_n) -> (S, split, BLOCK_S, BLOCK_D)
