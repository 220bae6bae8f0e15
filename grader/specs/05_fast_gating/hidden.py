"""Exercise 05 (performance track), the instructor's checks and gallery."""

from grader.kinds.base import round_to
from grader.kinds.gating import boundary
from grader.kinds.gating.inputs import dominant, logits, ties
from grader.kinds.gating.traps import TIES_NOT_LOWEST_INDEX, TOP1_FILL_TOO_HIGH, TOP2_NOT_MASKED
from grader.kinds.tiled_gating.traps import ONE_TOKEN_PER_TILE
from grader.model import Case, Check, right, wrong

# The grader pins how many tokens a program owns (the kernel's autotuner would pick one of its
# own): 16 (the interpreter's old only choice), 32, 64 and 128, and, for fp32 and for bf16
# logits, every choice the kernel offers (the reference picks one per row width and dtype: 256
# and 512 tokens at E = 8). A row mapping that holds at one tile height only is wrong at the
# others.
ROWS_16, ROWS_32, ROWS_64, ROWS_128 = ({"BLOCK_M": m, "num_warps": 4} for m in (16, 32, 64, 128))

# fmt: off
CASES = [
    Case(name="random-1000x64", about="1000 tokens x 64 experts, 64 rows per program", inputs=logits(400, 1000, 64), config=ROWS_64),
    Case(name="random-333x128", about="333 tokens x 128 experts, 32 rows per program",
         inputs=logits(401, 333, 128), config=ROWS_32),
    Case(name="random-77x8",
         about="77 tokens x 8 experts, under every rows-per-program the kernel's autotuner offers",
         inputs=logits(402, 77, 8), each_config=True),
    Case(name="bf16-200x64", about="200 tokens x 64 experts, bfloat16",
         inputs={"logits": round_to(logits(403, 200, 64)["logits"], "bfloat16")}, dtype="bfloat16",
         config=ROWS_16),
    Case(name="negative-e6", about="40 tokens x 6 experts (padded), all logits negative",
         inputs=logits(404, 40, 6, shift=-8.0), config=ROWS_128),
    Case(name="ties-e8", about="exact ties: lowest index first", inputs=ties(8), config=ROWS_16),
    Case(name="dominant-e16", about="40 tokens x 16 experts, one logit 200 above the rest",
         inputs=dominant(405, 40, 16), config=ROWS_64),
    boundary.extremes(406, 33, 12, config=ROWS_32),
    Case(name="bf16-40x9", about="40 tokens x 9 experts (padded to 16), bfloat16",
         inputs={"logits": round_to(logits(407, 40, 9)["logits"], "bfloat16")}, dtype="bfloat16",
         config=ROWS_16),
    Case(name="bf16-40x6", about="40 tokens x 6 experts (padded to 8), bfloat16",
         inputs={"logits": round_to(logits(409, 40, 6)["logits"], "bfloat16")}, dtype="bfloat16",
         config=ROWS_16),
    # E = 160 is read in five chunks of 32 (fp32 and bf16), E = 80 in fp32 in five of 16: no
    # chunk wholly past E, as a chunk width fixed by the padded 256 or 128 would leave. Rows of
    # 120 bytes (E = 60, bf16) go in chunks of 16 logits, the last one partly past E.
    Case(name="bf16-40x60", about="40 tokens x 60 experts (padded to 64), bfloat16",
         inputs={"logits": round_to(logits(412, 40, 60)["logits"], "bfloat16")}, dtype="bfloat16",
         config=ROWS_32),
    Case(name="bf16-40x160", about="40 tokens x 160 experts (padded to 256), bfloat16",
         inputs={"logits": round_to(logits(410, 40, 160)["logits"], "bfloat16")}, dtype="bfloat16",
         config=ROWS_32),
    Case(name="random-40x80", about="40 tokens x 80 experts (padded to 128)",
         inputs=logits(411, 40, 80), config=ROWS_16),
    Case(name="bf16-77x8",
         about="77 tokens x 8 experts, bfloat16, under every rows-per-program the kernel's autotuner offers",
         inputs={"logits": round_to(logits(408, 77, 8)["logits"], "bfloat16")}, dtype="bfloat16",
         each_config=True),
]
# fmt: on

# fmt: off
CHECKS = [
    # The weights come from given code here: a wrong row mapping is what shows in them. They are
    # judged first: until every token gets its own row, the experts a token was given say
    # nothing about the top-2 search (that check is blocked, not failed). They are judged on the
    # experts the kernel chose, one expert chosen twice included (1/2 each, as the given code
    # computes it), so that a missing top-2 mask does not hold back this TODO's points. Given
    # code edited out of exp's range (exp of raw logits) shows in them too: this check, the only
    # judge of the weights, charges it, so that such a kernel never gets full marks.
    Check(id="fast-gating-weights", todo="rows-per-program", points=25,
          about="Renormalized weights for every token of every tile",
          cases=("random-1000x64", "random-333x128", "random-77x8", "bf16-200x64", "negative-e6",
                 "extreme-logits-33x12", "bf16-77x8"), judge="chosen-weights",
          traps=(ONE_TOKEN_PER_TILE,)),
    Check(id="fast-gating-top2", todo="top2-mask", points=25,
          about="Many rows per program, rows not a multiple of a tile, bfloat16, padded E, ties",
          cases=("random-1000x64", "random-333x128", "random-77x8", "bf16-200x64", "negative-e6",
                 "ties-e8", "dominant-e16", "bf16-40x9", "bf16-40x6", "bf16-40x160", "random-40x80", "bf16-40x60", "bf16-77x8"),
          judge="top2",
          traps=(TOP2_NOT_MASKED, TOP1_FILL_TOO_HIGH, TIES_NOT_LOWEST_INDEX),
          requires="rows-per-program"),
]
# fmt: on

REFERENCE = {
    "rows-per-program": "rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)",
    "top2-mask": """\
holds_top1 = i1 == i0[:, None]
rest, rest_idx = tl.where(holds_top1, t2, t1), tl.where(holds_top1, i2, i1)""",
}

_E1 = "e1 = tl.exp(l1 - l0)"
_W1 = "w1 = e1 / (1.0 + e1)"

# fmt: off
GALLERY = [
    wrong("05-top2-not-masked", "the best slot is picked again, so the top-1 comes back",
          fills={"top2-mask": "rest, rest_idx = t1, i1"}, traps=["top2-not-masked"],
          breaks="top2-mask", failed=["fast-gating-top2"],
          expect={"passed": ("fast-gating-weights",)}),  # the page's "rows only: 25/50"
    wrong("05-highest-index-on-ties", "merges equal logits toward the highest expert index, "
          "between slots and, chunk after chunk, within a slot",
          edits=[("take = (v1 > v0) | ((v1 == v0) & (i1 < i0))",
                  "take = (v1 > v0) | ((v1 == v0) & (i1 > i0))"),
                 ("gt1 = x > t1", "gt1 = x >= t1"), ("gt2 = x > t2", "gt2 = x >= t2")],
          traps=["ties-not-lowest-index"], failed=["fast-gating-top2"]),
    wrong("05-one-token-per-tile", "the skeleton's row mapping: every row of a tile is its first "
          "token, so the others are never written",
          fills={"rows-per-program": "rows = pid * BLOCK_M + tl.zeros([BLOCK_M], dtype=tl.int32)"},
          traps=["one-token-per-tile"], failed=["fast-gating-weights"], breaks="rows-per-program"),
    wrong("05-rows-by-sixteen", "token rows counted in steps of 16 (the interpreter's old only "
          "tile height): right at BLOCK_M = 16 only, rows skipped and written twice at 32 and 64",
          fills={"rows-per-program": "rows = pid * 16 + tl.arange(0, BLOCK_M)"},
          failed=["fast-gating-weights"], breaks="rows-per-program"),
    wrong("05-bf16-padding-unmasked", "the 16-bit path loads its first chunk unmasked: padded "
          "experts read whatever lies there (right whenever E is a power of two or fills the "
          "first chunk: 8 bf16 logits for rows of up to 64 bytes)",
          edits=[("    x = tl.load(chunk_ptrs, mask=cols[None, :] < E, other=float(\"-inf\"))\n"
                  "    k1 = _sort_key(x, cols[None, :])",
                  "    x = tl.load(chunk_ptrs)\n    k1 = _sort_key(x, cols[None, :])")],
          failed=["fast-gating-top2"], breaks="top2-mask"),
    wrong("05-weights-from-raw-logits", "the given weights edited to exp() of each raw logit: "
          "exact until exp overflows past 88 or underflows below -103",
          edits=[(_E1, "e0, e1 = tl.exp(l0), tl.exp(l1)"), (_W1, "w1 = e1 / (e0 + e1)")],
          failed=["fast-gating-weights"], breaks="rows-per-program"),
    right("05-weights-as-sigmoid", "w1 as 1 / (1 + exp(l0 - l1)): exp may overflow to inf, "
          "which gives w1 = 0, as it should",
          edits=[(_E1 + "\n    " + _W1, "w1 = 1.0 / (1.0 + tl.exp(l0 - l1))")]),
    right("05-top2-mask-by-index-compare", "the top-1's slot found by comparing with each row's "
          "top-1 expert, written as one where per output",
          fills={"top2-mask": "rest = tl.where(i1 == i0[:, None], t2, t1)\n"
                              "rest_idx = tl.where(i1 == i0[:, None], i2, i1)"}),
]
# fmt: on
