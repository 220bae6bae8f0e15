"""What batch grading writes besides each student's report: the gradebook's trap columns and
upload notes, each student's ``score.html``, and ``OUT/class.html``, the class's misconceptions
on one page.

The page: the score distribution; each check's pass rate; each trap, how many students fell into
it and who; integrity flags; and the students the grader could not grade (an infrastructure
problem, not a score), or whose upload held no exercise file. Per-test class statistics are
what course staff ask autograders for (otter-grader issue 885). Self-contained like the
students' pages (grader.report.html): inline CSS and SVG, no script, no request.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader.classroom.engines.task import files, read_json
from grader.kinds import TRAPS
from grader.report import reasons, svg
from grader.report.records import zeroed

# Messages that mean the grader, not the submission, failed (grader.run.runner, grader.judge.plugin).
INFRASTRUCTURE = (
    "the grader's checks did not run",
    "grader error",
    "grader self-check",
    "the grader could not run this check",
)


@dataclass
class Student:
    name: str
    report: dict | None  # score.json, None when there is no score
    status: str = "graded"  # the batch engines' status (grader.classroom.batch.STATUSES)
    note: str = ""  # where the files were found, or why there is no score
    infrastructure: list[str] = field(default_factory=list)  # the grader's own failures
    # (exercise number, why) for each exercise below full marks (grader.report.reasons)
    reasons: list[tuple[str, str]] = field(default_factory=list)

    @property
    def graded(self) -> bool:
        return self.report is not None

    @property
    def traps(self) -> list[str]:
        return list(self.report.get("traps", [])) if self.report else []


def upload_note(report: dict, folder: Path | None) -> str:
    """What the gradebook says about an odd upload: the folder below the student's where the
    files were found (an upload with no exercise file is not graded at all: status no_files)."""
    if not report.get("target") or folder is None:
        return ""
    target = Path(report["target"])
    if target.resolve() != folder.resolve():
        try:
            return f"files found in {target.resolve().relative_to(folder.resolve().parent)}"
        except ValueError:
            return f"files found in {target}"
    return ""


def annotate(rows: list, out: Path) -> list:
    """Give each graded batch row without a note the note of its upload (see upload_note); the
    student's folder is the one task.json says was graded."""
    for row in rows:
        if row.report is None or row.note:
            continue
        record = read_json(files(out, row.student).task) or {}
        found = upload_note(row.report, Path(record["target"]) if record.get("target") else None)
        row.note = "; ".join(n for n in (record.get("upload"), found) if n)
    return rows


def students(rows: list) -> list[Student]:
    """The page's view of the batch rows: graded reports, and what went wrong for the rest."""
    found = []
    for row in rows:
        student = Student(row.student, row.report, row.status, row.note)
        student.reasons = reasons.of_report(row.report)
        if row.status in ("infra_error", "grader_error"):
            student.infrastructure.append(f"{row.status}: {row.note}")
        for ex in (row.report or {}).get("exercises", []):
            messages = [ex.get("error") or ""] + [
                c.get("message", "") for c in ex.get("checks", [])
            ]
            if any(m.startswith(INFRASTRUCTURE) for m in messages):
                student.infrastructure.append(f"{ex['id']}: the grader failed on it")
        found.append(student)
    return found


def trap_columns(report: dict | None) -> list[str]:
    """The gradebook's ``trap:<id>`` cells: 1 where the student fell into the trap."""
    fell = set((report or {}).get("traps", []))
    return ["1" if t in fell else "" for t in TRAPS]


TRAP_HEADER = [f"trap:{t}" for t in TRAPS]


def write_pages(rows: list, out: Path, title: str) -> Path | None:
    """Each graded student's OUT/<student>/score.html (drawn here, from score.json, so that a
    page exists exactly when a score does, whichever engine graded) and OUT/class.html."""
    from grader.report import html

    for row in rows:
        if row.report is not None:
            try:
                html.write(html.from_json(row.report), out / row.student / "score.html")
            except Exception as exc:  # noqa: BLE001  (a page is a view; the score stands)
                print(
                    f"batch: {row.student}: no score.html ({type(exc).__name__}: {exc})",
                    file=sys.stderr,
                )
    path = out / "class.html"
    try:
        path.write_text(render(students(rows), title), encoding="utf-8")
    except Exception as exc:  # noqa: BLE001  (the gradebook is what counts; say why, go on)
        print(f"batch: no class.html ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None
    return path


def summary(students: list[Student]) -> dict:
    """The page's numbers: checks' pass rates, traps and who fell into them, flags. A student
    whose upload held no exercise file is listed apart, with what it held: not graded, so never
    counted as a class member's 0."""
    no_files = [s for s in students if s.status == "no_files"]
    graded = [s for s in students if s.graded]
    checks: dict[tuple[str, str], dict] = {}
    traps: dict[str, list[str]] = {}
    integrity = []
    for s in graded:
        for ex in s.report.get("exercises", []):
            if ex.get("integrity") and not ex["integrity"].get("ok", True):
                integrity.append(
                    {
                        "student": s.name,
                        "exercise": ex["id"],
                        "lines": ex["integrity"].get("lines", []),
                        "zeroed": bool(zeroed(ex["integrity"])),
                    }
                )
            for c in ex.get("checks", []):
                row = checks.setdefault(
                    (ex["id"], c["id"]),
                    {
                        "exercise": ex["id"],
                        "check": c["id"],
                        "passed": 0,
                        "graded": 0,
                        "note": c.get("todo") is None,
                        "hidden": c.get("hidden", True),
                        "traps": {},
                    },
                )
                row["graded"] += 1
                row["passed"] += c.get("status") == "passed"
                if c.get("trap"):
                    row["traps"][c["trap"]] = row["traps"].get(c["trap"], 0) + 1
        for trap in s.traps:
            traps.setdefault(trap, []).append(s.name)
    for row in checks.values():
        row["rate"] = row["passed"] / row["graded"] if row["graded"] else 0.0
    ranked = sorted(traps.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return {
        "graded": graded,
        "checks": list(checks.values()),
        "traps": [{"trap": TRAPS.get(t), "id": t, "students": names} for t, names in ranked],
        "integrity": integrity,
        "infrastructure": [s for s in students if s.infrastructure],
        "pending": [
            s for s in students if not s.graded and not s.infrastructure and s not in no_files
        ],
        "no_files": no_files,
        "nested": [s for s in graded if s.note.startswith("files found in")],
    }


def render(students: list[Student], title: str) -> str:
    from grader.report.html import environment

    numbers = summary(students)
    graded = numbers["graded"]  # without the uploads that held no exercise file
    top = max((s.report.get("max_score", 0) for s in graded), default=100) or 100
    scores = [s.report["score"] for s in graded]
    chart = svg.histogram(scores, top) if graded else None
    mean = sum(scores) / len(scores) if scores else 0.0
    return (
        environment()
        .get_template("class.html.j2")
        .render(
            title=title,
            students=students,
            n=numbers,
            chart=chart,
            mean=mean,
            top=top,
            median=sorted(scores)[len(scores) // 2] if scores else 0,
        )
    )
