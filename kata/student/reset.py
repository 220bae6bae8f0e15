"""``nox -s reset -- 02``: put an exercise's skeleton back, keeping the student's version.

The current file is moved to ``<stem>.py.bak`` (or ``.bak2``, ``.bak3``... so no backup is ever
overwritten). The skeleton is the frozen copy in ``kata/skeletons.json``, which the student
handout ships too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kata import commands, skeletons
from kata.catalogue import EXERCISES, Exercise, find_or_report


def skeleton(ex: Exercise) -> str:
    return skeletons.pristine(ex.stem).text


def backup_path(path: Path) -> Path:
    candidate = path.with_name(path.name + ".bak")
    n = 2
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak{n}")
        n += 1
    return candidate


def reset(ex: Exercise, folder: Path = EXERCISES) -> Path | None:
    """Restore the skeleton; returns the backup's path (None if there was nothing to keep)."""
    path = folder / ex.filename
    text = skeleton(ex)
    backup = None
    if path.exists():
        if path.read_text() == text:
            return None
        backup = backup_path(path)
        path.replace(backup)
    path.write_text(text)
    return backup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=commands.prog("reset", "kata.student.reset"), description="Restore a skeleton."
    )
    parser.add_argument("exercise", help="exercise number (02) or file stem")
    args = parser.parse_args(argv)
    ex = find_or_report(args.exercise)
    if ex is None:
        return 2
    backup = reset(ex)
    where = f"exercises/{ex.filename}"
    if backup is None:
        print(f"{where} is already the untouched skeleton")
    else:
        print(f"restored {where}; your version is kept as exercises/{backup.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
