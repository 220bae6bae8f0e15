"""Whether this Python has the kata's packages, and what happens when it has not.

The README's set-up installs torch, triton and the rest into ``.nox/kata``, not into the Python
that runs ``nox``. So ``python -m grader.validate`` or ``python3 exercises/01_....py`` typed in a
fresh terminal usually starts a Python without them. Rather than a traceback ending in "No module
named 'numpy'", such a run is started again with ``.nox/kata``'s Python when that exists, or
stops with one line that says what to run instead. ``python -m grader`` says the same in its own
words (``grader.cli``), after it has checked its arguments.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# module to import -> the package pip installs it from: what a grading needs
RUNTIME = {
    "torch": "torch",
    "triton": "triton",
    "numpy": "numpy",
    "pytest": "pytest",
    "pytest_jsonreport": "pytest-json-report",
}

# `python -m MODULE` -> the nox session that runs it in .nox/kata (the noxfile's; a test checks
# each pair). A module not listed is suggested `nox -s grade`, which installs the same packages.
SESSIONS = {
    "grader.validate": "validate",
    "grader.validate.mutants": "mutants",
    "grader.classroom.batch": "batch",
    "kata.authoring.docs": "generate",
}

# Entry points that check for themselves and say more: `python -m grader` checks its arguments
# first, and the Gradescope bundle's must write a results.json that says it could not grade.
CHECKS_ITSELF = {"grader", "grader.autograder"}

# Set in the environment of a rerun, so that a .nox/kata without the packages cannot loop.
RERUN = "KATA_REEXEC"


def missing(modules=RUNTIME) -> list[str]:
    """The modules of ``modules`` this Python cannot import (none is imported to find out)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def env_python() -> Path:
    """The Python of ``.nox/kata``, the environment every nox session of the kata runs in."""
    if os.name == "nt":
        return ROOT / ".nox" / "kata" / "Scripts" / "python.exe"
    return ROOT / ".nox" / "kata" / "bin" / "python"


def step(command: str) -> str:
    """``command`` (a nox command line) as what to do from here: as it is when ``nox`` is on
    PATH; after activating ``.venv`` when that exists; else after the README's set-up."""
    if not command.startswith("nox ") or shutil.which("nox"):
        return f"`{command}`"
    if (ROOT / ".venv").is_dir():
        activate = r".venv\Scripts\activate" if os.name == "nt" else ". .venv/bin/activate"
        return f"`{activate}` (it puts nox on PATH), then `{command}`"
    return f"the README's set-up (Start here), then `{command}`"


def rerun(what: str, argv: list[str]) -> None:
    """Run ``argv`` (arguments to a Python) again with ``.nox/kata``'s Python and exit with its
    status, when that Python exists and this is not already such a rerun; else return."""
    python = env_python()
    if not python.exists() or os.environ.get(RERUN):
        return
    print(
        f"kata: {sys.executable} lacks the kata's packages; running {what} with "
        f"{python.relative_to(ROOT)}, the kata's environment",
        file=sys.stderr,
    )
    os.environ[RERUN] = "1"
    if os.name == "nt":  # no exec there: a child, and its exit status
        sys.exit(subprocess.call([str(python), *argv]))
    os.execv(python, [str(python), *argv])


def _module_run() -> str | None:
    """The module of ``python -m MODULE``, while Python is importing it; else None. Only then is
    ``sys.argv[0]`` the string "-m"; ``sys.orig_argv`` still holds the module's name."""
    if sys.argv[:1] != ["-m"]:
        return None
    args = getattr(sys, "orig_argv", [])
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("-m") and len(arg) > 2:  # python -mgrader.validate
            return arg[2:]
    return None


def guard(package: str) -> None:
    """Called by ``package``'s ``__init__``: ``python -m package.MODULE`` run by a Python without
    the kata's packages is rerun with ``.nox/kata``'s Python, or stops with status 2 and one line
    saying which nox session runs it instead. Any other import is left alone. ``package`` may
    name one module, for a package whose other tools run without those packages."""
    module = _module_run()
    if not module or module in CHECKS_ITSELF or not f"{module}.".startswith(f"{package}."):
        return
    lacking = missing(("torch", "triton", "numpy"))
    if not lacking:
        return
    rerun(f"python -m {module}", ["-m", module, *sys.argv[1:]])
    from kata import commands

    session = SESSIONS.get(module)
    if session:
        todo = f"Run {step(commands.nox(session))} instead: it installs them into .nox/kata"
    else:
        todo = (
            f"Run {step(commands.nox('grade'))} once (it installs them into .nox/kata); then "
            "this command reruns itself there"
        )
    print(
        f"{module}: {sys.executable} has no {', '.join(lacking)}. {todo}.",
        file=sys.stderr,
    )
    sys.exit(2)
