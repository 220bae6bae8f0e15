"""Exercise 02, the instructor's checks and gallery (TODO causal-mask).

For 16x16, 16x32, 32x16, 64x16 and 128x32 tiles (the last two: a query block over more than two
key tiles, so its diagonal crosses four of them), sizes one past, one short of and a whole number
of tiles, with M < N, M > N (top-left alignment) and M = N (``grader.kinds.attention.boundary``); besides
them, the
chapter's example, one query row, and two hostile cases: scores that climb by 8 per key, so that
inside one tile a row's future keys score up to 120 above its own (a mask applied after the max
and the exponential loses the row), and scores near -150 (a finite mask value like -100 would
beat them). Strides and half-precision inputs are handled by given code: they are 0-point notes.
"""

from grader.kinds.attention import boundary
from grader.kinds.attention.hidden import ATTENTION_NOTES, attention_cases
from grader.kinds.attention.inputs import all_low, future_high, growing, qkv
from grader.kinds.attention.traps import (
    CAUSAL_BOTTOM_RIGHT,
    CAUSAL_MASK_AFTER_EXP,
    CAUSAL_MASK_MISSING,
    CAUSAL_MASK_OFF_BY_ONE,
)
from grader.model import Case, Check, Expect, right, wrong

# fmt: off
CASES = [
    Case(name="chapter-20x20", about="M=N=20, D=8: the chapter's causal example shape",
         inputs=qkv(110, 20, 20, 8), causal=True),
    Case(name="one-row-d64", about="M=1, N=40, D=64: a single query row",
         inputs=qkv(105, 1, 40, 64), causal=True),
    *boundary.attention(boundary.ragged(16, 16), 120, causal=True),
    *boundary.attention(boundary.ragged(16, 32) + boundary.ragged(32, 16), 123, causal=True),
    *boundary.attention(boundary.ragged(64, 16) + boundary.ragged(128, 32), 130, causal=True),
    Case(name="grow-blocks-16x32",
         about="M=40, N=96, D=32, 16x32 tiles; every key block raises the row maxima",
         inputs=growing(102, 40, 96, 32, 32), block_m=16, block_n=32, causal=True),
    Case(name="future-keys-high",
         about="M=N=48, D=16: inside each tile, a row's future keys score up to 120 above it",
         inputs=future_high(116, 48, 48, 16), causal=True),
    Case(name="future-keys-high-16x32",
         about="M=N=64, D=16, 16x32 tiles: future keys score up to 250 above the row's own",
         inputs=future_high(117, 64, 64, 16), block_m=16, block_n=32, causal=True),
    Case(name="all-scores-low", about="M=N=40, D=16: every score of every other row is near -150",
         inputs=all_low(118, 40, 40, 16), causal=True),
    *attention_cases(107, causal=True),
]
# fmt: on

MASK_TRAPS = (CAUSAL_MASK_MISSING, CAUSAL_MASK_OFF_BY_ONE)
# fmt: off
CHECKS = [
    Check(id="causal-square", todo="causal-mask", points=10,
          about="M = N with diagonal tiles, including the chapter's 20x20 example",
          cases=("chapter-20x20", "edges-32x32"), judge="output", traps=MASK_TRAPS),
    Check(id="causal-rectangular", todo="causal-mask", points=5,
          about="M != N (top-left alignment), ragged D, one row",
          cases=("edges-17x31", "edges-31x17", "one-row-d64"), judge="output",
          traps=(*MASK_TRAPS, CAUSAL_BOTTOM_RIGHT)),
    Check(id="causal-tiles", todo="causal-mask", points=5,
          about="Tiles of 16x32, 32x16, 64x16 and 128x32: several key blocks per query block, "
          "and a query block's diagonal across four key tiles",
          cases=("edges-33x63-16x32", "edges-63x33-16x32", "edges-64x64-16x32",
                 "edges-33x63-32x16", "edges-63x33-32x16", "edges-64x64-32x16",
                 "edges-65x127-64x16", "edges-127x65-64x16", "edges-128x128-64x16",
                 "edges-129x255-128x32", "edges-255x129-128x32", "edges-256x256-128x32",
                 "grow-blocks-16x32"), judge="output", traps=MASK_TRAPS),
    Check(id="causal-hostile", todo="causal-mask", points=5,
          about="Future keys scoring up to 250 above a row inside its tile; scores near -150",
          cases=("future-keys-high", "future-keys-high-16x32", "all-scores-low"), judge="output",
          traps=(*MASK_TRAPS, CAUSAL_MASK_AFTER_EXP)),
    *ATTENTION_NOTES,
]
# fmt: on

HI = "hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)"
_CAUSAL = "offs_m[:, None] >= offs_n[None, :]"
# The mask's region holds the given `visible = col_ok[None, :]`, the line its TODO says to extend.
_GIVEN = "visible = col_ok[None, :]"
MASK = f"{_GIVEN} & ({_CAUSAL})"
REFERENCE = {"causal-mask": (HI, MASK)}

_WHERE = 'scores = tl.where(visible, scores, float("-inf"))'
_P = "p = tl.exp(scores - m_new[:, None])"
_SCORES = "scores = tl.dot(q, tl.trans(k)) * scale"
_ALPHA = "alpha = tl.exp(m_i - m_new)"
LOG2E = "1.4426950408889634"


def _mask(condition: str, hi: str = HI) -> dict:
    return {"causal-mask": (hi, f"{_GIVEN} & ({condition})")}


# fmt: off
GALLERY = [
    wrong("02-mask-missing", "the loop stops at the diagonal block but no per-pair mask",
          fills={"causal-mask": (HI, _GIVEN)}, traps=["causal-mask-missing"], breaks="causal-mask"),
    wrong("02-non-causal-kernel", "the chapter's trap: 21.1's correct kernel on the causal task",
          fills={"causal-mask": ("hi = N", _GIVEN)}, traps=["causal-mask-missing"],
          breaks="causal-mask"),
    wrong("02-mask-strict", "strict comparison drops the diagonal (row 0 sees nothing)",
          fills=_mask("offs_m[:, None] > offs_n[None, :]"), traps=["causal-mask-off-by-one"],
          breaks="causal-mask"),
    wrong("02-mask-one-ahead", "one future key admitted",
          fills=_mask("offs_m[:, None] + 1 >= offs_n[None, :]"), traps=["causal-mask-off-by-one"],
          breaks="causal-mask"),
    wrong("02-mask-reversed", "rows see the future and not the past",
          fills=_mask("offs_m[:, None] <= offs_n[None, :]"), breaks="causal-mask"),
    wrong("02-skip-diagonal", "the loop stops before the diagonal block (block 0 sees no key)",
          fills=_mask("offs_m[:, None] >= offs_n[None, :]", "hi = tl.minimum(N, pid_m * BLOCK_M)"),
          breaks="causal-mask"),
    wrong("02-hi-last-key", "the loop ends at N - 1, the last key's index: when N is one past "
          "a whole number of tiles and M >= N, that key's tile is never visited",
          fills=_mask(_CAUSAL, "hi = tl.minimum(N - 1, (pid_m + 1) * BLOCK_M)"),
          failed=["causal-rectangular", "causal-tiles"], breaks="causal-mask"),
    wrong("02-hi-two-key-tiles", "the loop ends two key tiles past the block's first row, as "
          "if a query block's diagonal crossed at most two key tiles: with 64x16 and 128x32 "
          "tiles the block's later rows lose their newest keys",
          fills=_mask(_CAUSAL, "hi = tl.minimum(N, pid_m * BLOCK_M + 2 * BLOCK_N)"),
          failed=["causal-tiles"], breaks="causal-mask"),
    wrong("02-mask-two-diagonal-tiles", "the causal condition only on the first two key tiles "
          "from the block's first row, as if the diagonal crossed no more: with 64-row blocks "
          "over 16-key tiles the next two go unmasked and rows see future keys",
          fills=_mask(f"(n0 >= pid_m * BLOCK_M + 2 * BLOCK_N) | ({_CAUSAL})"),
          failed=["causal-tiles"], breaks="causal-mask"),
    wrong("02-bottom-right", "FlashAttention >= 2.1's bottom-right alignment, not the chapter's "
          "top-left", fills=_mask("offs_m[:, None] + (N - M) >= offs_n[None, :]", "hi = N"),
          traps=["causal-bottom-right"], failed=["causal-rectangular"], breaks="causal-mask"),
    wrong("02-mask-after-exp", "the mask zeroes p after the max and exp saw every key: exact on "
          "ordinary scores, lost when a future key scores 100 above",
          edits=[(f"        {_WHERE}\n", ""),
                 (_P, "p = tl.where(visible, tl.exp(scores - m_new[:, None]), 0.0)")],
          traps=["causal-mask-after-exp"], failed=["causal-hostile"]),
    wrong("02-mask-value-too-small", "a finite mask value of -100 beats real scores near -150",
          edits=[(_WHERE, "scores = tl.where(visible, scores, -100.0)")],
          failed=["causal-hostile"]),
    right("02-exp2", "exp2 with log2(e) folded into the scale",
          edits=[(_SCORES, f"scores = tl.dot(q, tl.trans(k)) * (scale * {LOG2E})"),
                 (_ALPHA, "alpha = tl.exp2(m_i - m_new)"), (_P, "p = tl.exp2(scores - m_new[:, None])")]),
    right("02-finite-mask", "a large finite mask value instead of -inf",
          edits=[(_WHERE, "scores = tl.where(visible, scores, -1.0e30)")]),
    right("02-no-block-skip", "every key tile visited; the mask alone makes it causal",
          fills={"causal-mask": ("hi = N", MASK)}),
    right("02-hi-inclusive", "the loop bound from inclusive indices (the last key, the block's "
          "last row) plus one",
          fills=_mask(_CAUSAL, "hi = tl.minimum(N - 1, (pid_m + 1) * BLOCK_M - 1) + 1")),
    right("02-hi-diagonal-tiles-counted", "the loop bound as the block's first row plus the "
          "key tiles its diagonal crosses, cdiv(BLOCK_M, BLOCK_N), whatever the tiles",
          fills=_mask(_CAUSAL, "hi = tl.minimum(N, pid_m * BLOCK_M + tl.cdiv(BLOCK_M, BLOCK_N) "
                      "* BLOCK_N)")),
    right("02-mask-in-one-where", "the causal condition written straight into the where",
          fills={"causal-mask": (HI, f"{_GIVEN}\ncausal = {_CAUSAL}")},
          edits=[(_WHERE, 'scores = tl.where(visible & causal, scores, float("-inf"))')]),
    wrong("02-chapter", "the chapter's own kernel: `continue` past future tiles does not compile "
          "for a GPU, so every case gets the compiler's verdict, on both backends",
          file="chapter.py", integrity=True, score="zero",
          expect={"error": "`continue` does not compile", "warning": "continue"},
          on_cuda=Expect(score="zero", integrity=True, error="`continue` does not compile")),
    right("02-chapter-gpu-legal", "the chapter's kernel with the loop bounded instead of "
          "`continue` (as it must be to compile)", file="chapter.py", integrity=True,
          edits=[("for n0 in range(0, N, BLOCK_N):", "for n0 in range(0, tl.minimum(N, max_col), BLOCK_N):"),
                 ("        if n0 >= max_col:\n            continue\n", "")],
          expect={"notes_failed": ("half-precision-inputs",)}),
]
# fmt: on
