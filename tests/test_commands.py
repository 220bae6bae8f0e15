"""Every command the README and the docs print works as printed after the README's set-up
(issue 28, item 1): each `nox -s NAME` names a session of the noxfile, each `python -m MODULE` a
module that runs, and none calls `.venv/bin/...`, which the set-up replaces by activating the
venv. And `python -m grader.<anything>` run by a Python without the kata's packages says what
to run instead of ending in a traceback."""

import ast
import importlib.util
import os
import re
import shlex
import subprocess
import sys

import pytest

from kata import catalogue, environment

ROOT = catalogue.ROOT
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# Fenced blocks that hold shell lines: a bare ``` block holds commands or their output (only
# lines that start with a command are read from it).
SHELL = {"", "bash", "sh", "shell", "console"}
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")  # a span may wrap onto the next line
# The first word of a line this test reads: nox, pip, a Python, or any of them run out of a venv.
COMMAND = re.compile(r"(nox|pip3?|python3?|\S*venv\S*[/\\](nox|python3?|pip)(\.exe)?)$")


def sessions() -> set[str]:
    """The sessions the noxfile defines, read from its source (nox is not run)."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / "noxfile.py").read_text())):
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            call = dec if isinstance(dec, ast.Call) else None
            if ast.unparse(call.func if call else dec) != "nox.session":
                continue
            named = [k.value.value for k in (call.keywords if call else ()) if k.arg == "name"]
            names.add(named[0] if named else node.name)
    return names


def session_modules() -> dict[str, set[str]]:
    """session -> the dotted names of the modules its body runs (string constants)."""
    found = {}
    for node in ast.walk(ast.parse((ROOT / "noxfile.py").read_text())):
        if isinstance(node, ast.FunctionDef) and any(
            "nox.session" in ast.unparse(d) for d in node.decorator_list
        ):
            strings = {
                n.value
                for n in ast.walk(node)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            }
            name = node.name.replace("_", "-")
            found[name] = {s for s in strings if re.fullmatch(r"(grader|kata)(\.\w+)*", s)}
    return found


def commands_in(text: str) -> list[str]:
    """The command lines a page prints: every line of its shell blocks that starts with a
    command, and every inline code span that does; continuations joined, `&&`, `;` and `|`
    chains split, comments, `$ ` prompts, subshell parentheses and `VAR=value` prefixes
    dropped."""
    lines = []
    for m in FENCE.finditer(text):
        if m[1] in SHELL:
            lines += m[2].replace("\\\n", " ").splitlines()
    prose = FENCE.sub("", text)
    lines += [" ".join(m[1].split()) for m in INLINE.finditer(prose)]
    found = []
    for line in lines:
        line = re.sub(r"(^|\s)#.*", "", line).strip().removeprefix("$ ").strip("() ")
        for part in re.split(r"&&|\|\||;|\|", line):
            words = part.split()
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words = words[1:]
            if words and COMMAND.fullmatch(words[0]):
                found.append(" ".join(words))
    return found


def _runs(module: str) -> bool:
    """Whether `python -m module` finds something to run: a module of this repository, or of
    the standard library and the packages installed here."""
    path = ROOT.joinpath(*module.split("."))
    if module.split(".")[0] in ("grader", "kata", "tests"):
        return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return False
    if spec is None:
        return False
    if spec.submodule_search_locations is not None:  # a package runs through its __main__
        return importlib.util.find_spec(f"{module}.__main__") is not None
    return True


def problems(command: str, known: set[str]) -> list[str]:
    """What is wrong with one printed command line, after the README's set-up."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    program, args = words[0], words[1:]
    if "/" in program or "\\" in program:
        return [
            f"`{command}`: the README's set-up activates .venv; print `{COMMAND.fullmatch(program)[2]}`"
            f" as it is, not {program}"
        ]
    if program == "nox":
        out = []
        for i, arg in enumerate(args):
            if arg == "--":
                break
            if arg in ("-s", "--session", "--sessions", "-e"):
                name = args[i + 1] if i + 1 < len(args) else ""
                if name not in known:
                    out.append(f"`{command}`: the noxfile has no session {name!r}")
        return out
    if args and args[0].endswith(".py") and not args[0].startswith(("/", "-")):
        if not (ROOT / args[0]).is_file():  # `python exercises/01_....py`, from the root
            return [f"`{command}`: there is no {args[0]}"]
    if "-m" in args:
        module = args[args.index("-m") + 1] if args.index("-m") + 1 < len(args) else ""
        module = module.rstrip(":,.")  # `python -m grader: the grading process`, a label
        if not _runs(module):
            return [f"`{command}`: `python -m {module}` has nothing to run"]
    return []


def all_problems(pages=PAGES) -> list[str]:
    known = sessions()
    out = []
    for page in pages:
        for command in commands_in(page.read_text()):
            where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
            out += [f"{where}: {p}" for p in problems(command, known)]
    return out


def test_every_printed_command_works_after_the_set_up():
    assert all_problems() == []


def test_the_pages_print_commands_at_all():
    """The reader above finds what it is meant to: the README's set-up, the exercise pages'
    `nox -s run`, the instructor guide's blocks and inline commands."""
    readme = commands_in((ROOT / "README.md").read_text())
    assert "nox -s grade" in readme and "pip install -q nox" in readme
    assert "python3 -m venv .venv" in readme
    page = commands_in(
        (ROOT / "docs" / "exercises" / f"{catalogue.find('01').stem}.md").read_text()
    )
    assert "nox -s run -- 01" in page
    guide = commands_in((ROOT / "docs" / "instructors.md").read_text())
    assert "python -m grader.validate --solutions path/to/other/solutions" in guide
    assert "python3 -m json.tool /tmp/agr/results/results.json" in guide  # a piped line


def test_a_bad_block_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Run `nox -s nonesuch -- 01`, then:\n\n"
        "```bash\n"
        "python3 -m venv .venv && .venv/bin/pip install -q nox\n"
        ".venv/bin/nox -s grade   # what the old README said\n"
        "nox -s grade -- 01\n"
        "python -m grader.no_such_stage --help\n"
        "python -m grader.classroom          # a package without __main__\n"
        "python3 -m json.tool x.json | head -3\n"
        "python exercises/07_no_such_exercise.py\n"
        "```\n\n"
        "```\n"
        "python -m grader: the grading process   (a picture's label, a real module)\n"
        "```\n"
    )
    found = [p.split(": ", 1)[1] for p in all_problems([page])]
    assert found == [
        "`.venv/bin/pip install -q nox`: the README's set-up activates .venv; print `pip` as "
        "it is, not .venv/bin/pip",
        "`.venv/bin/nox -s grade`: the README's set-up activates .venv; print `nox` as it is, "
        "not .venv/bin/nox",
        "`python -m grader.no_such_stage --help`: `python -m grader.no_such_stage` has nothing "
        "to run",
        "`python -m grader.classroom`: `python -m grader.classroom` has nothing to run",
        "`python exercises/07_no_such_exercise.py`: there is no exercises/07_no_such_exercise.py",
        "`nox -s nonesuch -- 01`: the noxfile has no session 'nonesuch'",
    ]


def test_no_message_hard_codes_the_venvs_nox():
    """What grader/ and kata/ print spells nox through kata.commands (as the student started
    it: `nox` in the activated venv), never a fixed `.venv/bin/nox`."""
    fixed = []
    for path in [*(ROOT / "grader").rglob("*.py"), *(ROOT / "kata").rglob("*.py")]:
        if path == ROOT / "kata" / "commands.py":  # the one home, and its fallback
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        fixed += [
            f"{path.relative_to(ROOT)}:{n.lineno}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and id(n) not in docstrings
            and re.search(r"\.venv[/\\](bin|Scripts)[/\\]nox", n.value)
        ]
    assert fixed == []


def test_the_sessions_are_read_from_the_noxfile():
    known = sessions()
    assert {"grade", "run", "hint", "tests", "validate", "slurm-test", "batch"} <= known
    assert "slurm_test" not in known and "_pytest" not in known


def test_each_module_the_guard_names_runs_in_its_session():
    """kata.environment tells `python -m grader.validate` to run `nox -s validate`: that
    session must exist and run that module."""
    ran = session_modules()
    for module, session in environment.SESSIONS.items():
        assert module in ran.get(session, set()), (module, session, ran.get(session))


# ---- python -m grader.<anything> by a Python without the kata's packages --------------------


def _bare(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -S -m ...``: this Python without its site packages, so without torch, triton
    and numpy whatever is installed here."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", environment.RERUN)}
    return subprocess.run(
        [sys.executable, "-S", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "module, session",
    [
        ("grader.validate", "validate"),
        ("grader.classroom.batch", "batch"),
        ("kata.authoring.docs", "generate"),  # the grader's, though it stands with the tools
        ("grader.report.html", None),  # no session of its own: `nox -s grade` makes .nox/kata
    ],
)
def test_a_grader_module_without_the_packages_says_what_to_run(module, session):
    proc = _bare("-m", module, "--help", **{environment.RERUN: "1"})  # no rerun: the message
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"{module}: {sys.executable} has no torch, triton, numpy. Run ")
    assert f"nox -s {session or 'grade'}`" in line


@pytest.mark.slow
def test_python_m_grader_keeps_its_own_message():
    """`python -m grader` checks its arguments first: --help works without the packages."""
    proc = _bare("-m", "grader", "--help", **{environment.RERUN: "1"})
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr


@pytest.mark.slow
def test_a_grader_module_reruns_itself_with_the_kata_environment():
    if not environment.env_python().exists():
        pytest.skip("no .nox/kata here to rerun with")
    proc = _bare("-m", "grader.validate", "--list")
    assert proc.returncode == 0, proc.stderr
    assert "running python -m grader.validate with .nox/kata/bin/python" in proc.stderr
    assert "02-chapter" in proc.stdout  # the gallery was listed, by the environment's Python
