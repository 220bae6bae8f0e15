"""08's boundary classes (instructor-only: the handout leaves every grader/kinds/*/boundary.py out): cache lengths one key
past, one short of and a whole number of splits, with and without empty splits
(``split_lengths``), and the case of one decoding step built on them (``split_kv``)."""

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


def _slots(splits: int) -> str:
    block = 1 << (splits - 1).bit_length()
    return f" (padded to {block} slots)" if block != splits else ""


def split_kv(
    seed: int,
    split: int,
    splits: int,
    D: int,
    *,
    empty: bool = False,
    lengths: list[int] | None = None,
    group: int = 1,
    kind: str | None = None,
    gap: float = 100.0,
    what: str = "",
    **fields,
) -> Case:
    """The partials of one decoding step (``grader.kinds.split_kv_merge.inputs``) as a case of 08's merge:
    ``splits`` splits of ``split`` keys, caches of lengths ``lengths`` (default
    ``split_lengths``), ``group`` query rows per cache, scores of ``kind`` (None: random q and
    k; else ``inputs.hostile_partials``' kinds, ``gap`` that of "dominant")."""
    lengths = lengths or split_lengths(split, splits, empty)
    N = split * splits
    if kind is None:
        partials = inputs.decode_partials(seed, lengths, split, D, group, N)
    else:
        partials = inputs.hostile_partials(seed, lengths, split, D, kind, N, gap)
    rows = len(lengths) * group
    heads = f" ({group} query rows per cache)" if group > 1 else ""
    about = (
        f"{rows} rows{heads}, NUM_SPLITS={splits}{_slots(splits)} of {split} keys, D={D}, "
        f"lengths {', '.join(map(str, lengths))}" + (f": {what}" if what else "")
    )
    name = fields.pop("name", None) or f"split-{splits}x{split}-d{D}" + ("-empty" if empty else "")
    return Case(name=name, about=about, inputs=partials, params={"NUM_SPLITS": splits}, **fields)
