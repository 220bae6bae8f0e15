"""The pristine skeletons (frozen in ``kata/skeletons.json`` by ``nox -s generate``) and what a
submission changed outside the regions a student is meant to edit.

The grader, ``nox -s reset``, and the validation galleries all read the skeletons from here, so
none of them depends on ``solutions/`` still holding the kata's own reference kernels.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

from kata.generate import SKELETONS, Region, Skeleton


class SkeletonError(LookupError):
    pass


@functools.cache
def _frozen(path: Path = SKELETONS) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise SkeletonError(f"{path} is missing: run `nox -s generate`") from None


def pristine(stem: str) -> Skeleton:
    """The untouched skeleton of exercise ``stem`` with its regions."""
    entry = _frozen().get(stem)
    if entry is None:
        raise SkeletonError(f"no frozen skeleton for {stem}: run `nox -s generate`")
    return Skeleton(
        entry["text"],
        tuple(Region(**r) for r in entry["regions"]),
        tuple(tuple(c) for c in entry["comments"]),
    )


# ---- integrity: changes outside the TODO regions ----------------------------------------------


@dataclass
class Integrity:
    """Lines of the skeleton a submission changed outside the regions it may edit."""

    lines: list[int] = field(default_factory=list)  # skeleton line numbers touched
    diff: str = ""  # a short unified diff of those changes

    @property
    def ok(self) -> bool:
        return not self.lines

    def describe(self) -> str:
        if self.ok:
            return "only the TODO regions were edited"
        shown = ", ".join(str(n) for n in self.lines[:8]) + (" ..." if len(self.lines) > 8 else "")
        return f"changed outside the TODO regions, at skeleton line(s) {shown}"


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of lines that hold code: blank and comment-only lines are left out,
    and trailing whitespace does not count."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        bare = line.rstrip()
        if bare and not bare.lstrip().startswith("#"):
            found.append((n, bare))
    return found


def _editable(sk: Skeleton) -> set[int]:
    lines = set()
    for r in sk.regions:
        lines.update(range(r.start, r.end + 1))
    for first, last in sk.comments:
        lines.update(range(first, last + 1))
    return lines


def _gap_is_editable(sk: Skeleton, editable: set[int], before: int, after: int) -> bool:
    """Lines may be added between skeleton lines ``before`` and ``after`` when the gap holds an
    editable line or an empty region."""
    if any(n in editable for n in range(before, after + 1)):
        return True
    return any(r.end == r.start - 1 and before < r.start <= after for r in sk.regions)


MAX_DIFF_LINES = 24


def check(sk: Skeleton, text: str) -> Integrity:
    """What ``text`` (a submission) changed in skeleton ``sk`` outside its editable regions."""
    old, new = _code_lines(sk.text), _code_lines(text)
    editable = _editable(sk)
    total = len(sk.text.splitlines())
    touched: list[int] = []
    hunks: list[str] = []
    matcher = difflib.SequenceMatcher(a=[b for _, b in old], b=[b for _, b in new], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if i1 == i2:  # an insertion between two skeleton lines
            before = old[i1 - 1][0] if i1 > 0 else 0
            after = old[i1][0] if i1 < len(old) else total + 1
            bad = [] if _gap_is_editable(sk, editable, before, after) else [max(before, 1)]
        else:
            bad = [old[i][0] for i in range(i1, i2) if old[i][0] not in editable]
        if not bad:
            continue
        touched += bad
        hunks += [f"@@ skeleton line {bad[0]} @@"]
        hunks += [f"-{line}" for _, line in old[i1:i2]] + [f"+{line}" for _, line in new[j1:j2]]
    if len(hunks) > MAX_DIFF_LINES:
        hunks = hunks[:MAX_DIFF_LINES] + [f"... ({len(hunks) - MAX_DIFF_LINES} more lines)"]
    return Integrity(sorted(set(touched)), "\n".join(hunks))
