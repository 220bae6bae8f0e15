"""Every hidden check: its points, the TODO it judges, its cases and the traps it can name.

The points of each exercise add up to its share of 100, each TODO earning its own: 25 for
01's rescale, 25 for 02's causal mask, 25 each for 03's top-2 masking and renormalization.
Every check is only paid for a right answer on all its cases, and each of its traps is first
proven to be visible on those cases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from grader import compare
from grader.cases import Case
from grader.traps import TRAPS, Output, Trap
from kata import oracles


class CheckFailed(AssertionError):
    """The submission ran but its output is wrong."""

    def __init__(self, message: str, trap: str | None = None):
        super().__init__(message)
        self.message, self.trap = message, trap


class SubmissionError(Exception):
    """The submission could not produce an output (missing, import error, crash, timeout)."""


class GraderError(Exception):
    """The grader's own premise failed (e.g. a trap not visible on a check's inputs)."""


# ---- judges: what "right" means for each kind of output ------------------------------------


class AttentionJudge:
    keys = ("out",)

    def __init__(self, causal: bool):
        self.causal = causal

    def expected(self, case: Case, got: Output) -> Output:
        q, k, v = (case.inputs[n] for n in "qkv")
        return {"out": oracles.attention(q, k, v, causal=self.causal)}

    def evidence(self, case: Case, got: Output, want: Output) -> str | None:
        return compare.matrix_evidence(got["out"], want["out"])


def _index_evidence(case: Case, got: Output) -> str | None:
    """Indices must lie in [0, E) before anything is looked up with them (on the CPU)."""
    E = case.inputs["logits"].shape[1]
    for key in ("idx0", "idx1"):
        idx = got[key].astype(np.int64)
        bad = np.flatnonzero((idx < 0) | (idx >= E))
        if bad.size:
            unwritten = " (still -1: never written)" if (idx[bad] == -1).all() else ""
            return (
                f"{key} is outside [0, {E}) for {bad.size} of {idx.size} tokens{unwritten}; "
                f"first at token {bad[0]}: {idx[bad[0]]}"
            )
    return None


class Top2Judge:
    """The two chosen experts must be distinct and hold the two largest probabilities
    (compared by value, so any order among exactly tied experts is accepted)."""

    keys = ("idx0", "idx1")

    def expected(self, case: Case, got: Output) -> Output:
        w0, w1, idx0, idx1 = oracles.top2_gating(case.inputs["logits"])
        return {"idx0": idx0, "idx1": idx1}

    def evidence(self, case: Case, got: Output, want: Output) -> str | None:
        problem = _index_evidence(case, got)
        if problem:
            return problem
        probs = oracles.softmax(case.inputs["logits"])
        rows = np.arange(len(probs))
        i0, i1 = got["idx0"].astype(np.int64), got["idx1"].astype(np.int64)
        ranked = -np.sort(-probs, axis=1)
        bad = (
            (i0 == i1)
            | compare.bad_mask(probs[rows, i0], ranked[:, 0], "prob")
            | compare.bad_mask(probs[rows, i1], ranked[:, 1], "prob")
        )
        if not bad.any():
            return None
        t = int(np.flatnonzero(bad)[0])
        return (
            f"wrong experts for {int(bad.sum())} of {len(bad)} tokens; first at token {t}: "
            f"chose ({i0[t]}, {i1[t]}), expected ({want['idx0'][t]}, {want['idx1'][t]})"
        )


class WeightsJudge:
    """Weights are judged on the experts the kernel itself chose: p[i] / (p[i0] + p[i1])."""

    keys = ("w0", "w1")

    def expected(self, case: Case, got: Output) -> Output:
        probs = oracles.softmax(case.inputs["logits"])
        rows = np.arange(len(probs))
        p0 = probs[rows, got["idx0"].astype(np.int64)]
        p1 = probs[rows, got["idx1"].astype(np.int64)]
        return {"w0": p0 / (p0 + p1), "w1": p1 / (p0 + p1)}

    def evidence(self, case: Case, got: Output, want: Output) -> str | None:
        for key in self.keys:
            bad = compare.bad_mask(got[key], want[key], key)
            if bad.any():
                t = int(np.flatnonzero(bad)[0])
                extra = " (NaN: never written?)" if np.isnan(got[key][t]) else ""
                return (
                    f"{key} wrong for {int(bad.sum())} of {bad.size} tokens; first at token {t}: "
                    f"got {got[key][t]:.6g}, expected {want[key][t]:.6g}{extra} "
                    f"(weights of the experts your kernel chose, ({got['idx0'][t]}, {got['idx1'][t]}))"
                )
        return None


# ---- checks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    id: str
    exercise: str  # file stem
    todo: str
    points: int
    about: str
    cases: tuple[str, ...]
    judge: object
    traps: tuple[Trap, ...] = ()
    proof: Callable[[list[Case]], None] | None = None  # a chapter demonstration, kept as a check

    def __str__(self) -> str:
        return self.id

    def _right_output(self, case: Case) -> Output:
        """The right answer as the kernel would write it (indices included), for proofs."""
        if isinstance(self.judge, AttentionJudge):
            return self.judge.expected(case, {})
        w0, w1, idx0, idx1 = oracles.top2_gating(case.inputs["logits"])
        return {"w0": w0, "w1": w1, "idx0": idx0, "idx1": idx1}

    def prove_traps_visible(self, cases: list[Case]) -> None:
        """Every form of every trap must be far from the right answer on some case, or the
        check could be passed by that very mistake."""
        rights = [self._right_output(case) for case in cases]
        for trap in self.traps:
            forms = [trap.forms(case, right) for case, right in zip(cases, rights)]
            for n in range(len(forms[0])):
                if max(_gap(f[n], right) for f, right in zip(forms, rights)) < 1.0:
                    raise GraderError(
                        f"grader self-check: trap {trap.id} (form {n}) is not visible on the "
                        f"inputs of check {self.id}, so the check could pay for that mistake"
                    )
        if self.proof:
            self.proof(cases)

    def run(self, submission) -> None:
        cases = [submission.case(name) for name in self.cases]
        self.prove_traps_visible(cases)
        for case in cases:
            got = submission.output(case.name)
            # Indices are validated here, on the CPU, before anything is looked up with them.
            evidence = _index_evidence(case, got) if "idx0" in got else None
            if evidence is None:
                evidence = self.judge.evidence(case, got, self.judge.expected(case, got))
            if evidence is None:
                continue
            for trap in self.traps:
                if any(_matches(got, form) for form in trap.forms(case, got)):
                    raise CheckFailed(f"{case.about}: {trap.message}", trap=trap.id)
            raise CheckFailed(f"{case.about}: {evidence}")


def _gap(form: Output, right: Output) -> float:
    """How far a trap's form is from the right output, in units of SEPARATION tolerances
    (indices: any difference is infinitely far)."""
    gaps = []
    for key, predicted in form.items():
        if key.startswith("idx"):
            gaps.append(0.0 if np.array_equal(predicted, right[key]) else float("inf"))
        else:
            scale = compare.TOLERANCE[key][0] * compare.SEPARATION
            gaps.append(compare.distance(predicted, right[key]) / scale)
    return max(gaps)


def _raw_sums_vary(cases: list[Case]) -> None:
    """The chapter's demonstration: raw top-2 sums fall short of 1 by a per-token amount."""
    for case in cases:
        probs = -np.sort(-oracles.softmax(case.inputs["logits"]), axis=1)
        raw = probs[:, 0] + probs[:, 1]
        if 1.0 - raw.max() < 0.05 or raw.max() - raw.min() < 0.1:
            raise GraderError(
                f"grader self-check: raw top-2 sums of {case.name} span {raw.min():.3f}.."
                f"{raw.max():.3f}; they should stay below 1 and vary from token to token"
            )


def _matches(got: Output, form: Output) -> bool:
    for key, predicted in form.items():
        if key.startswith("idx"):
            if not np.array_equal(got[key].astype(np.int64), predicted.astype(np.int64)):
                return False
        elif not compare.close(got[key], predicted, key):
            return False
    return True


T = TRAPS
E01, E02, E03 = "01_flash_attention_core", "02_causal_flash_attention", "03_moe_gating"
ATTN, CAUSAL = AttentionJudge(causal=False), AttentionJudge(causal=True)
TOP2, WEIGHTS = Top2Judge(), WeightsJudge()

CHECKS = (
    Check("running-max-grows", E01, "rescale-acc", 10,
          "Several key blocks, each raising the running maximum of every row",
          ("grow-3-blocks", "grow-blocks-16x32"), ATTN, (T["acc-not-rescaled"],)),
    Check("ragged-shapes", E01, "rescale-acc", 10,
          "M, N, D off the tile sizes, one row, one key block, M != N, strides, float16",
          ("single-block", "ragged-37x53-d24", "one-row-d64", "m-gt-n-50x19", "strided",
           "fp16-inputs"), ATTN, (T["acc-not-rescaled"],)),
    Check("large-scores", E01, "rescale-acc", 5,
          "Scores 30x larger than usual: exp() overflows without the running maximum",
          ("scores-30x",), ATTN, (T["acc-not-rescaled"],)),
    Check("causal-square", E02, "causal-mask", 10,
          "M = N with diagonal tiles, including the chapter's 20x20 example",
          ("chapter-20x20", "square-64"), CAUSAL,
          (T["causal-mask-missing"], T["causal-mask-off-by-one"])),
    Check("causal-rectangular", E02, "causal-mask", 10,
          "M != N (top-left alignment), ragged D, one row, strides, float16",
          ("m-lt-n-24x56", "m-gt-n-56x24", "ragged-37x53-d24", "one-row-d64", "strided",
           "fp16-inputs"), CAUSAL, (T["causal-mask-missing"], T["causal-mask-off-by-one"])),
    Check("causal-tiles", E02, "causal-mask", 5,
          "Tiles of 16x32 and 32x16, several key blocks per query block, 30x scores",
          ("tiles-16x32", "tiles-32x16", "grow-blocks-16x32", "scores-30x"), CAUSAL,
          (T["causal-mask-missing"], T["causal-mask-off-by-one"])),
    Check("top2-random", E03, "top2-mask", 10, "Random logits, 8 and 16 experts, strided rows",
          ("random-64x8", "random-33x16", "strided-rows"), TOP2, (T["top2-not-masked"],)),
    Check("top2-padded-experts", E03, "top2-mask", 5,
          "E = 5, 6, 12 (padded to a power of two) with all-negative logits",
          ("negative-e5", "negative-e6", "negative-e12"), TOP2, (T["top2-not-masked"],)),
    Check("top2-ties", E03, "top2-mask", 5,
          "Exact ties: all-zero rows need two distinct experts",
          ("ties-e8", "ties-e5"), TOP2, (T["top2-not-masked"],)),
    Check("top2-two-experts", E03, "top2-mask", 5, "E = 2: both experts, best first",
          ("two-experts",), TOP2, (T["top2-not-masked"],)),
    Check("renormalized-random", E03, "renormalize", 10,
          "Random logits: w0 + w1 = 1 with w = p / (p0 + p1) of the chosen experts",
          ("random-64x8", "random-33x16", "strided-rows"), WEIGHTS,
          (T["weights-not-renormalized"],), proof=_raw_sums_vary),
    Check("renormalized-padded-experts", E03, "renormalize", 5,
          "E = 5, 6, 12 with all-negative logits", ("negative-e5", "negative-e6", "negative-e12"),
          WEIGHTS, (T["weights-not-renormalized"],)),
    # With E = 2 the raw probabilities already sum to one, so that case rides along with ties,
    # where the mistake shows, instead of paying on its own.
    Check("renormalized-ties-and-two-experts", E03, "renormalize", 10,
          "Exact ties (0.5 / 0.5 on all-zero rows), and E = 2",
          ("ties-e8", "ties-e5", "two-experts"), WEIGHTS, (T["weights-not-renormalized"],)),
)  # fmt: skip


def checks_for(stem: str) -> list[Check]:
    return [c for c in CHECKS if c.exercise == stem]


def max_score(stem: str) -> int:
    return sum(c.points for c in checks_for(stem))
