"""Tiled top-2 gating (05, performance track): 03's router with BLOCK_M tokens per program,
autotuned, and the torch baseline it is timed against."""

from __future__ import annotations

import torch
import triton

from kata import runtime
from kata.kinds import gating
from kata.kinds.launch import cdiv, launch_cached, next_power_of_2

PARAMS = gating.PARAMS + ("BLOCK_M",)


class TiledGating(gating.Gating):
    """05: like 03, but one program owns BLOCK_M tokens (autotuned)."""

    def _launch_helper(self):
        return launch_fast_gating

    def baseline(self, logits):
        """(weights, experts, probabilities): the probabilities are the softmax torch computes
        anyway, returned so that the timed output can be compared (``timed_pairs``)."""
        probs = torch.softmax(logits.float(), dim=-1)
        w, i = torch.topk(probs, 2, dim=-1)
        return w / w.sum(dim=-1, keepdim=True), i, probs

    def timed_pairs(self, ours, theirs):
        """The weights against torch's, and the experts by their probabilities, as 03's top-2
        judge compares them: on equal logits the kernel and torch.topk may pick different
        experts of one probability, and both are right. An expert out of range, or chosen
        twice, gets NaN, which nothing is close to."""
        w0, w1, idx0, idx1 = ours
        w, i, probs = theirs
        chosen = torch.stack((idx0, idx1), dim=1).long()
        E = probs.shape[1]
        valid = (chosen >= 0) & (chosen < E) & (idx0 != idx1)[:, None]
        mine = torch.where(valid, probs.gather(1, chosen.clamp(0, E - 1)), float("nan"))
        top = probs.gather(1, i)
        return [
            ("w0", w0, w[:, 0]),
            ("w1", w1, w[:, 1]),
            ("prob", mine[:, 0], top[:, 0]),
            ("prob", mine[:, 1], top[:, 1]),
        ]

    def timed(self, kernel, shape: dict):
        """(kernel call, torch call, label, baseline name) on one random problem of ``shape``:
        M tokens x E experts in ``dtype``."""
        M, E = shape["M"], shape["E"]
        x = torch.randn(M, E, device="cuda", dtype=getattr(torch, shape["dtype"]))
        outs = tuple(
            torch.empty(M, device="cuda", dtype=t)
            for t in (torch.float32, torch.float32, torch.int32, torch.int32)
        )
        label = f"M={M // 2**20}M E={E} {shape['dtype']}" if M >= 2**20 else f"M={M} E={E}"
        return (
            lambda: launch_fast_gating(kernel, x, out=outs),
            lambda: self.baseline(x),
            label,
            "torch softmax -> topk -> divide",
        )


INTERFACE = TiledGating(
    "tiled-gating",
    PARAMS,
    ("w0", "w1", "idx0", "idx1"),
    ("top2", "chosen-weights"),
    "top-2 gating with BLOCK_M tokens per program",
    autotuned=True,
)

# ---- host side: checks and launches (``kata.host`` gives them to the kernel files) ----------

# What kata.host gives the kernel files, by name.
HOST = (
    "launch_fast_gating",
    "gating_outputs",
    "run_fast_gating",
)


def launch_fast_gating(kernel, logits, *, out=None):
    """Like launch_gating, for an autotuned kernel that picks its own rows per program."""
    logits, (w0, w1, idx0, idx1) = gating.gating_buffers(logits, out)
    M, E = logits.shape
    if M > 0:
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]),)  # noqa: E731
        kernel[grid](
            logits, w0, w1, idx0, idx1, M, E, logits.stride(0), BLOCK_E=triton.next_power_of_2(E)
        )
    return w0, w1, idx0, idx1


def usual_gating_input(logits) -> bool:
    """True when ``check_gating_input`` would pass ``logits`` and its experts have unit stride:
    the usual case, told in a few operations (anything else takes the full check)."""
    return (
        type(logits) is torch.Tensor
        and logits.dim() == 2
        and logits.shape[1] >= 2
        and logits.is_floating_point()
        and logits.stride(1) == 1
        and logits.device.type == runtime.DEVICE
    )


def gating_outputs(M: int, device) -> tuple:
    """``(w0, w1, idx0, idx1)``, float32, float32, int32, int32, (M,) each: the rows of one
    allocation. They are padded to a multiple of 4 values, so that each output starts 16-byte
    aligned like an allocation of its own: Triton specialises a kernel on its pointers'
    alignment, and every M then shares one compiled kernel."""
    padded = -(-M // 4) * 4
    # empty_strided and unbind: the fewest tensor objects torch makes for four rows (each view
    # or index costs a microsecond or two of host time, as much as the kernel at decode sizes).
    w0, w1, idx0, idx1 = torch.empty_strided(
        (4, M), (padded, 1), dtype=torch.int32, device=device
    ).unbind(0)
    return w0.view(torch.float32), w1.view(torch.float32), idx0, idx1


def run_fast_gating(kernel, logits):
    """``launch_fast_gating`` for a wrapper (05's ``fast_top2_gating``): the same checks and
    results, the four outputs rows of one int32 allocation (the weights read as float32),
    the launch cached per (E, dtype), which is all 05's configuration depends on."""
    if not usual_gating_input(logits):
        gating.check_gating_input(logits)  # raises its message, or the input is merely strided
        if logits.stride(1) != 1:
            logits = logits.contiguous()  # the kernel walks experts with unit stride
    outs = gating_outputs(logits.shape[0], logits.device)
    if logits.shape[0]:
        cached_gating_launch(kernel, logits, outs)
    return outs


def cached_gating_launch(kernel, logits, outs) -> None:
    """``run_fast_gating``'s launch alone (the bench times it apart)."""
    M, E = logits.shape
    launch_cached(
        kernel,
        (E, logits.dtype),
        lambda meta: (cdiv(M, meta["BLOCK_M"]),),
        (logits, *outs, M, E, logits.stride(0)),
        {"BLOCK_E": next_power_of_2(E)},
    )
