"""Everything a student, an instructor or CI runs: `nox -l` lists the sessions.

All sessions share one environment, ``.nox/kata``. It is a virtual environment that also sees the
packages of the Python running nox (and of the system), so a CUDA build of torch that is already
installed is used as it is. Only what is missing gets installed; torch, if missing, as
``torch==2.13.0`` (override with ``KATA_TORCH``, e.g.
``KATA_TORCH="torch --index-url https://download.pytorch.org/whl/cpu"``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
ENV = ROOT / ".nox" / "kata"

nox.options.default_venv_backend = "none"
nox.options.sessions = ["grade"]

# nox looks for uv on every session and logs "uv binary not found." when it is absent; the kata
# never uses uv (its sessions run in .nox/kata with pip), so the line only puzzles students.
logging.getLogger("nox").addFilter(lambda record: record.getMessage() != "uv binary not found.")

# A student's session prints what the kata prints, not nox's own lines around it: which session
# runs, the package probe, the command line, and "was successful". Installing, a failure, and
# every instructor session keep nox's lines.
STUDENT_SESSIONS = ("grade", "run", "hint", "watch", "reset")
_NAMES = "|".join(STUDENT_SESSIONS)
# "Session grade was successful." or, when nox times it, "... was successful in 41 seconds."
QUIET = re.compile(rf"Running session ({_NAMES})$|Session ({_NAMES}) was successful\b")
logging.getLogger("nox").addFilter(lambda record: not QUIET.match(record.getMessage()))


def _nox_as_typed() -> str:
    """How this nox was started, as a student can type it again from the clone's root: `nox`
    when that is what PATH finds (the README's set-up activates .venv), else its path."""
    started = Path(sys.argv[0])
    if started.name == "__main__.py":  # python -m nox
        program, tail = Path(sys.executable), " -m nox"
    else:
        program, tail = started, ""
    # A relative path is relative to where nox was started ($PWD): nox has since moved here.
    starts = [Path(os.environ.get("PWD", os.getcwd()), program), Path(program)]
    program = next((p.absolute() for p in starts if p.exists()), program.absolute())
    on_path = shutil.which("nox")
    if not tail and on_path and Path(on_path).resolve() == program.resolve():
        return "nox"
    try:
        return f"{program.relative_to(ROOT)}{tail}"
    except ValueError:
        return f"{shlex.quote(str(program))}{tail}"


# kata.commands spells every command the kata prints with it ("Stuck? nox -s hint -- 01").
os.environ.setdefault("KATA_NOX", _nox_as_typed())

# module to import -> what pip installs when it is missing
RUNTIME = {
    "torch": os.environ.get("KATA_TORCH", "torch==2.13.0"),
    "triton": "triton",
    "numpy": "numpy",
    "pytest": "pytest>=7",
    "pytest_jsonreport": "pytest-json-report>=1.5",
    "jinja2": "jinja2>=3",  # reports/score.html (torch depends on it too, so it is usually there)
}
if sys.version_info < (3, 11):
    RUNTIME["tomli"] = "tomli"  # exercises/info.toml; tomllib is in the standard library from 3.11
DEV = {"ruff": "ruff"}
TEST = {
    "jsonschema": "jsonschema",  # the report contract, docs/report.schema.json
    "xdist": "pytest-xdist>=3",  # the tests run on every core
    # A right kernel keeps full marks whatever formatter saved it (tests/test_saved_forms.py).
    "black": "black",
    "autopep8": "autopep8",
    "isort": "isort",
    # The figures' tests redraw each picture and check its numbers (tests/test_figures.py).
    "matplotlib": "matplotlib",
}
BATCH = {"submitit": "submitit"}  # the Slurm engine submits through it


def _env_python(session: nox.Session, extra: dict[str, str] | None = None) -> str:
    """The shared environment's python, created and completed on first use."""
    bindir = "Scripts" if os.name == "nt" else "bin"
    python = ENV / bindir / ("python.exe" if os.name == "nt" else "python")
    if not python.exists():
        session.log(f"creating {ENV.relative_to(ROOT)} (sees the packages of {sys.executable})")
        # Without pip of its own (5-10 s saved on the first run): the pip of the interpreter
        # running nox is visible through its site packages, and ensurepip below fills the gap
        # when there is none.
        session.run(
            sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(ENV)
        )
        # Also see the packages of the interpreter running nox, when that is itself a venv
        # holding torch: a venv's --system-site-packages only reaches the base interpreter.
        site = session.run(
            str(python),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            silent=True,
            log=False,
        ).strip()
        own = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        Path(site, "_kata_parent_site.pth").write_text("\n".join(sorted(own)) + "\n")
    wanted = {**RUNTIME, **(extra or {})}
    probe = "import importlib.util as u, sys; print(*[m for m in sys.argv[1:] if u.find_spec(m) is None])"
    missing = session.run(str(python), "-c", probe, *wanted, silent=True, log=False).split()
    if missing:
        # One line, not pip's thirty: its output is shown only if it fails.
        session.log(
            f"installing {', '.join(missing)} into {ENV.relative_to(ROOT)} (the first run: "
            "about a minute, longer on a slow network)"
        )
        if session.run(str(python), "-c", probe, "pip", silent=True, log=False).strip():
            session.run(str(python), "-m", "ensurepip", "--default-pip", silent=True, log=False)
        specs = [arg for module in missing for arg in shlex.split(wanted[module])]
        session.run(
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            *specs,
            silent=True,
            log=False,
        )
    return str(python)


# ---- for students ------------------------------------------------------------------------


def _student(session: nox.Session, module: str, **kwargs) -> None:
    """Run a student's tool, its command line unlogged (see QUIET), telling it how the
    student typed the session (its --help says `nox -s grade --`, not `python -m grader`)."""
    session.run(
        _env_python(session),
        "-m",
        module,
        *session.posargs,
        log=False,
        env={"KATA_SESSION": session.name},
        **kwargs,
    )


@nox.session
def grade(session: nox.Session) -> None:
    """Grade your exercises (args: [EXERCISE ...] [--target DIR] [--report FILE] ...)."""
    _student(session, "grader")


@nox.session
def run(session: nox.Session) -> None:
    """Run an exercise's worked example: `nox -s run -- 02` (`--solutions`: the reference)."""
    _student(session, "kata.student.run", success_codes=[0, 1])


@nox.session
def hint(session: nox.Session) -> None:
    """Show an exercise's next hint: `nox -s hint -- 02` (`--all` for every level)."""
    _student(session, "kata.student.hints")


@nox.session
def watch(session: nox.Session) -> None:
    """Regrade an exercise whenever its file is saved: `nox -s watch [-- 02]`."""
    _student(session, "kata.student.watch")


@nox.session
def reset(session: nox.Session) -> None:
    """Restore an exercise's skeleton, keeping yours as .bak: `nox -s reset -- 02`."""
    _student(session, "kata.student.reset")


# ---- for instructors and maintainers (a full checkout; the student handout has none) -------

if (ROOT / "solutions").is_dir():

    def _pytest(session: nox.Session, python: str, *args: str) -> None:
        """pytest on every core. Only the plugins the tests use are loaded: a plugin that
        happens to be installed beside torch (a benchmark timer, say) has no say."""
        session.run(
            python,
            "-m",
            "pytest",
            "-p",
            "xdist.plugin",
            "-n",
            "auto",
            "--dist",
            "loadfile",
            *args,
            env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        )

    @nox.session
    def tests(session: nox.Session) -> None:
        """The repository's own tests, the static checks and ruff (about 4 min, 2 idle cores).
        Not here: `nox -s validate` (every gallery kernel graded), `nox -s e2e`."""
        python = _env_python(session, {**DEV, **TEST})
        if session.posargs:
            _pytest(session, python, *session.posargs)
            return
        _pytest(session, python, "-m", "not e2e", "tests")
        session.run(python, "-m", "grader.validate", "--static")
        session.run(python, "-m", "ruff", "check", ".")
        session.run(python, "-m", "ruff", "format", "--check", ".")

    @nox.session
    def mutants(session: nox.Session) -> None:
        """Mutation testing of the hidden checks: every small slip in a TODO region's reference
        code must lose points, or be listed as equivalent with its reason (docs/mutants.md)."""
        session.run(_env_python(session), "-m", "grader.validate.mutants", *session.posargs)

    @nox.session
    def e2e(session: nox.Session) -> None:
        """End to end: a class graded, resumed and shown in a browser; the handout and the
        Gradescope bundle unpacked and run (the tests marked e2e)."""
        _pytest(
            session, _env_python(session, {**DEV, **TEST}), "-m", "e2e", "tests", *session.posargs
        )

    @nox.session
    def validate(session: nox.Session) -> None:
        """Prove the grader: solutions 100, skeletons 0, galleries judged (10-12 min, 2 idle cores).
        Before them the static checks: the tree consistent (`-- --static`: only those)."""
        session.run(_env_python(session), "-m", "grader.validate", *session.posargs)

    @nox.session
    def batch(session: nox.Session) -> None:
        """Grade a class: `nox -s batch -- --submissions DIR --out DIR [--engine local|slurm]`."""
        # submitit only for --engine slurm: the local engine keeps working on an offline machine.
        slurm = "slurm" in session.posargs or "--engine=slurm" in session.posargs
        python = _env_python(session, BATCH if slurm else None)
        session.run(python, "-m", "grader.classroom.batch", *session.posargs)

    @nox.session(name="slurm-test")
    def slurm_test(session: nox.Session) -> None:
        """Grade a class through a real Slurm (one node on this machine, brought up as root when
        none answers) and compare the gradebook with the local engine's."""
        python = _env_python(session, BATCH)
        path = ROOT / "tests" / "slurm" / "cluster.py"
        spec = importlib.util.spec_from_file_location("kata_slurm_cluster", path)
        cluster = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cluster)
        with cluster.running(ROOT / ".slurm-test", log=session.log) as env:
            session.run(
                python,
                "-m",
                "pytest",
                "tests/slurm",
                "-v",
                "-s",
                *session.posargs,
                env={"KATA_SLURM_TEST": "1", **env},
            )

    @nox.session
    def handout(session: nox.Session) -> None:
        """Build dist/triton-kata-handout.zip: what students get (public checks only)."""
        session.run(
            _env_python(session), "-m", "kata.authoring.bundles", "handout", *session.posargs
        )

    @nox.session
    def autograder(session: nox.Session) -> None:
        """Build dist/triton-kata-autograder.zip for Gradescope (setup.sh, run_autograder)."""
        session.run(
            _env_python(session), "-m", "kata.authoring.bundles", "autograder", *session.posargs
        )

    @nox.session
    def bench(session: nox.Session) -> None:
        """GPU: solution kernels vs torch; writes reports/bench.json and reports/bench.png."""
        python = _env_python(session, {"matplotlib": "matplotlib"})
        session.run(python, "-m", "kata.authoring.bench", *session.posargs)

    @nox.session
    def generate(session: nox.Session) -> None:
        """Rewrite exercises/ from solutions/ (strips the marked solution regions)."""
        session.run(_env_python(session), "-m", "kata.authoring.generate", *session.posargs)
        session.run(_env_python(session), "-m", "kata.authoring.docs", *session.posargs)

    @nox.session
    def new(session: nox.Session) -> None:
        """Scaffold an exercise: `nox -s new -- 10_name --interface attention` writes its manifest
        entry, solution, specs and docs page from the first exercise with that interface."""
        session.run(_env_python(session), "-m", "kata.authoring.new", *session.posargs)

    @nox.session
    def figures(session: nox.Session) -> None:
        """Redraw docs/figures/*.png from the reference kernels (needs matplotlib)."""
        session.run(
            _env_python(session, {"matplotlib": "matplotlib"}), "-m", "kata.authoring.figures"
        )

    @nox.session
    def lint(session: nox.Session) -> None:
        """ruff check and format check."""
        python = _env_python(session, DEV)
        session.run(python, "-m", "ruff", "check", ".")
        session.run(python, "-m", "ruff", "format", "--check", ".")
