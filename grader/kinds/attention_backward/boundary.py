"""10's boundary classes (instructor-only: the handout leaves every grader/kinds/*/boundary.py
out): sequence lengths against the tiles (S = 1, one row past, one short of and a whole number
of tiles, tiles of two sizes), a head dimension that is not a power of two, causal and not,
several (batch, head) pairs, and scores in the hundreds (``backward``)."""

from __future__ import annotations

from grader.kinds.attention_backward import inputs
from grader.kinds.base import against
from grader.model import Case


def backward(
    seed: int,
    B: int,
    H: int,
    S: int,
    D: int,
    *,
    causal: bool = False,
    block_m: int = 16,
    block_n: int = 16,
    spread: float | None = None,
    what: str = "",
    **fields,
) -> Case:
    """One backward problem as a case of 10: B x H heads of S rows and D dims, random inputs
    (``spread``: q and k multiplied by it), launched with ``block_m`` x ``block_n`` tiles."""
    mask = "causal" if causal else "non-causal"
    tiles = f"{block_m}x{block_n} tiles"
    about = (
        f"B={B}, H={H}, S={S} ({against(S, block_n, 'key', 'tile')}), D={D}, {mask}, {tiles}"
        + (f", q and k times {spread:g}" if spread is not None else "")
        + (f": {what}" if what else "")
    )
    name = fields.pop("name", None) or (
        f"s{S}-d{D}" + ("-causal" if causal else "") + (f"-{block_m}x{block_n}")
    )
    return Case(
        name=name,
        about=about,
        inputs=inputs.backward_inputs(seed, B, H, S, D, causal, spread),
        block_m=block_m,
        block_n=block_n,
        causal=causal,
        **fields,
    )
