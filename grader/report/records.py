"""The score report: result dataclasses, versioned JSON, and Gradescope's results.json.

The contract is ``docs/report.schema.json`` (JSON Schema), explained in docs/report-schema.md;
bump SCHEMA_VERSION on any change to it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

# 2.0: check todo/hidden, status "blocked", integrity, warnings, track; 3.0: integrity's
# findings (grader.run.screen), the compile for the GPU before the interpreter ran the kernels,
# ``screened``; 3.1: integrity's ``edited`` (the student's lines) and ``regions`` (where to write);
# 3.2: a finding's rule may be ``exercise-forbids`` (a Triton function one exercise refuses);
# 4.0: what is graded is the skeleton with the TODO regions spliced in (grader.run.splice):
# ``free_form`` replaces ``screened``, integrity's ``graded`` says which, its ``diff`` lists the
# changes that were not graded, and findings come from grader.run.rules (rule ``todo-rules``)
# isolation (optional): what the submission's process could write (grader.run.isolation)
SCHEMA_VERSION = "4.0"
STATUSES = ("passed", "failed", "blocked", "error")


def zeroed(integrity: dict | None) -> str | None:
    """Why an exercise edited outside its TODO regions scored 0, or None."""
    if not integrity:
        return None
    if integrity.get("contract_zeroed"):
        return (
            "its edits of given code break inputs the exercise's contract accepts (a note on "
            "them failed)"
        )
    if integrity.get("strict_zeroed"):
        return "strict grading"
    return None


def some_lines(lines: list[int], most: int = 8) -> str:
    """``3, 4, 9`` or ``3, 4, 9, ... (and 40 more)``: a list of line numbers fit for one line."""
    shown = ", ".join(map(str, lines[:most]))
    return shown + (f" ... (and {len(lines) - most} more)" if len(lines) > most else "")


def line_spans(places) -> str:
    """``42-60 and 70``: a region's line ranges, each said once (a kernel replaced whole can
    hold one TODO's region twice at the same lines)."""
    said = dict.fromkeys(f"{a}" if a == b else f"{a}-{b}" for a, b in places)
    return " and ".join(said)


def where_to_write(regions: dict) -> list[str]:
    """``TODO(a) is line(s) 62``, or ``TODO(a) and TODO(b) are line(s) 39-55`` where TODOs share
    their lines: where each TODO's region is, each range said once."""
    by_lines: dict[str, list[str]] = {}
    for todo, places in regions.items():
        by_lines.setdefault(line_spans(places), []).append(f"TODO({todo})")
    return [
        " and ".join(todos) + f" {'is' if len(todos) == 1 else 'are'} line(s) {lines}"
        for lines, todos in by_lines.items()
        if lines
    ]


def edits_outside(ex: ExerciseResult) -> str:
    """What the terminal, the page and Gradescope say of an exercise edited outside its TODO
    regions: where in the student's file, and where the regions are, to write there instead."""
    integrity = ex.integrity or {}
    name = Path(ex.file).name
    edited = integrity.get("edited") or []
    where = (
        f"line(s) {some_lines(edited)} of {name} (skeleton line(s) "
        f"{some_lines(integrity.get('lines', []))})"
        if edited
        else f"skeleton line(s) {some_lines(integrity.get('lines', []))}"
    )
    spans = where_to_write(integrity.get("regions") or {})
    inside = f"; write inside the regions: {'; '.join(spans)}" if spans else ""
    why = zeroed(integrity)
    cost = f"; scored 0 ({why})" if why else ""
    return f"edited given code outside its TODO regions, at {where}{inside}{cost}"


@dataclass(kw_only=True)
class CheckResult:
    id: str
    todo: str | None  # None: a 0-point note about given code
    status: str  # passed | failed | blocked | error
    points: int
    max_points: int
    trap: str | None
    message: str
    hidden: bool = True
    # Figures for the HTML report (shapes in grader/judge/details.py): the largest error against the
    # tolerance, and for a failure where the output is wrong. Optional; never input values.
    details: dict | None = None

    @property
    def note(self) -> bool:
        return self.todo is None


@dataclass(kw_only=True)
class ExerciseResult:
    id: str  # the file stem
    file: str
    track: str
    score: int
    max_score: int
    checks: list[CheckResult]
    duration_s: float = 0.0
    output: str = ""  # what the submission printed, cut to its head and tail
    error: str | None = None  # why no check could run, when that is the case
    # {"ok", "lines", "edited", "regions", "diff", "strict_zeroed", "contract_zeroed",
    # "findings"}; None: no file
    integrity: dict | None = None
    warnings: list[str] = field(default_factory=list)
    performance: dict | None = None  # performance track only: timings, speedups, points
    # {"target", "launches", "refused", "seconds"}: the kernels compiled for the GPU before the
    # interpreter ran them; None where they ran compiled (or were not run)
    compiled: dict | None = None

    @property
    def traps(self) -> list[str]:
        return list(dict.fromkeys(c.trap for c in self.checks if c.trap))


@dataclass(kw_only=True)
class Report:
    target: str
    device: str
    versions: dict[str, str]
    exercises: list[ExerciseResult]
    duration_s: float
    checkset: str = "hidden"  # "hidden" (the instructor's checks) or "public" (the handout's)
    strict: bool = False  # exercises edited outside their TODO regions score 0
    free_form: bool = False  # --free-form: files ran as written, not their regions in the skeleton
    # "landlock (ABI N)": the submission's process could write only its scratch folder;
    # "none: <reason>"; None: not recorded (a report from before 4.0, or not from the grader)
    isolation: str | None = None
    schema_version: str = SCHEMA_VERSION
    score: int = field(init=False)
    max_score: int = field(init=False)
    traps: list[str] = field(init=False)

    def __post_init__(self):
        self.score = sum(e.score for e in self.exercises)
        self.max_score = sum(e.max_score for e in self.exercises)
        self.traps = list(dict.fromkeys(t for e in self.exercises for t in e.traps))

    def to_json(self) -> dict:
        data = asdict(self)
        for ex in data["exercises"]:
            if ex["performance"] is None:
                del ex["performance"]
            for check in ex["checks"]:
                if check["details"] is None:
                    del check["details"]
        order = [
            "schema_version",
            "target",
            "device",
            "versions",
            "isolation",
            "checkset",
            "strict",
            "free_form",
            "score",
            "max_score",
            "duration_s",
            "traps",
            "exercises",
        ]
        report = {key: data[key] for key in order if key != "isolation" or data[key] is not None}
        timed = {e.id: e.performance for e in self.exercises if e.performance is not None}
        if timed:  # separate from the correctness score
            report["performance"] = {
                "points": sum(p["points"] for p in timed.values()),
                "max_points": sum(p["max_points"] for p in timed.values()),
                "exercises": timed,
            }
        return report

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
