"""pytest plugin for the checks of one exercise: runs the submission once, in a separate,
time-limited process (grader.launcher), then lets each check judge its outputs here.

Loaded explicitly (``-p grader.plugin``) by the runner; never from the target folder. What the
runner reads back travels in one channel, pytest-json-report's file: each test's metadata (the
check's verdict) and, under the key ``kata``, what the launch did (status, output, timing).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from grader import checking, details, process, specs
from grader.model import Output


def pytest_addoption(parser):
    group = parser.getgroup("kata")
    group.addoption("--kata-exercise", required=True, help="exercise file stem")
    group.addoption("--kata-file", required=True, help="the submission's file")
    group.addoption("--kata-workdir", required=True, help="scratch folder for this exercise")
    group.addoption("--kata-timeout", type=float, default=120.0, help="seconds for the launcher")
    group.addoption("--kata-checkset", choices=specs.CHECKSETS, help="hidden or public checks")
    group.addoption("--kata-no-timing", action="store_true",
                    help="skip the performance track's timing (verdicts only)")  # fmt: skip


def _spec(config) -> specs.Spec:
    return specs.load(config.getoption("--kata-exercise"), config.getoption("--kata-checkset"))


def pytest_generate_tests(metafunc):
    if "check" in metafunc.fixturenames:
        checks = _spec(metafunc.config).checks
        metafunc.parametrize("check", checks, ids=[c.id for c in checks])


class Submission:
    """One exercise's submission, run lazily (once) on all the cases its checks use."""

    def __init__(self, config):
        self.spec = _spec(config)
        self.file = Path(config.getoption("--kata-file"))
        self.work = Path(config.getoption("--kata-workdir"))
        self.timeout = config.getoption("--kata-timeout")
        self.timed = not config.getoption("--kata-no-timing")
        self._order = list(self.spec.cases)
        self._ran = False
        self.info: dict = {"output": "", "status": None}
        self.verdicts: dict[str, str] = {}  # check id -> status, in the order checks ran
        self.details: dict[str, dict] = {}  # check id -> figures for the HTML report
        self.probe_shown: set[str | None] = set()  # TODOs whose failure already has the probe
        # 2-D attention kernels also run on a probe whose picture shows, key by key, which
        # attention weights are wrong (grader.details); it is launched last and never judged.
        self._probe = (
            details.probe_case(self.spec.exercise.causal)
            if self.spec.exercise.interface == "attention"
            else None
        )

    def output(self, name: str) -> Output:
        self._run()
        if self.info.get("error"):
            raise checking.SubmissionError(self.info["error"])
        i = self._order.index(name)
        result, error = self.work / "out" / f"{i}.npz", self.work / "out" / f"{i}.error.json"
        if result.exists():
            with np.load(result) as data:
                return {k: data[k] for k in data.files}
        if error.exists():
            raise checking.SubmissionError(json.loads(error.read_text())["message"])
        case = self.spec.cases[name]
        stopped = self.info.get("stopped") or "the kernel produced no output"
        raise checking.SubmissionError(f"case {name} ({case.about}): {stopped}")

    def probe(self) -> tuple | None:
        """(the probe case, the kernel's outputs on it), or None: no probe, or it failed."""
        self._run()
        if self._probe is None or self.info.get("error"):
            return None
        result = self.work / "out" / f"{len(self._order)}.npz"
        if not result.exists():
            return None
        with np.load(result) as data:
            return self._probe, {k: data[k] for k in data.files}

    def _run(self) -> None:
        if self._ran:
            return
        self._ran = True
        if not self.file.is_file():
            self.info["error"] = f"{self.file.name} not found in {self.file.parent}"
            return
        self._launch()
        self._read_back()

    def _launch(self) -> None:
        """Write the job, run the launcher in its scratch folder, keep what it printed."""
        (self.work / "out").mkdir(parents=True, exist_ok=True)
        cases = [self.spec.cases[n] for n in self._order]
        if self._probe is not None:
            cases.append(self._probe)  # last: its launch can delay no judged case
        job = {"stem": self.spec.exercise.stem, "file": str(self.file.resolve()), "cases": cases,
               "timing": list(self.spec.timing) if self.timed else []}  # fmt: skip
        (self.work / "job.pkl").write_bytes(pickle.dumps(job))
        scratch = self.work / "cwd"
        scratch.mkdir(exist_ok=True)
        done = process.run(process.python("-m", "grader.launcher", str(self.work)), cwd=scratch,
                           env=process.child_env(), timeout=self.timeout)  # fmt: skip
        self.info.update(seconds=done.seconds, output=done.output, output_bytes=done.output_bytes)
        self._stopped = done.stopped(self.timeout)

    def _read_back(self) -> None:
        """What the launcher wrote: its status, warnings, timing; and why it stopped early."""
        out = self.work / "out"
        if not self.timed:
            self.info["timing"] = {"timed": False, "reason": "not timed: verdicts only"}
        elif (out / "timing.json").exists():
            self.info["timing"] = json.loads((out / "timing.json").read_text())
        status = (
            json.loads((out / "status.json").read_text())
            if (out / "status.json").exists()
            else None
        )
        self.info["status"] = status
        self.info["warnings"] = (status or {}).get("warnings", [])
        stopped = (
            self._stopped
            and f"the submission's process {self._stopped.removeprefix('the process ')}"
        )
        if status is None:
            self.info["error"] = stopped or (
                "the submission's process exited with code 0 while importing the file "
                "(os._exit(0) or another hard exit), so no kernel was run"
            )
        elif status.get("error"):
            self.info["error"] = status["error"]
        elif stopped:
            self.info["stopped"] = stopped


@pytest.fixture(scope="session")
def submission(request):
    sub = Submission(request.config)
    request.config._kata_submission = sub
    return sub


def pytest_json_runtest_metadata(item, call):
    check = item.callspec.params.get("check") if hasattr(item, "callspec") else None
    if check is None:
        return {}
    meta = {"check": check.id}
    if call.when == "teardown":
        return meta
    sub = getattr(item.config, "_kata_submission", None)
    if sub is not None and check.id in sub.details:
        meta["details"] = sub.details[check.id]
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
        meta.update(status="error", trap=None, grader_fault=True,
                    message=f"grader error: {type(exc).__name__}: {exc}")  # fmt: skip
    return meta


_CONFIG: dict = {}


def pytest_configure(config):
    _CONFIG["config"] = config


def pytest_json_modifyreport(json_report):
    """The launch's record rides in the same file as the checks' verdicts."""
    sub = getattr(_CONFIG.get("config"), "_kata_submission", None)
    json_report["kata"] = sub.info if sub is not None else {"status": None, "output": ""}
