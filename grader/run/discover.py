"""Where a submission's exercise files are: the folder given, or a folder below it.

Students upload zipped folders (``ada/exercises/01_....py``, ``ada/my-upload/...``), and a
folder graded only at its top would score 0 with nothing but "not found". The grader
(``--target``), batch grading and the Gradescope entry point all look here instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kata.catalogue import EXERCISE_LIST, Exercise

IGNORED = {"__MACOSX", "__pycache__", "node_modules"}  # zip tools' and Python's clutter


def _count(folder: Path, names: set[str]) -> int:
    return sum((folder / name).is_file() for name in names)


def exercise_folder(folder: Path, exercises: Iterable[Exercise] = EXERCISE_LIST) -> Path | None:
    """The folder holding the most of ``exercises``' files, ``folder`` itself or one below it
    (on a tie the shallowest, then the first by name); None when no folder holds any."""
    names = {ex.filename for ex in exercises}
    below = [folder] + [
        p
        for p in folder.rglob("*")
        if p.is_dir()
        and not any(part in IGNORED or part.startswith(".") for part in p.relative_to(folder).parts)
    ]
    scored = [(_count(p, names), p) for p in below]
    best = max((n for n, _ in scored), default=0)
    if not best:
        return None
    return min((p for n, p in scored if n == best), key=lambda p: (len(p.parts), str(p)))
