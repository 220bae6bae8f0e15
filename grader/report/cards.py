"""What a failed check's card says, the same on the HTML page and in Gradescope's results.json:
the trap, the invariant that broke, the TODO to revisit (and its line in the file), the next
hint command. No Jinja2 here: Gradescope's results are written without it.
"""

from __future__ import annotations

import re
from pathlib import Path

from grader.kinds import TRAPS
from grader.report.records import CheckResult, ExerciseResult
from kata import commands
from kata.catalogue import find


def todo_line(file: str, todo: str | None) -> int | None:
    """The line of ``TODO(<todo>)`` in the submission, where the student should look."""
    if not todo:
        return None
    try:
        text = Path(file).read_text(errors="replace")
    except OSError:
        return None
    for n, line in enumerate(text.splitlines(), 1):
        if re.search(rf"TODO\({re.escape(todo)}\)", line):
            return n
    return None


def fields(ex: ExerciseResult, check: CheckResult, hint: str | None = None) -> dict:
    """The card of one failed or blocked check. ``hint``: the hint command, spelled for where
    the card is read (default: as this machine's student would type it)."""
    try:
        exercise = find(ex.id)
        title = {t.id: t.title for t in exercise.todos}.get(check.todo or "", "")
        number = exercise.number
    except KeyError:
        title, number = "", ex.id[:2]
    trap = TRAPS.get(check.trap) if check.trap else None
    return {
        "trap": trap,
        "invariant": trap.invariant if trap else "",
        "todo": check.todo,
        "todo_title": title,
        "todo_line": todo_line(ex.file, check.todo),
        "file": Path(ex.file).name,
        "hint": hint or commands.nox("hint", number),
    }


def markdown(ex: ExerciseResult, check: CheckResult) -> str:
    """A check's text for Gradescope (markdown): the card's lines, then the message."""
    if check.status == "passed":
        return ""
    # Gradescope is read away from the student's clone: spell the hint as the docs do (the
    # README's set-up activates .venv, which puts nox on PATH).
    card = fields(ex, check, hint=f"nox -s hint -- {ex.id[:2]}")
    lines = []
    if check.status == "blocked":
        lines.append("*not judged yet*")
    if card["trap"]:
        lines.append(f"**trap: `{card['trap'].id}`**: {card['trap'].summary}")
        lines.append(f"**invariant that broke:** {card['invariant']}")
    if check.message:
        lines.append(check.message)
    if card["todo"] and not check.note:
        where = f" ({card['file']}, line {card['todo_line']})" if card["todo_line"] else ""
        title = f": {card['todo_title']}" if card["todo_title"] else ""
        lines.append(f"**revisit:** `TODO({card['todo']})`{title}{where}")
        lines.append(f"**next hint:** `{card['hint']}`")
    return "\n\n".join(lines)
