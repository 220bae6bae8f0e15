"""06's traps: the sliding window ignored, or one key off, replayed in float32 tile by tile
like 2-D attention's."""

from __future__ import annotations

import numpy as np

from grader.kinds.attention.traps import (
    _causal,
    _grid,
    _qkv,
    masked_attention,
)
from grader.model import Case, Output, Trap
from kata.kinds.attention import attention, causal_mask


def _window_skip(case: Case, window: int) -> np.ndarray:
    """Keys a kernel whose loop starts at the tile holding its query block's first row's
    oldest key (the solution's ``lo`` for ``window``) ever loads."""
    rows, cols = _grid(case)
    first = np.maximum(rows // case.block_m * case.block_m - window + 1, 0)
    return cols >= first // case.block_n * case.block_n


def _window_ignored(case: Case, _got: Output) -> list[Output]:
    q, k, v = _qkv(case)
    return [
        {"out": attention(q, k, v, causal=True)},
        # No window condition, but the loop already starts at the window's first tile.
        {"out": masked_attention(q, k, v, _causal(case) & _window_skip(case, case.window))},
    ]


def _window_off_by_one(case: Case, _got: Output) -> list[Output]:
    q, k, v = _qkv(case)
    M, N, W = len(q), len(k), case.window
    wide = causal_mask(M, N, W + 1)
    return [
        {"out": masked_attention(q, k, v, causal_mask(M, N, W - 1))},  # W - 1 keys
        {"out": masked_attention(q, k, v, wide)},  # W + 1 keys
        {"out": masked_attention(q, k, v, wide & _window_skip(case, W))},  # and the right lo
    ]


WINDOW_IGNORED = Trap(
    id="window-ignored",
    todo="window-mask",
    summary="keys older than the window were attended to",
    message="This is plain causal attention, or causal attention over whole tiles from the "
    "loop's lower bound on: query rows also attend to keys WINDOW or more positions before "
    "their own. Add the per-pair window condition (row i sees keys i - WINDOW + 1 .. i) in "
    "TODO(window-mask).",
    hint="hide keys WINDOW or more positions back (TODO window-mask)",
    why=(
        "The window is a property of each (row, key) pair, like causality: row `i` may see "
        "keys `i - WINDOW + 1 .. i`. Only a per-pair test enforces its lower edge. Raising the "
        "loop's lower bound skips the tiles that lie wholly before every row's window, which "
        "saves work, but the window's first key usually sits inside a tile, and that tile's "
        "older keys still count without the per-pair test (and so do the tiles between the "
        "first row's window and a later row's). The untouched skeleton is exercise 02's "
        "answer: correct causal attention, for a different task. The grader recognises both "
        "forms, plain causal attention and causal attention from the window's first tile on."
    ),
    forms=_window_ignored,
    invariant="Row i gives weight 0 to every key more than WINDOW - 1 positions before it.",
)

WINDOW_OFF_BY_ONE = Trap(
    id="window-off-by-one",
    todo="window-mask",
    summary="the window holds WINDOW - 1 or WINDOW + 1 keys",
    message="The window is one key off: row i must see exactly the WINDOW keys i - WINDOW + 1 "
    ".. i, its own included. One fewer loses each row's oldest key (with WINDOW = 1 a row then "
    "sees nothing and comes out NaN); one more lets in a key outside the window. Check the "
    "comparison in TODO(window-mask).",
    hint="WINDOW keys per row, its own included (TODO window-mask)",
    why=(
        "A window of `WINDOW` keys ends at the row itself, so it starts `WINDOW - 1` keys "
        "back: the row keeps key `j` when `i - j < WINDOW`, or `j >= i - WINDOW + 1`. Mixing "
        "the two ways of writing it (`<=` with `WINDOW`, `>` with `i - WINDOW + 1`) moves the "
        "edge by one key: each row gains a key older than its window, or loses its oldest "
        "one, and with `WINDOW = 1` then sees nothing at all (`0/0`). The grader recognises "
        "`WINDOW - 1` and `WINDOW + 1` keys, the latter also with the right lower bound on "
        "the loop, which keeps the extra key out of reach of a block's first row when its "
        "window begins on a tile boundary."
    ),
    forms=_window_off_by_one,
    invariant="Row i sees exactly the WINDOW keys i - WINDOW + 1 .. i, its own included.",
)

TRAPS = (WINDOW_IGNORED, WINDOW_OFF_BY_ONE)
