"""Solution files and their regions: what ``# BEGIN SOLUTION`` / ``# BEGIN SKELETON`` mark.

In a solution file::

    # BEGIN SOLUTION          lines the student must write: removed from the exercise
    # END SOLUTION
    # BEGIN SKELETON          commented-out lines that stand in for the solution in the
    # # hi = N                exercise: uncommented there, so the skeleton still runs
    # END SKELETON

Everything else is copied as is, TODO comments included. Each run of adjacent SOLUTION and
SKELETON blocks becomes one *region* of the exercise: the lines a student is meant to edit. A
region belongs to the nearest ``# TODO(id)`` comment above it (below it, when none is above).
The generator (``kata.authoring.generate``) writes the exercises with it; the grader reads the
frozen skeletons' regions (``kata.skeletons``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kata.catalogue import ROOT

MARKER = re.compile(r"^\s*# (BEGIN|END) (SOLUTION|SKELETON)\s*$")
TODO = re.compile(r"^\s*# TODO\(([^)]+)\)")
SKELETONS = ROOT / "kata" / "skeletons.json"


class MarkerError(ValueError):
    pass


@dataclass(frozen=True)
class Region:
    """Lines ``start``..``end`` (1-based, inclusive) of a skeleton a student may rewrite for
    TODO ``todo``; ``end == start - 1`` is an empty region: lines go in before ``start``."""

    todo: str
    start: int
    end: int


@dataclass(frozen=True)
class Skeleton:
    text: str
    regions: tuple[Region, ...]
    comments: tuple[tuple[int, int], ...]  # the TODO comment blocks, (first, last) line

    def regions_of(self, todo: str) -> list[Region]:
        return [r for r in self.regions if r.todo == todo]


def skeleton(source: str, name: str = "<solution>") -> Skeleton:
    """The exercise text for one solution file, with its regions."""
    out: list[str] = []
    region: str | None = None
    spans: list[list[int]] = []  # [start, end] in exercise lines, before TODO ids are known
    for lineno, line in enumerate(source.splitlines(keepends=True), 1):
        marker = MARKER.match(line)
        if marker:
            edge, kind = marker.groups()
            if edge == "BEGIN" and region is None:
                region = kind
                if not spans or spans[-1][1] != len(out):  # a new run of blocks
                    spans.append([len(out) + 1, len(out)])
            elif edge == "END" and region == kind:
                region = None
            else:
                raise MarkerError(f"{name}:{lineno}: unexpected '# {edge} {kind}'")
            continue
        if region == "SOLUTION":
            continue
        if region == "SKELETON":
            indent = line[: len(line) - len(line.lstrip())]
            body = line.lstrip()
            if body.rstrip("\r\n") in ("", "#"):  # a blank line inside the skeleton
                line = "\n"
            elif not body.startswith("# "):
                raise MarkerError(f"{name}:{lineno}: skeleton lines must be commented out")
            else:
                line = indent + body[2:]
            out.append(line)
            spans[-1][1] = len(out)
            continue
        out.append(line)
    if region is not None:
        raise MarkerError(f"{name}: '# BEGIN {region}' is never closed")
    text = "".join(out)
    ast.parse(text, filename=name)  # a skeleton must at least be valid Python
    lines = text.splitlines()
    comments, todos = [], []  # (first, last, id) of each TODO comment block
    for i, line in enumerate(lines, 1):
        found = TODO.match(line)
        if found:
            last = i
            while (
                last < len(lines)
                and lines[last].strip().startswith("#")
                and not TODO.match(lines[last])
            ):
                last += 1
            todos.append((i, last, found.group(1)))
            comments.append((i, last))
    regions = []
    for start, end in spans:
        above = [t for t in todos if t[1] < start]
        below = [t for t in todos if t[0] > end]
        owner = above[-1] if above else below[0] if below else None
        if owner is None:
            raise MarkerError(f"{name}: a solution region at line {start} has no TODO comment")
        regions.append(Region(owner[2], start, end))
    return Skeleton(text, tuple(regions), tuple(comments))


def strip(source: str, name: str = "<solution>") -> str:
    """The exercise text for one solution file."""
    return skeleton(source, name).text


def has_markers(source: str) -> bool:
    return any(MARKER.match(line) for line in source.splitlines())
