"""The validation galleries' machinery: how a variant becomes a file, and what it must score.

A variant is written the way a student writes a submission: the exercise's frozen skeleton
(``kata.skeletons``) with its TODO regions filled, the spec's ``REFERENCE`` code wherever the
variant gives none, plus exact edits elsewhere if the mistake lives in given code. A variant may
instead start from a whole file in the spec's ``gallery/`` folder (the chapter's own kernels, a
fake kernel). Nothing here reads ``solutions/``, so ``validate`` works whatever solutions an
instructor swaps in. The variants themselves are data, in each spec's ``hidden.py``.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from grader import specs
from kata import skeletons
from kata.generate import Skeleton

Edit = tuple[str, str]


class GalleryError(ValueError):
    """A variant cannot be built: an edit that no longer applies, an unknown TODO."""


@dataclass(frozen=True, kw_only=True)
class Expect:
    """What one graded file must get. ``score``: "full", "zero" or "less" (loses points)."""

    score: str
    traps: tuple[str, ...] = ()  # exactly these trap ids must be named
    failed: tuple[str, ...] = ()  # these checks must have status "failed"
    breaks: str | None = None  # its TODO: every check of another TODO must pass (or be blocked)
    integrity: bool | None = False  # it edits given code (None: not judged)
    notes_failed: tuple[str, ...] = ()  # 0-point notes allowed to fail
    error: str | None = None  # a regular expression the exercise's error must match
    message: str | None = None  # a regular expression some failed check's message must match
    warning: str | None = None  # a regular expression one of its warnings must match

    def label(self, max_score: int) -> str:
        return {"full": f"={max_score}", "zero": "=0", "less": f"<{max_score}"}[self.score]


@dataclass(frozen=True, kw_only=True)
class Variant:
    name: str
    why: str
    expect: Expect
    fills: dict[str, str | tuple[str, ...]] = field(default_factory=dict)  # TODO -> code
    edits: tuple[Edit, ...] = ()  # exact (old, new) replacements on the filled file
    file: str | None = None  # a whole file in the spec's gallery/ folder instead
    on_cuda: Expect | None = None  # where the compiled backend must differ

    def expectation(self, backend: str) -> Expect:
        return self.on_cuda if backend == "cuda" and self.on_cuda else self.expect

    @property
    def full_marks(self) -> bool:
        return self.expect.score == "full"


def wrong(
    name: str, why: str, *, traps=(), failed=(), breaks=None, integrity=None, **kw
) -> Variant:
    """A kernel the grader must fail (``integrity`` defaults to "it has edits")."""
    edits = tuple(kw.pop("edits", ()))
    flagged = bool(edits) if integrity is None else integrity
    expect = Expect(score=kw.pop("score", "less"), traps=tuple(traps), failed=tuple(failed),
                    breaks=breaks, integrity=flagged, **kw.pop("expect", {}))  # fmt: skip
    return Variant(name=name, why=why, expect=expect, edits=edits, **kw)


def right(name: str, why: str, *, integrity=None, **kw) -> Variant:
    """A kernel written differently that must keep full marks."""
    edits = tuple(kw.pop("edits", ()))
    flagged = bool(edits) if integrity is None else integrity
    expect = Expect(score="full", integrity=flagged, **kw.pop("expect", {}))
    return Variant(name=name, why=why, expect=expect, edits=edits, **kw)


def apply_edits(text: str, edits: tuple[Edit, ...], label: str = "variant") -> str:
    """Apply exact replacements in order; each ``old`` must occur exactly once at its turn."""
    for n, (old, new) in enumerate(edits, 1):
        count = text.count(old) if old else 0
        if count != 1:
            found = "not found" if count == 0 else f"found {count} times"
            raise GalleryError(
                f"{label}: edit {n} of {len(edits)}: the text {old!r} is {found} "
                "(it must occur exactly once); update the gallery to follow the skeleton"
            )
        if old == new:
            raise GalleryError(f"{label}: edit {n} changes nothing")
        text = text.replace(old, new)
    return text


def fill(sk: Skeleton, fills: dict[str, str | tuple[str, ...]], label: str = "variant") -> str:
    """The skeleton with the regions of each TODO in ``fills`` replaced by its code (one string
    per region, in file order; a string alone for a TODO with one region)."""
    lines = sk.text.splitlines(keepends=True)
    todos = {r.todo for r in sk.regions}
    unknown = sorted(set(fills) - todos)
    if unknown:
        raise GalleryError(f"{label}: the skeleton has no TODO {', '.join(unknown)}")
    edits = []  # (start, end, code) for every region, applied bottom-up
    for todo, code in fills.items():
        regions = sk.regions_of(todo)
        codes = (code,) if isinstance(code, str) else tuple(code)
        if len(codes) != len(regions):
            raise GalleryError(f"{label}: TODO {todo} has {len(regions)} region(s), "
                               f"the fill gives {len(codes)}")  # fmt: skip
        edits += [(r.start, r.end, c) for r, c in zip(regions, codes)]
    for start, end, code in sorted(edits, reverse=True):
        # A region's own first line sets the indentation; an empty one takes the line above.
        anchor = lines[start - 1] if end >= start else lines[start - 2]
        indent = anchor[: len(anchor) - len(anchor.lstrip())]
        body = textwrap.dedent(code).strip("\n")
        new = [indent + ln + "\n" if ln.strip() else "\n" for ln in body.splitlines()]
        lines[start - 1 : end] = new
    return "".join(lines)


def source(variant: Variant, spec: specs.Spec) -> str:
    """The file ``variant`` stands for."""
    label = f"{variant.name} ({spec.exercise.filename})"
    if variant.file:
        path = specs.folder(spec.exercise.stem) / "gallery" / variant.file
        if not path.is_file():
            raise GalleryError(f"{label}: gallery file {path.name} is missing")
        text = path.read_text()
    else:
        sk = skeletons.pristine(spec.exercise.stem)
        text = fill(sk, {**spec.reference, **variant.fills}, label)
    return apply_edits(text, variant.edits, label)


def all_variants(stems: list[str] | None = None) -> list[tuple[specs.Spec, Variant]]:
    """Every (spec, variant) of the galleries, in manifest order."""
    from kata.catalogue import ALL_EXERCISES

    found = []
    for ex in ALL_EXERCISES:
        if stems is not None and ex.stem not in stems:
            continue
        spec = specs.load(ex.stem, "hidden")
        found += [(spec, v) for v in spec.gallery]
    return found
