"""Commands as a student can paste them.

The README's set-up installs nox into ``.venv`` and activates it, so the docs write a bare
``nox -s hint -- 01``. Every command the kata prints is spelled here, as the student can type it
again: the noxfile passes how nox was started (``KATA_NOX``: ``nox`` when that is what is on
PATH, as it is in the activated venv, else its path, such as ``.venv/bin/nox``); without it
(``python -m kata.student.hints``), ``nox`` if it is on PATH, else ``.venv/bin/nox`` when it
exists (a new terminal where ``.venv`` is not active yet), else ``nox``.
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


def prog(session: str, module: str) -> str:
    """The command line a tool's --help shows: ``.venv/bin/nox -s grade --`` when the student
    started it through that nox session (the noxfile sets KATA_SESSION), else
    ``python -m grader``."""
    if os.environ.get("KATA_SESSION") == session:
        return f"{nox(session)} --"
    return f"python -m {module}"


def install(missing: list[str]) -> str:
    """What installs ``missing`` Python packages in this copy of the kata: the nox session in a
    checkout or a handout; in the Gradescope bundle (no noxfile, a setup.sh) its setup.sh, which
    Gradescope runs when it builds the image; otherwise pip."""
    if (ROOT / "noxfile.py").is_file():
        return f"`{nox('grade')}` installs them"
    if (ROOT / "setup.sh").is_file():
        return (
            f"`bash {ROOT / 'setup.sh'}` installs them into the Python that runs `python3` "
            "(Gradescope runs it when it builds the image)"
        )
    return f"`python3 -m pip install {' '.join(missing)}` installs them"
