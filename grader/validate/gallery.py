"""The validation galleries' machinery: how a variant becomes a file, and what it must score.

A variant is written the way a student writes a submission: the exercise's frozen skeleton
(``kata.skeletons``) with its TODO regions filled, the spec's ``REFERENCE`` code wherever the
variant gives none, plus exact edits elsewhere if the mistake lives in given code. A variant may
instead start from a whole file in the spec's ``gallery/`` folder (the chapter's own kernels, a
fake kernel). Nothing here reads ``solutions/``, so ``validate`` works whatever solutions an
instructor swaps in. The variants themselves are data, in each spec's ``hidden.py``, declared with
``grader.model``'s ``wrong`` and ``right``.
"""

from __future__ import annotations

import textwrap

from grader import specs
from grader.model import Edit, Variant
from kata import skeletons
from kata.regions import Skeleton


class GalleryError(ValueError):
    """A variant cannot be built: an edit that no longer applies, an unknown TODO."""


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
            raise GalleryError(
                f"{label}: TODO {todo} has {len(regions)} region(s), the fill gives {len(codes)}"
            )
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
