"""Exercise 01, the instructor's checks and gallery (TODO rescale-acc).

Each case exposes something: key blocks that raise the running maximum by about 3 (a missing
rescale) or by just 0.001 (a rescale skipped while alpha is near 1), a maximum that falls by 120
after the first block (a reference point that is not the running maximum overflows), rows whose
every score is near -150 (a running maximum that starts at 0 underflows to 0/0), 30x scores
(exp overflows without a running maximum), and sizes one past, one short of and a whole number
of tiles with M < N and M > N, for 16x16 and 16x32 tiles (``grader.kinds.attention.boundary``). Strides and
half-precision inputs are handled by given code: they are 0-point notes.
"""

from grader.kinds.attention import boundary
from grader.kinds.attention.hidden import ATTENTION_NOTES, attention_cases
from grader.kinds.attention.inputs import all_low, falling, growing, qkv
from grader.kinds.attention.traps import (
    ACC_NOT_RESCALED,
    ACC_RESCALED_AFTER_ADD,
    ALPHA_APPLIED_TWICE,
    REFERENCE_NOT_RUNNING_MAX,
    RUNNING_MAX_NOT_FROM_NEG_INF,
)
from grader.model import Case, Check, right, wrong

# fmt: off
CASES = [
    Case(name="grow-3-blocks", about="M=20, N=48, D=16; every key block raises the row maxima",
         inputs=growing(1, 20, 48, 16, 16)),
    Case(name="grow-blocks-16x32",
         about="M=40, N=96, D=32, 16x32 tiles; every key block raises the row maxima",
         inputs=growing(2, 40, 96, 32, 32), block_m=16, block_n=32),
    boundary.creep(11),
    Case(name="single-block", about="M=5, N=7, D=8: one key block, smaller than a tile",
         inputs=qkv(3, 5, 7, 8)),
    Case(name="one-row-d64", about="M=1, N=40, D=64: a single query row", inputs=qkv(5, 1, 40, 64)),
    # M < N and M > N, one past and one short of a tile: the whole-tile sizes are the growing
    # cases' (N = 48, 96) and the creeping one's (M = 16, N = 64).
    *boundary.attention(boundary.ragged(16, 16)[:2] + boundary.ragged(16, 32)[:2], 12),
    Case(name="falling-maxima",
         about="M=24, N=64, D=16: in every other row the first key block scores 120 above the rest",
         inputs=falling(7, 24, 64, 16, 16)),
    Case(name="all-scores-low", about="M=24, N=48, D=16: every score of every other row is near -150",
         inputs=all_low(8, 24, 48, 16)),
    Case(name="scores-30x", about="M=24, N=64, D=16, scores 30x larger than usual",
         inputs=qkv(9, 24, 64, 16, magnitude=30.0)),
    *attention_cases(10),
]
# fmt: on

# The ways to get the rescale of acc wrong, in the order they are named.
RESCALE = (ACC_NOT_RESCALED, ACC_RESCALED_AFTER_ADD, ALPHA_APPLIED_TWICE)
HOSTILE = (*RESCALE, RUNNING_MAX_NOT_FROM_NEG_INF, REFERENCE_NOT_RUNNING_MAX)
# fmt: off
CHECKS = [
    Check(id="running-max-grows", todo="rescale-acc", points=10,
          about="Several key blocks, each raising the running maximum of every row",
          cases=("grow-3-blocks", "grow-blocks-16x32", "creeping-max-16x64"), judge="output",
          traps=RESCALE),
    Check(id="ragged-shapes", todo="rescale-acc", points=5,
          about="M, N, D off the tile sizes, one row, one key block, M != N",
          cases=("single-block", "one-row-d64", "edges-17x31", "edges-31x17", "edges-33x63-16x32",
                 "edges-63x33-16x32"), judge="output", traps=RESCALE),
    Check(id="hostile-scores", todo="rescale-acc", points=10,
          about="Maxima that fall by 120, scores near -150, scores 30x larger than usual",
          cases=("falling-maxima", "all-scores-low", "scores-30x"), judge="output",
          traps=HOSTILE),
    *ATTENTION_NOTES,
]
# fmt: on

REFERENCE = {"rescale-acc": "acc = acc * alpha[:, None] + tl.dot(p, v)"}

_ALPHA = "alpha = tl.exp(m_i - m_new)"
_P = "p = tl.exp(scores - m_new[:, None])"
_SCORES = "scores = tl.dot(q, tl.trans(k)) * scale"
_M_NEW = "m_new = tl.maximum(m_i, tl.max(scores, axis=1))"
_M_INIT = 'm_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)'
_LOOP = "for n0 in range(0, N, BLOCK_N):"
LOG2E = "1.4426950408889634"

# fmt: off
GALLERY = [
    wrong("01-acc-not-rescaled", "the skeleton's mistake: l_i follows the new max, acc does not",
          fills={"rescale-acc": "acc += tl.dot(p, v)"}, traps=["acc-not-rescaled"],
          breaks="rescale-acc"),
    wrong("01-rescale-skipped-near-one", "the rescale skipped while alpha > 0.99, as if it were "
          "1: exact when maxima jump, off when they creep up by 0.001 per tile",
          fills={"rescale-acc": "acc = tl.where(alpha[:, None] > 0.99, acc, acc * alpha[:, None]) "
                                "+ tl.dot(p, v)"},
          traps=["acc-not-rescaled"], failed=["running-max-grows"], breaks="rescale-acc"),
    wrong("01-rescale-after-add", "the new tile is added before acc is rescaled, so it is "
          "scaled down too", fills={"rescale-acc": "acc = (acc + tl.dot(p, v)) * alpha[:, None]"},
          traps=["acc-rescaled-after-add"], failed=["running-max-grows"], breaks="rescale-acc"),
    wrong("01-alpha-twice", "acc rescaled twice: alpha squared against l_i's one alpha",
          fills={"rescale-acc": "acc = acc * alpha[:, None]\nacc = acc * alpha[:, None] + tl.dot(p, v)"},
          traps=["alpha-applied-twice"], failed=["running-max-grows"], breaks="rescale-acc"),
    wrong("01-l-not-rescaled", "the mirror image: acc rescaled, the denominator not",
          edits=[("l_i = l_i * alpha + tl.sum(p, axis=1)", "l_i = l_i + tl.sum(p, axis=1)")],
          failed=["running-max-grows"]),
    wrong("01-max-from-zero", "the running maximum starts at 0: rows scoring near -150 end 0/0",
          edits=[(_M_INIT, "m_i = tl.zeros([BLOCK_M], dtype=tl.float32)")],
          traps=["running-max-not-from-neg-inf"], failed=["hostile-scores"]),
    wrong("01-tile-max-reference", "each tile's own maximum as the reference: alpha overflows "
          "when the maximum falls", edits=[(_M_NEW, "m_new = tl.max(scores, axis=1)")],
          traps=["reference-not-running-max"], failed=["hostile-scores"]),
    wrong("01-no-scale", "scores not multiplied by 1/sqrt(D)",
          edits=[(_SCORES, "scores = tl.dot(q, tl.trans(k))")]),
    wrong("01-no-final-division", "the running sum is stored without dividing by l_i",
          edits=[("out = acc / l_i[:, None]", "out = acc")]),
    wrong("01-no-running-max", "exp of raw scores (max taken as 0): exact until exp overflows "
          "on 30x scores", edits=[(_ALPHA, "alpha = tl.exp(m_new - m_new)"), (_P, "p = tl.exp(scores)")],
          traps=["reference-not-running-max"], failed=["hostile-scores"]),
    wrong("01-padded-keys-not-masked", "keys past N load 0 and still get exp(0 - m) weight",
          edits=[('        scores = tl.where(col_ok[None, :], scores, float("-inf"))\n', "")],
          failed=["ragged-shapes"]),
    wrong("01-loop-misses-last-key", "the key loop ends at N - 1 (the last key's index): when "
          "N is one past a whole number of tiles, the last tile, holding that key, is never "
          "visited", edits=[(_LOOP, _LOOP.replace("range(0, N,", "range(0, N - 1,"))],
          failed=["ragged-shapes"]),
    wrong("01-writes-nothing", "no store: the poisoned output buffer must be noticed as unwritten",
          edits=[("    tl.store(out_ptrs, out, mask=row_ok[:, None] & d_ok[None, :])\n", "")],
          expect={"message": "no output was written"}),
    wrong("01-writes-nan", "stores NaN everywhere: told apart from an unwritten buffer",
          edits=[("out = acc / l_i[:, None]", 'out = acc * float("nan")')],
          expect={"message": "NaN"}),
    wrong("01-shared-memory-overflow", "a red team's region: a 256x512 fp16 block and its dot, "
          "weighted by 0, need more shared memory per program than an H100 or H200 has. The "
          "interpreter has no limit and gave it full marks; a GPU refuses every launch "
          "(OutOfResources), and so does the compile gate",
          fills={"rescale-acc": (
              "big = (tl.full([256, 512], 1.0, tl.float32) * tl.max(alpha, axis=0)).to(tl.float16)\n"
              "junk = tl.dot(big, tl.trans(big))\n"
              "acc = acc * alpha[:, None] + tl.dot(p, v) + 0.0 * tl.sum(tl.sum(junk, axis=1), axis=0)")},
          score="zero", expect={"error": r"needs \d+ bytes of shared memory per program; an H100 "
                                         r"or H200 has 232448|out of resource: shared memory"}),
    wrong("01-fake-kernel", "computes attention with torch in Python; graded free-form (a file "
          "written apart) the launcher refuses it as no Triton kernel, and graded as its regions "
          "it has no region at all (the golden case fake-kernel)",
          file="fake_kernel.py", score="zero", integrity=True,
          expect={"error": r"is a _LooksLikeAKernel object, not a Triton kernel"}),
    right("01-rescale-two-statements", "rescale, then add the tile, as two statements",
          fills={"rescale-acc": "acc = acc * alpha[:, None]\nacc += tl.dot(p, v)"}),
    right("01-rescale-skipped-at-one", "the multiply skipped only where alpha is exactly 1 (the "
          "maximum did not move), which changes nothing",
          fills={"rescale-acc": "acc = tl.where(alpha[:, None] == 1.0, acc, acc * alpha[:, None]) "
                                "+ tl.dot(p, v)"}),
    right("01-exp2", "exp2 with log2(e) folded into the scale",
          edits=[(_SCORES, f"scores = tl.dot(q, tl.trans(k)) * (scale * {LOG2E})"),
                 (_ALPHA, "alpha = tl.exp2(m_i - m_new)"), (_P, "p = tl.exp2(scores - m_new[:, None])")]),
    right("01-max-from-large-negative", "the running maximum starts at -1e30 instead of -inf",
          edits=[(_M_INIT, "m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)")]),
    # Two verdicts a red-team probe found in v4 (full marks in the interpreter, reasoned wrong
    # compiled); the region rules refuse them on both backends.
    wrong("01-false-contiguity-hint", "V's columns promised contiguous in 16s: the interpreter "
          "never checks the hint, sm_90 copies 16-byte vectors of a stride-2 column",
          fills={"rescale-acc": "v_cols = tl.max_contiguous(tl.multiple_of(offs_d * stride_vd, 16), 16)\n"
                                "v2 = tl.load(v_ptr + offs_n[:, None] * stride_vn + v_cols[None, :], mask=col_ok[:, None], other=0.0)\n"
                                "acc = acc * alpha[:, None] + tl.dot(p, tl.where(d_ok[None, :], v2.to(tl.float32), 0.0))"},
          score="zero", traps=[], expect={"error": "a promise a GPU's compiler trusts"}),
    wrong("01-runtime-negative-step", "the tile added in a loop whose step, -1, is known only "
          "at run time: one trip in Python, zero compiled",
          fills={"rescale-acc": "acc = acc * alpha[:, None]\nfor j in range(N, N - 1, -1 + 0 * N):\n"
                                "    acc = acc + tl.dot(p, v)"},
          score="zero", traps=[], expect={"error": "a loop step must be"}),
    right("01-string-as-comment", "a string alone on a region line, as a comment: dropped, "
          "not refused", fills={"rescale-acc": '"""Rescale acc by alpha before adding this tile."""\n'
                                               "acc = acc * alpha[:, None] + tl.dot(p, v)"}),
    right("01-chapter", "the chapter's own kernel: fp32 style, its own names, 4x4 host blocks",
          file="chapter.py", integrity=True,
          expect={"notes_failed": ("half-precision-inputs",)}),
]
# fmt: on
