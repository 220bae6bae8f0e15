"""Gradescope's autograder results.json: one test per check, with the same card text as the
HTML page (``cards``), and a summary of the score and the traps found."""

from __future__ import annotations

import json
from pathlib import Path

from grader.report import cards
from grader.report.records import Report, edits_outside


def results(report: Report) -> dict:
    """Gradescope's autograder results.json: one test per check, markdown text."""
    tests = []
    for ex in report.exercises:
        for c in ex.checks:
            tests.append(
                {
                    "name": f"{ex.id}: {c.id}" + (" (note, no points)" if c.note else ""),
                    "score": c.points,
                    "max_score": c.max_points,
                    "status": "passed" if c.status == "passed" else "failed",
                    "output": cards.markdown(ex, c),
                    "output_format": "md",
                    "visibility": "visible",
                }
            )
    found = ", ".join(report.traps) or "none"
    lines = [f"{report.score}/{report.max_score} on {report.device}; traps found: {found}"]
    for ex in report.exercises:
        if ex.integrity and not ex.integrity["ok"]:
            lines.append(f"{ex.id}: {edits_outside(ex)}")
        for finding in (ex.integrity or {}).get("findings", []):
            lines.append(f"{ex.id}: not run: {finding['message']}")
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
