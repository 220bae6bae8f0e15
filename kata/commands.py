"""Commands as a student can paste them.

The README installs nox into ``.venv/bin``, so a bare ``nox -s hint -- 01`` is "command not
found" unless the student activated that venv. Every command the kata prints is spelled here:
the noxfile passes how nox was started (``KATA_NOX``: ``nox`` when that is what is on PATH,
else ``.venv/bin/nox``, relative to the clone's root); without it (``python -m kata.student.hints``),
``nox`` if it is on PATH, else the README's ``.venv/bin/nox`` when it exists.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def nox_program() -> str:
    given = os.environ.get("KATA_NOX", "").strip()
    if given:
        return given
    if shutil.which("nox"):
        return "nox"
    local = ROOT / ".venv" / "bin" / "nox"
    return ".venv/bin/nox" if local.exists() else "nox"


def nox(session: str, *args: str) -> str:
    """``nox(\"hint\", \"01\")`` -> ``.venv/bin/nox -s hint -- 01`` (or ``nox -s ...``)."""
    tail = f" -- {' '.join(args)}" if args else ""
    return f"{nox_program()} -s {session}{tail}"
