"""Gradescope's autograder results.json: one test per check, with the same card text as the
HTML page (``cards``), and a summary of the score and the traps found. An exercise that never
ran (its file missing or misnamed, unreadable, or refused) is explained once, in that summary;
its tests only point there."""

from __future__ import annotations

import json
from pathlib import Path

from grader.report import cards
from grader.report.records import ExerciseResult, Report, edits_outside

NOT_RUN = "Not run: the top of these results says why."


def never_ran(ex: ExerciseResult) -> bool:
    """No check of ``ex`` ran: each carries the exercise's own error (a missing file, say), which
    repeated on every test, with a TODO to revisit, would send the student to the wrong place."""
    return bool(ex.error) and all(c.status == "error" and c.message == ex.error for c in ex.checks)


def results(report: Report) -> dict:
    """Gradescope's autograder results.json: one test per check, markdown text."""
    tests = []
    for ex in report.exercises:
        silent = never_ran(ex)
        for c in ex.checks:
            tests.append(
                {
                    "name": f"{ex.id}: {c.id}" + (" (note, no points)" if c.note else ""),
                    "score": c.points,
                    "max_score": c.max_points,
                    "status": "passed" if c.status == "passed" else "failed",
                    "output": NOT_RUN if silent else cards.markdown(ex, c),
                    "output_format": "md",
                    "visibility": "visible",
                }
            )
    found = ", ".join(report.traps) or "none"
    lines = [f"{report.score}/{report.max_score} on {report.device}; traps found: {found}"]
    for ex in report.exercises:
        if ex.integrity and not ex.integrity["ok"]:
            lines.append(f"{ex.id}: {edits_outside(ex)}")
        findings = (ex.integrity or {}).get("findings", [])
        for finding in findings:
            lines.append(f"{ex.id}: not run: {finding['message']}")
        if never_ran(ex) and not findings:  # the findings above are its error, in full
            lines.append(f"{ex.id}: not run: {ex.error}")
    return {
        "score": report.score,
        "execution_time": round(report.duration_s, 2),
        "output": "\n\n".join(lines),
        "output_format": "md",
        "tests": tests,
    }


def write(report: Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results(report), indent=2) + "\n")
