"""Which exercise a student is on: the first one below full marks in the last grade.

``nox -s hint`` with no argument asks here (it must answer at once, so it reads the last report
instead of grading); ``nox -s watch`` grades first and then asks the same question.
"""

from __future__ import annotations

import json
from pathlib import Path

from kata import commands
from kata.catalogue import ALL_EXERCISES, EXERCISE_LIST, EXERCISES, ROOT, TRACKS, Exercise, find

REPORTS = (ROOT / "reports" / "score.json", ROOT / "reports" / "watch.json")


def unfinished_in(report: dict) -> Exercise | None:
    """The first exercise below full marks in a score report, in catalogue order."""
    below = {e["id"] for e in report.get("exercises", []) if e["score"] < e["max_score"]}
    for ex in EXERCISE_LIST:
        if ex.stem in below:
            return ex
    extra = [e["id"] for e in report.get("exercises", []) if e["id"] in below]
    return find(extra[0]) if extra else None


def last_report(target: Path = EXERCISES) -> tuple[dict, Path] | None:
    """The newest report of ``target`` (score.json or watch.json), or None."""
    found = []
    for path in REPORTS:
        try:
            data = json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            continue
        if Path(data.get("target", "")).resolve() == target.resolve():
            found.append((path.stat().st_mtime, data, path))
    if not found:
        return None
    _, data, path = max(found, key=lambda f: f[0])
    return data, path


def current() -> tuple[Exercise | None, str]:
    """(the exercise a student is on, a line saying how that was decided); None: all done."""
    last = last_report()
    if last is None:
        return EXERCISE_LIST[0], "not graded yet, so starting with the first exercise"
    data, path = last
    ex = unfinished_in(data)
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if ex is None:
        # Only part of the chapter may have been graded (`grade -- 02`): the first one missing.
        graded = {e["id"] for e in data.get("exercises", [])}
        rest = [e for e in EXERCISE_LIST if e.stem not in graded]
        if rest:
            return rest[0], f"the first exercise not graded in {where}"
        return None, f"every exercise is at full marks in {where}"
    return ex, f"the first exercise below full marks in {where}"


def unfinished_todo(ex: Exercise) -> tuple[str, str]:
    """(the TODO of ``ex`` a student is on, a line saying how that was decided): the first whose
    checks did not all pass in the last report, else the first."""
    last = last_report()
    entry = None
    if last is not None:
        data, path = last
        entry = next((e for e in data.get("exercises", []) if e["id"] == ex.stem), None)
    if entry is None:
        return ex.todos[0].id, f"{ex.stem} not graded yet, so its first TODO"
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for todo in ex.todos:
        if any(c["todo"] == todo.id and c["status"] != "passed" for c in entry["checks"]):
            return todo.id, f"the first TODO below full marks in {where}"
    return ex.todos[0].id, f"every TODO passes in {where}, so the first"


def what_next(full_marks: set[str]) -> str | None:
    """What to do once every exercise in ``full_marks`` (stems) is done: the tracks not yet
    done, then the chapter's self-check questions. None while the chapter's own exercises are
    not all done (the next one is the next step then)."""
    if not {ex.stem for ex in TRACKS["core"]} <= full_marks:
        return None
    steps = []
    for track, what in (("performance", "the performance track"), ("extensions", "the extensions")):
        exercises = TRACKS.get(track, ())
        if exercises and not {ex.stem for ex in exercises} <= full_marks:
            numbers = ", ".join(ex.number for ex in exercises)
            steps.append(f"{what} ({numbers}: `{commands.nox('grade', '--track', track)}`)")
    page = ROOT / "docs" / "self-check.md"
    if page.exists():
        steps.append(f"the chapter's self-check questions ({page.relative_to(ROOT)})")
    if not steps:
        return "Every exercise is done."
    return "Next: " + "; ".join(steps) + "."


def next_exercise(done: list[str], session: str = "grade") -> str | None:
    """What follows exercises at full marks (stems), for ``nox -s <session>``: ``01 done: next,
    02 (docs/exercises/02_....md): `nox -s grade -- 02`.``; after a track's last exercise, the
    command that grades the whole track; None where nothing was graded."""
    graded = [ex for ex in ALL_EXERCISES if ex.stem in done]
    if not graded:  # nothing graded (or none of the catalogue's): nothing follows
        return None
    said = ", ".join(ex.number for ex in graded)
    track = graded[-1].track
    later = [ex for ex in TRACKS[track] if ex.number > graded[-1].number and ex.stem not in done]
    if later:
        ex = later[0]
        page = ROOT / "docs" / "exercises" / f"{ex.stem}.md"
        where = f" ({page.relative_to(ROOT).as_posix()})" if page.exists() else ""
        return f"{said} done: next, {ex.number}{where}: `{commands.nox(session, ex.number)}`."
    if {ex.stem for ex in TRACKS[track]} <= set(done):
        return f"Every exercise of the {track} track is done."
    whole = commands.nox("grade") if track == "core" else commands.nox("grade", "--track", track)
    what = "the chapter" if track == "core" else f"the {track} track"
    return f"{said} done, the last exercise of {what}: `{whole}` grades all of it."
