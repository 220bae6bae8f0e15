"""One spec per exercise, in ``grader/specs/<stem>/``:

* ``public.py`` (shipped in the student handout): ``CASES`` and ``CHECKS`` declared with
  ``hidden=False``, ``SKELETON_TRAPS`` (what the untouched skeleton must be diagnosed with),
  for the performance track ``TIMING`` (the shapes timed against torch on a GPU), and, where an
  exercise refuses some Triton functions before running anything, ``FORBIDDEN``;
* ``hidden.py`` (the instructor's; the handout leaves every one out): ``CASES`` and ``CHECKS``
  declared with ``hidden=True``, ``REFERENCE`` (the right code of every TODO region) and
  ``GALLERY`` (kernels the grader must fail and kernels it must pass).

The hidden checks grade when a spec has them, unless ``KATA_CHECKS=public``; each set on its own
pays every TODO its manifest points.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from grader.model import Case, Check
from kata import kinds
from kata.catalogue import Exercise, find

HERE = Path(__file__).resolve().parent
CHECKSETS = ("hidden", "public")


class SpecError(ValueError):
    """A spec contradicts itself or the manifest; the message says where."""


@dataclass(frozen=True)
class Spec:
    exercise: Exercise
    checkset: str  # the set that grades: "hidden" or "public"
    checks: tuple[Check, ...]  # the active set's checks, in order
    cases: dict[str, Case]  # every case those checks use, by name
    skeleton_traps: tuple[str, ...]
    timing: tuple[dict, ...]
    reference: dict  # hidden.py's REFERENCE; {} without it
    gallery: tuple  # hidden.py's GALLERY; () without it
    forbidden: tuple = ()  # public.py's FORBIDDEN: grader.model.Forbidden rules

    @property
    def interface(self):
        return kinds.get(self.exercise.interface)

    def checks_for(self, todo: str | None) -> list[Check]:
        return [c for c in self.checks if c.todo == todo]

    @property
    def max_score(self) -> int:
        return sum(c.points for c in self.checks)


def folder(stem: str) -> Path:
    return HERE / stem


def has_hidden(stem: str) -> bool:
    return (folder(stem) / "hidden.py").is_file()


def default_checkset() -> str:
    """``KATA_CHECKS`` if set; else hidden where this copy of the grader has hidden checks."""
    chosen = os.environ.get("KATA_CHECKS", "").strip()
    if chosen:
        if chosen not in CHECKSETS:
            raise SpecError(f"KATA_CHECKS={chosen!r} is not one of {', '.join(CHECKSETS)}")
        return chosen
    return "hidden" if any(HERE.glob("*/hidden.py")) else "public"


def _module(stem: str, part: str) -> ModuleType | None:
    path = folder(stem) / f"{part}.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"kata_spec_{stem}_{part}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _declared(module: ModuleType, hidden: bool, where: str) -> tuple[list[Case], list[Check]]:
    cases, checks = list(getattr(module, "CASES", [])), list(getattr(module, "CHECKS", []))
    for item in cases + checks:
        if item.hidden != hidden:
            raise SpecError(
                f"{where}: {item.name if isinstance(item, Case) else item.id} "
                f"is declared with hidden={item.hidden}"
            )
    return cases, checks


@functools.cache
def load(stem: str, checkset: str | None = None) -> Spec:
    """The spec of exercise ``stem`` with the checks of ``checkset`` (default: see above)."""
    ex = find(stem)
    checkset = checkset or default_checkset()
    public = _module(ex.stem, "public")
    if public is None:
        raise SpecError(f"grader/specs/{ex.stem}/public.py is missing")
    hidden = _module(ex.stem, "hidden")
    if checkset == "hidden" and hidden is None:
        checkset = "public"  # a handout: only the public checks are here
    cases, public_checks = _declared(public, False, f"{ex.stem}/public.py")
    checks = public_checks
    if hidden is not None:
        hidden_cases, hidden_checks = _declared(hidden, True, f"{ex.stem}/hidden.py")
        cases += hidden_cases
        if checkset == "hidden":
            checks = hidden_checks
    by_name = {c.name: c for c in cases}
    if len(by_name) != len(cases):
        raise SpecError(f"{ex.stem}: two cases share a name")
    spec = Spec(
        exercise=ex,
        checkset=checkset,
        checks=tuple(checks),
        cases=_used(checks, by_name),
        skeleton_traps=tuple(getattr(public, "SKELETON_TRAPS", ())),
        timing=tuple(getattr(public, "TIMING", ())),
        reference=dict(getattr(hidden, "REFERENCE", {})) if hidden else {},
        gallery=tuple(getattr(hidden, "GALLERY", ())) if hidden else (),
        forbidden=tuple(getattr(public, "FORBIDDEN", ())),
    )
    problems = consistency(spec, by_name)
    if problems:
        raise SpecError(f"{ex.stem}: " + "; ".join(problems))
    return spec


def _used(checks, by_name: dict[str, Case]) -> dict[str, Case]:
    """The cases the checks use, and their twins, by name, in first-use order."""
    names = [n for c in checks for n in c.cases]
    names += [by_name[n].twin for n in names if n in by_name and by_name[n].twin]
    return {n: by_name[n] for n in dict.fromkeys(names) if n in by_name}


def consistency(spec: Spec, cases: dict[str, Case]) -> list[str]:
    """What is wrong with a spec on its own (validate --static adds the cross-file checks)."""
    problems = []
    ids = [c.id for c in spec.checks]
    if len(set(ids)) != len(ids):
        problems.append("two checks share an id")
    todos = set(spec.exercise.todo_ids)
    for check in spec.checks:
        missing = [n for n in check.cases if n not in cases]
        if missing:
            problems.append(f"check {check.id} uses unknown case(s) {', '.join(missing)}")
        if check.todo is not None and check.todo not in todos:
            problems.append(f"check {check.id} charges unknown TODO {check.todo}")
        if check.requires is not None:
            earlier = [
                c for c in spec.checks[: spec.checks.index(check)] if c.todo == check.requires
            ]
            if not earlier:
                problems.append(
                    f"check {check.id} requires TODO {check.requires}, which no "
                    "earlier check judges"
                )
        if check.judge == "twin":
            if check.todo is not None or check.traps:
                problems.append(f"check {check.id}: a twin judge is for notes (todo=None)")
            orphans = [n for n in check.cases if n in cases and cases[n].twin not in cases]
            if orphans:
                problems.append(f"check {check.id}: case(s) {', '.join(orphans)} have no twin")
        elif check.judge not in spec.interface.judges:
            problems.append(
                f"check {check.id}: interface {spec.interface.name} has no judge {check.judge!r}"
            )
        for trap in check.traps:
            if trap.todo != check.todo:
                problems.append(
                    f"check {check.id} (TODO {check.todo}) names trap {trap.id} of TODO {trap.todo}"
                )
    if spec.interface.autotuned:
        loose = [c.name for c in spec.cases.values() if not c.config and not c.each_config]
        if loose:
            problems.append(
                f"case(s) {', '.join(loose)} of an autotuned kernel pin no "
                "configuration (config=) and do not run each one (each_config=)"
            )
        if spec.checkset == "hidden" and not any(c.each_config for c in spec.cases.values()):
            problems.append(
                "no case runs under every configuration the kernel's autotuner "
                "offers (each_config=True)"
            )
    for todo in spec.exercise.todos:
        paid = sum(c.points for c in spec.checks_for(todo.id))
        if paid != todo.points:
            problems.append(
                f"the {spec.checkset} checks of TODO {todo.id} pay {paid} points, "
                f"the manifest says {todo.points}"
            )
    return problems
