"""The split-KV merge (08): the last step of split-KV decoding, which combines the partial
softmax sums of NUM_SPLITS key splits per query row into the row's output and log-sum-exp; its
oracles (the merge, and decoding attention over ragged caches), and the torch baseline."""

from __future__ import annotations

import math
import sys

import numpy as np
import torch
import triton

from kata import runtime
from kata.kinds.base import Interface, f64, poisoned
from kata.kinds.launch import _MAX_LAUNCHES, _require_device, _require_tensor, launch_cached

# fmt: off
PARAMS = (
    "m_ptr", "l_ptr", "acc_ptr", "out_ptr", "lse_ptr", "NUM_SPLITS", "D",
    "stride_mb", "stride_ab", "stride_as", "stride_ob", "BLOCK_S", "BLOCK_D",
)
# fmt: on


def _attend(q, k, v) -> np.ndarray:
    """softmax(q k^T / sqrt(D)) v over every key, row by row, in float64: the same operations
    as 2-D attention's oracle without a mask (kept here, so that this kind stands on none)."""
    scores = q @ k.T / np.sqrt(q.shape[1])
    scores = scores - scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    return (p / p.sum(axis=1, keepdims=True)) @ v


def decode_attention(q, k, v, lengths, group: int = 1) -> np.ndarray:
    """One query row per output row against a KV cache with ragged lengths: row ``b`` of q
    (B, D) attends to the first ``lengths[b // group]`` keys of ``k[b // group]`` and
    ``v[b // group]`` (caches of shape (B // group, N, D)); ``group`` query rows share a cache,
    as the heads of one group do in grouped-query attention. (B, D) out."""
    q, k, v = f64(q), f64(k), f64(v)
    lengths = np.asarray(lengths, np.int64)
    out = np.empty(q.shape)
    for b in range(len(q)):
        s = b // group
        n = int(lengths[s])
        out[b] = _attend(q[b : b + 1], k[s, :n], v[s, :n])[0]
    return out


def decode_lse(q, k, lengths, group: int = 1) -> np.ndarray:
    """The natural log of each row's softmax denominator in ``decode_attention``: ln sum_n
    exp(s_n) over the row's scores s_n = q k_n / sqrt(D) (B,)."""
    q, k = f64(q), f64(k)
    lse = np.empty(len(q))
    for b in range(len(q)):
        s = k[b // group, : int(lengths[b // group])] @ q[b] / np.sqrt(q.shape[1])
        lse[b] = s.max() + np.log(np.exp(s - s.max()).sum())
    return lse


def split_kv_merge(m, l, acc) -> tuple[np.ndarray, np.ndarray]:  # noqa: E741
    """``(out, lse)`` from the partials of NUM_SPLITS key splits per row: their maxima m
    (B, S), denominators l (B, S) and unnormalized sums acc (B, S, D), each measured against
    its own split's maximum; an empty split has m = -inf, l = 0, acc = 0. Every row needs one
    split that is not empty. out = sum_j w_j acc_j / L and lse = m + ln L, where m = max_j m_j,
    w_j = exp(m_j - m) and L = sum_j w_j l_j: the softmax over every key of the row, and the
    natural log of its denominator sum_n exp(s_n)."""
    m, l, acc = f64(m), f64(l), f64(acc)  # noqa: E741
    top = m.max(axis=1, keepdims=True)
    if not np.isfinite(top).all():
        raise ValueError("every row needs a split that is not empty (a finite maximum)")
    w = np.exp(m - top)  # exp(-inf) = 0: empty splits weigh nothing
    total = (w * l).sum(axis=1)
    out = (w[:, :, None] * acc).sum(axis=1) / total[:, None]
    return out, top[:, 0] + np.log(total)


class SplitKVMerge(Interface):
    """08: the merge of split-KV decoding. Inputs: the partials of NUM_SPLITS key splits per
    row (``case.params["NUM_SPLITS"]``), m and l (B, S) and acc (B, S, D), float32, computed by
    the grader (its ``inputs.split_partials``); outputs out (B, D) and lse (B,), float32. Layout
    ``"padded"``: a partial lies inside a wider buffer (NaN around it), so that its row stride
    (and acc's split stride) exceed its own width."""

    def launch(self, kernel, case, device):
        ins = self.inputs(case, device)
        B, _, D = ins["acc"].shape
        outs = {
            "out": poisoned((B, D), "float32", device),
            "lse": poisoned((B,), "float32", device),
        }
        launch_split_kv_merge(
            kernel, **ins, num_splits=case.params["NUM_SPLITS"], out=outs["out"], lse=outs["lse"]
        )
        return outs

    def expected(self, case):
        S = case.params["NUM_SPLITS"]
        m, l, acc = (case.inputs[n][:, :S] for n in ("m", "l", "acc"))  # noqa: E741
        out, lse = split_kv_merge(m, l, acc)
        return {"out": out, "lse": lse}

    def tolerance(self, key, dtype):
        # Float32 merges land near 1e-7 relative; lse reaches 200 on the hostile cases, where
        # one float32 ulp is 1.5e-5, hence the relative part.
        return (1e-5, 1e-5)

    def baseline(self, q, k, v):
        """torch SDPA, one query row per (batch, head) against the whole cache: q (B, H, D), k
        and v (B, H, N, D)."""
        sdpa = torch.nn.functional.scaled_dot_product_attention
        return sdpa(q[:, :, None, :], k, v)[:, :, 0, :]

    def timed(self, kernel, shape: dict):
        """(decode call, torch call, label, baseline name) on one random problem of ``shape``:
        B sequences x H heads, each one query row against N cached keys of D dims, in
        ``dtype``. The decode is the whole of it, both kernels: the file's given partial kernel
        (``split_kv_partial_kernel``, from the module that defines ``kernel``) and ``kernel``
        as the merge, with ``shape["splits"]`` splits (default: the host's choice)."""
        inner = kernel
        while hasattr(inner, "fn"):
            inner = inner.fn
        partial = sys.modules[inner.__module__].split_kv_partial_kernel
        B, H, N, D = (shape[k] for k in ("B", "H", "N", "D"))
        dtype = getattr(torch, shape["dtype"])
        device = runtime.DEVICE  # a GPU; the bench's dry run tries it in the interpreter
        q = torch.randn(B, H, D, device=device, dtype=dtype)
        k, v = (torch.randn(B, H, N, D, device=device, dtype=dtype) for _ in "kv")
        lengths = torch.full((B * H,), N, dtype=torch.int32, device=device)
        flat = [x.reshape(B * H, *x.shape[2:]) for x in (q, k, v)]
        splits = shape.get("splits") or default_num_splits(B * H, N)

        def decode():  # the lengths are known (all N): no device sync to check them
            m, l, acc = launch_split_kv_partials(  # noqa: E741
                partial, *flat, lengths, splits, check_lengths=False
            )
            return launch_split_kv_merge(kernel, m, l, acc)

        label = f"B={B} H={H} N={N} D={D} {shape['dtype']} splits={splits}"
        return decode, lambda: self.baseline(q, k, v), label, "torch SDPA"


INTERFACE = SplitKVMerge(
    "split-kv-merge",
    PARAMS,
    ("out", "lse"),
    ("output", "lse"),
    "split-KV merge: partials m, l (B, S), acc (B, S, D); out (B, D), lse (B,)",
)

# ---- host side: checks and launches (``kata.host`` gives them to the kernel files) ----------

# What kata.host gives the kernel files, by name.
HOST = (
    "check_decode_inputs",
    "check_split_kv_partials",
    "split_kv_blocks",
    "launch_split_kv_merge",
    "default_num_splits",
    "launch_split_kv_partials",
    "run_split_kv_decoding",
)


def check_decode_inputs(q, k, v, lengths, *, values: bool = True) -> int:
    """Raise TypeError/ValueError naming the first problem with one query row per head, q
    (B, D), against KV caches k, v (C, N, D) whose first ``lengths[c]`` keys are filled; B must
    be a multiple of C (B // C query heads share a cache, as in grouped-query attention).
    Returns that group size. With ``values``, each length must lie in 1..N, which reads the
    lengths back once (a device sync: a decoding loop that knows its lengths skips it)."""
    _require_tensor("q", q)
    for name, x in (("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError(f"{name} must be a floating-point torch.Tensor")
        if x.dim() != 3:
            raise ValueError(f"{name} must be 3-D (caches, keys, head_dim), got {tuple(x.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    C, N, D = k.shape
    if q.shape[1] != D:
        raise ValueError(f"q and k must share the head dimension, got {q.shape[1]} and {D}")
    if D == 0 or C == 0 or q.shape[0] == 0 or q.shape[0] % C:
        raise ValueError(
            f"q's {q.shape[0]} rows must be one or more query rows per cache, the same number "
            f"for each ({C} caches of head dimension {D})"
        )
    if not isinstance(lengths, torch.Tensor) or lengths.dtype not in (torch.int32, torch.int64):
        raise TypeError("lengths must be an int32 or int64 torch.Tensor, one length per cache")
    if tuple(lengths.shape) != (C,):
        raise ValueError(
            f"lengths must have shape ({C},), one per cache, got {tuple(lengths.shape)}"
        )
    _require_device(q=q, k=k, v=v, lengths=lengths)
    if not values:
        return q.shape[0] // C
    low, high = (int(x) for x in torch.aminmax(lengths))
    if low < 1:
        first = int(torch.nonzero(lengths < 1)[0, 0])
        raise ValueError(
            f"lengths[{first}] is {int(lengths[first])}: every sequence needs at least one key "
            "(attention over no keys is undefined)"
        )
    if high > N:
        raise ValueError(f"a length of {high} is longer than the cache's {N} keys")
    return q.shape[0] // C


def check_split_kv_partials(m, l, acc) -> None:  # noqa: E741 (l is the chapter's name)
    """Raise TypeError/ValueError naming the first problem with the partials of NUM_SPLITS key
    splits per row: m and l (B, S) and acc (B, S, D), all float32."""
    for name, x, dims in (("m", m, 2), ("l", l, 2), ("acc", acc, 3)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dtype != torch.float32:
            raise TypeError(f"{name} must be float32, got {x.dtype}")
        if x.dim() != dims:
            raise ValueError(f"{name} must be {dims}-D, got shape {tuple(x.shape)}")
    if m.shape != l.shape or tuple(acc.shape[:2]) != tuple(m.shape):
        raise ValueError(
            f"m, l (B, S) and acc (B, S, D) disagree: {tuple(m.shape)}, {tuple(l.shape)}, "
            f"{tuple(acc.shape)}"
        )
    if m.shape[1] == 0 or acc.shape[2] == 0:
        raise ValueError("the partials need at least one split and a head dimension of 1 or more")
    _require_device(m=m, l=l, acc=acc)


def split_kv_blocks(num_splits: int, D: int) -> tuple[int, int]:
    """(BLOCK_S, BLOCK_D) of the merge: every split and head dimension in one tile (BLOCK_D at
    least 16, like the attention kernels')."""
    return triton.next_power_of_2(num_splits), max(16, triton.next_power_of_2(D))


def launch_split_kv_merge(kernel, m, l, acc, *, num_splits=None, out=None, lse=None):  # noqa: E741
    """Check the partials, then run a merge ``kernel`` with the interface of exercise 08: one
    program per row, all its splits at once. Returns ``(out, lse)``: out (B, D) and lse (B,),
    float32 (``out`` and ``lse`` may be preallocated; the grader's are poisoned).

    ``num_splits`` (default: all of m's columns) are merged; m and l are read with one row
    stride, every tensor with unit stride along its last dimension (copies are made where that
    does not hold)."""
    check_split_kv_partials(m, l, acc)
    B, S = m.shape
    D = acc.shape[2]
    num_splits = S if num_splits is None else int(num_splits)
    if not 1 <= num_splits <= S:
        raise ValueError(f"num_splits must lie in 1..{S} (the partials' splits), got {num_splits}")
    if m.stride(1) != 1 or l.stride(1) != 1 or m.stride(0) != l.stride(0):
        m, l = m.contiguous(), l.contiguous()  # noqa: E741
    if acc.stride(2) != 1:
        acc = acc.contiguous()
    if out is None:
        out = torch.empty((B, D), dtype=torch.float32, device=m.device)
    if lse is None:
        lse = torch.empty(B, dtype=torch.float32, device=m.device)
    if B > 0:
        BLOCK_S, BLOCK_D = split_kv_blocks(num_splits, D)
        kernel[(B,)](
            m,
            l,
            acc,
            out,
            lse,
            num_splits,
            D,
            m.stride(0),
            acc.stride(0),
            acc.stride(1),
            out.stride(0),
            BLOCK_S=BLOCK_S,
            BLOCK_D=BLOCK_D,
        )
    return out, lse


def default_num_splits(rows: int, N: int, min_keys: int = 256) -> int:
    """Splits per row for ``rows`` query rows over N keys: enough programs for four per
    streaming multiprocessor (132 on an H200; one program per row would leave most of them
    idle when there are few rows), and no split of fewer than ``min_keys`` keys."""
    sms = 132
    if runtime.DEVICE == "cuda":
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    wanted = triton.cdiv(4 * sms, max(rows, 1))
    return max(1, min(wanted, N // min_keys))


def launch_split_kv_partials(
    kernel, q, k, v, lengths, num_splits=None, *, block_n: int = 64, check_lengths: bool = True
):
    """Check the inputs, then run exercise 08's partial ``kernel``: grid (rows, splits), each
    program the online softmax of one query row over one split of its cache. The split size is
    a whole number of ``block_n``-key tiles, so there may be fewer splits than asked for (None:
    ``default_num_splits``). Returns the partials ``(m, l, acc)``: (B, S), (B, S) and (B, S, D),
    float32. ``check_lengths=False`` trusts the lengths (no device sync; see
    ``check_decode_inputs``)."""
    group = check_decode_inputs(q, k, v, lengths, values=check_lengths)
    B, D = q.shape
    N = k.shape[1]
    if num_splits is None:
        num_splits = default_num_splits(B, N)
    if int(num_splits) < 1:
        raise ValueError(f"num_splits must be at least 1, got {num_splits}")
    split = triton.cdiv(triton.cdiv(N, int(num_splits)), block_n) * block_n
    S = triton.cdiv(N, split)
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    m = torch.empty((B, S), dtype=torch.float32, device=q.device)
    l = torch.empty((B, S), dtype=torch.float32, device=q.device)  # noqa: E741
    acc = torch.empty((B, S, D), dtype=torch.float32, device=q.device)
    kernel[(B, S)](
        q,
        k,
        v,
        lengths,
        m,
        l,
        acc,
        group,
        split,
        D,
        q.stride(0),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        m.stride(0),
        acc.stride(0),
        acc.stride(1),
        1.0 / math.sqrt(D),
        BLOCK_N=block_n,
        BLOCK_D=split_kv_blocks(S, D)[1],
    )
    return m, l, acc


_SPLIT_PLANS: dict = {}  # (B, N, D, num_splits, block_n) -> (S, split, BLOCK_S, BLOCK_D)


def _split_plan(B: int, N: int, D: int, num_splits, block_n: int) -> tuple:
    """(S splits, keys per split, BLOCK_S, BLOCK_D) of a decode, worked out once per key: the
    default split count asks the GPU for its multiprocessor count."""
    key = (B, N, D, num_splits, block_n)
    plan = _SPLIT_PLANS.get(key)
    if plan is None:
        wanted = default_num_splits(B, N) if num_splits is None else num_splits
        if int(wanted) < 1:
            raise ValueError(f"num_splits must be at least 1, got {num_splits}")
        split = triton.cdiv(triton.cdiv(N, int(wanted)), block_n) * block_n
        S = triton.cdiv(N, split)
        plan = (S, split, *split_kv_blocks(S, D))
        if len(_SPLIT_PLANS) >= _MAX_LAUNCHES:
            _SPLIT_PLANS.clear()
        _SPLIT_PLANS[key] = plan
    return plan


def run_split_kv_decoding(
    partial_kernel,
    merge_kernel,
    q,
    k,
    v,
    lengths,
    num_splits=None,
    *,
    block_n: int = 64,
    check_lengths: bool = True,
):
    """``launch_split_kv_partials`` then ``launch_split_kv_merge`` for a wrapper (08's
    ``split_kv_decoding``): the same checks and results, the split plan kept per shape, the
    partials and the outputs in one allocation, the merge's check of partials it made itself
    left out. Returns ``(out, lse)``. ``check_lengths=False`` trusts the lengths: no device sync
    (see ``check_decode_inputs``)."""
    group = check_decode_inputs(q, k, v, lengths, values=check_lengths)
    B, D = q.shape
    N = k.shape[1]
    S, split, BLOCK_S, BLOCK_D = _split_plan(B, N, D, num_splits, block_n)
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    acc, out, m, l, lse = torch.empty(  # noqa: E741
        B * (S * D + D + 2 * S + 1), dtype=torch.float32, device=q.device
    ).split([B * S * D, B * D, B * S, B * S, B])
    acc, out, m, l = acc.view(B, S, D), out.view(B, D), m.view(B, S), l.view(B, S)  # noqa: E741
    launch_cached(  # the key holds the dtypes and the constexprs: they are kept with it
        partial_kernel,
        (q.dtype, k.dtype, v.dtype, lengths.dtype, block_n, BLOCK_D),
        lambda meta: (B, S),
        (q, k, v, lengths, m, l, acc, group, split, D, q.stride(0), k.stride(0), k.stride(1),
         v.stride(0), v.stride(1), S, S * D, D, 1.0 / math.sqrt(D)),
        {"BLOCK_N": block_n, "BLOCK_D": BLOCK_D},
    )  # fmt: skip
    launch_cached(
        merge_kernel,
        (BLOCK_S, BLOCK_D),
        lambda meta: (B,),
        (m, l, acc, out, lse, S, D, S, S * D, D, D),
        {"BLOCK_S": BLOCK_S, "BLOCK_D": BLOCK_D},
    )
    return out, lse
