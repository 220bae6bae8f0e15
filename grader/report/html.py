"""``reports/score.html``: the score report as a page a student looks at.

One self-contained file: CSS inline, figures as inline SVG (grader.report.svg), no script, no
request to anywhere. Jinja2 escapes everything a template prints (autoescape), so whatever a
submission printed, or a message quotes from it, is shown as text.

What it shows: the score, the backend and versions; one row per check (verdict, points,
tolerance, error); for each failed check a card (the trap, the invariant that broke, the TODO to
revisit and where it is in the file, the next hint command) with a picture of where the output
is wrong; the exercise's warnings, integrity and output. A hidden check shows its name, verdict
and message (the inputs' shapes at most), never the input values.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from grader import kinds
from grader.judge import errors
from grader.kinds import TRAPS
from grader.report import cards as cards_text
from grader.report.records import CheckResult, ExerciseResult, Report, edits_outside
from kata import commands
from kata.catalogue import find
from kata.kinds import get as interface_of

TEMPLATES = Path(__file__).resolve().parent / "templates"
# Read when this module is imported, before any launcher of the grading runs: a page is drawn
# from these, never from files a submission's code could have rewritten meanwhile.
SOURCES = {p.name: p.read_text(encoding="utf-8") for p in sorted(TEMPLATES.glob("*.j2"))}
VERDICTS = {"passed": "pass", "failed": "fail", "blocked": "wait", "error": "error"}


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.DictLoader(SOURCES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(verdicts=VERDICTS)
    return env


def tolerance(ex: ExerciseResult, check: CheckResult) -> str:
    """The tolerance the check judged with, as a student reads it."""
    found = (check.details or {}).get("tolerance")
    if found:
        return f"atol {found[0]:.0e}, rtol {found[1]:.0e}"
    if (check.details or {}).get("exact"):
        return "exact indices"
    try:
        interface = interface_of(find(ex.id).interface)
    except KeyError:
        return ""
    atol, rtol = interface.tolerance(interface.outputs[0], None)  # the first output's
    return f"atol {atol:.0e}, rtol {rtol:.0e}"


def error_figure(check: CheckResult, ex: ExerciseResult | None = None) -> str:
    if check.status == "blocked":
        return "not judged yet (another TODO first)"
    if check.status == "error":  # nothing to measure: the reason is what the row must say
        if ex is not None and ex.error and check.message == ex.error:
            return "not judged: the reason is above the table"
        return check.message
    details = check.details or {}
    if "max_error" not in details:
        if details.get("exact") and check.status == "passed":
            return "all indices right"
        if "bad_tokens" in details:
            return f"{details['bad_tokens']} of {details['shape']['M']} tokens wrong"
        return ""
    worst = details["max_error"]
    text = "NaN, inf or unwritten" if worst is None else f"max error {worst:.2g}"
    if "bad_values" in details:
        text += f"; {details['bad_values']} of {details['values']} values wrong"
    elif "bad_tokens" in details:
        text += f"; {details['bad_tokens']} of {details['shape']['M']} tokens wrong"
    return text


def pictures(check: CheckResult, interface: str) -> list[tuple[str, object]]:
    """(caption, inline SVG) for each picture of where a failed check's output is wrong: the
    pictures of the exercise's kind (``grader/kinds/<kind>/pictures.py``); none for a kind that
    draws none."""
    drawer = kinds.pictures(interface)
    return drawer.pictures(check) if drawer else []


def cards(ex: ExerciseResult) -> list[dict]:
    """One card per trap (or per failed check that matches none): the checks that fell into
    it, the invariant that broke, the TODO to revisit and where it is, the next hint command,
    and the pictures."""
    found: dict[str, dict] = {}
    try:
        interface = find(ex.id).interface
    except KeyError:  # not an exercise of the kata: nothing to draw
        interface = ""
    for check in ex.checks:
        if check.status not in ("failed", "blocked") or check.note:
            continue
        key = f"trap:{check.trap}" if check.trap else f"check:{check.id}"
        if key not in found:
            found[key] = {
                **cards_text.fields(ex, check),
                "message": check.message,
                "status": check.status,
                "checks": [],
                "pictures": [],
                "unpictured": [],  # the grader's failures to draw a check's figure
                "hidden": False,
            }
        card = found[key]
        card["checks"].append(check)
        card["hidden"] |= check.hidden
        if check.status == "failed":
            card["status"] = "failed"
        card["pictures"] += pictures(check, interface)
        if (check.details or {}).get("figure_error"):
            card["unpictured"].append((check.id, check.details["figure_error"]))
    return list(found.values())


def own_notes(ex: ExerciseResult) -> list[CheckResult]:
    """The notes to show apart: those that did not pass for a reason of their own. A note left
    unjudged for the reason its paid checks share (the exercise's error, a time limit) would
    read as if the note were the problem."""
    shared = {c.message for c in ex.checks if not c.note and c.status == "error"}
    if ex.error:
        shared.add(ex.error)
    return [
        c
        for c in ex.checks
        if c.note and c.status != "passed" and not (c.status == "error" and c.message in shared)
    ]


def note_title(check: CheckResult) -> str:
    """A note's heading: a compile error is the student's own (the line is theirs, or their
    regions made given code fail), however the note's inputs were made."""
    if errors.DOES_NOT_COMPILE in check.message:
        return "Your code does not compile"
    return "Note on given code"


def render(report: Report) -> str:
    exercises = []
    for ex in report.exercises:
        exercises.append(
            {
                "ex": ex,
                "rows": [
                    {
                        "check": c,
                        "tolerance": tolerance(ex, c) if not c.note else "",
                        "error": error_figure(c, ex),
                    }
                    for c in ex.checks
                ],
                "cards": cards(ex),
                # A "hidden" badge tells checks apart only where an exercise has both kinds;
                # on a page graded by one set, the line above the exercises says which.
                "mixed": len({c.hidden for c in ex.checks}) > 1,
                "notes": [{"check": c, "title": note_title(c)} for c in own_notes(ex)],
                "error_title": (
                    "Your code does not compile"
                    if ex.error and errors.DOES_NOT_COMPILE in ex.error
                    else "Nothing could be judged"
                ),
                "edits": edits_outside(ex) if ex.integrity and not ex.integrity["ok"] else "",
            }
        )
    return (
        environment()
        .get_template("score.html.j2")
        .render(
            report=report,
            exercises=exercises,
            traps=TRAPS,
            grade=commands.nox("grade"),
        )
    )


def write(report: Report, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(report), encoding="utf-8")
    return path


def from_json(data: dict) -> Report:
    """A Report back from its JSON (to redraw a page without grading again)."""
    exercises = []
    for e in data["exercises"]:
        checks = [
            CheckResult(
                **{
                    k: c.get(k)
                    for k in ("id", "todo", "status", "points", "max_points", "trap", "message")
                },
                hidden=c.get("hidden", True),
                details=c.get("details"),
            )
            for c in e["checks"]
        ]
        exercises.append(
            ExerciseResult(
                id=e["id"],
                file=e["file"],
                track=e.get("track", "core"),
                score=e["score"],
                max_score=e["max_score"],
                checks=checks,
                duration_s=e.get("duration_s", 0.0),
                output=e.get("output", ""),
                error=e.get("error"),
                integrity=e.get("integrity"),
                warnings=e.get("warnings", []),
                performance=e.get("performance"),
            )
        )
    return Report(
        target=data["target"],
        device=data["device"],
        versions=data["versions"],
        exercises=exercises,
        duration_s=data["duration_s"],
        checkset=data.get("checkset", "hidden"),
        strict=data.get("strict", False),
        isolation=data.get("isolation"),
    )


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    p = argparse.ArgumentParser(
        prog="python -m grader.report.html",
        description="Draw the HTML page of a score report again.",
    )
    p.add_argument("report", type=Path, help="a score.json")
    p.add_argument("--out", type=Path, help="the page to write (default: beside it, .html)")
    args = p.parse_args(argv)
    report = from_json(json.loads(args.report.read_text()))
    print(write(report, args.out or args.report.with_suffix(".html")))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
