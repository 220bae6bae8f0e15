"""05's own trap: one token per program where the tile holds BLOCK_M of them (the rest of 05's
traps are 03's, from the gating home)."""

from __future__ import annotations

import numpy as np

from grader.model import Case, Output, Trap


def _one_token_per_tile(case: Case, _got: Output) -> list[Output]:
    """Every row of a program's tile is the tile's first token: only the tokens at multiples of
    BLOCK_M are written. BLOCK_M is the case's pinned one, or each one the kernel may offer."""
    M = len(case.inputs["logits"])
    pinned = (case.config or {}).get("BLOCK_M")
    forms = []
    for block_m in (pinned,) if pinned else (16, 32, 64, 128):
        unwritten = np.arange(M) % block_m != 0
        forms.append({f"{key}.unwritten": unwritten for key in ("w0", "w1", "idx0", "idx1")})
    return forms


ONE_TOKEN_PER_TILE = Trap(
    id="one-token-per-tile",
    todo="rows-per-program",
    summary="every row of a program's tile was its first token",
    message="Each program wrote only the first token of its tile: every row of the tile was "
    "given that same token's index, so the other BLOCK_M - 1 tokens were never written. Give "
    "row r of the tile the token pid * BLOCK_M + r: TODO(rows-per-program).",
    hint="row r is token pid * BLOCK_M + r (TODO rows-per-program)",
    why=(
        "A program of the fast kernel owns `BLOCK_M` consecutive tokens, one per row of its "
        "tile: row `r` is token `pid * BLOCK_M + r`. The skeleton gives every row the same "
        "index, `pid * BLOCK_M` (a vector of zeros added), so all rows load, compute and store "
        "the tile's first token, and the others keep whatever the output held. The grader "
        "fills its outputs with a marker no kernel writes, so it sees exactly which tokens "
        "were never written: every token but one in each tile."
    ),
    forms=_one_token_per_tile,
    invariant="Every token of every tile is written, by the row of the tile that owns it.",
)

TRAPS = (ONE_TOKEN_PER_TILE,)
