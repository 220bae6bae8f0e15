"""Sliding-window attention (06): 2-D causal attention where query row i sees keys
i - WINDOW + 1 .. i. Launched and judged as 2-D attention, with the window passed on."""

from __future__ import annotations

from kata.kinds import attention

PARAMS = attention.PARAMS[:-3] + ("WINDOW",) + attention.PARAMS[-3:]


class WindowAttention2D(attention.Attention2D):
    """06: causal attention where row i sees keys i - WINDOW + 1 .. i."""

    def _extra(self, case):
        return {"WINDOW": case.window}


INTERFACE = WindowAttention2D(
    "window-attention",
    PARAMS,
    ("out",),
    ("output",),
    "2-D causal attention over a sliding window of WINDOW keys",
)
