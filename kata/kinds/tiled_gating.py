"""Tiled top-2 gating (05, performance track): 03's router with BLOCK_M tokens per program,
autotuned, and the torch baseline it is timed against."""

from __future__ import annotations

from kata import host
from kata.kinds import gating

PARAMS = gating.PARAMS + ("BLOCK_M",)


class TiledGating(gating.Gating):
    """05: like 03, but one program owns BLOCK_M tokens (autotuned)."""

    def _launch_helper(self):
        return host.launch_fast_gating

    # ``torch`` is kata/authoring/bench.py's argument: it goes when the bench rows move here.
    def baseline(self, torch, logits):
        w, i = torch.topk(torch.softmax(logits.float(), dim=-1), 2, dim=-1)
        return w / w.sum(dim=-1, keepdim=True), i

    def timed(self, torch, kernel, shape: dict):
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
            lambda: host.launch_fast_gating(kernel, x, out=outs),
            lambda: self.baseline(torch, x),
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
