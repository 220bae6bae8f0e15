"""The kernels' fixed interfaces: one object per kind of kernel the kata grades.

An interface knows the kernel's parameters (fixed by the chapter, so that a kernel from the book
drops into a submission), how the grader launches it on a case (through ``kata.host``, with the
grader's own block sizes and outputs poisoned so that unwritten elements show), what it writes,
what right means (a float64 oracle and a tolerance per output and input dtype), and what torch
does instead (the baseline the performance track is timed against).

This module imports nothing outside the standard library at the top: the manifest reader
(``kata.catalogue``) imports it, and ``python -m grader`` reads the manifest before it knows
whether torch is installed, to say what is missing. torch, numpy and triton are imported where
they are used.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---- parameters, as the chapter fixes them -----------------------------------------------------

# fmt: off
ATTENTION_PARAMS = (
    "q_ptr", "k_ptr", "v_ptr", "out_ptr", "M", "N", "D",
    "stride_qm", "stride_qd", "stride_kn", "stride_kd", "stride_vn", "stride_vd",
    "stride_om", "stride_od", "scale", "BLOCK_M", "BLOCK_N", "BLOCK_D",
)
# fmt: on
WINDOW_ATTENTION_PARAMS = ATTENTION_PARAMS[:-3] + ("WINDOW",) + ATTENTION_PARAMS[-3:]
# fmt: off
GATING_PARAMS = (
    "logits_ptr", "weight0_ptr", "weight1_ptr", "idx0_ptr", "idx1_ptr", "M", "E", "stride_m",
    "BLOCK_E",
)
BHSD_ATTENTION_PARAMS = (
    "q_ptr", "k_ptr", "v_ptr", "out_ptr", "stride_qb", "stride_qh", "stride_qs", "stride_kb",
    "stride_kh", "stride_ks", "stride_vb", "stride_vh", "stride_vs", "stride_ob", "stride_oh",
    "stride_os", "H", "S", "sm_scale", "HEAD_DIM", "CAUSAL", "BLOCK_M", "BLOCK_N", "TMA",
)
# fmt: on
TILED_GATING_PARAMS = GATING_PARAMS + ("BLOCK_M",)
# fmt: off
SPLIT_KV_MERGE_PARAMS = (
    "m_ptr", "l_ptr", "acc_ptr", "out_ptr", "lse_ptr", "NUM_SPLITS", "D",
    "stride_mb", "stride_ab", "stride_as", "stride_ob", "BLOCK_S", "BLOCK_D",
)
MOE_DISPATCH_PARAMS = (
    "idx_ptr", "counts_ptr", "offsets_ptr", "slot_ptr", "token_ptr", "M", "K", "E", "CAPACITY",
    "BLOCK", "BLOCK_E",
)
# fmt: on

# ---- poison: what an output buffer holds before the kernel runs --------------------------------
# A NaN with a payload no arithmetic produces (computed NaNs are 0x7FC00000 or 0x7FFFFFFF), so
# that "never written" and "written as NaN" can be told apart bit for bit.
POISON_BITS = {"float32": 0x7FC0BEEF, "float16": 0x7EEF, "bfloat16": 0x7FEF}
INDEX_POISON = -1_588_444_911  # an int32 no kernel writes by accident


def poisoned(torch, shape, dtype: str, device):
    """A tensor of ``shape`` and ``dtype`` (a torch dtype name) full of the poison value."""
    if dtype == "int32":
        return torch.full(shape, INDEX_POISON, dtype=torch.int32, device=device)
    int_type = torch.int32 if dtype == "float32" else torch.int16  # every payload is positive
    raw = torch.full(shape, POISON_BITS[dtype], dtype=int_type, device=device)
    return raw.view(getattr(torch, dtype))


def unwritten(torch, tensor):
    """Which elements of a poisoned tensor still hold the poison."""
    if tensor.dtype == torch.int32:
        return tensor == INDEX_POISON
    name = str(tensor.dtype).removeprefix("torch.")
    int_type = torch.int32 if name == "float32" else torch.int16
    return tensor.view(int_type) == POISON_BITS[name]


def _tensor(torch, array, layout: str | None, device):
    """Put a NumPy array on the device with the requested memory layout."""
    t = torch.from_numpy(array)
    if layout == "transposed":  # column-major: strides (1, rows)
        return t.t().contiguous().to(device).t()
    if layout == "sliced":  # every other column of a wider tensor: strides (2 * cols, 2)
        buf = torch.zeros(t.shape[0], 2 * t.shape[1], dtype=t.dtype, device=device)
        buf[:, ::2] = t.to(device)
        return buf[:, ::2]
    if layout == "row-sliced":  # every other row: strides (2 * cols, 1)
        buf = torch.zeros(2 * t.shape[0], t.shape[1], dtype=t.dtype, device=device)
        buf[::2] = t.to(device)
        return buf[::2]
    if layout == "padded":  # inside a buffer wider in its trailing axes, NaN around it (08)
        pad = (0, 3) if t.dim() == 2 else (0, 1, 8)
        wider = [n + p for n, p in zip(t.shape, pad)]
        buf = torch.full(wider, float("nan"), dtype=t.dtype, device=device)
        view = buf[tuple(slice(n) for n in t.shape)]
        view.copy_(t.to(device))
        return view
    if layout is not None:
        raise ValueError(f"unknown layout {layout!r}")
    return t.to(device)


# ---- the interfaces ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Interface:
    """What every interface has. ``launch`` runs in the launcher (the student's process) and
    returns torch tensors; ``expected`` runs in the grader, in float64 NumPy."""

    name: str
    params: tuple[str, ...]
    outputs: tuple[str, ...]  # what the kernel writes, in the order of its pointers
    judges: tuple[str, ...]  # the judges (grader.judge.judges) its checks may use
    about: str
    # A trap's form must sit this many absolute tolerances from the right answer on some case,
    # or the check could pay for the mistake (grader.judge.checking.prove_traps_visible).
    separation: float = 100.0
    # The kernel picks its tiles with an autotuner: every case pins a configuration, or runs
    # under each one the kernel offers (grader.run.launcher), so that both backends run the same.
    autotuned: bool = False

    def inputs(self, torch, case, device) -> dict:
        ins = {k: _tensor(torch, a, case.layout.get(k), device) for k, a in case.inputs.items()}
        if case.dtype:
            ins = {k: v.to(getattr(torch, case.dtype)) for k, v in ins.items()}
        return ins

    def launch(self, torch, kernel, case, device) -> dict:
        raise NotImplementedError

    def expected(self, case) -> dict:
        raise NotImplementedError

    def tolerance(self, key: str, dtype: str | None) -> tuple[float, float]:
        """(atol, rtol) for output ``key`` when the inputs are ``dtype`` (None: float32)."""
        raise NotImplementedError


class Attention2D(Interface):
    """01, 02: q (M, D), k and v (N, D) of any float dtype and strides; out (M, D) float32."""

    def launch(self, torch, kernel, case, device):
        from kata import host

        ins = self.inputs(torch, case, device)
        out = poisoned(torch, tuple(ins["q"].shape), "float32", device)
        host.launch_attention(
            kernel,
            ins["q"],
            ins["k"],
            ins["v"],
            block_m=case.block_m,
            block_n=case.block_n,
            out=out,
            **self._extra(case),
        )
        return {"out": out}

    def _extra(self, case) -> dict:
        return {}

    def expected(self, case):
        from kata import oracles

        q, k, v = (case.inputs[n] for n in "qkv")
        return {"out": oracles.attention(q, k, v, causal=case.causal, window=case.window)}

    def tolerance(self, key, dtype):
        return (1e-4, 1e-4)  # the chapter's atol; fp32 kernels land near 1e-6


class WindowAttention2D(Attention2D):
    """06: causal attention where row i sees keys i - WINDOW + 1 .. i."""

    def _extra(self, case):
        return {"WINDOW": case.window}


class Gating(Interface):
    """03: logits (M, E); w0, w1 float32 and idx0, idx1 int32, each (M,); one row a program."""

    def _launch_helper(self):
        from kata import host

        return host.launch_gating

    def launch(self, torch, kernel, case, device):
        logits = self.inputs(torch, case, device)["logits"]
        M = logits.shape[0]
        outs = {
            "w0": poisoned(torch, (M,), "float32", device),
            "w1": poisoned(torch, (M,), "float32", device),
            "idx0": poisoned(torch, (M,), "int32", device),
            "idx1": poisoned(torch, (M,), "int32", device),
        }
        self._launch_helper()(kernel, logits, out=tuple(outs.values()))
        return outs

    def expected(self, case):
        from kata import oracles

        w0, w1, idx0, idx1 = oracles.top2_gating(case.inputs["logits"])
        return {"w0": w0, "w1": w1, "idx0": idx0, "idx1": idx1}

    def tolerance(self, key, dtype):
        if key == "prob":  # a chosen expert's probability against the k-th largest
            return (1e-6, 1e-5)
        return (1e-5, 1e-5)  # the weights (the chapter's atol)


class TiledGating(Gating):
    """05: like 03, but one program owns BLOCK_M tokens (autotuned)."""

    def _launch_helper(self):
        from kata import host

        return host.launch_fast_gating

    def baseline(self, torch, logits):
        w, i = torch.topk(torch.softmax(logits.float(), dim=-1), 2, dim=-1)
        return w / w.sum(dim=-1, keepdim=True), i

    def timed(self, torch, kernel, shape: dict):
        """(kernel call, torch call, label, baseline name) on one random problem of ``shape``:
        M tokens x E experts in ``dtype``."""
        from kata import host

        M, E = shape["M"], shape["E"]
        x = torch.randn(M, E, device="cuda", dtype=getattr(torch, shape["dtype"]))
        outs = tuple(
            torch.empty(M, device="cuda", dtype=t)
            for t in (torch.float32, torch.float32, torch.int32, torch.int32)
        )
        label = f"M={M // 2**20}M E={E} {shape['dtype']}" if M >= 2**20 else f"M={M} E={E}"
        return (
            lambda: host.launch_fast_gating(kernel, x, out=outs),
            lambda: self.baseline(torch, x),
            label,
            "torch softmax -> topk -> divide",
        )


class BHSDAttention(Interface):
    """04: q, k, v (B, H, S, D) in float16 / bfloat16; out like q; causal per case."""

    def launch(self, torch, kernel, case, device):
        from kata import host

        ins = self.inputs(torch, case, device)
        out = poisoned(torch, tuple(ins["q"].shape), case.dtype or "float32", device)
        host.launch_fast_attention(
            kernel, ins["q"], ins["k"], ins["v"], causal=case.causal, out=out
        )
        return {"out": out}

    def expected(self, case):
        import numpy as np

        from kata import oracles

        q, k, v = (case.inputs[n] for n in "qkv")
        B, H = q.shape[:2]
        out = np.empty(q.shape)
        for b in range(B):
            for h in range(H):
                out[b, h] = oracles.attention(q[b, h], k[b, h], v[b, h], causal=case.causal)
        return {"out": out}

    def tolerance(self, key, dtype):
        return (1e-2, 1e-2)  # P is rounded to 16 bits before P @ V, and out is 16-bit

    def baseline(self, torch, q, k, v, causal):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def timed(self, torch, kernel, shape: dict):
        """(kernel call, torch call, label, baseline name) on one random bf16 problem of
        ``shape``: B, H, S, D and causal."""
        from kata import host

        B, H, S, D, causal = (shape[k] for k in ("B", "H", "S", "D", "causal"))
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
        out = torch.empty_like(q)
        label = f"B={B} H={H} S={S} D={D} bf16" + (" causal" if causal else "")
        return (
            lambda: host.launch_fast_attention(kernel, q, k, v, causal=causal, out=out),
            lambda: self.baseline(torch, q, k, v, causal),
            label,
            "torch SDPA",
        )


class SplitKVMerge(Interface):
    """08: the merge of split-KV decoding. Inputs: the partials of NUM_SPLITS key splits per
    row (``case.params["NUM_SPLITS"]``), m and l (B, S) and acc (B, S, D), float32, computed by
    the grader (``grader.specs.inputs.split_partials``); outputs out (B, D) and lse (B,),
    float32. Layout ``"padded"``: a partial lies inside a wider buffer (NaN around it), so
    that its row stride (and acc's split stride) exceed its own width."""

    def launch(self, torch, kernel, case, device):
        from kata import host

        ins = self.inputs(torch, case, device)
        B, _, D = ins["acc"].shape
        outs = {
            "out": poisoned(torch, (B, D), "float32", device),
            "lse": poisoned(torch, (B,), "float32", device),
        }
        host.launch_split_kv_merge(
            kernel, **ins, num_splits=case.params["NUM_SPLITS"], out=outs["out"], lse=outs["lse"]
        )
        return outs

    def expected(self, case):
        from kata import oracles

        S = case.params["NUM_SPLITS"]
        m, l, acc = (case.inputs[n][:, :S] for n in ("m", "l", "acc"))  # noqa: E741
        out, lse = oracles.split_kv_merge(m, l, acc)
        return {"out": out, "lse": lse}

    def tolerance(self, key, dtype):
        # Float32 merges land near 1e-7 relative; lse reaches 200 on the hostile cases, where
        # one float32 ulp is 1.5e-5, hence the relative part.
        return (1e-5, 1e-5)

    def baseline(self, torch, q, k, v):
        """torch SDPA, one query row per (batch, head) against the whole cache: q (B, H, D), k
        and v (B, H, N, D)."""
        sdpa = torch.nn.functional.scaled_dot_product_attention
        return sdpa(q[:, :, None, :], k, v)[:, :, 0, :]

    def timed(self, torch, kernel, shape: dict):
        """(decode call, torch call, label, baseline name) on one random problem of ``shape``:
        B sequences x H heads, each one query row against N cached keys of D dims, in
        ``dtype``. The decode is the whole of it, both kernels: the file's given partial kernel
        (``split_kv_partial_kernel``, from the module that defines ``kernel``) and ``kernel``
        as the merge, with ``shape["splits"]`` splits (default: the host's choice)."""
        import sys

        from kata import host, runtime

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
        splits = shape.get("splits") or host.default_num_splits(B * H, N)

        def decode():  # the lengths are known (all N): no device sync to check them
            m, l, acc = host.launch_split_kv_partials(  # noqa: E741
                partial, *flat, lengths, splits, check_lengths=False
            )
            return host.launch_split_kv_merge(kernel, m, l, acc)

        label = f"B={B} H={H} N={N} D={D} {shape['dtype']} splits={splits}"
        return decode, lambda: self.baseline(torch, q, k, v), label, "torch SDPA"


class MoeDispatch(Interface):
    """09: top-K expert ids idx (M, K) int32 -> the grouped layout a grouped GEMM reads: counts
    and offsets (E,), slot (M, K) and token_of_slot, all int32; one program per expert. A case
    gives E, CAPACITY and the pair block BLOCK in ``Case.params``.

    The grader's token_of_slot holds 2 * M * K rows, twice the worst case, all poisoned, and M * K
    more rows before its row 0 (``rows_before``): a kernel that writes a row past the last one
    it fills (one past the end, a dropped pair's) or a negative row (a rank below 0) is seen
    doing it, where it would otherwise write outside the buffer (a crash in the interpreter, a
    silent overwrite on a GPU: two verdicts for one kernel)."""

    GUARD = 2  # token_of_slot's rows, in units of M * K

    def launch(self, torch, kernel, case, device):
        from kata import host

        idx = self.inputs(torch, case, device)["idx"]
        M, K = idx.shape
        E = case.params["E"]
        outs = {
            "counts": poisoned(torch, (E,), "int32", device),
            "offsets": poisoned(torch, (E,), "int32", device),
            "slot": poisoned(torch, (M, K), "int32", device),
        }
        rows = poisoned(torch, ((1 + self.GUARD) * M * K,), "int32", device)
        outs["token_of_slot"] = rows[M * K :]
        host.launch_moe_dispatch(
            kernel,
            idx,
            E,
            case.params["CAPACITY"],
            block=case.params["BLOCK"],
            out=tuple(outs.values()),
        )
        outs["rows_before"] = rows[: M * K]
        return outs

    def expected(self, case):
        """The oracle's layout, token_of_slot padded to the grader's buffer: the rows past the
        last one filled stay unwritten (``token_of_slot.unwritten``)."""
        import numpy as np

        from kata import oracles

        idx = case.inputs["idx"]
        right = oracles.moe_dispatch(idx, case.params["E"], case.params["CAPACITY"])
        rows = np.full(self.GUARD * idx.size, INDEX_POISON, np.int64)
        filled = right["token_of_slot"]
        rows[: len(filled)] = filled
        right["token_of_slot"] = rows
        right["token_of_slot.unwritten"] = np.arange(len(rows)) >= len(filled)
        right["rows_before"] = np.full(idx.size, INDEX_POISON, np.int64)
        right["rows_before.unwritten"] = np.ones(idx.size, bool)
        return right

    def tolerance(self, key, dtype):
        return (0.0, 0.0)  # rows and counts are integers: exact

    def baseline(self, torch, idx, E: int, capacity: int):
        """The same layout in torch: a stable sort by expert (token order kept within each), a
        count by scatter_add (bincount would synchronise to size its output), two exclusive
        cumsums and a scatter; no host synchronisation."""
        M, K = idx.shape
        flat = idx.reshape(-1).long()
        P = flat.numel()
        pairs = torch.arange(P, device=idx.device)
        order = torch.sort(flat, stable=True).indices
        routed = torch.zeros(E, dtype=torch.long, device=idx.device)
        routed.scatter_add_(0, flat, torch.ones_like(flat))
        first = torch.cumsum(routed, 0) - routed
        rank = torch.empty_like(flat)
        rank[order] = pairs - first[flat[order]]
        counts = routed.clamp(max=capacity)
        offsets = torch.cumsum(counts, 0) - counts
        keep = rank < capacity
        slot = torch.where(keep, offsets[flat] + rank, -1)
        token_of_slot = torch.empty(P + 1, dtype=torch.long, device=idx.device)
        token_of_slot.scatter_(0, torch.where(keep, slot, P), pairs // K)  # row P: dropped
        return (
            counts.int(),
            offsets.int(),
            slot.view(M, K).int(),
            token_of_slot[:P].int(),
        )

    def timed(self, torch, kernel, shape: dict):
        """(kernel call, torch call, label, baseline name) on one random top-K routing of
        ``shape``: M tokens, K choices, E experts, capacity = ceil(factor * M * K / E)."""
        import math

        from kata import host

        M, K, E = shape["M"], shape["K"], shape["E"]
        capacity = math.ceil(shape.get("factor", 1.25) * M * K / E)
        idx = torch.rand(M, E, device="cuda").topk(K, dim=-1).indices.int()
        outs = host.dispatch_buffers(M, K, E, idx.device)
        host.check_dispatch_input(idx, E, capacity)  # once; the timed calls skip the sync
        block = shape.get("BLOCK", 256)
        label = f"M={M} K={K} E={E} capacity={capacity}"
        return (
            lambda: host.launch_moe_dispatch(
                kernel, idx, E, capacity, block=block, out=outs, check_ids=False
            ),
            lambda: self.baseline(torch, idx, E, capacity),
            label,
            "torch stable sort -> scatter_add counts -> cumsum -> scatter",
        )


# fmt: off
INTERFACES: dict[str, Interface] = {
    i.name: i
    for i in (
        Attention2D("attention", ATTENTION_PARAMS, ("out",), ("output",),
                    "2-D attention: q (M, D), k and v (N, D), out (M, D) float32"),
        WindowAttention2D("window-attention", WINDOW_ATTENTION_PARAMS, ("out",), ("output",),
                          "2-D causal attention over a sliding window of WINDOW keys"),
        Gating("gating", GATING_PARAMS, ("w0", "w1", "idx0", "idx1"), ("top2", "weights"),
               "top-2 gating: logits (M, E); w0, w1, idx0, idx1 (M,); one row per program"),
        BHSDAttention("bhsd-attention", BHSD_ATTENTION_PARAMS, ("out",), ("output",),
                      "(B, H, S, D) attention in float16 / bfloat16, causal or not",
                      separation=10.0,  # 100 x its 1e-2 would ask for differences of 1
                      autotuned=True),
        TiledGating("tiled-gating", TILED_GATING_PARAMS, ("w0", "w1", "idx0", "idx1"),
                    ("top2", "chosen-weights"), "top-2 gating with BLOCK_M tokens per program",
                    autotuned=True),
        SplitKVMerge("split-kv-merge", SPLIT_KV_MERGE_PARAMS, ("out", "lse"), ("output", "lse"),
                     "split-KV merge: partials m, l (B, S), acc (B, S, D); out (B, D), lse (B,)"),
        MoeDispatch("moe-dispatch", MOE_DISPATCH_PARAMS,
                    ("counts", "offsets", "slot", "token_of_slot"),
                    ("dispatch-slots", "dispatch-capacity"),
                    "MoE dispatch: top-K ids (M, K) -> counts, offsets, slot, token_of_slot"),
    )
}
# fmt: on


def get(name: str) -> Interface:
    try:
        return INTERFACES[name]
    except KeyError:
        raise KeyError(f"no interface {name!r}; known: {', '.join(INTERFACES)}") from None
