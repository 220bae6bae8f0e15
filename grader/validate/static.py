"""``validate --static``, like rustlings' ``dev check``: a tree where the pieces of an exercise
disagree is refused before anything is graded.

Checked: the manifest against the files (solution, exercise, spec, docs page); the generated
exercises and frozen skeletons against the solutions; every spec with both check sets (each
pays every TODO its manifest points); each TODO's regions hold the lines its comment tells the
student to change; the galleries (every variant builds, names known traps and
checks, and every trap has a wrong kernel expecting it); the reference fills against the
solutions; the hints; the placeholder text ``nox -s new`` leaves; and the generated parts of
the docs.
"""

from __future__ import annotations

from pathlib import Path

from grader import specs
from grader.kinds import TRAPS
from grader.validate import gallery
from kata import regions, skeletons
from kata.authoring import generate, new
from kata.catalogue import ALL_EXERCISES, EXERCISES, ROOT, SOLUTIONS

DOCS = ROOT / "docs" / "exercises"


def _plain_solution(source: str) -> str:
    """A marked solution as a student would have written it: markers and skeleton blocks
    dropped, solution blocks kept."""
    out, skeleton = [], False
    for line in source.splitlines(keepends=True):
        marker = regions.MARKER.match(line)
        if marker:
            skeleton = marker.groups() == ("BEGIN", "SKELETON")
            continue
        if not skeleton:
            out.append(line)
    return "".join(out)


def _files(notes: list[str], solutions: Path) -> list[str]:
    problems = []
    swapped = solutions.resolve() != SOLUTIONS.resolve()
    for ex in ALL_EXERCISES:
        for path, what in (
            (EXERCISES / ex.filename, "exercise"),
            (DOCS / f"{ex.stem}.md", "docs page"),
            (specs.folder(ex.stem) / "public.py", "public spec"),
        ):
            if not path.is_file():
                problems.append(f"{ex.stem}: its {what} {path.relative_to(ROOT)} is missing")
        if not (solutions / ex.filename).is_file() and not swapped:
            problems.append(f"{ex.stem}: no solution {ex.filename} in {solutions}")
        for todo, levels in ex.ladders.items():
            if len(levels) < 2:
                which = f" for TODO {todo}" if todo else ""
                problems.append(f"{ex.stem}: the manifest gives fewer than 2 hints{which}")
    if swapped:
        notes.append(f"solutions from {solutions}: generation drift is checked against solutions/")
        # A swapped-in folder may hold a few exercises: the others keep the grader's own rows.
        absent = [ex.filename for ex in ALL_EXERCISES if not (solutions / ex.filename).is_file()]
        if absent:
            notes.append(f"not in {solutions}, so not graded as solutions: {', '.join(absent)}")
    marked = [
        ex
        for ex in ALL_EXERCISES
        if (SOLUTIONS / ex.filename).is_file()
        and regions.has_markers((SOLUTIONS / ex.filename).read_text())
    ]
    unmarked = [ex.stem for ex in ALL_EXERCISES if ex not in marked]
    if unmarked:
        notes.append(
            f"solutions/ of {', '.join(unmarked)} have no solution markers (swapped-in "
            "solutions?): their exercises, skeletons and reference fills are not "
            "compared with them"
        )
    if len(marked) == len(ALL_EXERCISES):
        problems += _drift()
    return problems + _references(marked)


def committed(path: Path) -> str | None:
    """``path`` as git has it committed, or None outside a git checkout, or where git's HEAD
    does not hold this tree's solutions (a copy of the files beside an older .git)."""
    import subprocess

    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(
                ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
            )
        except OSError:
            return None

    same = git("diff", "--quiet", "HEAD", "--", "solutions", "exercises/info.toml")
    if same is None or same.returncode != 0:
        return None
    shown = git("show", f"HEAD:{path.relative_to(ROOT).as_posix()}")
    return shown.stdout if shown is not None and shown.returncode == 0 else None


def _drift() -> list[str]:
    """The generated files against the solutions. The exercises are compared as git has them
    committed: the working copy is a student's to edit (a solved checkout stays consistent)."""
    stale = []
    for path, text in generate.expected().items():
        if path.parent == EXERCISES:
            found = committed(path)
            current = found if found is not None else text  # no usable git: the JSON decides
        else:
            current = path.read_text() if path.exists() else None
        if current != text:
            stale.append(path)
    return [
        f"{p.relative_to(ROOT)} differs from the solutions: run `nox -s generate`" for p in stale
    ]


def _references(marked) -> list[str]:
    """The gallery's reference fills must rebuild each marked solution exactly."""
    problems = []
    for ex in marked:
        spec = specs.load(ex.stem, "hidden")
        if not spec.reference:
            continue
        try:
            rebuilt = gallery.fill(skeletons.pristine(ex.stem), spec.reference, ex.stem)
        except gallery.GalleryError as exc:
            problems.append(str(exc))
            continue
        if rebuilt != _plain_solution((SOLUTIONS / ex.filename).read_text()):
            problems.append(f"{ex.stem}: REFERENCE in its hidden.py does not rebuild the solution")
    return problems


def _todo_names(sk: regions.Skeleton) -> list[tuple[str, str, int, int]]:
    """(TODO id, a name the comment quotes in backticks, the comment's first and last line)."""
    import re

    lines = sk.text.splitlines()
    found = []
    for first, last in sk.comments:
        todo = regions.TODO.match(lines[first - 1]).group(1)
        comment = " ".join(lines[first - 1 : last])
        for name in dict.fromkeys(re.findall(r"`([A-Za-z_]\w*)`", comment)):
            found.append((todo, name, first, last))
    return found


def _assigned(text: str) -> dict[str, list[int]]:
    """Each name the skeleton assigns, with the lines of its assignments."""
    import ast

    found: dict[str, list[int]] = {}
    for node in ast.walk(ast.parse(text)):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    found.setdefault(name.id, []).append(node.lineno)
    return found


def names_outside_regions(sk: regions.Skeleton) -> list[str]:
    """A TODO comment that tells the student to change a variable (it quotes its name, as in
    "add that condition to `visible`") must have a line assigning that variable inside its own
    regions: the student's natural edit of that line would otherwise count as an edit of given
    code (the integrity warning, and 0 under --strict). What breaks that rule, one line each."""
    problems = []
    assigned = _assigned(sk.text)
    for todo, name, first, last in _todo_names(sk):
        lines = assigned.get(name)
        if not lines:
            continue  # not a variable of the file (a word like `continue`, a parameter)
        spans = sk.regions_of(todo)
        if any(r.start <= n <= r.end for r in spans for n in lines):
            continue
        shown = ", ".join(
            f"{r.start}-{r.end}" if r.end >= r.start else f"empty, before {r.start}" for r in spans
        )
        problems.append(
            f"TODO({todo}) (skeleton lines {first}-{last}) names `{name}`, assigned at line(s) "
            f"{', '.join(map(str, lines))}, none in its region(s) ({shown}): widen the region "
            "to hold the line the student is told to edit"
        )
    return problems


def _regions_hold_what_todos_name() -> list[str]:
    problems = []
    for ex in ALL_EXERCISES:
        try:
            sk = skeletons.pristine(ex.stem)
        except skeletons.SkeletonError:
            continue  # the drift check says so
        problems += [f"{ex.stem}: {p}" for p in names_outside_regions(sk)]
    return problems


def _specs() -> list[str]:
    problems = []
    for ex in ALL_EXERCISES:
        for checkset in specs.CHECKSETS:
            try:
                spec = specs.load(ex.stem, checkset)
            except specs.SpecError as exc:
                problems.append(str(exc))
                continue
            if checkset == "hidden" and not specs.has_hidden(ex.stem):
                problems.append(f"{ex.stem}: no hidden.py (a full checkout must have one)")
            unknown = [t for t in spec.skeleton_traps if t not in TRAPS]
            problems += [f"{ex.stem}: SKELETON_TRAPS names unknown trap {t}" for t in unknown]
            unknown = [r.trap for r in spec.forbidden if r.trap not in TRAPS]
            problems += [f"{ex.stem}: FORBIDDEN names unknown trap {t}" for t in unknown]
    return problems


def _galleries() -> list[str]:
    problems, expected = [], set()
    names = [v.name for _, v in gallery.all_variants()]
    problems += [
        f"variant name {n} is used twice" for n in sorted({n for n in names if names.count(n) > 1})
    ]
    for spec, v in gallery.all_variants():
        check_ids = {c.id for c in spec.checks}
        for expect in filter(None, (v.expect, v.on_cuda)):
            expected.update(expect.traps)
            problems += [f"{v.name}: unknown trap {t}" for t in expect.traps if t not in TRAPS]
            problems += [
                f"{v.name}: {spec.exercise.stem} has no check {c}"
                for c in (*expect.failed, *expect.passed, *expect.notes_failed)
                if c not in check_ids
            ]
            problems += [
                f"{v.name}: check {c} is expected to both pass and fail"
                for c in set(expect.passed) & set(expect.failed)
            ]
            if expect.breaks and expect.breaks not in spec.exercise.todo_ids:
                problems.append(f"{v.name}: {spec.exercise.stem} has no TODO {expect.breaks}")
            if expect.score == "full" and (expect.traps or expect.failed):
                problems.append(f"{v.name}: a full-marks variant cannot expect a trap or a failure")
        try:
            gallery.source(v, spec)
        except gallery.GalleryError as exc:
            problems.append(str(exc))
    problems += [f"trap {t} has no wrong kernel in any gallery" for t in TRAPS if t not in expected]
    return problems


def problems(solutions: Path = SOLUTIONS) -> tuple[list[str], list[str]]:
    """(problems, notes) of the tree; an empty problem list means it is consistent."""
    notes: list[str] = []
    found = _files(notes, solutions) + _specs() + _galleries() + _regions_hold_what_todos_name()
    found += [p for ex in ALL_EXERCISES for p in new.placeholders_left(ex)]
    try:
        from kata.authoring import docs
    except ImportError:  # the docs generator is not part of every copy
        return found, notes
    found += docs.problems()
    return found, notes
