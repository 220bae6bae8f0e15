"""Exercise 10 (extensions track), the instructor's checks and gallery (TODOs recompute-p and ds).

dV depends on the recomputed P alone, dQ and dK on P and dS: recompute-p is judged on dV, ds on
dQ and dK, and ds's checks wait on recompute-p's (a wrong P makes every dS wrong). The cases
follow the boundary classes of ``grader.kinds.attention_backward.boundary.backward``: S = 1
(one key: every right dS is 0), S one short of, a whole number of and one past the 16-row
tiles, two tiles and one row; D = 24 (not a power of two, padded to 32); several (batch, head)
pairs; causal and not, with square tiles and with 32x16 and 16x32 ones (the dK, dV and dQ
kernels then walk different tiles past the diagonal); and scores in the hundreds (q and k
times 12), where exp of a score alone overflows fp32. The scale traps need D >= 2 (at D = 1 the scale is 1): every case
has D >= 16.
"""

from grader.kinds.attention_backward.boundary import backward
from grader.kinds.attention_backward.traps import (
    CAUSAL_MASK_MISSING_IN_BACKWARD,
    DELTA_MISSING,
    DV_FROM_UNMASKED_P,
    P_NOT_NORMALIZED_BY_LSE,
    SCALE_DOUBLED,
    SCALE_DROPPED,
)
from grader.model import Check, right, wrong

# The large-score cases are judged with each element's fp32 error bound besides the tolerance
# (grader.kinds.attention_backward.judges): they catch what overflows.
_BOUND = {"fp32_bound": 1}
# fmt: off
CASES = [
    # Non-causal: S against the 16-row tiles, D padded, several heads.
    backward(1011, 1, 1, 1, 16, what="one row and one key: every right dS is 0"),
    backward(1012, 1, 2, 15, 16, what="one row short of a tile"),
    backward(1013, 1, 1, 16, 16, what="exactly one tile"),
    backward(1014, 1, 2, 17, 24, what="one row past a tile, D padded to 32"),
    backward(1015, 2, 2, 33, 16, what="four (batch, head) pairs, one row past two tiles"),
    # Causal, square tiles and not.
    backward(1021, 1, 1, 1, 16, causal=True, what="one row: it sees its own key only"),
    backward(1022, 1, 2, 33, 24, causal=True, what="D padded to 32"),
    backward(1023, 2, 1, 47, 16, causal=True, block_m=32, block_n=16,
             what="query tiles twice as tall as key tiles"),
    backward(1024, 1, 2, 40, 16, causal=True, block_m=16, block_n=32,
             what="key tiles twice as wide as query tiles"),
    # Scores in the hundreds: exp of a score overflows fp32 (exp(S) / exp(lse) is inf / inf),
    # and a future key's exp(S - lse) too (inf * 0 is NaN where the mask multiplies).
    backward(1031, 1, 2, 20, 16, spread=12.0, name="large-scores", params=_BOUND,
             what="scores in the hundreds"),
    backward(1032, 1, 2, 20, 16, causal=True, spread=12.0, name="large-scores-causal", params=_BOUND,
             what="scores in the hundreds, future keys far above their row's lse"),
]
# fmt: on

_PLAIN = ("s1-d16-16x16", "s15-d16-16x16", "s16-d16-16x16", "s17-d24-16x16", "s33-d16-16x16")
_CAUSAL = (
    "s1-d16-causal-16x16",
    "s33-d24-causal-16x16",
    "s47-d16-causal-32x16",
    "s40-d16-causal-16x32",
)
_LARGE = ("large-scores", "large-scores-causal")
_P_TRAPS = (P_NOT_NORMALIZED_BY_LSE, CAUSAL_MASK_MISSING_IN_BACKWARD, DV_FROM_UNMASKED_P)
_DS_TRAPS = (DELTA_MISSING, SCALE_DROPPED, SCALE_DOUBLED)
# fmt: off
CHECKS = [
    Check(id="dv-tiles", todo="recompute-p", points=4,
          about="dV, non-causal: S = 1, S one short of, a whole number of and one past the "
          "tiles, D = 24, four (batch, head) pairs", cases=_PLAIN, judge="dv",
          traps=(P_NOT_NORMALIZED_BY_LSE,)),
    Check(id="dv-causal", todo="recompute-p", points=5,
          about="dV, causal: S = 1, D = 24, query tiles taller and key tiles wider than the "
          "other", cases=_CAUSAL, judge="dv", traps=_P_TRAPS),
    Check(id="dv-large-scores", todo="recompute-p", points=3,
          about="dV: scores in the hundreds, causal and not", cases=_LARGE, judge="dv",
          traps=_P_TRAPS),
    Check(id="dqdk-tiles", todo="ds", points=5, requires="recompute-p",
          about="dQ and dK, non-causal: the same shapes as dv-tiles", cases=_PLAIN,
          judge="dqdk", traps=_DS_TRAPS),
    Check(id="dqdk-causal", todo="ds", points=5, requires="recompute-p",
          about="dQ and dK, causal: the same shapes as dv-causal", cases=_CAUSAL,
          judge="dqdk", traps=_DS_TRAPS),
    Check(id="dqdk-large-scores", todo="ds", points=3, requires="recompute-p",
          about="dQ and dK: scores in the hundreds, causal and not", cases=_LARGE, judge="dqdk",
          traps=_DS_TRAPS),
]
# fmt: on

P = "p = tl.where(visible, tl.exp(qk * scale - lse[:, None]), 0.0)"
DS = "ds = p * (dp - delta[:, None]) * scale"
REFERENCE = {"recompute-p": (P, P), "ds": (DS, DS)}


def _both(code: str) -> tuple[str, str]:
    """The same code in the TODO's region of each kernel (dK, dV and dQ)."""
    return (code, code)


# fmt: off
GALLERY = [
    wrong("10-p-without-lse", "P = exp(S): the saved lse left out",
          fills={"recompute-p": _both("p = tl.where(visible, tl.exp(qk * scale), 0.0)")},
          traps=["p-not-normalized-by-lse"], breaks="recompute-p"),
    wrong("10-p-unmasked", "P left unmasked in both kernels",
          fills={"recompute-p": _both("p = tl.exp(qk * scale - lse[:, None])")},
          traps=["causal-mask-missing-in-backward"], failed=["dv-causal"],
          expect={"passed": ("dv-tiles",)}, breaks="recompute-p"),
    wrong("10-mask-moved-to-ds", "the mask moved from P to dS: dQ and dK right, dV not",
          fills={"recompute-p": _both("p = tl.exp(qk * scale - lse[:, None])"),
                 "ds": _both("ds = tl.where(visible, p * (dp - delta[:, None]), 0.0) * scale")},
          traps=["dv-from-unmasked-p"], failed=["dv-causal"],
          expect={"passed": ("dv-tiles",)}),
    wrong("10-exp-over-exp", "P = exp(S) / exp(lse): exact in exact arithmetic, inf / inf in "
          "fp32 once a score passes 88",
          fills={"recompute-p": _both(
              "p = tl.where(visible, tl.exp(qk * scale) / tl.exp(lse[:, None]), 0.0)")},
          failed=["dv-large-scores"], expect={"passed": ("dv-tiles", "dv-causal")},
          breaks="recompute-p"),
    wrong("10-mask-by-multiplying", "the mask applied by multiplication: inf * 0 is NaN "
          "where a future score passes the row's lse by 88",
          fills={"recompute-p": _both(
              "p = tl.exp(qk * scale - lse[:, None]) * visible.to(tl.float32)")},
          failed=["dv-large-scores"], expect={"passed": ("dv-tiles", "dv-causal")},
          breaks="recompute-p"),
    wrong("10-delta-missing", "dS = P * dP: the softmax's gradient without delta",
          fills={"ds": _both("ds = p * dp * scale")}, traps=["delta-missing"], breaks="ds"),
    wrong("10-delta-from-tile", "delta summed over this tile's p * dp: right while a row's keys "
          "fit one tile",
          fills={"ds": _both("ds = p * (dp - tl.sum(p * dp, axis=1)[:, None]) * scale")},
          failed=["dqdk-tiles"], breaks="ds"),
    wrong("10-scale-dropped", "dS without the scale",
          fills={"ds": _both("ds = p * (dp - delta[:, None])")}, traps=["scale-dropped"],
          breaks="ds"),
    wrong("10-scale-doubled", "dS with the scale twice",
          fills={"ds": _both("ds = p * (dp - delta[:, None]) * scale * scale")},
          traps=["scale-doubled"], breaks="ds"),
    wrong("10-scale-from-block-d", "the scale rebuilt from the padded width BLOCK_D: right "
          "while D is a power of two of at least 16",
          fills={"ds": _both("ds = p * (dp - delta[:, None]) / tl.sqrt(BLOCK_D * 1.0)")},
          failed=["dqdk-tiles", "dqdk-causal"], breaks="ds"),
    wrong("10-dq-dot-k8", "a tl.dot with an inner dimension of 8 in the dQ kernel alone: the "
          "interpreter runs it, a GPU's compiler refuses it (the compile gate compiles all three "
          "kernels, not the graded one alone)",
          fills={"recompute-p": (
              "p = tl.where(visible, tl.exp(qk * scale - lse[:, None]), 0.0)",
              "p = tl.where(visible, tl.exp(qk * scale - lse[:, None]), 0.0)\n"
              "p += tl.dot(tl.zeros([BLOCK_M, 8], dtype=tl.float16),\n"
              "            tl.zeros([8, BLOCK_N], dtype=tl.float16))")},
          score="zero", expect={"error": "does not compile"}),
    right("10-exp2", "P in base 2: exp2 of the scores and lse times log2(e)",
          fills={"recompute-p": _both(
              "LOG2E = 1.4426950408889634\n"
              "p = tl.where(visible, tl.exp2((qk * scale - lse[:, None]) * LOG2E), 0.0)")}),
    right("10-ds-expanded", "dS written as P dP - P delta, the scale folded into dP first",
          fills={"ds": _both("dps = dp * scale\nds = p * dps - p * (delta[:, None] * scale)")}),
    right("10-masked-twice", "P masked, and dS masked again with tl.where",
          fills={"ds": _both("ds = tl.where(visible, p * (dp - delta[:, None]) * scale, 0.0)")}),
]
# fmt: on
