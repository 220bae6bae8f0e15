"""``python -m kata.authoring.docs``: the parts of the docs that are generated from the code.

* ``docs/traps.md``: the trap catalogue, one section per trap of ``grader.kinds.TRAPS`` (its TODO,
  the checks that can name it, the skeletons that have it, its summary, hint, message and the
  ``why`` prose written into the trap);
* ``docs/exercises/<stem>.md``: the table of the exercise's public and hidden checks;
* every H200 figure of the README and the docs, and the bench tables, from one bench run,
  ``docs/bench_h200.json`` (``kata.authoring.bench_docs``).

Each generated part sits between two markers in the page, so the prose around it stays
hand-written::

    <!-- BEGIN GENERATED: checks (python -m kata.authoring.docs; edit grader/specs/, not this) -->
    <!-- END GENERATED: checks -->

Nothing generated names a hidden case or shows its inputs: the student handout ships these
pages. ``--check`` reports drift and writes nothing; ``problems()`` is what
``validate --static`` reports.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

from grader import specs
from grader.kinds import TRAPS
from grader.model import Check, Trap
from kata.authoring import bench_docs
from kata.catalogue import ALL_EXERCISES, ROOT, Exercise

DOCS = ROOT / "docs"
TRAPS_PAGE = DOCS / "traps.md"
PAGES = DOCS / "exercises"
INDEX = DOCS / "README.md"

# Exercise pages owned by the performance track, whose markers have not landed yet: until they
# do, a missing checks section there is not a problem. Once a page has the markers it is
# generated like every other; then its stem can leave this set.
PENDING_PAGES: set[str] = set()  # pages without their generated table yet

MARKER = re.compile(
    r"(?P<begin><!-- BEGIN GENERATED: (?P<name>[\w-]+)[^\n]*?-->\n)"
    r"(?P<body>.*?)"
    r"(?P<end><!-- END GENERATED: (?P=name) -->)",
    re.S,
)


class MarkerError(ValueError):
    """A page lacks the markers of a generated section, or has them twice."""


def begin(name: str, source: str) -> str:
    return (
        f"<!-- BEGIN GENERATED: {name} (python -m kata.authoring.docs; edit {source}, not this) -->"
    )


def end(name: str) -> str:
    return f"<!-- END GENERATED: {name} -->"


def splice(text: str, name: str, body: str, where: str = "page") -> str:
    """``text`` with the section ``name`` between its markers replaced by ``body``."""
    found = [m for m in MARKER.finditer(text) if m["name"] == name]
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise MarkerError(
            f"{where} has {what} generated '{name}' section(s); it needs exactly one, between "
            f"'<!-- BEGIN GENERATED: {name} ... -->' and '{end(name)}'"
        )
    m = found[0]
    return text[: m.start("body")] + body + text[m.end("body") :]


# ---- what the specs say ----------------------------------------------------------------------


def checksets(ex: Exercise) -> dict[str, tuple[Check, ...]]:
    """The exercise's checks by set: "public" always, "hidden" where this checkout has it."""
    found = {"public": specs.load(ex.stem, "public").checks}
    if specs.has_hidden(ex.stem):
        found["hidden"] = specs.load(ex.stem, "hidden").checks
    return found


def namers(trap: Trap) -> list[tuple[Exercise, str, Check]]:
    """(exercise, set, check) of every check that can name ``trap``, in manifest order."""
    return [
        (ex, checkset, check)
        for ex in ALL_EXERCISES
        for checkset, checks in checksets(ex).items()
        for check in checks
        if trap in check.traps
    ]


def skeletons_with(trap: Trap) -> list[Exercise]:
    """The exercises whose untouched skeleton the grader must diagnose with ``trap``."""
    return [ex for ex in ALL_EXERCISES if trap.id in specs.load(ex.stem).skeleton_traps]


# ---- rendering -------------------------------------------------------------------------------


WIDTH = 96  # generated prose is wrapped like the hand-written pages


def _fill(text: str, prefix: str = "") -> str:
    return textwrap.fill(
        " ".join(text.split()),
        WIDTH,
        initial_indent=prefix,
        subsequent_indent=prefix,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _page_link(ex: Exercise, prefix: str = "") -> str:
    return f"[{ex.number}]({prefix}exercises/{ex.stem}.md)"


def _trap_link(trap_id: str, page: str = "") -> str:
    return f"[`{trap_id}`]({page}#{trap_id})"


def _named_in(trap: Trap) -> str:
    """ "01 (`a`, `b`; public `c`)": the checks that can name ``trap``, per exercise."""
    parts = []
    for ex in ALL_EXERCISES:
        mine = [(s, c) for e, s, c in namers(trap) if e is ex]
        if not mine:
            continue
        by_set = []
        for checkset in ("hidden", "public"):
            ids = ", ".join(f"`{c.id}`" for s, c in mine if s == checkset)
            if ids:
                by_set.append(f"{checkset} {ids}")
        parts.append(f"{_page_link(ex)} ({'; '.join(by_set)})")
    return "; ".join(parts) or "no check names it yet"


def trap_index() -> str:
    rows = ["| trap | TODO | in one line | named by the checks of |", "|---|---|---|---|"]
    for trap in TRAPS.values():
        exercises = [ex for ex in ALL_EXERCISES if any(e is ex for e, _, _ in namers(trap))]
        where = ", ".join(_page_link(ex) for ex in exercises) or "-"
        rows.append(f"| {_trap_link(trap.id)} | `{trap.todo}` | {_cell(trap.summary)} | {where} |")
    return "\n".join(rows) + "\n"


def trap_section(trap: Trap) -> str:
    lines = [
        f"## {trap.id}",
        "",
        f"- In one line: {trap.summary}.",
        f"- TODO: `{trap.todo}`.",
        f"- Named by: {_named_in(trap)}.",
    ]
    skeletons = skeletons_with(trap)
    if skeletons:
        which = ", ".join(_page_link(ex) for ex in skeletons)
        lines.append(f"- The untouched skeleton of {which} has this trap.")
    lines += [
        f"- In the summary table: `{trap.id}: {trap.hint}`",
        "",
        _fill(trap.why) if trap.why.strip() else "*(No explanation written yet.)*",
        "",
    ]
    if trap.messages:  # one message per slip: each is quoted
        lines += [
            "What the grader says, after the description of the case that failed, for each of "
            f"the {len(trap.messages)} slips:",
            "",
        ]
        for message in trap.messages:
            lines += [_fill(message, "> "), ""]
    else:
        lines += [
            "What the grader says, after the description of the case that failed:",
            "",
            _fill(trap.message, "> "),
            "",
        ]
    return "\n".join(lines)


def trap_catalogue() -> str:
    """The generated part of docs/traps.md."""
    sections = [trap_section(trap) for trap in TRAPS.values()]
    return trap_index() + "\n" + "\n---\n\n".join(sections)


def _todo_cell(check: Check) -> str:
    if check.note:
        return "note, no points"
    if check.requires:
        return f"`{check.todo}` (judged once `{check.requires}` works)"
    return f"`{check.todo}`"


def check_table(checks: tuple[Check, ...]) -> str:
    rows = [
        "| check | TODO | points | traps it can name | what it covers |",
        "|---|---|---|---|---|",
    ]
    for c in checks:
        traps = ", ".join(_trap_link(t.id, "../traps.md") for t in c.traps) or "-"
        rows.append(f"| `{c.id}` | {_todo_cell(c)} | {c.points} | {traps} | {_cell(c.about)} |")
    return "\n".join(rows) + "\n"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


SET_TITLES = {
    "public": "Public checks: what the grader in the student handout runs",
    "hidden": "Hidden checks: what your instructor grades with",
}


def exercise_checks(ex: Exercise) -> str:
    """The generated part of docs/exercises/<stem>.md."""
    parts = []
    for checkset, checks in checksets(ex).items():
        paid = sum(c.points for c in checks)
        notes = sum(c.note for c in checks)
        counted = f"{_count(len(checks) - notes, 'check')} worth {paid} points"
        if notes:
            counted += f", and {_count(notes, 'note')} on given code worth none"
        parts.append(f"**{SET_TITLES[checkset]}** ({counted}):\n\n{check_table(checks)}")
    return "\n".join(parts)


TRACK_WORDS = {
    "core": "the chapter",
    "performance": "performance track",
    "extensions": "extensions",
}


def exercise_pages() -> str:
    """The generated part of docs/README.md: every exercise's page, from the manifest."""
    rows = ["| page | track | what you write |", "|---|---|---|"]
    for ex in ALL_EXERCISES:
        todos = "; ".join(t.title for t in ex.todos)
        link = f"[Exercise {ex.stem[:2]}: {ex.title}](exercises/{ex.stem}.md)"
        rows.append(f"| {link} | {TRACK_WORDS[ex.track]} | {_cell(todos)} |")
    return "\n".join(rows) + "\n"


# ---- the pages -------------------------------------------------------------------------------


def expected() -> tuple[dict[Path, str], list[str]]:
    """(every generated page and its full text, the pages that could not be generated)."""
    files, problems = {}, []
    sections = [
        (TRAPS_PAGE, "traps", trap_catalogue()),
        (INDEX, "exercise-pages", exercise_pages()),
    ]
    for ex in ALL_EXERCISES:
        page = PAGES / f"{ex.stem}.md"
        if not page.is_file():
            continue  # validate --static reports a missing page
        text = page.read_text()
        if ex.stem in PENDING_PAGES and not any(
            m["name"] == "checks" for m in MARKER.finditer(text)
        ):
            continue
        sections.append((page, "checks", exercise_checks(ex)))
    for path, name, body in sections:
        where = str(path.relative_to(ROOT))
        if not path.is_file():
            problems.append(f"{where} is missing")
            continue
        try:
            files[path] = splice(files.get(path, path.read_text()), name, body, where)
        except MarkerError as exc:
            problems.append(str(exc))
    _bench_figures(files, problems)
    return files, problems


def _bench_figures(files: dict[Path, str], problems: list[str]) -> None:
    """The GPU figures and tables of every page, rewritten from the bench runs."""
    if not bench_docs.BENCH.is_file():  # a handout has no bench run, and no tags to fill
        return
    runs = {card: bench_docs.run_path(card) for card in bench_docs.RUNS}
    runs = {card: bench_docs.load(path) for card, path in runs.items() if path.is_file()}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if not path.is_file():  # a tree without the README (a scaffolding test's copy)
            continue
        text = files.get(path, path.read_text())
        if not any(f"<!-- {card}:" in text for card in bench_docs.RUNS) and "h200" not in text:
            continue
        where = str(path.relative_to(ROOT))
        try:
            for name in {m["name"] for m in MARKER.finditer(text)} & set(bench_docs.SECTIONS):
                text = splice(text, name, bench_docs.SECTIONS[name](runs["h200"]), where)
            for card, data in runs.items():
                text = bench_docs.rewrite_figures(text, data, where, card)
            missing = {m["card"] for m in bench_docs.TAG.finditer(text)} - set(runs)
            if missing:
                raise bench_docs.FigureError(f"{where}: no bench run for {sorted(missing)}")
            files[path] = text
        except (MarkerError, bench_docs.FigureError) as exc:
            problems.append(str(exc))


def problems() -> list[str]:
    """What ``validate --static`` reports: generated sections that are missing or stale."""
    files, found = expected()
    found += [
        f"{path.relative_to(ROOT)} differs from the code: run `nox -s generate`"
        for path, text in files.items()
        if path.read_text() != text
    ]
    found += [f"trap {t.id} has no `why` for the docs" for t in TRAPS.values() if not t.why.strip()]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kata.authoring.docs", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="report drift, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        found = problems()
        for problem in found:
            print(problem)
        return 1 if found else 0
    files, found = expected()
    for problem in found:
        print(problem, file=sys.stderr)
    for path, text in files.items():
        if path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
