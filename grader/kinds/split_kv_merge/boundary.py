"""08's boundary classes (instructor-only: the handout leaves every grader/kinds/*/boundary.py out): cache lengths one key
past, one short of and a whole number of splits, with and without empty splits
(``split_lengths``), and the case of one decoding step built on them (``split_kv``). The
public cases are built by ``inputs.decode_case`` with their lengths written out."""

from __future__ import annotations

from grader.kinds.split_kv_merge import inputs
from grader.model import Case


def split_lengths(split: int, splits: int, empty: bool) -> list[int]:
    """Cache lengths against ``splits`` splits of ``split`` keys. Without ``empty``, every split
    holds keys: the cache full (= 0 modulo the split), one key short (= -1) and the last split
    holding a single key (= 1). With it, splits left empty at the end: the last one (= 0), all
    but two (= 1), all but the first (= -1), and a single key in the whole cache."""
    N = split * splits
    if not empty:
        return [N, N - 1, N - split + 1]
    if splits < 3:
        raise ValueError("empty splits after a partly filled one need at least three splits")
    return [N - split, split + 1, split - 1, 1]


def split_kv(seed: int, split: int, splits: int, D: int, *, empty: bool = False, **fields) -> Case:
    """``inputs.decode_case`` with the cache lengths of ``split_lengths`` unless given."""
    lengths = fields.pop("lengths", None) or split_lengths(split, splits, empty)
    return inputs.decode_case(seed, split, splits, D, lengths=lengths, empty=empty, **fields)
