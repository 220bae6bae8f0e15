"""Why an exercise scored below full marks, in a few words: the gradebook's ``reasons`` column
and the class page's (grader.classroom) say it for every such exercise, so that an instructor
scanning a class sees "not found", "stopped after 60 s" or a trap without opening each
student's page.

Read from a score report's JSON (``score.json``, what batch grading gathers): the exercise's
own error (the file missing, not valid Python, not run, stopped at the time limit, not
compiling) in short, else its first check that did not pass: the trap it fell into, or what
kept it from passing. The long messages these shorten are the grader's own
(grader.run.runner, grader.run.splice, grader.judge.errors); each shape is tested in
tests/test_batch_engines.py.
"""

from __future__ import annotations

import re

from grader.judge.errors import DOES_NOT_COMPILE

MOST = 90  # characters of a message kept when no known shape fits

# (pattern, what to say): the first that matches a message, in order. The groups are the
# message's own words (a file name, a number of seconds, a line).
# fmt: off
SHAPES = (
    # grader.run.runner: a file missing, maybe with look-alikes (grader.run.discover.rename_hint)
    (r"^(?P<file>\S+\.py) not found in .*?(?:; (?P<like>'.+') looks? like it: rename it|$)",
     lambda m: f"{m['file']} not found" + (f" ({m['like']} looks like it)" if m["like"] else "")),
    # grader.run.runner.stopped_message: the time limit, and the line it was on if known
    (r"was stopped after (?P<s>\d+) s(?:, the time limit, (?:in the loop )?at line (?P<line>\d+))?",
     lambda m: f"stopped after {m['s']} s, the time limit"
               + (f", at line {m['line']}" if m["line"] else "")),
    (r"was killed by (?P<signal>\w+)", lambda m: f"crashed ({m['signal']})"),
    (r"exited with code (?P<code>\d+)", lambda m: f"exited with code {m['code']}"),
    # grader.judge.errors.explain: the student's compile error
    (re.escape(DOES_NOT_COMPILE) + r"(?:, line (?P<line>\d+))?(?: \(in TODO\((?P<todo>[\w-]+)\)\))?",
     lambda m: "does not compile" + (f" at line {m['line']}" if m["line"] else "")
               + (f" (TODO({m['todo']}))" if m["todo"] else "")),
    # grader.run.splice / kata.source: the file does not parse
    (r"is not valid Python: .*?\(line (?P<line>\d+)", lambda m: f"not valid Python, line {m['line']}"),
    (r"is not valid Python", lambda m: "not valid Python"),
    (r"is not a text file", lambda m: "not a text file"),
    # grader.run.rules: code a region may not hold, never run
    (r"^not run: line (?P<line>\d+)(?: \(in TODO\((?P<todo>[\w-]+)\)\))?: (?P<why>[^;]+)",
     lambda m: f"not run: {m['why']}, line {m['line']}"),
    (r"the file failed to import: (?P<what>\w+)(?: at line (?P<line>\d+))?",
     lambda m: f"{m['what']} on import" + (f", line {m['line']}" if m["line"] else "")),
)
# fmt: on


def short(message: str) -> str:
    """A message of the grader's in a few words: a known shape's summary, else its head."""
    message = " ".join(message.split())
    message = re.sub(r"^every case failed the same way: ", "", message)
    message = re.sub(r"^case [\w-]+ \([^)]*\)(?: with [^:]+)?: ", "", message)
    for pattern, say in SHAPES:
        found = re.search(pattern, message)
        if found:
            return say(found)
    # The gradebook joins exercises with "; ": a message's own are commas here.
    head = message.replace(";", ",")
    if len(head) > MOST:
        head = head[:MOST].rsplit(" ", 1)[0] + " ..."
    return head


def reason(ex: dict) -> str | None:
    """Why the exercise ``ex`` (a score report's entry) is below full marks; None at full."""
    if ex.get("score", 0) >= ex.get("max_score", 0):
        return None
    integrity = ex.get("integrity") or {}
    if integrity.get("contract_zeroed"):  # a note's inputs are ones the exercise accepts
        note = next(
            (c for c in ex.get("checks", []) if not c.get("todo") and c["status"] != "passed"), None
        )
        which = f"note {note['id']}" if note else "a note"
        return f"scored 0: {which} failed, on inputs the exercise accepts"
    if integrity.get("strict_zeroed"):
        return "scored 0: edited given code (strict grading)"
    if ex.get("error"):
        return short(ex["error"])
    paid = [c for c in ex.get("checks", []) if c.get("todo") and c["status"] != "passed"]
    # A blocked check waits on another: the one that failed is the reason.
    first = next((c for c in paid if c["status"] != "blocked"), paid[0] if paid else None)
    if first is None:
        return "below full marks, every check passed: see the report"
    if first.get("trap"):
        return f"trap {first['trap']}"
    if first["status"] == "failed":
        return f"wrong output in {first['id']}"
    if first["status"] == "blocked":
        return f"{first['id']} not judged yet"
    return short(first.get("message", ""))


def of_report(report: dict | None) -> list[tuple[str, str]]:
    """(exercise number, reason) for each exercise of ``report`` below full marks."""
    found = []
    for ex in (report or {}).get("exercises", []):
        why = reason(ex)
        if why:
            found.append((ex["id"][:2], why))
    return found


def column(report: dict | None) -> str:
    """The gradebook's ``reasons`` cell: ``01: trap acc-not-rescaled; 03: ... not found``."""
    return "; ".join(f"{number}: {why}" for number, why in of_report(report))
