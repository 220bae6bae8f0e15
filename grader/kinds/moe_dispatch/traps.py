"""09's traps: the classic wrong layouts of MoE dispatch, replayed the way 09's kernel walks
its pairs, block by block, with one mistake switched on."""

from __future__ import annotations

import numpy as np

from grader.model import Case, Output, Trap
from kata.kinds.base import INDEX_POISON
from kata.kinds.moe_dispatch import INTERFACE, MoeDispatch

# ---- MoE dispatch (exercise 09), replayed ------------------------------------------------------


def _pairs(case: Case) -> tuple[np.ndarray, int, int]:
    """(each pair's expert, in (token, choice) order; E; K)."""
    idx = np.asarray(case.inputs["idx"], np.int64)
    return idx.reshape(-1), case.params["E"], idx.shape[1]


def dispatch_replay(
    case: Case,
    *,
    offsets: str = "exclusive",
    rank: str = "exclusive",
    keep_below: int | None = None,
) -> Output:
    """The layout 09's kernel writes with one mistake switched on, as a kernel computes it:
    pairs walked in blocks of the case's BLOCK, counts capped at CAPACITY (given code), a pair
    kept when its rank is below ``keep_below`` (default CAPACITY; None-like huge: no drop).

    ``offsets``: "exclusive" (right), "inclusive" (expert e's own rows counted too) or "zero";
    ``rank``: "exclusive" (right), "inclusive" (the pair itself counted), "pair" (the pair's own
    index: no grouping), "restart" (no carry from earlier blocks), "carry-first" (the block's
    own pairs added to the carry before ranking), "reversed" (counted from the expert's last
    pair). The grouped buffer's values are given only where no two pairs share a row: where
    they do, which one a GPU writes last is a race, and the form says only which rows are
    written."""
    flat, E, K = _pairs(case)
    P, block, capacity = flat.size, case.params["BLOCK"], case.params["CAPACITY"]
    routed = np.bincount(flat, minlength=E)
    kept = np.minimum(routed, capacity)
    start = {
        "exclusive": np.cumsum(kept) - kept,
        "inclusive": np.cumsum(kept),
        "zero": np.zeros(E, np.int64),
    }[offsets]
    ranks = np.empty(P, np.int64)
    for e in range(E):
        mine = np.flatnonzero(flat == e)
        blocks = mine // block
        carry = np.searchsorted(blocks, blocks, side="left")  # e's pairs in earlier blocks
        within = np.arange(mine.size) - carry
        in_block = np.searchsorted(blocks, blocks, side="right") - carry
        ranks[mine] = {
            "exclusive": carry + within,
            "inclusive": carry + within + 1,
            "pair": mine,
            "restart": within,
            "carry-first": carry + in_block + within,
            "reversed": routed[e] - 1 - (carry + within),
        }[rank]
    limit = capacity if keep_below is None else keep_below
    keep = ranks < limit
    row = start[flat] + ranks
    size = MoeDispatch.GUARD * P
    written = np.zeros(size, bool)
    inside = keep & (row >= 0) & (row < size)
    written[row[inside]] = True
    form: Output = {
        "counts": kept,
        "offsets": start,
        "slot": np.where(keep, row, -1).reshape(case.inputs["idx"].shape),
        "token_of_slot.unwritten": ~written,
    }
    if np.unique(row[inside]).size == int(inside.sum()):  # no race: the values are known
        tokens = np.zeros(size, np.int64)
        tokens[row[inside]] = np.flatnonzero(inside) // K
        form["token_of_slot"] = tokens
    return form


def _not_grouped(case: Case, _got: Output) -> list[Output]:
    return [dispatch_replay(case, rank="pair", offsets=o) for o in ("zero", "exclusive")]


def _offset_missing(case: Case, _got: Output) -> list[Output]:
    return [dispatch_replay(case, offsets="zero")]


def _offsets_inclusive(case: Case, _got: Output) -> list[Output]:
    return [dispatch_replay(case, offsets="inclusive")]


def _inclusive_rank(case: Case, _got: Output) -> list[Output]:
    return [dispatch_replay(case, rank="inclusive")]


def _rank_restarts(case: Case, _got: Output) -> list[Output]:
    return [dispatch_replay(case, rank=r) for r in ("restart", "carry-first")]


def _grouped_in_another_order(case: Case, got: Output) -> bool:
    """Whether ``got`` is a valid grouping that is not the token order: the right counts and
    offsets, each expert's kept pairs filling exactly its rows (in some order), the dropped
    ones -1, and every filled row holding its pair's token."""
    right = INTERFACE.expected(case)
    if "slot" not in got or got.get("slot.unwritten", np.zeros(1, bool)).any():
        return False
    flat, E, K = _pairs(case)
    slot = np.asarray(got["slot"], np.int64).reshape(-1)
    want = np.asarray(right["slot"], np.int64).reshape(-1)
    if np.array_equal(slot, want) or not np.array_equal(got["offsets"], right["offsets"]):
        return False
    for e in range(E):
        mine = slot[flat == e]
        first, n = int(right["offsets"][e]), int(right["counts"][e])
        kept = np.sort(mine[mine >= 0])
        if not np.array_equal(kept, np.arange(first, first + n)):
            return False
    rows = np.asarray(got["token_of_slot"], np.int64)
    filled = slot >= 0
    tokens = rows[slot[filled]] if "token_of_slot" in got else np.full(1, INDEX_POISON)
    return bool(np.array_equal(tokens, np.flatnonzero(filled) // K))


def _not_token_order(case: Case, got: Output) -> list[Output]:
    """The kernel's own slots when they group every expert's pairs in some order other than
    the tokens' (an atomic counter's order, or a reversed one); else, as the trap's
    representative, each expert's pairs in reverse token order."""
    if _grouped_in_another_order(case, got):
        return [{"slot": np.asarray(got["slot"])}]
    return [dispatch_replay(case, rank="reversed")]


def _capacity_not_applied(case: Case, got: Output) -> list[Output]:
    """Some pair got a row CAPACITY + 1 or more rows past its expert's offset: a pair of rank
    above CAPACITY kept (its slot is the given offset + rank, with the kernel's own offsets; one
    of rank CAPACITY alone is the off-by-one), so the trap is named while the slots are still
    wrong in other ways; else, as its representative, every pair of an expert past its CAPACITY
    given the next row anyway. (Every capacity case has an expert routed CAPACITY + 2 pairs or
    more, so that the representative never is the off-by-one's form.)"""
    slot, offsets = got.get("slot"), got.get("offsets")
    whole = slot is not None and offsets is not None
    whole = whole and not any(
        got.get(f"{k}.unwritten", np.zeros(1, bool)).any() for k in ("slot", "offsets")
    )
    if whole:
        flat, E, _ = _pairs(case)
        mine = np.asarray(slot, np.int64).reshape(-1)
        start = np.asarray(offsets, np.int64)[np.clip(flat, 0, E - 1)]
        if (mine - start > case.params["CAPACITY"]).any():
            return [{"slot": np.asarray(slot), "offsets": np.asarray(offsets)}]
    return [dispatch_replay(case, keep_below=np.iinfo(np.int32).max)]


def _capacity_off_by_one(case: Case, _got: Output) -> list[Output]:
    capacity = case.params["CAPACITY"]
    return [dispatch_replay(case, keep_below=capacity + d) for d in (1, -1)]


DISPATCH_NOT_GROUPED = Trap(
    id="dispatch-not-grouped",
    todo="dest-slot",
    summary="the pairs kept their token order: nothing grouped by expert",
    message="Each pair's row is its own position among all pairs, so the buffer is still in "
    "token order, and no expert's rows are contiguous. A pair's row is its expert's offset plus "
    "its rank among that expert's pairs: TODO(dest-slot).",
    hint="row = the expert's offset + its rank (TODO dest-slot)",
    why=(
        "A grouped GEMM runs one matrix product per expert over a contiguous block of rows, so "
        "the dispatch must move every pair to its expert's block. The untouched skeleton sets "
        "`rank` to the pair's own index `p` and `offset` to 0: each pair goes to row `p`, the "
        "order the router produced, which mixes the experts as much as the tokens did. Each "
        "expert's program then writes only its own pairs' rows, so every row is filled once "
        "and the output looks plausible; only the grouping is missing. The grader recognises "
        "it with the offsets still 0 and with the right offsets added (`offset + p`, which "
        "runs past the last row filled)."
    ),
    forms=_not_grouped,
    invariant="Expert e's pairs fill the rows offsets[e] .. offsets[e] + counts[e] - 1, and "
    "only those.",
)
DISPATCH_OFFSET_MISSING = Trap(
    id="dispatch-offset-missing",
    todo="dest-slot",
    summary="every expert's rows began at row 0",
    message="Each expert's pairs are ranked right, but every expert's block starts at row 0, so "
    "the experts overwrite each other's rows and offsets is 0 for all of them. Expert e's rows "
    "begin after the rows kept by experts 0 .. e - 1: TODO(dest-slot).",
    hint="offset = rows of experts 0..e-1 (TODO dest-slot)",
    why=(
        "A pair's row has two parts: where its expert's block begins, and its place inside "
        "the block. With the rank right and the offset left at 0, every expert's first pair "
        "goes to row 0, its second to row 1, and so on: the experts overwrite each other, "
        "and which pair's token a row ends up holding depends on which program happened to "
        "write last (a race on a GPU). The slots themselves are deterministic, so the grader "
        "sees the mistake in `slot` and in `offsets` before it looks at the rows."
    ),
    forms=_offset_missing,
    invariant="offsets[e] is the number of rows kept by experts 0 .. e - 1.",
)
DISPATCH_OFFSETS_INCLUSIVE = Trap(
    id="dispatch-offsets-inclusive",
    todo="dest-slot",
    summary="the offsets are an inclusive prefix sum",
    message="Each expert's offset also counts the expert's own rows (an inclusive prefix sum, "
    "experts 0 .. e): expert 0 starts after its own block instead of at row 0, and every "
    "expert is shifted by its own count. Sum the experts strictly before e: TODO(dest-slot).",
    hint="count experts before e, not e (TODO dest-slot)",
    why=(
        "The offsets are an *exclusive* scan of the counts: `offsets[e] = counts[0] + ... + "
        "counts[e - 1]`, so `offsets[0] = 0` and `offsets[e] + counts[e] = offsets[e + 1]`. "
        "An inclusive scan (a cumulative sum, `tl.cumsum`, or `experts <= e`) gives "
        "`offsets[e + 1]` instead: row 0 is never written, each block starts where the next "
        "one should, blocks overlap wherever an expert has more pairs than the one after it, "
        "and the last expert's block runs past the rows filled. The two scans differ by "
        "exactly the element itself: `exclusive = inclusive - counts`."
    ),
    forms=_offsets_inclusive,
    invariant="offsets[0] = 0 and offsets[e] + counts[e] = offsets[e + 1]: an exclusive scan.",
)
DISPATCH_INCLUSIVE_RANK = Trap(
    id="dispatch-inclusive-rank",
    todo="dest-slot",
    summary="each pair's rank counted the pair itself",
    message="Each pair's rank counts the pair itself (an inclusive prefix sum, 1 for an "
    "expert's first pair): every block starts one row late, its first row stays empty and its "
    "last pair lands on the next expert's first row. Count only the pairs before it: "
    "TODO(dest-slot).",
    hint="rank the pairs from 0 (TODO dest-slot)",
    why=(
        "`tl.cumsum` is an inclusive scan: at each position it adds the element there. Over "
        "the hit flags of a block, it gives an expert's first pair 1, not 0, so `offset + "
        "rank` skips the expert's first row and puts its last pair on the row where the next "
        "expert begins (past the last filled row, for the last expert). The exclusive rank is "
        "the inclusive one minus the pair's own flag. With a capacity it also drops one pair "
        "too many, since `rank < CAPACITY` now keeps CAPACITY - 1 pairs."
    ),
    forms=_inclusive_rank,
    invariant="An expert's first pair, in token order, has rank 0 and goes to row offsets[e].",
)
DISPATCH_RANK_RESTARTS = Trap(
    id="dispatch-rank-restarts",
    todo="dest-slot",
    summary="the rank did not carry over from one block of pairs to the next",
    message="The ranks are right inside each block of pairs, but not across blocks: they start "
    "again at 0 in every block (nothing carried), or the block's own pairs were added to the "
    "carry before ranking them. Pairs of one expert in different blocks then share rows or skip "
    "them. Carry the count of the earlier blocks' pairs into each block: TODO(dest-slot).",
    hint="carry earlier blocks' count once (TODO dest-slot)",
    why=(
        "The loop sees the pairs BLOCK at a time, and a prefix sum inside a block only counts "
        "that block's pairs. An expert's pairs in later blocks must continue where the "
        "earlier ones stopped, so the kernel keeps a carry (`seen`): the number of the "
        "expert's pairs in the blocks already ranked. Without it, every block's first pair "
        "gets rank 0 again and overwrites the expert's first row. Adding the block's own "
        "count to the carry before ranking it counts those pairs twice and leaves gaps. Both "
        "mistakes are invisible while all of an expert's pairs sit in one block, which is why "
        "the checks use many blocks of 16 pairs."
    ),
    forms=_rank_restarts,
    invariant="An expert's ranks run 0, 1, 2, ... across every block of pairs, without a "
    "repeat or a gap.",
    messages=(
        "The ranks are right inside each block of pairs, but start again at 0 in every block: "
        "nothing carried the count of the earlier blocks' pairs, so an expert's pairs in "
        "different blocks share rows. Carry that count (seen) into each block: TODO(dest-slot).",
        "The ranks are right inside each block of pairs, but each block's own pairs were added "
        "to the carry before ranking them, so every block after the first skips rows. Rank the "
        "block first, then add its pairs to the carry (seen): TODO(dest-slot).",
    ),
)
DISPATCH_NOT_TOKEN_ORDER = Trap(
    id="dispatch-not-token-order",
    todo="dest-slot",
    summary="each expert's rows are grouped, but not in token order",
    message="Every expert's pairs fill exactly its rows, but not in token order: the layout must "
    "be one answer, the same on every run, with an expert's pairs in the order of their tokens "
    "(slots taken from an atomic counter come in whatever order the threads arrive). Rank each "
    "pair by the pairs before it: TODO(dest-slot).",
    hint="rank by a prefix sum (TODO dest-slot)",
    why=(
        "Any order inside an expert's block gives a grouped GEMM the same products, so an "
        "atomic counter (`tl.atomic_add` on a per-expert count, each pair taking the next "
        "free row) looks like a fine way to hand out rows. But the order it gives is the "
        "order in which threads reach the counter, possibly different each run, and with a "
        "capacity it also decides *which* pairs a full expert drops: the same batch could "
        "route differently twice. The kata's layout is deterministic: an expert's pairs in "
        "(token, choice) order, and an expert past its capacity keeps the first of them, "
        'the rule of DeepSpeed\'s `drop_policy="position"`. (GShard ranks every first '
        "choice before any second choice: another fixed order, which drops other pairs.) "
        "The CPU interpreter runs programs and lanes in a fixed order, where an atomic "
        "counter happens to give token order, while a GPU does not; so the grader's static "
        "screen refuses `tl.atomic_*` in this exercise on both backends alike, naming this "
        "trap, and the checks name it for any other order (a reversed one, say)."
    ),
    forms=_not_token_order,
    invariant="Inside expert e's block, its pairs appear in token order: lowest token first.",
)
CAPACITY_NOT_APPLIED = Trap(
    id="capacity-not-applied",
    todo="capacity-drop",
    summary="pairs past an expert's capacity were still given a row and written",
    message="Pairs past an expert's first CAPACITY still got a row: an expert routed more than "
    "CAPACITY pairs wrote its extra ones over the first rows of the experts after it (the "
    "counts stop at CAPACITY, the rows did not). Keep only the first CAPACITY pairs of each "
    "expert in token order: TODO(capacity-drop).",
    hint="drop ranks >= CAPACITY (TODO capacity-drop)",
    why=(
        "A capacity bounds an expert's work: its block holds at most CAPACITY rows, and the "
        "counts, and so every later expert's offset, are capped. A pair past the capacity "
        "must then get no row at all (slot -1) and write nothing; otherwise it lands on the "
        "next expert's first rows, or past the last row filled, and the grouped buffer holds "
        "tokens the counts do not account for. Which of two pairs on one row survives is a "
        "race between programs on a GPU, so the grader judges the slots and which rows are "
        "written, not the values a race leaves. The untouched skeleton keeps every pair. The "
        "grader names the trap whenever a pair's slot lies more than CAPACITY rows past its "
        "expert's offset, so it is named even while the slots are still wrong in other ways."
    ),
    forms=_capacity_not_applied,
    invariant="An expert's pairs from rank CAPACITY on get slot -1 and fill no row.",
)
CAPACITY_OFF_BY_ONE = Trap(
    id="capacity-off-by-one",
    todo="capacity-drop",
    summary="experts kept CAPACITY + 1 or CAPACITY - 1 pairs",
    message="Each expert over capacity keeps one pair too many or too few: ranks count from 0, "
    "so the pairs kept are those of rank 0 .. CAPACITY - 1 (rank < CAPACITY, not <=). Check the "
    "comparison in TODO(capacity-drop).",
    hint="keep ranks 0 .. CAPACITY - 1 (TODO capacity-drop)",
    why=(
        "With ranks from 0, the first CAPACITY pairs have ranks 0 to CAPACITY - 1, so the "
        "test is `rank < CAPACITY`. `rank <= CAPACITY` keeps one pair more than the capped "
        "count, and that pair spills onto the next expert's first row; `rank < CAPACITY - 1` "
        "keeps one fewer and leaves the block's last row empty. The checks include CAPACITY "
        "= 1, where an expert keeps exactly its first pair, and experts routed exactly "
        "CAPACITY pairs, which must drop none."
    ),
    forms=_capacity_off_by_one,
    invariant="An expert keeps exactly min(routed, CAPACITY) pairs: those of rank 0 .. "
    "CAPACITY - 1.",
    messages=(
        "Each expert over capacity keeps one pair too many, CAPACITY + 1: ranks count from 0, "
        "so the pairs kept are those of rank 0 .. CAPACITY - 1 (rank < CAPACITY, not <=). "
        "Check the comparison in TODO(capacity-drop).",
        "Each expert routed CAPACITY pairs or more keeps one pair too few, CAPACITY - 1: ranks "
        "count from 0, so the pairs kept are those of rank 0 .. CAPACITY - 1, and the test is "
        "rank < CAPACITY. Check the comparison in TODO(capacity-drop).",
    ),
)

# fmt: off
TRAPS = (
    DISPATCH_NOT_GROUPED, DISPATCH_OFFSET_MISSING, DISPATCH_OFFSETS_INCLUSIVE,
    DISPATCH_INCLUSIVE_RANK, DISPATCH_RANK_RESTARTS, DISPATCH_NOT_TOKEN_ORDER,
    CAPACITY_NOT_APPLIED, CAPACITY_OFF_BY_ONE,
)
# fmt: on
