"""``nox -s hint -- 02``: show an exercise's hints one level at a time.

Hints live in the manifest, ``exercises/info.toml``: one ladder per exercise, or one per TODO
(``nox -s hint -- 03 renormalize``; without a TODO, the first one not passing in the last
grade). How far each ladder has been revealed is remembered in ``.kata/hints.json``, so each
call shows one more level (``--all`` shows them all, ``--reset`` starts over).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from kata import commands, terminal
from kata.catalogue import ROOT, find_or_report
from kata.student import progress

STATE = ROOT / ".kata" / "hints.json"


def _state() -> dict:
    try:
        return json.loads(STATE.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=commands.prog("hint", "kata.student.hints"),
        description="Show hints, one level at a time.",
    )
    parser.add_argument(
        "exercise",
        nargs="?",
        help="exercise number (02) or file stem (default: the one you are on)",
    )
    parser.add_argument(
        "todo", nargs="?", help="the TODO, for an exercise with hints per TODO (e.g. renormalize)"
    )
    parser.add_argument("--all", action="store_true", help="show every level")
    parser.add_argument("--reset", action="store_true", help="forget which levels were shown")
    args = parser.parse_args(argv)
    if args.exercise:
        ex = find_or_report(args.exercise)
        if ex is None:
            return 2
    else:  # like grade, run and watch: no argument means the exercise the student is on
        ex, why = progress.current()
        if ex is None:
            print(
                f"No hint needed: {why}. Name an exercise for its hints: "
                f"`{commands.nox('hint', '04')}`"
            )
            return 0
        print(f"({ex.stem}: {why})")
    if args.todo is not None and args.todo not in ex.todo_ids:
        print(f"{ex.stem} has no TODO {args.todo!r}; its TODOs: {', '.join(ex.todo_ids)}")
        return 2
    ladders = ex.ladders
    todo = None
    if None not in ladders:  # a ladder per TODO: the one asked for, or the one the student is on
        todo = args.todo
        if todo is None:
            todo, why = progress.unfinished_todo(ex)
            print(f"(TODO({todo}): {why})")
    levels, key = ladders[todo], ex.stem if todo is None else f"{ex.stem} {todo}"
    state = _state()
    if args.reset:
        state.pop(key, None)
    shown = len(levels) if args.all else min(state.get(key, 0) + 1, len(levels))
    state[key] = shown
    STATE.parent.mkdir(exist_ok=True)
    STATE.write_text(json.dumps(state))

    which = f", TODO({todo})" if todo else ""
    print(f"Hints for {ex.stem} ({ex.title}){which}: level {shown} of {len(levels)}")
    for n, text in enumerate(levels[:shown], 1):
        print()
        print(
            textwrap.fill(
                " ".join(text.split()),
                terminal.width() - 2,
                initial_indent=f"{n}. ",
                subsequent_indent="   ",
            )
        )
    print()
    again = [ex.number] + ([todo] if todo else [])
    if shown < len(levels):
        print(f"Run `{commands.nox('hint', *again)}` again for the next level.")
    else:
        last = (
            f"That was the last level. The docs page docs/exercises/{ex.stem}.md explains the trap."
        )
        print(textwrap.fill(last, terminal.width()))
    for other in (t for t in ladders if t not in (None, todo)):
        print(f"Hints for TODO({other}): `{commands.nox('hint', ex.number, other)}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
