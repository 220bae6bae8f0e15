"""The pytest plugin that judges one exercise: one test per check of its spec, each judging the
outputs the launcher already sent back. It runs inside the grading process (``pytest.main``
with this object as a plugin, as exercism's test runner does): no student code runs here, and
no file is read.

Each test's verdict travels in pytest-json-report's metadata, which the runner reads from the
report pytest-json-report builds in memory.
"""

from __future__ import annotations

import pytest

from grader.judge import checking
from grader.model import Output


class Submission:
    """What the launcher sent back for one exercise, as the checks ask for it."""

    def __init__(self, spec, launch):
        self.spec, self.launch = spec, launch
        self.verdicts: dict[str, str] = {}  # check id -> status, in the order checks ran
        self.details: dict[str, dict] = {}  # check id -> figures for the HTML report
        self.probe_shown: set[str | None] = set()  # TODOs whose failure already has the probe

    def outputs(self, name: str) -> list[tuple[str | None, Output]]:
        """The kernel's outputs on case ``name``: one per tile configuration it ran with,
        ``(None, outputs)`` when it ran with its own choice."""
        if self.launch.error:
            raise checking.SubmissionError(self.launch.error)
        runs = self.launch.outputs.get(name)
        errors = self.launch.errors.get(name)
        if errors:  # the first configuration that failed tells why
            raise checking.SubmissionError(errors[0])
        if runs:
            return runs
        if self.launch.stopped:  # the same words for every check it left unjudged: said once
            raise checking.SubmissionError(f"not judged: {self.launch.stopped}")
        case = self.spec.cases[name]
        raise checking.SubmissionError(f"case {name} ({case.about}): the kernel produced no output")

    def output(self, name: str) -> Output:
        """The outputs of a case that ran once (a twin's plain layout, say)."""
        return self.outputs(name)[0][1]

    def probe(self) -> tuple | None:
        """(the probe case, the kernel's outputs on it), or None: no probe, or it failed."""
        case = self.launch.probe
        runs = self.launch.outputs.get(case.name) if case is not None else None
        if not runs or self.launch.error:
            return None
        return case, runs[0][1]


class KataPlugin:
    """Parametrizes ``check`` with the spec's checks and serves the submission fixture."""

    def __init__(self, spec, launch):
        self.spec = spec
        self.state = Submission(spec, launch)

    def pytest_addoption(self, parser):
        # pytest-json-report reads the terminal plugin's --tb; the terminal plugin is left out
        # (nothing is printed: the runner reports), so the option is declared here.
        parser.addoption("--tb", dest="tbstyle", default="auto")

    @pytest.hookimpl(trylast=True)
    def pytest_report_teststatus(self, report):
        """The terminal plugin's verdict words, which pytest-json-report records."""
        outcome = report.outcome
        if report.when in ("collect", "setup", "teardown") and outcome == "failed":
            outcome = "error"
        return outcome, outcome[0], outcome.upper()

    def pytest_generate_tests(self, metafunc):
        if "check" in metafunc.fixturenames:
            checks = self.spec.checks
            metafunc.parametrize("check", checks, ids=[c.id for c in checks])

    @pytest.fixture(scope="session")
    def submission(self):
        return self.state

    def pytest_json_runtest_metadata(self, item, call):
        check = item.callspec.params.get("check") if hasattr(item, "callspec") else None
        if check is None:
            return {}
        meta = {"check": check.id}
        if call.when == "teardown":
            return meta
        if check.id in self.state.details:
            meta["details"] = self.state.details[check.id]
        if call.excinfo is None:
            if call.when == "call":
                meta.update(status="passed", message="")
            return meta
        exc = call.excinfo.value
        if isinstance(exc, checking.CheckFailed):
            meta.update(status="failed", trap=exc.trap, message=exc.message)
        elif isinstance(exc, checking.CheckBlocked):
            meta.update(status="blocked", trap=exc.trap, message=exc.message)
        elif isinstance(exc, checking.SubmissionError):
            meta.update(status="error", trap=None, message=str(exc))
        elif isinstance(exc, checking.GraderError):
            meta.update(status="error", trap=None, message=str(exc), grader_fault=True)
        else:
            meta.update(
                status="error",
                trap=None,
                grader_fault=True,
                message=f"grader error: {type(exc).__name__}: {exc}",
            )
        return meta
