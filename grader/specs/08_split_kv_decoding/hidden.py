"""Exercise 08 (extensions track), the instructor's checks and gallery (TODO merge).

The merge kernel is graded on partials the grader computes itself (``grader.kinds.split_kv_merge.inputs``), so
that a check judges its TODO and nothing else: real decoding steps cut into splits against the
boundary classes of ``grader.kinds.split_kv_merge.boundary.split_kv`` (cache lengths one key past, one short of
and a whole number of splits; lengths that leave the last splits empty, down to a single key;
NUM_SPLITS = 1, powers of two and not, so that slots are padded; D = 16 and D not a power of two;
four query rows per cache), and three hostile kinds beside ordinary rows: scores near +200
(exp() overflows float32), near -150 (it underflows) and one split 100 above the rest, and 200
above (split maxima that far apart overflow exp() measured from any point between them, their
mean or their midpoint; only the largest maximum will do). Partial
buffers wider than their splits (a row stride past NUM_SPLITS, NaN beyond) are read by given
code: a 0-point note.
"""

from grader.kinds.split_kv_merge.boundary import split_kv
from grader.kinds.split_kv_merge.traps import (
    LSE_BASE_2,
    LSE_MISSING_MAX,
    MERGE_ACC_NOT_RESCALED,
    MERGE_L_NOT_RESCALED,
    MERGE_NO_MAX_SHIFT,
    SPLIT_PARTIALS_AVERAGED,
)
from grader.model import Case, Check, right, wrong

_PADDED = {"m": "padded", "l": "padded", "acc": "padded"}
# fmt: off
_STRIDED = split_kv(
    830, 16, 3, 40, empty=True, name="wide-buffers-3x16", layout=_PADDED,
    twin="wide-buffers-plain",
    what="m, l and acc inside wider buffers (row strides past NUM_SPLITS and D, NaN beyond)",
)
CASES = [
    # Every split holds keys; NUM_SPLITS a power of two (no padded slot).
    split_kv(801, 16, 4, 16, what="every split holds keys"),
    split_kv(802, 32, 4, 40, what="every split holds keys, D padded to 64"),
    split_kv(803, 16, 4, 32, lengths=[64, 50], group=4, name="gqa-4x16-d32",
             what="every split holds keys, four query rows per cache (GQA)"),
    # Empty splits and padded slots.
    split_kv(811, 32, 3, 40, empty=True, what="the last splits empty, and a single key"),
    split_kv(812, 16, 8, 16, empty=True, what="the last splits empty, no padded slot"),
    split_kv(813, 64, 1, 24, lengths=[64, 40, 1], what="one split: the merge is a division"),
    split_kv(814, 16, 7, 24, what="every split holds keys, padded slots"),
    split_kv(815, 8, 13, 16, lengths=[104, 50, 9, 1], what="many splits, padded slots"),
    # Scores beyond float32's exp() range, beside ordinary rows.
    split_kv(821, 16, 5, 16, lengths=[80, 80, 65, 47, 33, 17], kind="high",
             name="high-scores", what="every score of every other row near +200"),
    split_kv(822, 16, 3, 16, lengths=[48, 40, 33, 20, 47, 17], kind="low",
             name="low-scores", what="every score of every other row near -150"),
    split_kv(823, 16, 6, 24, lengths=[96, 90, 70, 50, 96, 33], kind="dominant",
             name="dominant-split",
             what="on every other row one split scores 100 above the rest, not always the first"),
    split_kv(824, 16, 4, 16, lengths=[64, 40, 25, 50, 64, 33], kind="dominant", gap=200.0,
             name="far-apart-splits",
             what="on every other row one split scores 200 above the rest (on one row, above the "
             "only other split holding keys): split maxima 200 apart"),
    _STRIDED,
    Case(name="wide-buffers-plain", about="the strided case's numbers, contiguous",
         inputs=_STRIDED.inputs, params=_STRIDED.params),
]
# fmt: on

_OUT_TRAPS = (SPLIT_PARTIALS_AVERAGED, MERGE_L_NOT_RESCALED, MERGE_ACC_NOT_RESCALED)
_LSE_TRAPS = (LSE_MISSING_MAX, LSE_BASE_2, SPLIT_PARTIALS_AVERAGED, MERGE_L_NOT_RESCALED)
_HOSTILE = ("high-scores", "low-scores", "dominant-split", "far-apart-splits")
# fmt: off
_ORDINARY = (
    "split-4x16-d16", "split-4x32-d40", "gqa-4x16-d32", "split-3x32-d40-empty",
    "split-8x16-d16-empty", "split-1x64-d24", "split-7x16-d24", "split-13x8-d16",
)
CHECKS = [
    Check(id="merge-splits", todo="merge", points=6,
          about="out: every split holds keys (lengths 0, +1 and -1 modulo the split), D = 16 "
          "and D padded, four query rows per cache",
          cases=_ORDINARY[:3], judge="output", traps=_OUT_TRAPS),
    Check(id="merge-empty-splits", todo="merge", points=6,
          about="out: splits left empty by short caches, a single key, padded slots, one split "
          "and thirteen", cases=_ORDINARY[3:], judge="output", traps=_OUT_TRAPS),
    Check(id="merge-hostile", todo="merge", points=5,
          about="out: scores near +200 and near -150, one split 100 and 200 above the rest",
          cases=_HOSTILE, judge="output", traps=(*_OUT_TRAPS, MERGE_NO_MAX_SHIFT)),
    Check(id="lse", todo="merge", points=5,
          about="lse: every ordinary case above", cases=_ORDINARY, judge="lse",
          traps=_LSE_TRAPS),
    Check(id="lse-hostile", todo="merge", points=3,
          about="lse: scores near +200 and near -150, one split 100 and 200 above the rest",
          cases=_HOSTILE, judge="lse", traps=(*_LSE_TRAPS, MERGE_NO_MAX_SHIFT)),
    Check(id="strided-partials", todo=None, points=0,
          about="Note on given code: partial buffers wider than their splits (row strides past "
          "NUM_SPLITS and D)", cases=("wide-buffers-3x16",), judge="twin", contract=True),
]
# fmt: on

MERGE = """\
m = tl.max(m_j)
w = tl.exp(m_j - m)
L = tl.sum(w * l_j)
out = tl.sum(w[:, None] * acc_j, axis=0) / L
lse = m + tl.log(L)"""
REFERENCE = {"merge": MERGE}

_OUT = "out = tl.sum(w[:, None] * acc_j, axis=0) / L"


def _merge(*lines: str, **replaced: str) -> dict:
    """The reference merge with some of its lines replaced (by their first word: m, w, L, out,
    lse) and ``lines`` added at the end."""
    kept = [replaced.get(line.split()[0], line) for line in MERGE.splitlines()]
    return {"merge": "\n".join(kept + list(lines))}


# fmt: off
GALLERY = [
    wrong("08-averaged-every-slot", "the splits' own outputs averaged over all NUM_SPLITS, "
          "empty ones included (0 / 0 there); lse right",
          fills=_merge(out="out = tl.sum(acc_j / l_j[:, None], axis=0) / NUM_SPLITS"),
          traps=["split-partials-averaged"], breaks="merge"),
    wrong("08-no-max-shift", "weights exp(m_j): exact until exp() leaves float32's range",
          fills=_merge(m="m = 0.0", w="w = tl.exp(m_j)"),
          traps=["merge-no-max-shift"], failed=["merge-hostile", "lse-hostile"],
          expect={"passed": ("merge-splits", "merge-empty-splits", "lse")}, breaks="merge"),
    wrong("08-l-not-rescaled", "the l_j added unweighted", fills=_merge(L="L = tl.sum(l_j)"),
          traps=["merge-l-not-rescaled"], breaks="merge"),
    wrong("08-acc-not-rescaled", "the acc_j added unweighted",
          fills=_merge(out="out = tl.sum(acc_j, axis=0) / L"),
          traps=["merge-acc-not-rescaled"], expect={"passed": ("lse", "lse-hostile")}, breaks="merge"),
    wrong("08-lse-missing-max", "lse = ln L, the maximum left out",
          fills=_merge(lse="lse = tl.log(L)"), traps=["lse-missing-max"],
          expect={"passed": ("merge-splits", "merge-empty-splits", "merge-hostile")}, breaks="merge"),
    wrong("08-lse-log2", "lse = m + log2(L): a natural m, a base-2 log",
          fills=_merge(lse="lse = m + tl.log2(L)"), traps=["lse-base-2"], breaks="merge"),
    wrong("08-lse-all-base-2", "a base-2 merge whose log-sum-exp stays in base 2",
          fills={"merge": "LOG2E = 1.4426950408889634\nm = tl.max(m_j) * LOG2E\n"
                 "w = tl.exp2(m_j * LOG2E - m)\nL = tl.sum(w * l_j)\n" + _OUT
                 + "\nlse = m + tl.log2(L)"},
          traps=["lse-base-2"], breaks="merge"),
    wrong("08-exp2-without-log2e", "exp2(m_j - m): the weights in the wrong base",
          fills=_merge(w="w = tl.exp2(m_j - m)"), breaks="merge"),
    wrong("08-max-from-zero", "the maximum taken with 0: rows whose scores are all near -150 "
          "underflow to 0 / 0, as without the maximum",
          fills=_merge(m="m = tl.maximum(tl.max(m_j), 0.0)"), traps=["merge-no-max-shift"],
          failed=["merge-hostile", "lse-hostile"], breaks="merge"),
    wrong("08-mean-reference", "the weights measured from the mean of the filled splits' "
          "maxima, a point between them: no exp() leaves float32's range while the maxima lie "
          "100 apart, but at 200 the largest split's weight overflows",
          fills=_merge(m="m = tl.sum(tl.where(l_j > 0, m_j, 0.0)) / "
                         "tl.sum((l_j > 0).to(tl.float32))"),
          traps=["merge-no-max-shift"], failed=["merge-hostile", "lse-hostile"],
          expect={"passed": ("merge-splits", "merge-empty-splits", "lse")}, breaks="merge"),
    wrong("08-lse-form-0-over-0", "merged in log-sum-exp form, each split normalized first: an "
          "empty split's acc_j / l_j is 0 / 0, and 0 * NaN is NaN",
          fills={"merge": "lse_j = m_j + tl.log(l_j)\nm = tl.max(lse_j)\n"
                 "lse = m + tl.log(tl.sum(tl.exp(lse_j - m)))\n"
                 "out = tl.sum(tl.exp(lse_j - lse)[:, None] * (acc_j / l_j[:, None]), axis=0)"},
          failed=["merge-empty-splits"], expect={"passed": ("merge-splits", "lse")}, breaks="merge"),
    wrong("08-divided-by-weights", "out divided by the sum of the weights, not of the "
          "weighted l_j", fills=_merge(out="out = tl.sum(w[:, None] * acc_j, axis=0) / tl.sum(w)"),
          expect={"passed": ("lse", "lse-hostile")}, breaks="merge"),
    wrong("08-lse-largest-split", "lse as the largest split's own log-sum-exp",
          fills=_merge(lse="lse = tl.max(m_j + tl.log(l_j))"), breaks="merge"),
    wrong("08-padded-max-zero", "padded slots load m = 0, not -inf: the maximum of a row whose "
          "scores are all near -150 becomes 0",
          edits=[('m_j = tl.load(m_ptr + b * stride_mb + offs_s, mask=s_ok, other=float("-inf"))',
                  "m_j = tl.load(m_ptr + b * stride_mb + offs_s, mask=s_ok, other=0.0)")],
          traps=["merge-no-max-shift"], failed=["merge-hostile", "lse-hostile"]),
    right("08-base-2", "the merge in base 2 throughout, lse converted back to a natural log",
          fills={"merge": "LOG2E = 1.4426950408889634\nm2 = tl.max(m_j) * LOG2E\n"
                 "w = tl.exp2(m_j * LOG2E - m2)\nL = tl.sum(w * l_j)\n" + _OUT
                 + "\nlse = (m2 + tl.log2(L)) / LOG2E"}),
    right("08-from-largest-lse", "the weights measured from the largest split's own "
          "log-sum-exp m_j + ln l_j, not from the largest m_j: every exponent is still <= 0, "
          "however far apart the maxima", fills=_merge(m="m = tl.max(m_j + tl.log(l_j))")),
    right("08-pairwise-loop", "a loop over the splits, merging them pairwise as 01 merges key "
          "tiles (split 0 always holds keys)",
          fills={"merge": """\
first = offs_s == 0
m = tl.max(tl.where(first, m_j, float("-inf")))
L = tl.sum(tl.where(first, l_j, 0.0))
o = tl.sum(tl.where(first[:, None], acc_j, 0.0), axis=0)
for j in range(1, NUM_SPLITS):
    this = offs_s == j
    m_s = tl.max(tl.where(this, m_j, float("-inf")))
    m_new = tl.maximum(m, m_s)
    alpha = tl.exp(m - m_new)
    beta = tl.exp(m_s - m_new)
    L = L * alpha + beta * tl.sum(tl.where(this, l_j, 0.0))
    o = o * alpha + beta * tl.sum(tl.where(this[:, None], acc_j, 0.0), axis=0)
    m = m_new
out = o / L
lse = m + tl.log(L)"""}),
    right("08-lse-form", "merged in log-sum-exp form, each split normalized first, empty ones "
          "kept out of the division",
          fills={"merge": """\
filled = l_j > 0
lse_j = m_j + tl.log(l_j)
top = tl.max(lse_j)
e = tl.exp(lse_j - top)
total = tl.sum(e)
own = acc_j / tl.where(filled, l_j, 1.0)[:, None]
out = tl.sum(e[:, None] * own, axis=0) / total
lse = top + tl.log(total)"""}),
    right("08-normalized-last", "the weights normalized first (w_j l_j / L), then applied to "
          "acc_j / l_j where l_j > 0",
          fills=_merge("share = w * l_j / L",
                       "own = tl.where((l_j > 0)[:, None], acc_j / tl.where(l_j > 0, l_j, 1.0)[:, None], 0.0)",
                       "out = tl.sum(share[:, None] * own, axis=0)")),
    right("08-written-apart", "a merge kernel written apart from the skeleton: its own names, "
          "a guard on the maximum, a reciprocal", file="apart.py", integrity=True),
]
# fmt: on
