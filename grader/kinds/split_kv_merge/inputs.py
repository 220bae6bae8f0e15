"""08's inputs: the partials its merge kernel is given, computed from a decoding step's scores
the way 08's given partial kernel computes them, from random or hostile scores."""

from __future__ import annotations

import numpy as np

from grader.kinds.base import rng
from grader.model import Case


def split_partials(scores, v, lengths, split, group=1):
    """The partials ``split_kv_partial_kernel`` stores, computed in float32 the same way: row b
    attends to the first ``lengths[b // group]`` keys of its cache, cut into splits of
    ``split`` keys (NUM_SPLITS = cdiv(N, split) of them); split j of row b keeps the maximum m
    of its scores (``scores[b]``, already scaled), l = sum exp(s - m) and acc = sum exp(s - m)
    v. A split that holds none of the row's keys stores m = -inf, l = 0, acc = 0."""
    scores = np.asarray(scores, np.float32)
    v = np.asarray(v, np.float32)
    B, N = scores.shape
    S = -(-N // split)
    m = np.full((B, S), -np.inf, np.float32)
    l = np.zeros((B, S), np.float32)  # noqa: E741 (the chapter's name)
    acc = np.zeros((B, S, v.shape[2]), np.float32)
    for b in range(B):
        n = int(lengths[b // group])
        for j in range(S):
            lo, hi = j * split, min((j + 1) * split, n)
            if lo >= hi:
                continue
            s = scores[b, lo:hi]
            m[b, j] = s.max()
            p = np.exp(s - m[b, j])
            l[b, j] = p.sum(dtype=np.float32)
            acc[b, j] = p @ v[b // group, lo:hi]
    return {"m": m, "l": l, "acc": acc}


def decode_partials(seed, lengths, split, D, group=1, N=None):
    """The partials of a real decoding step: random q (one row per query head, ``group`` heads
    per cache), k and v (N keys per cache, default the longest length), scores q k^T / sqrt(D)
    in float32."""
    r = rng(seed)
    lengths = np.asarray(lengths)
    N = N or int(lengths.max())
    caches = len(lengths)
    q = r.standard_normal((caches * group, D)).astype(np.float32)
    k = r.standard_normal((caches, N, D)).astype(np.float32)
    v = r.standard_normal((caches, N, D)).astype(np.float32)
    scale = np.float32(1.0 / np.sqrt(D))
    scores = np.einsum("bd,bnd->bn", q, np.repeat(k, group, axis=0)) * scale
    return split_partials(scores, v, lengths, split, group)


def hostile_partials(seed, lengths, split, D, kind, N=None, gap=100.0):
    """Partials of scores that only a merge measured from the maximum survives, on every even
    row (odd rows are ordinary, scores ~ N(0, 1)): ``"high"`` (every score near +200, where
    exp() overflows float32 past 88.7), ``"low"`` (near -150, where it underflows below -103)
    or ``"dominant"`` (one split's keys score ``gap`` above the rest, a different split on each
    even row, so that the split maxima differ by ``gap`` and the other splits' weights
    underflow to 0). At a gap of 100, a merge measured from a point between the maxima (their
    mean, their midpoint) still keeps every exp() in float32's range; at 200 it cannot."""
    r = rng(seed)
    lengths = np.asarray(lengths)
    B = len(lengths)
    N = N or int(lengths.max())
    scores = r.standard_normal((B, N))
    v = r.standard_normal((B, N, D))
    for b in range(0, B, 2):
        if kind == "high":
            scores[b] += 200.0
        elif kind == "low":
            scores[b] -= 150.0
        elif kind == "dominant":
            used = -(-int(lengths[b]) // split)  # the splits that hold keys of this row
            j = (b // 2) % used
            scores[b, j * split : (j + 1) * split] += gap
        else:
            raise ValueError(f"unknown kind {kind!r}")
    return split_partials(scores, v, lengths, split)


def _slots(splits: int) -> str:
    block = 1 << (splits - 1).bit_length()
    return f" (padded to {block} slots)" if block != splits else ""


def decode_case(
    seed: int,
    split: int,
    splits: int,
    D: int,
    *,
    lengths: list[int],
    empty: bool = False,
    group: int = 1,
    kind: str | None = None,
    gap: float = 100.0,
    what: str = "",
    **fields,
) -> Case:
    """The partials of one decoding step as a case of 08's merge: ``splits`` splits of
    ``split`` keys, caches of lengths ``lengths``, ``group`` query rows per cache, scores of
    ``kind`` (None: random q and k; else ``hostile_partials``' kinds, ``gap`` that of
    "dominant"); ``empty`` names a case whose last splits hold no key."""
    N = split * splits
    if kind is None:
        partials = decode_partials(seed, lengths, split, D, group, N)
    else:
        partials = hostile_partials(seed, lengths, split, D, kind, N, gap)
    rows = len(lengths) * group
    heads = f" ({group} query rows per cache)" if group > 1 else ""
    about = (
        f"{rows} rows{heads}, NUM_SPLITS={splits}{_slots(splits)} of {split} keys, D={D}, "
        f"lengths {', '.join(map(str, lengths))}" + (f": {what}" if what else "")
    )
    name = fields.pop("name", None) or f"split-{splits}x{split}-d{D}" + ("-empty" if empty else "")
    return Case(name=name, about=about, inputs=partials, params={"NUM_SPLITS": splits}, **fields)
