"""The repository's shape, which the code's reader relies on: the grader's stages are folders
a newcomer can see at a glance, no module imports another that imports it back, importing a
module does nothing but define things, and the formatter owns the code's layout."""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kata import catalogue

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = catalogue.ROOT
PACKAGES = ("grader", "kata")


def modules() -> dict[str, object]:
    """Every module of the packages (spec folders and pytest's check files are data the spec
    loader and pytest read by path), by dotted name, with its file."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "checks" in relative.parts or any(p[:2].isdigit() for p in relative.parts):
                continue
            parts = list(relative.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def libraries() -> list[str]:
    """The third-party modules the packages import (matplotlib.pyplot, torch, ...)."""
    found = set()
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
    return sorted(n for n in found if n.split(".")[0] not in (*PACKAGES, *sys.stdlib_module_names))


def imports_of(name: str, path) -> set[str]:
    """The package modules ``name`` imports, at its top or inside a function."""
    known = modules()
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in known and t != name}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_grader_shows_its_stages_at_the_top():
    entries = sorted(p.name for p in (ROOT / "grader").iterdir() if p.name != "__pycache__")
    assert len(entries) <= 12, entries
    for stage in ("specs", "run", "judge", "report", "classroom", "validate"):
        assert (ROOT / "grader" / stage / "__init__.py").is_file(), stage


def test_no_module_imports_one_that_imports_it_back():
    graph = {name: imports_of(name, path) for name, path in modules().items()}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


KIND_FOLDERS = ("grader.kinds", "kata.kinds")  # one room per kind, and one for what they share


def room(name: str) -> str:
    """The top-level entry of ``grader/`` or ``kata/`` a module belongs to: a stage folder
    (``grader.judge``) or a module standing alone (``grader.cli``, ``kata.host``). Inside the
    kinds' folders each entry is a room of its own (``grader.kinds.moe_dispatch``,
    ``grader.kinds.base``, the registry ``grader.kinds``): a kind stands on what the kinds
    share, never on another stage that stands on it."""
    parts = name.split(".")
    return ".".join(parts[:3] if ".".join(parts[:2]) in KIND_FOLDERS else parts[:2])


def folder_loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The loops between top-level entries, the modules' imports drawn between their rooms."""
    rooms: dict[str, set[str]] = {}
    for name, targets in graph.items():
        rooms.setdefault(room(name), set())
        for target in targets:
            rooms.setdefault(room(target), set())
            if room(target) != room(name):
                rooms[room(name)].add(room(target))
    return cycles(rooms)


def test_no_stage_folder_imports_one_that_imports_it_back():
    """A stage stands on the ones below it: a loop between two folders means a module sits in
    the wrong stage, even when no two modules import each other."""
    graph = {name: imports_of(name, path) for name, path in modules().items()}
    assert folder_loops(graph) == []


def test_the_loop_finder_sees_the_loops_of_the_old_layout():
    # The trap catalogue in judge/, imported by the specs, importing the specs' model; the
    # Gradescope entry point in run/ importing the command line that imports run/.
    old = {
        "grader.specs.hidden": {"grader.judge.traps"},
        "grader.judge.traps": {"grader.specs.model"},
        "grader.specs.model": set(),
        "grader.run.autograder": {"grader.cli"},
        "grader.cli": {"grader.run.runner"},
        "grader.run.runner": set(),
    }
    assert sorted(folder_loops(old)) == [
        ["grader.cli", "grader.run"],
        ["grader.judge", "grader.specs"],
    ]


def test_the_loop_finder_sees_a_kind_that_imports_the_judge_stage_back():
    # main's layout before the kinds had homes: the judges' base in judge/, which asks the kinds
    # for their judges, and a kind's judges built on it.
    old = {
        "grader.judge.judges": {"grader.kinds.moe_dispatch.judges"},
        "grader.kinds.moe_dispatch.judges": {"grader.judge.compare", "grader.kinds.base"},
        "grader.judge.compare": set(),
        "grader.kinds.base": set(),
    }
    assert folder_loops(old) == [["grader.judge", "grader.kinds.moe_dispatch"]]


# ---- a kind of kernel is one home on each side ------------------------------------------------


def code_words(path) -> list[str]:
    """What a file says in code: its names (variables, attributes, functions, arguments,
    keywords, imports) and its one-word string literals (keys, module paths). Docstrings,
    comments and prose (a string with a space) say nothing here."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.append(node.id)
        elif isinstance(node, ast.Attribute):
            found.append(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append(node.name)
        elif isinstance(node, ast.alias) and not _foreign(node.name):
            found.append(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module and not _foreign(node.module):
            found.append(node.module)
        elif isinstance(node, ast.arg):
            found.append(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            found.append(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docs and not any(c.isspace() for c in node.value):
                found.append(node.value)
    return found


def _foreign(module: str) -> bool:
    """A dotted module path outside this repository's packages (``torch.nn.attention``) names
    no kind, whatever its last part."""
    return "." in module and module.split(".")[0] not in PACKAGES


def kind_word(kind: str) -> re.Pattern:
    """A kind's name as a whole word, spelled with ``-`` or ``_``: ``moe_dispatch`` and
    ``"moe-dispatch"``, but not ``launch_moe_dispatch`` nor ``window-attention`` for
    ``attention``."""
    return re.compile(r"(?<![\w-])" + kind.replace("-", "[-_]") + r"(?![\w-])")


def is_home(kind: str, relative: str, stems: set[str]) -> bool:
    """Whether a file is one of the kind's homes: a path that carries its name (a kind built on
    another, window_attention on attention, lives in its family's homes), or the spec folder of
    one of its exercises."""
    name = kind.replace("-", "_")
    parts = Path(relative).with_suffix("").parts
    if any(re.search(rf"(^|_){name}(_|$)", part) for part in parts):
        return True
    return parts[:2] == ("grader", "specs") and len(parts) > 2 and parts[2] in stems


def naming(kind: str, root: Path = ROOT) -> list[str]:
    """The files under grader/ and kata/ that name ``kind`` in code."""
    word = kind_word(kind)
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if any(word.search(w) for w in code_words(path)):
                found.append(path.relative_to(root).as_posix())
    return found


def strangers(kind: str, root: Path = ROOT) -> list[str]:
    """The files that name ``kind`` outside its homes."""
    exercises = tomllib.loads((root / "exercises" / "info.toml").read_text())["exercise"]
    stems = {e["stem"] for e in exercises if e["interface"] == kind}
    return [f for f in naming(kind, root) if not is_home(kind, f, stems)]


def kind_names(root: Path = ROOT) -> list[str]:
    exercises = tomllib.loads((root / "exercises" / "info.toml").read_text())["exercise"]
    return sorted({e["interface"] for e in exercises})


@pytest.mark.parametrize("kind", kind_names())
def test_a_kind_is_named_in_its_homes_and_at_most_two_other_files(kind):
    """A kind's student-facing part is ``kata/kinds/<kind>.py``, the grader's part
    ``grader/kinds/<kind>/``; beyond them (and its exercises' spec folders) only the two
    registries may name it, so that a new kind, or a change to one, touches its homes."""
    name = kind.replace("-", "_")
    assert (ROOT / "kata" / "kinds" / f"{name}.py").is_file()
    assert (ROOT / "grader" / "kinds" / name / "__init__.py").is_file()
    found = strangers(kind)
    assert len(found) <= 2, f"{kind} is named outside its homes in {found}"


def test_the_kind_rule_sees_a_name_in_code_and_not_in_prose(tmp_path):
    (tmp_path / "grader").mkdir()
    (tmp_path / "kata").mkdir()
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "info.toml").write_text(
        '[[exercise]]\nstem = "99_moe_dispatch"\ninterface = "moe-dispatch"\n'
    )
    quiet = '"""moe-dispatch, in words."""\n# moe_dispatch\nx = "a moe-dispatch kernel"\n'
    quiet += "launch_moe_dispatch = 1\nfrom torch.nn.moe_dispatch import f\n"  # another's module
    (tmp_path / "grader" / "quiet.py").write_text(quiet)
    loud = (
        'k = "moe-dispatch"',
        "from kata.kinds import moe_dispatch",
        "from kata.kinds.moe_dispatch import f",
    )
    for n, line in enumerate(loud):
        (tmp_path / "grader" / f"loud{n}.py").write_text(line + "\n")
    (tmp_path / "kata" / "moe_dispatch.py").write_text("moe_dispatch = 1\n")  # a home
    assert strangers("moe-dispatch", tmp_path) == [f"grader/loud{n}.py" for n in range(3)]


# Imports every module in a fresh Python with the backend unset, and records what importing did
# besides defining things: a changed environment, a process started (Python's audit events).
IMPORT_ALL = """
import importlib, json, os, sys
started = []
def audit(event, args):
    if event in ("subprocess.Popen", "os.system", "os.exec", "os.fork", "os.forkpty",
                 "os.posix_spawn", "os.spawn"):
        started.append(f"{event} {args[:2]!r}")
sys.addaudithook(audit)
for library in json.loads(sys.argv[2]):  # what importing a library does is not the kata's
    try:
        importlib.import_module(library)
    except ImportError:
        pass
started.clear()
before = dict(os.environ)
changed, optional = {}, []
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:  # a tool's own library (matplotlib for the figures)
        if exc.name.split(".")[0] in ("grader", "kata"):
            raise
        optional.append(name)
    env = dict(os.environ)
    if env != before:
        changed[name] = sorted(k for k in set(env) | set(before) if env.get(k) != before.get(k))
        before = env
print(json.dumps({"changed": changed, "started": started, "optional": optional}))
"""


OPTIONAL = {"kata.authoring.figures", "grader.classroom.engines.slurm"}  # matplotlib, submitit


@pytest.mark.slow
def test_importing_a_module_only_defines_things():
    names = [n for n in modules() if not n.endswith("__main__")]
    env = {k: v for k, v in os.environ.items() if k not in ("KATA_DEVICE", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, json.dumps(names), json.dumps(libraries())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == ""
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(found.pop("optional")) <= OPTIONAL
    assert found == {"changed": {}, "started": []}


def test_the_import_check_sees_a_module_that_works_at_import(tmp_path):
    (tmp_path / "busy.py").write_text(
        "import os, subprocess\nos.environ['X_BUSY'] = '1'\nsubprocess.run(['true'])\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, json.dumps(["busy"]), "[]"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["changed"] == {"busy": ["X_BUSY"]} and found["started"], found


def test_the_formatter_owns_the_layout():
    """``# fmt: skip`` is for data tables only (a fenced table is ``# fmt: off`` / ``on``)."""
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    count = sum((ROOT / f).read_text().count("fmt: skip") for f in files if (ROOT / f).is_file())
    assert count <= 40, f"{count} '# fmt: skip' markers"


LONGEST = 80  # lines a function may have, counted from ``def`` to its last line


def long_functions(path, longest: int = LONGEST) -> list[str]:
    """``path:name:lines`` for each function of the file longer than ``longest`` lines, counted
    from the ``def`` line to the last line, docstring included and decorators not. A nested
    function counts inside its parent. The kata's ``@triton.jit`` kernels are left out: a kernel
    is one piece of teaching, written by the student as one function."""
    label = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if any(ast.unparse(d).endswith("jit") for d in node.decorator_list):
            continue
        lines = node.end_lineno - node.lineno + 1
        if lines > longest:
            found.append(f"{label}:{node.name}:{lines}")
    return found


def test_no_function_is_longer_than_80_lines():
    """A long function is split into named steps, so that a reader sees what it does."""
    found = [
        f
        for p in PACKAGES
        for path in sorted((ROOT / p).rglob("*.py"))
        for f in long_functions(path)
    ]
    assert found == [], "functions over 80 lines:\n" + "\n".join(found)


def test_the_length_check_counts_from_def_to_the_last_line(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(LONGEST - 2))
    (tmp_path / "m.py").write_text(
        f'def short():\n    """Doc."""\n{body}\ndef long():\n    """Doc."""\n{body}    return 1\n'
        f"@triton.jit\ndef kernel():\n{body}{body}"
    )
    found = long_functions(tmp_path / "m.py")
    assert [f.split(":", 1)[1] for f in found] == [f"long:{LONGEST + 1}"], found
