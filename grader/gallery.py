"""The validation galleries, as data: kernels the grader must fail and kernels it must pass.

Every variant is a reference solution with a few exact text edits. The solutions are read at the
moment a variant is built, so the galleries follow them: if a solution changes so that an edit's
``old`` text is no longer found exactly once, building that variant raises ``GalleryError``
instead of grading a stale copy (a gallery that rots silently would prove nothing).

``python -m grader.validate`` grades every variant; see that module for what each must score.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kata.catalogue import ALL_EXERCISES, SOLUTIONS, find

LOG2E = "1.4426950408889634"

E01 = "01_flash_attention_core"
E02 = "02_causal_flash_attention"
E03 = "03_moe_gating"

Edit = tuple[str, str]


class GalleryError(ValueError):
    """A variant's edit no longer applies to its solution file."""


@dataclass(frozen=True)
class Variant:
    name: str
    exercise_stem: str
    edits: tuple[Edit, ...]  # exact (old, new) replacements, applied in order
    expect_trap: str | None  # a trap id the grader must name (wrong variants only)
    full_marks: bool  # True: correct but different; False: must lose points
    why: str
    # Checks that must fail (by id): where the mistake is meant to show. Empty: any check.
    expect_failed: tuple[str, ...] = ()

    @property
    def filename(self) -> str:
        return f"{self.exercise_stem}.py"

    def source(self, solutions: Path = SOLUTIONS) -> str:
        """The solution file's text with this variant's edits applied."""
        return apply_edits(
            (solutions / self.filename).read_text(), self.edits, f"{self.name} ({self.filename})"
        )

    def write(self, folder: Path, solutions: Path = SOLUTIONS) -> Path:
        """Write the variant into ``folder`` under the exercise's file name."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / self.filename
        path.write_text(self.source(solutions))
        return path


def apply_edits(text: str, edits: tuple[Edit, ...], label: str = "variant") -> str:
    """Apply exact replacements in order; each ``old`` must occur exactly once at its turn."""
    if not edits:
        raise GalleryError(f"{label}: a variant needs at least one edit")
    for n, (old, new) in enumerate(edits, 1):
        count = text.count(old) if old else 0
        if count != 1:
            found = "not found" if count == 0 else f"found {count} times"
            raise GalleryError(
                f"{label}: edit {n} of {len(edits)}: the text {old!r} is {found} "
                "(it must occur exactly once); update grader/gallery.py to follow the solution"
            )
        if old == new:
            raise GalleryError(f"{label}: edit {n} changes nothing")
        text = text.replace(old, new)
    return text


def _wrong(name, stem, edits, trap, why, expect_failed=()) -> Variant:
    return Variant(name, stem, tuple(edits), trap, False, why, tuple(expect_failed))


def _right(name, stem, edits, why) -> Variant:
    return Variant(name, stem, tuple(edits), None, True, why)


# ---- reusable edits ------------------------------------------------------------------------

_SCORES = "scores = tl.dot(q, tl.trans(k)) * scale"
_ALPHA = "alpha = tl.exp(m_i - m_new)"
_P = "p = tl.exp(scores - m_new[:, None])"
_EXP2 = (
    (_SCORES, f"scores = tl.dot(q, tl.trans(k)) * (scale * {LOG2E})"),
    (_ALPHA, "alpha = tl.exp2(m_i - m_new)"),
    (_P, "p = tl.exp2(scores - m_new[:, None])"),
)
_CAUSAL = "visible = visible & (offs_m[:, None] >= offs_n[None, :])"
_HI = "hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)"


def _mask(condition: str) -> Edit:
    return (_CAUSAL, f"visible = visible & ({condition})")


WRONG: tuple[Variant, ...] = (
    # -- 01: the online softmax ------------------------------------------------------------------
    _wrong("01-acc-not-rescaled", E01, [("        acc = acc * alpha[:, None]\n", "")],
           "acc-not-rescaled", "the skeleton's mistake: l_i follows the new max, acc does not"),
    _wrong("01-l-not-rescaled", E01,
           [("l_i = l_i * alpha + tl.sum(p, axis=1)", "l_i = l_i + tl.sum(p, axis=1)")],
           None, "the mirror image: acc rescaled, the denominator not",
           ["running-max-grows"]),
    _wrong("01-no-scale", E01, [(_SCORES, "scores = tl.dot(q, tl.trans(k))")],
           None, "scores not multiplied by 1/sqrt(D)"),
    _wrong("01-no-final-division", E01, [("out = acc / l_i[:, None]", "out = acc")],
           None, "the running sum is stored without dividing by l_i"),
    _wrong("01-no-running-max", E01,
           [(_ALPHA, "alpha = tl.exp(m_new - m_new)"), (_P, "p = tl.exp(scores)")],
           None, "exp of raw scores (max taken as 0): exact until exp overflows on 30x scores",
           ["large-scores"]),
    _wrong("01-padded-keys-not-masked", E01,
           [('        scores = tl.where(col_ok[None, :], scores, float("-inf"))\n', "")],
           None, "keys past N load 0 and still get exp(0 - m) weight",
           ["ragged-shapes"]),
    _wrong("01-writes-nothing", E01,
           [("    tl.store(out_ptrs, out, mask=row_ok[:, None] & d_ok[None, :])\n", "")],
           None, "no store: the NaN-filled output buffer must be noticed"),
    # -- 02: the causal mask ---------------------------------------------------------------------
    _wrong("02-mask-missing", E02, [(f"        {_CAUSAL}\n", "")],
           "causal-mask-missing", "loop stops at the diagonal block but no per-pair mask"),
    _wrong("02-non-causal-kernel", E02, [(f"        {_CAUSAL}\n", ""), (_HI, "hi = N")],
           "causal-mask-missing", "the chapter's trap: 21.1's correct kernel on the causal task"),
    _wrong("02-mask-strict", E02, [_mask("offs_m[:, None] > offs_n[None, :]")],
           "causal-mask-off-by-one", "strict comparison drops the diagonal (row 0 sees nothing)"),
    _wrong("02-mask-one-ahead", E02, [_mask("offs_m[:, None] + 1 >= offs_n[None, :]")],
           "causal-mask-off-by-one", "one future key admitted"),
    _wrong("02-mask-reversed", E02, [_mask("offs_m[:, None] <= offs_n[None, :]")],
           None, "rows see the future and not the past"),
    _wrong("02-skip-diagonal", E02, [(_HI, "hi = tl.minimum(N, pid_m * BLOCK_M)")],
           None, "the loop stops before the diagonal block (block 0 sees no key at all)"),
    _wrong("02-bottom-right", E02, [_mask("offs_m[:, None] + (N - M) >= offs_n[None, :]"),
                                    (_HI, "hi = N")],
           None, "FlashAttention >= 2.1's bottom-right alignment, not the chapter's top-left",
           ["causal-rectangular"]),
    # -- 03: top-2 gating ------------------------------------------------------------------------
    _wrong("03-top2-not-masked", E03,
           [('rest = tl.where(cols == i0, float("-inf"), probs)', "rest = probs")],
           "top2-not-masked", "the second max/argmax finds the top-1 again",
           ["top2-random", "top2-padded-experts", "top2-ties", "top2-two-experts"]),
    _wrong("03-not-renormalized", E03,
           [("w0 = p0 / total", "w0 = p0"), ("w1 = p1 / total", "w1 = p1")],
           "weights-not-renormalized", "raw softmax probabilities as weights",
           ["renormalized-random", "renormalized-padded-experts"]),
    _wrong("03-zero-padded-experts", E03,
           [('mask=col_ok, other=float("-inf"))', "mask=col_ok, other=0.0)")],
           None, "padded experts load 0, which beats all-negative logits when E < BLOCK_E",
           ["top2-padded-experts"]),
    _wrong("03-swapped-weights", E03,
           [("tl.store(weight0_ptr + row, w0)", "tl.store(weight0_ptr + row, w1)"),
            ("tl.store(weight1_ptr + row, w1)", "tl.store(weight1_ptr + row, w0)")],
           None, "w0 and w1 stored the wrong way round", ["renormalized-random"]),
    _wrong("03-top1-masked-by-value", E03,
           [('rest = tl.where(cols == i0, float("-inf"), probs)',
             'rest = tl.where(probs == p0, float("-inf"), probs)')],
           None, "masks every expert equal to the top-1 value: wrong on exact ties",
           ["top2-ties"]),
    # The performance track: 05 promises the lowest index on ties, as vLLM's router does.
    _wrong("05-highest-index-on-ties", "05_fast_gating",
           [("| (BLOCK_E - 1 - cols)[None, :].to(tl.int64)", "| cols[None, :].to(tl.int64)"),
            ("i0 = BLOCK_E - 1 - (top1 & 0xFFFFFFFF).to(tl.int32)", "i0 = (top1 & 0xFFFFFFFF).to(tl.int32)"),
            ("i1 = BLOCK_E - 1 - (top2 & 0xFFFFFFFF).to(tl.int32)", "i1 = (top2 & 0xFFFFFFFF).to(tl.int32)")],
           None, "packs the index so that ties go to the highest expert", ["fast-gating-top2"]),
)  # fmt: skip

CORRECT: tuple[Variant, ...] = (
    _right("01-exp2", E01, _EXP2, "exp2 with log2(e) folded into the scale"),
    _right("01-rescale-fused", E01,
           [("        acc += tl.dot(p, v)\n", ""),
            ("acc = acc * alpha[:, None]", "acc = acc * alpha[:, None] + tl.dot(p, v)")],
           "rescale and add in one statement, the right way round"),
    _right("02-exp2", E02, _EXP2, "exp2 with log2(e) folded into the scale"),
    _right("02-finite-mask", E02,
           [('scores = tl.where(visible, scores, float("-inf"))',
             "scores = tl.where(visible, scores, -1.0e30)")],
           "a large finite mask value instead of -inf"),
    _right("02-no-block-skip", E02, [(_HI, "hi = N")],
           "every key tile visited; the mask alone makes it causal"),
    _right("03-finite-top1-mask", E03,
           [('rest = tl.where(cols == i0, float("-inf"), probs)',
             "rest = tl.where(cols == i0, -1.0, probs)")],
           "top-1 masked with -1 (below any probability) instead of -inf"),
)  # fmt: skip

GALLERY: tuple[Variant, ...] = WRONG + CORRECT


def variants(names: list[str] | None = None) -> list[Variant]:
    """The gallery, or the variants named (by name, or by exercise number/stem)."""
    if not names:
        return list(GALLERY)
    chosen = []
    for name in names:
        hits = [v for v in GALLERY if v.name == name]
        if not hits:
            try:
                stem = find(name).stem
            except KeyError:
                known = ", ".join(v.name for v in GALLERY)
                raise KeyError(f"no variant or exercise {name!r}; variants: {known}") from None
            hits = [v for v in GALLERY if v.exercise_stem == stem]
        chosen += [v for v in hits if v not in chosen]
    return chosen


def check_gallery() -> list[str]:
    """Problems with the gallery itself (names, stems, trap ids, edits that no longer apply)."""
    from grader import rubric
    from grader.traps import TRAPS

    problems = []
    stems = {ex.stem for ex in ALL_EXERCISES}
    names = [v.name for v in GALLERY]
    for name in {n for n in names if names.count(n) > 1}:
        problems.append(f"variant name {name} is used twice")
    for v in GALLERY:
        if v.exercise_stem not in stems:
            problems.append(f"{v.name}: unknown exercise {v.exercise_stem}")
            continue
        if v.expect_trap is not None and v.expect_trap not in TRAPS:
            problems.append(f"{v.name}: unknown trap {v.expect_trap}")
        if v.full_marks and (v.expect_trap or v.expect_failed):
            problems.append(f"{v.name}: a full-marks variant cannot expect a trap or a failure")
        check_ids = {c.id for c in rubric.checks_for(v.exercise_stem)}
        for check in v.expect_failed:
            if check not in check_ids:
                problems.append(f"{v.name}: {v.exercise_stem} has no check {check}")
        try:
            v.source()
        except GalleryError as exc:
            problems.append(str(exc))
    for trap in TRAPS:
        if not any(v.expect_trap == trap for v in WRONG):
            problems.append(f"no wrong variant expects trap {trap}")
    return problems
