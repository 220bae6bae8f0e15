"""The kata's exercises, in order, as read from the manifest ``exercises/info.toml``.

Everything that names an exercise asks this module: the file, the kernel the grader launches,
its interface (the fixed parameter list), the TODOs with their points, the hints. The checks of
an exercise live in ``grader/specs/<stem>/``.
"""

from __future__ import annotations

import importlib.util
import linecache
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from kata import kinds, source

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
MANIFEST = EXERCISES / "info.toml"
TRACK_NAMES = ("core", "performance", "extensions")


class ManifestError(ValueError):
    """exercises/info.toml is malformed; the message names the entry and the field."""


@dataclass(frozen=True)
class Todo:
    id: str
    points: int
    title: str


@dataclass(frozen=True)
class Exercise:
    stem: str  # file name without .py; also the exercise's id in reports
    title: str
    kernel: str  # the @triton.jit function a submission must define
    interface: str  # a name in kata.kinds.KINDS
    host: str  # the host function the file defines for its worked example
    todos: tuple[Todo, ...]
    hints: tuple[str, ...]  # one ladder for the whole exercise; () when split per TODO
    track: str = "core"
    causal: bool = False  # attention interfaces: the task is causal
    chapter: str = ""  # the chapter section it comes from, if any
    # A ladder per TODO, in file order, so that a student stuck on one TODO reads no hint that
    # gives away another.
    todo_hints: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def ladders(self) -> dict[str | None, tuple[str, ...]]:
        """Each ladder of hints by the TODO it helps with; None: the exercise's only ladder."""
        return dict(self.todo_hints) if self.todo_hints else {None: self.hints}

    @property
    def number(self) -> str:
        return self.stem[:2]

    @property
    def filename(self) -> str:
        return f"{self.stem}.py"

    @property
    def params(self) -> tuple[str, ...]:
        return kinds.get(self.interface).params

    @property
    def todo_ids(self) -> tuple[str, ...]:
        return tuple(t.id for t in self.todos)

    @property
    def points(self) -> int:
        return sum(t.points for t in self.todos)


def _entry(raw: dict, n: int) -> Exercise:
    where = f"{MANIFEST.name}: exercise {n} ({raw.get('stem', '?')})"
    required = ("stem", "title", "kernel", "interface", "host", "todos", "hints")
    missing = [key for key in required if key not in raw]
    if missing:
        raise ManifestError(f"{where}: missing {', '.join(missing)}")
    known = {*required, "track", "causal", "chapter"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ManifestError(f"{where}: unknown field(s) {', '.join(unknown)}")
    if raw.get("track", "core") not in TRACK_NAMES:
        raise ManifestError(f"{where}: track must be one of {', '.join(TRACK_NAMES)}")
    if raw["interface"] not in kinds.KINDS:
        raise ManifestError(f"{where}: unknown interface {raw['interface']!r}")
    try:
        todos = tuple(Todo(t["id"], int(t["points"]), t["title"]) for t in raw["todos"])
    except (KeyError, TypeError) as exc:
        raise ManifestError(f"{where}: each TODO needs id, points and title ({exc})") from None
    hints, todo_hints = raw["hints"], ()
    if isinstance(hints, dict):  # [exercise.hints]: one ladder per TODO id
        ids = [t.id for t in todos]
        if sorted(hints) != sorted(ids):
            raise ManifestError(f"{where}: hints per TODO must name exactly {', '.join(ids)}")
        hints, todo_hints = (), tuple((i, tuple(hints[i])) for i in ids)
    return Exercise(
        stem=raw["stem"],
        title=raw["title"],
        kernel=raw["kernel"],
        interface=raw["interface"],
        host=raw["host"],
        todos=todos,
        hints=tuple(hints),
        track=raw.get("track", "core"),
        causal=bool(raw.get("causal", False)),
        chapter=raw.get("chapter", ""),
        todo_hints=todo_hints,
    )


def load_manifest(path: Path = MANIFEST) -> tuple[Exercise, ...]:
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    found = tuple(_entry(entry, n) for n, entry in enumerate(raw.get("exercise", []), 1))
    stems = [ex.stem for ex in found]
    if len(set(stems)) != len(stems) or len({s[:2] for s in stems}) != len(stems):
        raise ManifestError(f"{path.name}: exercise stems and numbers must be unique")
    return found


ALL_EXERCISES = load_manifest()
TRACKS = {name: tuple(ex for ex in ALL_EXERCISES if ex.track == name) for name in TRACK_NAMES}
TRACKS["all"] = ALL_EXERCISES
EXERCISE_LIST = TRACKS["core"]  # the chapter's exercises: 100 points


def find(name: str) -> Exercise:
    """An exercise by number (``2``, ``02``) or file stem (``02_...``, as in the manifest)."""
    key = name.strip().removesuffix(".py")
    for ex in ALL_EXERCISES:
        if key in (ex.stem, ex.number) or (key.isdigit() and int(key) == int(ex.number)):
            return ex
    known = ", ".join(ex.stem for ex in ALL_EXERCISES)
    raise KeyError(f"no exercise {name!r}; known: {known}")


def find_or_report(name: str) -> Exercise | None:
    """``find`` for command lines: None (after saying why on stderr) for an unknown name."""
    try:
        return find(name)
    except KeyError as exc:
        print(exc.args[0], file=sys.stderr)
        return None


def load_text(text: str, path: Path | str, name: str) -> ModuleType:
    """Import kernel-file source ``text`` as module ``name``, as if it were read from ``path``
    (tracebacks and Triton, which reads a kernel's source back, see ``text``, never the file on
    disk, which may have changed since ``text`` was read)."""
    path = str(Path(path).resolve())
    # Lines as Python's tokenizer counts them: str.splitlines would also split at form feeds
    # and U+2028, and Triton, which reads a kernel's source back from here, would read the
    # wrong lines.
    linecache.cache[path] = (len(text), None, source.lines(text), path)
    module = ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module  # @triton.jit looks its function's module up while compiling
    exec(compile(text, path, "exec", dont_inherit=True), module.__dict__)
    return module


def load_file(path: Path | str, name: str | None = None) -> ModuleType:
    """Import a kernel file by path (its name starts with a digit, so `import` cannot), as a
    module of its own; ``name`` gives a second copy of a file loaded already a name apart."""
    path = Path(path).resolve()
    name = name or f"kata_submission_{path.parent.name}_{path.stem}".replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # @triton.jit looks its function's module up while compiling
    spec.loader.exec_module(module)
    return module
