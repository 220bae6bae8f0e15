"""09's boundary classes (instructor-only: the handout leaves every grader/kinds/*/boundary.py out): token counts whose
M * K pairs are one short of, a whole number of and one past blocks of pairs
(``ragged_tokens``); routings where one expert gets exactly CAPACITY pairs and another one more
(``capacity_met``); where each expert's first dropped pair sits, to put it on a block's first
pair (``first_dropped``)."""

from __future__ import annotations

import numpy as np

from grader.kinds.base import against
from grader.kinds.moe_dispatch import inputs


def ragged_tokens(block: int, K: int) -> list[int]:
    """Token counts M, each the smallest above two blocks of pairs, whose M * K pairs are one
    short of, a whole number of and one past blocks of ``block`` pairs (for an even K no pair
    count is odd: two short of and two past, the nearest it gets)."""
    step = 1 if K % 2 else 2
    found = []
    for r in (-step, 0, step):
        M = 2 * block // K + 1
        while (M * K - r) % block:
            M += 1
        found.append(M)
    return found


def pairs_against(M: int, K: int, block: int) -> str:
    """ "M tokens x K: 47 pairs, one pair short of three 16-pair blocks"."""
    return f"{M} tokens x {K}: {M * K} pairs, {against(M * K, block, 'pair', 'block')}"


def capacity_met(seed: int, M: int, E: int, K: int = 2) -> tuple[dict, int]:
    """(a routing, CAPACITY) where one expert is routed exactly CAPACITY pairs (it drops none),
    another CAPACITY + 1 (it drops exactly its last one) and a third more (so that keeping
    every pair and keeping one too many differ), the last expert under CAPACITY: the first seed
    from ``seed`` on whose routing has such counts, CAPACITY the largest that fits."""
    for s in range(seed, seed + 1000):
        routing = inputs.routing(s, M, E, K)
        routed = np.bincount(routing["idx"].ravel(), minlength=E)
        counts = set(routed.tolist())
        met = [c for c in counts if c >= 2 and c + 1 in counts and routed.max() >= c + 2]
        met = [c for c in met if routed[-1] < c]
        if met:
            return routing, max(met)
    raise ValueError(f"no routing of {M} tokens over {E} experts meets a capacity exactly")


def first_dropped(idx: np.ndarray, E: int, capacity: int) -> dict[int, int]:
    """{expert: the pair index of its first dropped pair} for the experts over ``capacity``."""
    flat = np.asarray(idx).reshape(-1)
    found = {}
    for e in range(E):
        mine = np.flatnonzero(flat == e)
        if mine.size > capacity:
            found[e] = int(mine[capacity])
    return found
