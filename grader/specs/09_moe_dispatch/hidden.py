"""Exercise 09 (extensions track), the instructor's checks and gallery (TODOs dest-slot and
capacity-drop).

The two TODOs are judged apart. The dest-slot checks run cases whose CAPACITY is above every
expert's count, so that no pair is dropped whatever the capacity TODO holds, and judge only the
offsets and the slots (``dispatch-slots``). The capacity checks judge the whole layout, the
grouped buffer's rows included (``dispatch-capacity``), and are blocked until the slots are
right: a pair's rank decides both its row and whether it is dropped.

Boundary classes (``grader.kinds.moe_dispatch.boundary``), with 16-pair blocks unless a case says otherwise:
pair counts one short of, a whole number of and one past the blocks (K = 1 and K = 3; K = 2
gives even counts only, two short and two past), E = 8, 9 (2^3 + 1), 16 and 60 (a padded
histogram), experts with no pair (the last one among them), one expert taking half the tokens
(and every token, at choice 0), an expert routed exactly CAPACITY pairs beside one routed one
more, CAPACITY = 0 (the contract's least: every pair dropped, no row filled), CAPACITY = 1,
CAPACITY = M with an expert routed every token, the first dropped pair on a
block's first pair (the carry equal to CAPACITY there), the hottest expert the last one (its
extra pairs would land past the last row filled).
"""

from grader.kinds.moe_dispatch import boundary
from grader.kinds.moe_dispatch.inputs import routing
from grader.kinds.moe_dispatch.traps import (
    CAPACITY_NOT_APPLIED,
    CAPACITY_OFF_BY_ONE,
    DISPATCH_INCLUSIVE_RANK,
    DISPATCH_NOT_GROUPED,
    DISPATCH_NOT_TOKEN_ORDER,
    DISPATCH_OFFSET_MISSING,
    DISPATCH_OFFSETS_INCLUSIVE,
    DISPATCH_RANK_RESTARTS,
)
from grader.model import Case, Check, Expect, right, wrong


def _case(name, about, idx, E, capacity=None, block=16):
    """A case of ``idx``; CAPACITY None: twice the pair count, above every expert's count."""
    pairs = idx["idx"].size
    params = {"E": E, "CAPACITY": 2 * pairs if capacity is None else capacity, "BLOCK": block}
    return Case(name=name, about=about, inputs=idx, params=params)


def _ragged(K, E, seed, capacity=None):
    """The three ragged token counts of ``boundary.ragged_tokens`` for K choices. With a
    ``capacity``: expert 0 takes half the tokens, well over it, and the last expert none."""
    cases = []
    for n, M in enumerate(boundary.ragged_tokens(16, K)):
        what = f"{boundary.pairs_against(M, K, 16)}, E={E}"
        if capacity is None:
            cases.append(_case(f"k{K}-m{M}", what, routing(seed + n, M, E, K), E))
            continue
        what += f", CAPACITY={capacity}: expert 0 takes half the tokens, expert {E - 1} none"
        idx = routing(seed + n, M, E, K, hot=0, empty=(E - 1,))
        cases.append(_case(f"k{K}-m{M}-c{capacity}", what, idx, E, capacity))
    return cases


_MET, _MET_CAP = boundary.capacity_met(930, 40, 8)

# fmt: off
CASES = [
    # dest-slot: nothing dropped.
    _case("e8-m40", "40 tokens x 2 over E=8: 80 pairs, exactly five 16-pair blocks",
          routing(901, 40, 8), 8),
    _case("e9-m33", "33 tokens x 2 over E=9 (a 16-bin histogram): 66 pairs",
          routing(902, 33, 9), 9),
    _case("e16-m50-b32", "50 tokens x 2 over E=16, in 32-pair blocks", routing(903, 50, 16), 16,
          block=32),
    _case("e60-m47-b32", "47 tokens x 2 over E=60 (a 64-bin histogram), in 32-pair blocks: "
          "about 1.5 pairs an expert", routing(904, 47, 60), 60, block=32),
    _case("skewed-e60-m64-b64", "64 tokens x 2 over E=60, in 64-pair blocks: expert 17 takes "
          "half the tokens, experts 40-59 none", routing(906, 64, 60, hot=17, empty=range(40, 60)),
          60, block=64),
    _case("skewed-e8-m48", "48 tokens x 2 over E=8: expert 3 takes half the tokens, experts 6 and "
          "7 none", routing(905, 48, 8, hot=3, empty=(6, 7)), 8),
    *_ragged(1, 8, 910),
    *_ragged(3, 9, 913),
    # capacity-drop: pairs dropped.
    _case("cap-skewed-e8", "64 tokens x 2 over E=8, CAPACITY=20: expert 2 takes half the "
          "tokens (32 pairs, 12 dropped)", routing(920, 64, 8, hot=2), 8, 20),
    _case("cap-skewed-e60-b64", "96 tokens x 2 over E=60, CAPACITY=12, in 64-pair blocks: the "
          "last expert, 59, takes half the tokens (48 pairs, 36 dropped)",
          routing(921, 96, 60, hot=59), 60, 12, block=64),
    _case("cap-exact", f"40 tokens x 2 over E=8, CAPACITY={_MET_CAP}: one expert routed exactly "
          f"{_MET_CAP} pairs, another {_MET_CAP + 1}, another more", _MET, 8, _MET_CAP),
    _case("cap-1", "30 tokens x 2 over E=8, CAPACITY=1: each expert keeps its first pair",
          routing(922, 30, 8), 8, 1),
    _case("cap-m", "24 tokens x 2 over E=8, CAPACITY=24=M: expert 5 routed every token, exactly "
          "its capacity", routing(923, 24, 8, hot=5, share=1.0), 8, 24),
    _case("cap-0", "30 tokens x 2 over E=8, CAPACITY=0: every pair dropped, no row of the "
          "grouped buffer filled", routing(926, 30, 8), 8, 0),
    _case("cap-block-edge", "40 tokens x 2 over E=8, CAPACITY=16: every token's first choice is "
          "expert 4, whose first dropped pair is the first pair of the third 16-pair block",
          routing(924, 40, 8, hot=4, share=1.0, first=True), 8, 16),
    _case("cap-block-edge-b32", "48 tokens x 2 over E=8, CAPACITY=16, 32-pair blocks: expert 1, "
          "every token's first choice, drops from the first pair of the second block on",
          routing(925, 48, 8, hot=1, share=1.0, first=True), 8, 16, block=32),
    *_ragged(1, 4, 930, capacity=10),
    *_ragged(3, 9, 933, capacity=4),
]
# fmt: on

SLOT_TRAPS = (
    DISPATCH_NOT_GROUPED,
    DISPATCH_OFFSET_MISSING,
    DISPATCH_OFFSETS_INCLUSIVE,
    DISPATCH_INCLUSIVE_RANK,
    DISPATCH_RANK_RESTARTS,
    DISPATCH_NOT_TOKEN_ORDER,
)
CAPACITY_TRAPS = (CAPACITY_OFF_BY_ONE, CAPACITY_NOT_APPLIED)  # the closer one first

# fmt: off
CHECKS = [
    Check(id="slots-e8", todo="dest-slot", points=8,
          about="Nothing dropped: 8, 9 and 16 experts, 16- and 32-pair blocks",
          cases=("e8-m40", "e9-m33", "e16-m50-b32"), judge="dispatch-slots", traps=SLOT_TRAPS),
    Check(id="slots-e60", todo="dest-slot", points=6,
          about="Nothing dropped: 60 experts, a few pairs each, or one expert with half the "
          "tokens and a third of the experts with none",
          cases=("e60-m47-b32", "skewed-e60-m64-b64"), judge="dispatch-slots", traps=SLOT_TRAPS),
    Check(id="slots-skewed", todo="dest-slot", points=5,
          about="Nothing dropped: one expert with half the tokens, the last two with none",
          cases=("skewed-e8-m48",), judge="dispatch-slots", traps=SLOT_TRAPS),
    Check(id="slots-ragged", todo="dest-slot", points=6,
          about="Nothing dropped: pair counts one short of, a whole number of and one past the "
          "blocks (top-1 and top-3 routing)",
          cases=("k1-m47", "k1-m48", "k1-m33", "k3-m21", "k3-m16", "k3-m11"),
          judge="dispatch-slots", traps=SLOT_TRAPS),
    Check(id="capacity-skewed", todo="capacity-drop", points=8, requires="dest-slot",
          about="One expert takes half the tokens, over its capacity (with 60 experts, the last "
          "one)", cases=("cap-skewed-e8", "cap-skewed-e60-b64"), judge="dispatch-capacity",
          traps=CAPACITY_TRAPS),
    Check(id="capacity-exact", todo="capacity-drop", points=7, requires="dest-slot",
          about="An expert routed exactly CAPACITY pairs beside one routed one more; CAPACITY = "
          "1; CAPACITY = M; CAPACITY = 0, every pair dropped",
          cases=("cap-exact", "cap-1", "cap-m", "cap-0"), judge="dispatch-capacity",
          traps=CAPACITY_TRAPS),
    Check(id="capacity-block-edge", todo="capacity-drop", points=5, requires="dest-slot",
          about="The first dropped pair on a block's first pair (16- and 32-pair blocks)",
          cases=("cap-block-edge", "cap-block-edge-b32"), judge="dispatch-capacity",
          traps=CAPACITY_TRAPS),
    Check(id="capacity-ragged", todo="capacity-drop", points=5, requires="dest-slot",
          about="Pairs dropped, pair counts one short of, a whole number of and one past the "
          "blocks (top-1 and top-3 routing)",
          cases=("k1-m47-c10", "k1-m48-c10", "k1-m33-c10", "k3-m21-c4", "k3-m16-c4",
                 "k3-m11-c4"), judge="dispatch-capacity", traps=CAPACITY_TRAPS),
]
# fmt: on

OFFSET = "offset = tl.sum(tl.where(experts < e, kept, 0))"
RANK = "ones = hit.to(tl.int32)\nrank = seen + tl.cumsum(ones) - ones\nseen += tl.sum(ones)"
KEEP = "keep = hit & (rank < CAPACITY)"
REFERENCE = {"dest-slot": (OFFSET, RANK), "capacity-drop": KEEP}


def _slot(offset: str = OFFSET, rank: str = RANK) -> dict:
    return {"dest-slot": (offset, rank)}


def _keep(condition: str) -> dict:
    return {"capacity-drop": f"keep = {condition}"}


# The previous expert's offset and count, read from what its program stored: right only when
# the programs run one by one in order, as Triton's interpreter runs them unless told otherwise.
_FROM_PREVIOUS_PROGRAM = (
    "offset = tl.load(offsets_ptr + e - 1, mask=e > 0, other=0) + "
    "tl.load(counts_ptr + e - 1, mask=e > 0, other=0)"
)

_ATOMIC = (
    "ones = hit.to(tl.int32)\n"
    "rank = tl.atomic_add(counts_ptr + e + 0 * pairs, ones, mask=hit) - count\n"
    "seen += tl.sum(ones)"
)

# fmt: off
GALLERY = [
    # ---- dest-slot ----
    wrong("09-offset-right-rank-pair", "the offset done, the rank still the pair's own index: "
          "each pair to offset + p, past the rows filled",
          fills=_slot(rank="rank = pairs"), traps=["dispatch-not-grouped"], breaks="dest-slot"),
    wrong("09-offset-missing", "the rank done, the offset still 0: every expert's block at row 0",
          fills=_slot(offset="offset = 0"), traps=["dispatch-offset-missing"],
          breaks="dest-slot"),
    wrong("09-offsets-inclusive", "experts <= e: each block starts where the next one should",
          fills=_slot(offset="offset = tl.sum(tl.where(experts <= e, kept, 0))"),
          traps=["dispatch-offsets-inclusive"], breaks="dest-slot"),
    wrong("09-offsets-by-cumsum", "the offset read off an inclusive tl.cumsum of the counts",
          fills=_slot(offset="offset = tl.sum(tl.where(experts == e, tl.cumsum(kept), 0))"),
          traps=["dispatch-offsets-inclusive"], breaks="dest-slot"),
    wrong("09-offset-of-previous-expert", "experts < e - 1: the rows of the expert just before "
          "e are left out of its offset",
          fills=_slot(offset="offset = tl.sum(tl.where(experts < e - 1, kept, 0))"),
          failed=["slots-e8", "slots-e60", "slots-skewed", "slots-ragged"], breaks="dest-slot"),
    wrong("09-inclusive-rank", "tl.cumsum alone: the pair itself counted",
          fills=_slot(rank="ones = hit.to(tl.int32)\nrank = seen + tl.cumsum(ones)\n"
                           "seen += tl.sum(ones)"),
          traps=["dispatch-inclusive-rank"], breaks="dest-slot"),
    wrong("09-rank-no-carry", "the rank inside the block only: seen never updated",
          fills=_slot(rank="ones = hit.to(tl.int32)\nrank = seen + tl.cumsum(ones) - ones"),
          traps=["dispatch-rank-restarts"], breaks="dest-slot",
          expect={"message": "start again at 0 in every block"}),
    wrong("09-carry-added-first", "seen updated before the rank: the block's own pairs counted "
          "twice", fills=_slot(rank="ones = hit.to(tl.int32)\nseen += tl.sum(ones)\n"
                                    "rank = seen + tl.cumsum(ones) - ones"),
          traps=["dispatch-rank-restarts"], breaks="dest-slot",
          expect={"message": "added to the carry before ranking"}),
    wrong("09-carry-added-twice", "the carry added twice to the rank: right in the first "
          "block, off from the second on",
          fills=_slot(rank="ones = hit.to(tl.int32)\nrank = 2 * seen + tl.cumsum(ones) - ones\n"
                           "seen += tl.sum(ones)"),
          failed=["slots-e8", "slots-skewed", "slots-ragged"], breaks="dest-slot"),
    wrong("09-carry-counts-lanes", "the carry counts every lane of a block, not the expert's "
          "pairs", fills=_slot(rank="ones = hit.to(tl.int32)\nrank = seen + tl.cumsum(ones) - ones"
                                    "\nseen += BLOCK"),
          failed=["slots-e8", "slots-e60", "slots-skewed", "slots-ragged"], breaks="dest-slot"),
    wrong("09-reversed-order", "each expert's pairs in reverse token order: a valid grouping, "
          "not the deterministic one",
          fills=_slot(rank="ones = hit.to(tl.int32)\nrank = count - 1 - (seen + tl.cumsum(ones) - "
                           "ones)\nseen += tl.sum(ones)"),
          traps=["dispatch-not-token-order"], breaks="dest-slot"),
    wrong("09-offset-read-from-e-1", "the offset read from the previous expert's "
          "program's outputs: right in the interpreter's order, 0, 1, 2, ...; run last first, "
          "program E-1 reads rows never written and stores far outside token_of_slot (on a GPU, "
          "a race)", fills=_slot(offset=_FROM_PREVIOUS_PROGRAM), breaks="dest-slot",
          expect={"error": "programs in reverse order: .*a program must not read what another "
                           "program of the same launch writes"},
          # On a GPU the programs run at once: no order to reverse, the read races the write, and
          # a row read before it is written sends stores out of bounds. Two H200 runs: 0/50, checks
          # ending in "CUDA error: operation not supported" and then "produced no output".
          on_cuda=Expect(score="less", error="CUDA error|produced no output")),
    wrong("09-atomic-counter", "slots from an atomic counter on the expert's count: refused "
          "before it runs, on both backends", fills=_slot(rank=_ATOMIC), score="zero",
          traps=[], expect={"error": "dispatch-not-token-order"}),
    # ---- capacity-drop ----
    wrong("09-capacity-not-applied", "the slots right, nothing dropped",
          fills=_keep("hit"), traps=["capacity-not-applied"], breaks="capacity-drop"),
    wrong("09-capacity-le", "rank <= CAPACITY: one pair too many",
          fills=_keep("hit & (rank <= CAPACITY)"), traps=["capacity-off-by-one"],
          breaks="capacity-drop", expect={"message": "one pair too many"}),
    wrong("09-capacity-minus-one", "rank < CAPACITY - 1: one pair too few",
          fills=_keep("hit & (rank < CAPACITY - 1)"), traps=["capacity-off-by-one"],
          breaks="capacity-drop", expect={"message": "one pair too few"}),
    wrong("09-capacity-at-least-one", "the capacity taken as at least 1 (tl.maximum(CAPACITY, "
          "1)): right for every CAPACITY >= 1, but with CAPACITY = 0 each expert still keeps its "
          "first pair, every one of them on row 0",
          fills=_keep("hit & (rank < tl.maximum(CAPACITY, 1))"), traps=["capacity-off-by-one"],
          failed=["capacity-exact"], breaks="capacity-drop",
          expect={"message": "one pair too many"}),
    wrong("09-capacity-by-row", "the row, not the rank, compared with CAPACITY: only expert 0 is "
          "capped right", fills=_keep("hit & (offset + rank < CAPACITY)"),
          failed=["capacity-skewed", "capacity-exact", "capacity-block-edge", "capacity-ragged"],
          breaks="capacity-drop"),
    wrong("09-keep-without-hit", "rank < CAPACITY without hit: the other experts' lanes write "
          "rows too", fills=_keep("rank < CAPACITY"),
          failed=["capacity-skewed", "capacity-exact", "capacity-ragged"], breaks="capacity-drop"),
    wrong("09-capacity-keeps-last", "the last CAPACITY pairs in token order kept, not the first: "
          "their rows, offset + rank, lie past the expert's block",
          fills=_keep("hit & (rank >= tl.sum(tl.where(experts == e, routed, 0)) - CAPACITY)"),
          traps=["capacity-not-applied"], breaks="capacity-drop"),
    # ---- right, written differently ----
    right("09-offset-by-cumsum", "the offset as an inclusive tl.cumsum minus the expert's own "
          "count", fills=_slot(offset="offset = tl.sum(tl.where(experts == e, tl.cumsum(kept) - "
                               "kept, 0))")),
    right("09-offset-of-e-1-computed", "the previous expert's offset plus its count, "
          "both computed by this program from the histogram (the twin of "
          "09-offset-read-from-e-1, which reads them from that program's outputs)",
          fills=_slot(offset="offset = tl.sum(tl.where(experts < e - 1, kept, 0)) + "
                             "tl.sum(tl.where(experts == e - 1, kept, 0))")),
    right("09-offset-by-subtraction", "the offset as the rows of experts up to e, minus e's own",
          fills=_slot(offset="offset = tl.sum(tl.where(experts <= e, kept, 0)) - count")),
    right("09-rank-by-comparison", "the rank counted by a BLOCK x BLOCK comparison, no scan",
          fills=_slot(rank="lane = tl.arange(0, BLOCK)\n"
                           "before = (lane[None, :] < lane[:, None]) & hit[None, :]\n"
                           "rank = seen + tl.sum(before.to(tl.int32), axis=1)\n"
                           "seen += tl.sum(hit.to(tl.int32))")),
    right("09-rank-inclusive-minus-one", "the inclusive scan minus 1 (right on the expert's own "
          "pairs, the only ones that use it)",
          fills=_slot(rank="rank = seen + tl.cumsum(hit.to(tl.int32)) - 1\n"
                           "seen += tl.sum(hit.to(tl.int32))")),
    right("09-carry-from-the-scan", "the carry updated from the scan's last value",
          fills=_slot(rank="scan = tl.cumsum(hit.to(tl.int32))\nrank = seen + scan - 1\n"
                           "seen += tl.max(scan)")),
    right("09-capacity-by-count", "kept while the rank is below the expert's capped count",
          fills=_keep("hit & (rank < count)")),
    right("09-capacity-by-count-from-one", "the pair's rank counted from 1, at most CAPACITY",
          fills=_keep("hit & (rank + 1 <= CAPACITY)")),
    right("09-capacity-le-minus-one", "rank <= CAPACITY - 1, the inclusive bound: with "
          "CAPACITY = 0 it is rank <= -1, and every pair drops",
          fills=_keep("hit & (rank <= CAPACITY - 1)")),
    right("09-capacity-by-where", "keep written with tl.where", fills=_keep(
          "tl.where(rank < CAPACITY, hit, False)")),
    right("09-written-apart", "a dispatch kernel written apart from the skeleton: counts by "
          "comparison, both scans with tl.cumsum, one store per output", file="apart.py",
          integrity=True),
]
# fmt: on
