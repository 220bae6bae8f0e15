"""Exercise 06 (extensions track), the instructor's checks and gallery (TODO window-mask).

Windows of every kind against the tiles: WINDOW = 1 (a row sees itself only), WINDOW >= N (plain
causal attention), windows whose first key sits on a tile's last key (18: a lower bound one key
too late skips it), and, for 16x16, 16x32 and 32x16 tiles, windows one short of, a whole number
of and one past key tiles, wider than a block and a tile together, so that a block's window edge
lies apart from its diagonal (with 32-row blocks it crosses three 16-key tiles, with 64x16 and
128x32 tiles five); M < N and M > N one past and one short of a tile, for those five tile shapes;
M > N with WINDOW = N and WINDOW = M - 1 (longer than the cache, yet not plain causal: rows from
WINDOW on lose their oldest keys); windows of 15 and 16 keys under 32-row blocks, where the
block's own diagonal key tiles hold keys older than its last rows' windows
(``grader.kinds.attention.boundary``). Two hostile cases: scores that fall by 8
per key position, so that the keys just older than a row's window score up to 250 above the
window's own (a mask applied after the max and the exponential loses the row), and scores near
-150 (a finite mask value like -100 would beat them). Strides and half-precision inputs are
handled by given code: they are 0-point notes.
"""

from grader.kinds.attention import boundary
from grader.kinds.attention.hidden import ATTENTION_NOTES, attention_cases
from grader.kinds.attention.inputs import all_low, future_high, growing, qkv
from grader.kinds.window_attention.traps import WINDOW_IGNORED, WINDOW_OFF_BY_ONE
from grader.model import Case, Check, right, wrong

# fmt: off
CASES = [
    Case(name="square-48-w10", about="M=N=48, D=16, WINDOW=10: the worked example's shape",
         inputs=qkv(160, 48, 48, 16), causal=True, window=10),
    Case(name="w1-32", about="M=N=32, D=16, WINDOW=1: each row sees its own key only",
         inputs=qkv(162, 32, 32, 16), causal=True, window=1),
    Case(name="tile-end-64-w18",
         about="M=N=64, D=16, WINDOW=18: each block's first row's window begins on a tile's "
         "last key", inputs=qkv(164, 64, 64, 16), causal=True, window=18),
    Case(name="w-gt-n-40-w64", about="M=N=40, D=16, WINDOW=64 > N: plain causal attention",
         inputs=qkv(165, 40, 40, 16), causal=True, window=64),
    # Windows one key short of key tiles: a block's last row's window edge on a tile's first key.
    # (With 32x16 tiles, 31 keys: rows past N + WINDOW - 1 would see no key at all.)
    *boundary.attention([*boundary.ragged(16, 16, window=15)[:2],
                         *boundary.ragged(16, 32, window=31)[:2],
                         *boundary.ragged(32, 16, window=31)[:2]], 186),
    # Query blocks over more than two key tiles (64x16, 128x32): windows one key short of a block.
    *boundary.attention([*boundary.ragged(64, 16, window=63)[:2],
                         *boundary.ragged(128, 32, window=127)[:2]], 200),
    # More queries than keys, WINDOW >= N: rows from WINDOW on still lose their oldest keys.
    *boundary.attention(boundary.long_windows(16, 16) + boundary.long_windows(32, 16), 205),
    *boundary.attention(boundary.windows(16, 16), 192),
    *boundary.attention(boundary.windows(16, 32) + boundary.windows(32, 16), 195),
    *boundary.attention(boundary.windows(64, 16) + boundary.windows(128, 32), 210),
    *boundary.attention(boundary.narrow(32, 16), 217),
    Case(name="grow-blocks-16x32-w40",
         about="M=N=96, D=32, WINDOW=40, 16x32 tiles; every key block raises the row maxima",
         inputs=growing(171, 96, 96, 32, 32), block_m=16, block_n=32, causal=True, window=40),
    Case(name="old-keys-high",
         about="M=N=48, D=16, WINDOW=6: scores fall by 8 per key, so keys just older than a "
         "row's window score up to 120 above it", inputs=future_high(172, 48, 48, 16, -8.0),
         causal=True, window=6),
    Case(name="old-keys-high-16x32",
         about="M=N=64, D=16, WINDOW=6, 16x32 tiles: keys just older than a row's window score "
         "up to 250 above it", inputs=future_high(173, 64, 64, 16, -8.0), block_m=16,
         block_n=32, causal=True, window=6),
    Case(name="all-scores-low",
         about="M=N=40, D=16, WINDOW=9: every score of every other row is near -150",
         inputs=all_low(174, 40, 40, 16), causal=True, window=9),
    *attention_cases(175, causal=True, windows=(11, 7)),
]
# fmt: on

WINDOW_TRAPS = (WINDOW_IGNORED, WINDOW_OFF_BY_ONE)
# fmt: off
CHECKS = [
    # WINDOW = 1 comes last: there the one-key-short window is all NaN, which names no trap.
    Check(id="window-square", todo="window-mask", points=8,
          about="M = N: the worked example's shape, windows beginning inside a tile, WINDOW = 1",
          cases=("square-48-w10", "window-64x64-w47", "w1-32"), judge="output",
          traps=WINDOW_TRAPS),
    Check(id="window-edges", todo="window-mask", points=5,
          about="Windows beginning on a tile's first and last key; WINDOW > N",
          cases=("window-64x64-w48", "window-64x64-w33", "tile-end-64-w18", "w-gt-n-40-w64"),
          judge="output", traps=WINDOW_TRAPS),
    Check(id="window-rectangular", todo="window-mask", points=5,
          about="M != N (top-left alignment), ragged shapes, query blocks over more than two key "
          "tiles; M > N with WINDOW >= N, where the last rows still lose their oldest keys",
          cases=("window-17x31-w15", "window-31x17-w15", "window-33x63-w31-16x32",
                 "window-63x33-w31-16x32", "window-33x63-w31-32x16", "window-63x33-w31-32x16",
                 "window-65x127-w63-64x16", "window-127x65-w63-64x16",
                 "window-129x255-w127-128x32", "window-255x129-w127-128x32",
                 "window-31x17-w17", "window-31x17-w30", "window-63x33-w33-32x16",
                 "window-63x33-w62-32x16"),
          judge="output", traps=WINDOW_TRAPS),
    Check(id="window-tiles", todo="window-mask", points=4,
          about="Tiles of 16x32, 32x16, 64x16 and 128x32 (a window edge across up to five key "
          "tiles); windows of 15 and 16 keys under 32-row blocks; key blocks that raise the "
          "running maximum",
          cases=("window-80x80-w63-16x32", "window-80x80-w64-16x32", "window-96x96-w65-16x32",
                 "window-96x96-w63-32x16", "window-96x96-w64-32x16", "window-96x96-w49-32x16",
                 "window-192x192-w95-64x16", "window-192x192-w96-64x16",
                 "window-192x192-w81-64x16", "window-384x384-w191-128x32",
                 "window-384x384-w192-128x32", "window-384x384-w161-128x32",
                 "window-64x64-w15-32x16", "window-64x64-w16-32x16", "grow-blocks-16x32-w40"),
          judge="output", traps=WINDOW_TRAPS),
    Check(id="window-hostile", todo="window-mask", points=3,
          about="Keys just older than a row's window scoring up to 250 above it; scores near "
          "-150", cases=("old-keys-high", "old-keys-high-16x32", "all-scores-low"),
          judge="output", traps=WINDOW_TRAPS),
    *ATTENTION_NOTES,
]
# fmt: on

LO = "lo = tl.maximum(pid_m * BLOCK_M - WINDOW + 1, 0) // BLOCK_N * BLOCK_N"
_IN_WINDOW = "offs_m[:, None] - offs_n[None, :] < WINDOW"
# The mask's region holds the given causal `visible`, the line its TODO says to extend.
_GIVEN = "visible = col_ok[None, :] & (offs_m[:, None] >= offs_n[None, :])"
MASK = f"{_GIVEN}\nvisible = visible & ({_IN_WINDOW})"
REFERENCE = {"window-mask": (LO, MASK)}

_WHERE = 'scores = tl.where(visible, scores, float("-inf"))'
_P = "p = tl.exp(scores - m_ref[:, None])"
_GUARD = 'm_ref = tl.where(m_new == float("-inf"), 0.0, m_new)'
_M_INIT = 'm_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)'


def _mask(condition: str, lo: str = LO) -> dict:
    return {"window-mask": (lo, f"{_GIVEN}\nvisible = visible & ({condition})")}


def _lo(expression: str) -> dict:
    return {"window-mask": (f"lo = {expression}", MASK)}


# fmt: off
GALLERY = [
    wrong("06-window-ignored", "the loop starts at the window's first tile but no per-pair "
          "window condition: causal over whole tiles", fills={"window-mask": (LO, _GIVEN)},
          traps=["window-ignored"], breaks="window-mask"),
    wrong("06-window-wrong-side", "the window measured from the key to the row (key - row < "
          "WINDOW): with causality it hides nothing",
          fills=_mask("offs_n[None, :] - offs_m[:, None] < WINDOW"), traps=["window-ignored"],
          breaks="window-mask"),
    wrong("06-window-short", "WINDOW - 1 keys: each row loses its oldest key (and with WINDOW = "
          "1, everything)", fills=_mask("offs_m[:, None] - offs_n[None, :] < WINDOW - 1"),
          traps=["window-off-by-one"], breaks="window-mask"),
    wrong("06-window-long", "WINDOW + 1 keys: `<=` where `<` belongs",
          fills=_mask("offs_m[:, None] - offs_n[None, :] <= WINDOW"),
          traps=["window-off-by-one"], breaks="window-mask"),
    wrong("06-window-long-no-skip", "WINDOW + 1 keys, every key tile visited",
          fills=_mask("offs_n[None, :] >= offs_m[:, None] - WINDOW", "lo = 0"),
          traps=["window-off-by-one"], breaks="window-mask"),
    wrong("06-window-from-start", "the first WINDOW keys of the sequence, not the last WINDOW "
          "before the row", fills=_mask("offs_n[None, :] < WINDOW"), breaks="window-mask"),
    wrong("06-lo-rounds-up", "the lower bound rounded up: the tile holding the first row's "
          "oldest keys is skipped", fills=_lo("tl.cdiv(tl.maximum(pid_m * BLOCK_M - WINDOW + 1, "
          "0), BLOCK_N) * BLOCK_N"), breaks="window-mask"),
    wrong("06-lo-from-last-row", "the lower bound from the block's last row: earlier rows lose "
          "their oldest keys",
          fills=_lo("tl.maximum((pid_m + 1) * BLOCK_M - WINDOW, 0) // BLOCK_N * BLOCK_N"),
          breaks="window-mask"),
    wrong("06-lo-one-late", "the lower bound one key late: when a window begins on a tile's last "
          "key, that tile is skipped",
          fills=_lo("tl.maximum(pid_m * BLOCK_M - WINDOW + 2, 0) // BLOCK_N * BLOCK_N"),
          failed=["window-edges"], breaks="window-mask"),
    wrong("06-mask-first-two-tiles", "the window condition only on the first two key tiles "
          "from lo, where a 16-row block's window edge always lies: a 32-row block's edge can "
          "cross three 16-key tiles",
          fills=_mask(f"(n0 >= lo + 2 * BLOCK_N) | ({_IN_WINDOW})"), failed=["window-tiles"],
          breaks="window-mask"),
    wrong("06-edge-tiles-one-early", "the window condition skipped on tiles from the block's "
          "last row's oldest key on, counted one key early (last row - WINDOW): a tile that "
          "starts on the key just outside that row's window goes unmasked",
          fills=_mask(f"(n0 >= (pid_m + 1) * BLOCK_M - 1 - WINDOW) | ({_IN_WINDOW})"),
          failed=["window-square", "window-rectangular", "window-tiles"], breaks="window-mask"),
    wrong("06-mask-first-three-tiles", "the window condition only on the first three key "
          "tiles from lo, as far as a 32-row block's window edge reaches over 16-key tiles: a "
          "64-row block's edge crosses five",
          fills=_mask(f"(n0 >= lo + 3 * BLOCK_N) | ({_IN_WINDOW})"),
          failed=["window-tiles"], breaks="window-mask"),
    wrong("06-window-skipped-when-ge-n", "the window condition skipped when WINDOW >= N, taken "
          "for plain causal attention: with more queries than keys, rows from WINDOW on still "
          "lose their oldest keys", fills=_mask(f"(WINDOW >= N) | ({_IN_WINDOW})"),
          traps=["window-ignored"], failed=["window-rectangular"], breaks="window-mask"),
    wrong("06-diagonal-tiles-unmasked", "the window condition skipped on the key tiles past the "
          "block's first diagonal tile, as if a window held at least BLOCK_M - BLOCK_N keys: "
          "with 32-row blocks over 16-key tiles and WINDOW = 15, the last rows see keys older "
          "than their window",
          fills=_mask(f"(n0 >= pid_m * BLOCK_M + BLOCK_N) | ({_IN_WINDOW})"),
          failed=["window-tiles"], breaks="window-mask"),
    wrong("06-mask-after-exp", "the mask zeroes p after the max and exp saw every loaded key: "
          "exact on ordinary scores, lost when an older key scores 100 above the window",
          edits=[(f"        {_WHERE}\n", ""),
                 (_P, "p = tl.where(visible, tl.exp(scores - m_ref[:, None]), 0.0)")],
          failed=["window-hostile"]),
    wrong("06-mask-value-too-small", "a finite mask value of -100 beats real scores near -150",
          edits=[(_WHERE, "scores = tl.where(visible, scores, -100.0)")],
          failed=["window-hostile"]),
    wrong("06-no-nan-guard", "the given guard removed: a row that sees no key in a tile gets "
          "exp(-inf - -inf) = NaN", edits=[(_GUARD, "m_ref = m_new")],
          expect={"message": "NaN"}),
    right("06-no-lower-bound", "every tile up to the diagonal visited; the mask alone makes the "
          "window", fills={"window-mask": ("lo = 0", MASK)}),
    right("06-lo-unaligned", "the loop starts at the first row's oldest key itself, not at its "
          "tile's start", fills=_lo("tl.maximum(pid_m * BLOCK_M - WINDOW + 1, 0)")),
    right("06-edge-tiles-only", "the window condition only on the tiles before the block's last "
          "row's oldest key: every later tile lies inside every row's window",
          fills=_mask(f"(n0 >= (pid_m + 1) * BLOCK_M - WINDOW) | ({_IN_WINDOW})")),
    right("06-mask-first-tiles", "the window condition on the tiles from lo up to BLOCK_M + "
          "BLOCK_N keys on, as far as a block's window edge reaches",
          fills=_mask(f"(n0 >= lo + BLOCK_M + BLOCK_N) | ({_IN_WINDOW})")),
    right("06-mask-edge-tiles-counted", "the window condition on as many key tiles from lo "
          "as a block's window edge can cross, cdiv(BLOCK_M, BLOCK_N) + 1, whatever the tiles",
          fills=_mask(f"(n0 >= lo + (tl.cdiv(BLOCK_M, BLOCK_N) + 1) * BLOCK_N) | ({_IN_WINDOW})")),
    right("06-window-skipped-when-ge-m", "the window condition skipped when WINDOW >= M: then "
          "every row's window reaches key 0, and it is plain causal attention",
          fills=_mask(f"(WINDOW >= M) | ({_IN_WINDOW})")),
    right("06-diagonal-tiles-unmasked-when-wide", "the window condition skipped on the key "
          "tiles past the block's first diagonal tile only when WINDOW >= BLOCK_M - BLOCK_N, "
          "the widest key distance left there",
          fills=_mask(f"((n0 >= pid_m * BLOCK_M + BLOCK_N) & (WINDOW >= BLOCK_M - BLOCK_N)) | "
                      f"({_IN_WINDOW})")),
    right("06-window-as-key-bound", "the window written as a lower bound on the key's position",
          fills=_mask("offs_n[None, :] >= offs_m[:, None] - WINDOW + 1")),
    right("06-mask-in-one-where", "the window condition written straight into the where",
          fills={"window-mask": (LO, f"{_GIVEN}\nwindow = {_IN_WINDOW}")},
          edits=[(_WHERE, 'scores = tl.where(visible & window, scores, float("-inf"))')]),
    right("06-finite-mask", "a large finite mask value instead of -inf (the guard then never "
          "fires: fully masked rows are erased by the next alpha)",
          edits=[(_WHERE, "scores = tl.where(visible, scores, -1.0e30)")]),
    right("06-finite-start", "the running maximum starts at -1e30 instead of -inf, and no guard: "
          "exp(-inf - -1e30) is 0, not NaN",
          edits=[(_M_INIT, "m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)"),
                 (_GUARD, "m_ref = m_new")]),
    right("06-written-apart", "a sliding-window kernel written apart from the skeleton: both "
          "bounds up front, one `valid` mask, the chapter's names", file="apart.py",
          integrity=True),
]
# fmt: on
