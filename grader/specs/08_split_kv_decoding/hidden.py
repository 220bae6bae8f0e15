"""Exercise 08 (extensions track), the instructor's checks and gallery (TODO window-mask).

Windows of every kind against the tiles: WINDOW = 1 (a row sees itself only), WINDOW >= N (plain
causal attention), windows whose first key sits on a tile's last key (18: a lower bound one key
too late skips it), and, for 16x16, 16x32 and 32x16 tiles, windows one short of, a whole number
of and one past key tiles, wider than a block and a tile together, so that a block's window edge
lies apart from its diagonal (with 32-row blocks it crosses three 16-key tiles); M < N and M > N
one past and one short of a tile (``grader.specs.boundary``). Two hostile cases: scores that fall by 8
per key position, so that the keys just older than a row's window score up to 250 above the
window's own (a mask applied after the max and the exponential loses the row), and scores near
-150 (a finite mask value like -100 would beat them). Strides and half-precision inputs are
handled by given code: they are 0-point notes.
"""

from grader.judge.traps import WINDOW_IGNORED, WINDOW_OFF_BY_ONE
from grader.specs import boundary
from grader.specs.hidden import ATTENTION_NOTES, attention_cases
from grader.specs.inputs import all_low, future_high, growing, qkv
from grader.specs.model import Case, Check, right, wrong

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
    *boundary.attention(boundary.windows(16, 16), 192),
    *boundary.attention(boundary.windows(16, 32) + boundary.windows(32, 16), 195),
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
          about="M != N (top-left alignment), ragged shapes",
          cases=("window-17x31-w15", "window-31x17-w15", "window-33x63-w31-16x32",
                 "window-63x33-w31-16x32", "window-33x63-w31-32x16", "window-63x33-w31-32x16"),
          judge="output", traps=WINDOW_TRAPS),
    Check(id="window-tiles", todo="window-mask", points=4,
          about="Tiles of 16x32 and 32x16; key blocks that raise the running maximum",
          cases=("window-80x80-w63-16x32", "window-80x80-w64-16x32", "window-96x96-w65-16x32",
                 "window-96x96-w63-32x16", "window-96x96-w64-32x16", "window-96x96-w49-32x16",
                 "grow-blocks-16x32-w40"), judge="output", traps=WINDOW_TRAPS),
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
# The wrong kernels a student is likely to write, each with what it must score, and
# right kernels written differently (grader.specs.model's wrong() and right()).
GALLERY = []
# fmt: on
