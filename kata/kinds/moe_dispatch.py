"""MoE dispatch (09): top-K expert ids -> the grouped layout a grouped GEMM reads, with each
expert's capacity; its oracle and the torch baseline it is timed against."""

from __future__ import annotations

import math

import numpy as np
import torch
import triton

from kata.kinds.base import INDEX_POISON, Interface, poisoned
from kata.kinds.launch import _require_device, launch_cached, next_power_of_2

# fmt: off
PARAMS = (
    "idx_ptr", "counts_ptr", "offsets_ptr", "slot_ptr", "token_ptr", "M", "K", "E", "CAPACITY",
    "BLOCK", "BLOCK_E",
)
# fmt: on


def moe_dispatch(idx, E: int, capacity: int) -> dict[str, np.ndarray]:
    """The grouped layout of the (token, expert) pairs of top-K routing ``idx`` (M, K), pairs
    taken in (token, k) order: ``counts`` (E,), the pairs each expert keeps, at most
    ``capacity``; ``offsets`` (E,), the row where each expert's pairs begin, an exclusive prefix
    sum of the counts; ``slot`` (M, K), each pair's row, -1 for a pair its expert dropped;
    ``token_of_slot`` (total kept,), the token that fills each row. An expert keeps its first
    ``capacity`` pairs in token order; a stable sort by expert keeps that order within each."""
    flat = np.asarray(idx, np.int64).reshape(-1)
    K = np.shape(idx)[1] if np.ndim(idx) == 2 else 1
    routed = np.bincount(flat, minlength=E)
    order = np.argsort(flat, kind="stable")  # grouped by expert, token order inside a group
    first = np.cumsum(routed) - routed  # where each expert's group starts in ``order``
    rank = np.empty(flat.size, np.int64)
    rank[order] = np.arange(flat.size) - first[flat[order]]
    counts = np.minimum(routed, capacity)
    offsets = np.cumsum(counts) - counts
    keep = rank < capacity
    slot = np.where(keep, offsets[flat] + rank, -1)
    token_of_slot = np.empty(int(counts.sum()), np.int64)
    token_of_slot[slot[keep]] = np.flatnonzero(keep) // K
    return {
        "counts": counts,
        "offsets": offsets,
        "slot": slot.reshape(np.shape(idx)),
        "token_of_slot": token_of_slot,
    }


def dropped_pairs(idx, E: int, capacity: int, first_choices_first: bool = False) -> list:
    """The (token, choice) pairs that full experts drop. The kata's rule ranks the pairs in
    (token, choice) order (DeepSpeed's ``drop_policy="position"``); ``first_choices_first``
    ranks every token's first choice before any second choice, as GShard's top-2 gating does
    (fairscale ``top2gate``, DeepSpeed ``top2gating``). That is only another flattening of
    ``idx``: its transpose, in (choice, token) order."""
    idx = np.asarray(idx)
    if first_choices_first:
        slot = moe_dispatch(idx.T, E, capacity)["slot"].T
    else:
        slot = moe_dispatch(idx, E, capacity)["slot"]
    return [(int(t), int(k)) for t, k in np.argwhere(slot < 0)]


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

    def launch(self, kernel, case, device):
        idx = self.inputs(case, device)["idx"]
        M, K = idx.shape
        E = case.params["E"]
        outs = {
            "counts": poisoned((E,), "int32", device),
            "offsets": poisoned((E,), "int32", device),
            "slot": poisoned((M, K), "int32", device),
        }
        rows = poisoned(((1 + self.GUARD) * M * K,), "int32", device)
        outs["token_of_slot"] = rows[M * K :]
        launch_moe_dispatch(
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
        idx = case.inputs["idx"]
        right = moe_dispatch(idx, case.params["E"], case.params["CAPACITY"])
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

    def baseline(self, idx, E: int, capacity: int):
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

    def timed(self, kernel, shape: dict):
        """(kernel call, torch call, label, baseline name) on one random top-K routing of
        ``shape``: M tokens, K choices, E experts, capacity = ceil(factor * M * K / E)."""
        M, K, E = shape["M"], shape["K"], shape["E"]
        capacity = math.ceil(shape.get("factor", 1.25) * M * K / E)
        idx = torch.rand(M, E, device="cuda").topk(K, dim=-1).indices.int()
        outs = dispatch_buffers(M, K, E, idx.device)
        check_dispatch_input(idx, E, capacity)  # once; the timed calls skip the sync
        block = shape.get("BLOCK", 256)
        label = f"M={M} K={K} E={E} capacity={capacity}"
        return (
            lambda: launch_moe_dispatch(
                kernel, idx, E, capacity, block=block, out=outs, check_ids=False
            ),
            lambda: self.baseline(idx, E, capacity),
            label,
            "torch stable sort -> scatter_add counts -> cumsum -> scatter",
        )


INTERFACE = MoeDispatch(
    "moe-dispatch",
    PARAMS,
    ("counts", "offsets", "slot", "token_of_slot"),
    ("dispatch-slots", "dispatch-capacity"),
    "MoE dispatch: top-K ids (M, K) -> counts, offsets, slot, token_of_slot",
)

# ---- host side: checks and launches (``kata.host`` gives them to the kernel files) ----------

# What kata.host gives the kernel files, by name.
HOST = (
    "check_dispatch_input",
    "dispatch_buffers",
    "launch_moe_dispatch",
    "run_moe_dispatch",
)


def check_dispatch_input(idx, E: int, capacity: int, check_ids: bool = True) -> None:
    """Raise TypeError/ValueError naming the first problem with top-K expert ids ``idx``
    (M tokens, K choices each), E experts and a per-expert ``capacity``. ``check_ids=False``
    skips the range check of the ids, the one check that waits for the GPU."""
    if not isinstance(idx, torch.Tensor):
        raise TypeError(f"idx must be a torch.Tensor, got {type(idx).__name__}")
    if idx.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"idx must hold integer expert ids (int32 or int64), got {idx.dtype}")
    if idx.dim() != 2:
        raise ValueError(f"idx must be 2-D (tokens, choices), got shape {tuple(idx.shape)}")
    if isinstance(E, bool) or not isinstance(E, int) or E < 1:
        raise ValueError(f"E, the number of experts, must be a positive int, got {E!r}")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise ValueError(f"capacity must be an int >= 0, got {capacity!r}")
    if idx.shape[1] > E:
        raise ValueError(
            f"top-{idx.shape[1]} routing needs at least {idx.shape[1]} experts, got E={E}"
        )
    if idx.numel() >= 2**30:
        raise ValueError(f"{idx.numel()} (token, expert) pairs: the kernel indexes them in int32")
    _require_device(idx=idx)
    # An expert id outside [0, E) would index past the outputs on a GPU (a device-side assert
    # that ends the process's CUDA context): checked here, at the price of one synchronisation.
    if check_ids and idx.numel() and bool((idx.min() < 0) | (idx.max() >= E)):
        raise ValueError(f"idx holds expert ids outside [0, {E})")


def dispatch_buffers(M: int, K: int, E: int, device) -> tuple:
    """``(counts, offsets, slot, token_of_slot)``: int32 (E,), (E,), (M, K) and (M * K,), the
    grouped buffer's worst case (no pair dropped)."""
    return (
        torch.empty(E, dtype=torch.int32, device=device),
        torch.empty(E, dtype=torch.int32, device=device),
        torch.empty((M, K), dtype=torch.int32, device=device),
        torch.empty(M * K, dtype=torch.int32, device=device),
    )


def launch_moe_dispatch(
    kernel, idx, E: int, capacity: int, *, block: int = 256, out=None, check_ids: bool = True
):
    """Check the input, then run a dispatch ``kernel`` with one program per expert; returns
    ``(counts, offsets, slot, token_of_slot)``. ``out`` may be those four, preallocated (the
    grader passes them poisoned, and a longer ``token_of_slot``); ``check_ids=False`` (a timing
    loop, on ids already checked) leaves out the synchronising range check."""
    check_dispatch_input(idx, E, capacity, check_ids)
    idx = idx.to(torch.int32).contiguous()
    M, K = idx.shape
    counts, offsets, slot, token_of_slot = out or dispatch_buffers(M, K, E, idx.device)
    if M == 0:  # no pair: every expert keeps none (an empty tensor has no address to pass)
        counts.zero_()
        offsets.zero_()
        return counts, offsets, slot, token_of_slot
    kernel[(E,)](
        idx,
        counts,
        offsets,
        slot,
        token_of_slot,
        M,
        K,
        E,
        capacity,
        BLOCK=block,
        BLOCK_E=triton.next_power_of_2(E),
    )
    return counts, offsets, slot, token_of_slot


def run_moe_dispatch(kernel, idx, E: int, capacity: int, *, block: int = 256, check_ids=True):
    """``launch_moe_dispatch`` for a wrapper (09's ``moe_dispatch``): the same checks and
    results, the four outputs in one int32 allocation. ``check_ids=False`` leaves out the range
    check of the ids, the one check that waits for the GPU."""
    check_dispatch_input(idx, E, capacity, check_ids)
    if idx.dtype != torch.int32 or not idx.is_contiguous():
        idx = idx.to(torch.int32).contiguous()
    M, K = idx.shape
    buf = torch.empty(2 * E + 2 * M * K, dtype=torch.int32, device=idx.device)
    counts, offsets, slot, token_of_slot = buf.split([E, E, M * K, M * K])
    slot = slot.view(M, K)
    if M == 0:  # no pair: every expert keeps none (an empty tensor has no address to pass)
        buf.zero_()
        return counts, offsets, slot, token_of_slot
    BLOCK_E = next_power_of_2(E)
    launch_cached(  # the key holds the constexprs: they are kept with it
        kernel,
        (block, BLOCK_E),
        lambda meta: (E,),
        (idx, counts, offsets, slot, token_of_slot, M, K, E, capacity),
        {"BLOCK": block, "BLOCK_E": BLOCK_E},
    )
    return counts, offsets, slot, token_of_slot
