"""pytest plugin for the hidden checks: runs the submission once per exercise in a separate,
time-limited process (grader.launcher), then lets each check compare its outputs here.

Loaded explicitly (``-p grader.plugin``) by the runner; never from the target folder.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from grader import checkset
from grader.checking import CheckFailed, GraderError, SubmissionError

ROOT = Path(__file__).resolve().parents[1]
OUTPUT_LIMIT = 4096  # bytes of the submission's output kept at each end


def pytest_addoption(parser):
    group = parser.getgroup("kata")
    group.addoption("--kata-exercise", required=True, help="exercise file stem")
    group.addoption("--kata-file", required=True, help="the submission's file")
    group.addoption("--kata-workdir", required=True, help="scratch folder for this exercise")
    group.addoption("--kata-timeout", type=float, default=120.0, help="seconds for the launcher")


def pytest_generate_tests(metafunc):
    if "check" in metafunc.fixturenames:
        stem = metafunc.config.getoption("--kata-exercise")
        checks = checkset.checks_for(stem)
        metafunc.parametrize("check", checks, ids=[c.id for c in checks])


class _Tail:
    """Keeps the head and tail of a stream that may be flooded, and counts the rest."""

    def __init__(self, stream):
        self.head, self.tail, self.total = b"", b"", 0
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream):
        for chunk in iter(lambda: stream.read(65536), b""):
            self.total += len(chunk)
            if len(self.head) < OUTPUT_LIMIT:
                self.head += chunk[: OUTPUT_LIMIT - len(self.head)]
            self.tail = (self.tail + chunk)[-OUTPUT_LIMIT:]

    def text(self) -> str:
        self._thread.join(timeout=5)
        if self.total <= 2 * OUTPUT_LIMIT:
            body = self.head + self.tail[max(0, len(self.head) + len(self.tail) - self.total) :]
            return body.decode(errors="replace")
        skipped = self.total - 2 * OUTPUT_LIMIT
        return (
            self.head.decode(errors="replace")
            + f"\n[... {skipped} bytes of output left out ...]\n"
            + self.tail.decode(errors="replace")
        )


class Submission:
    """One exercise's submission, run lazily (once) on all of that exercise's cases."""

    def __init__(self, config):
        self.stem = config.getoption("--kata-exercise")
        self.file = Path(config.getoption("--kata-file"))
        self.work = Path(config.getoption("--kata-workdir"))
        self.timeout = config.getoption("--kata-timeout")
        self.cases = checkset.cases_for(self.stem)
        self._order = list(self.cases)
        self._ran = False
        self.info: dict = {"output": "", "status": None}

    def case(self, name: str):
        return self.cases[name]

    def output(self, name: str) -> dict[str, np.ndarray]:
        self._run()
        if self.info.get("error"):
            raise SubmissionError(self.info["error"])
        i = self._order.index(name)
        result = self.work / "out" / f"{i}.npz"
        error = self.work / "out" / f"{i}.error.json"
        if result.exists():
            with np.load(result) as data:
                return {k: data[k] for k in data.files}
        if error.exists():
            raise SubmissionError(json.loads(error.read_text())["message"])
        raise SubmissionError(
            self.info.get("stopped") or "the kernel produced no output for this case"
        )

    def _run(self) -> None:
        if self._ran:
            return
        self._ran = True
        if not self.file.is_file():
            self.info["error"] = f"{self.file.name} not found in {self.file.parent}"
            return
        self.work.mkdir(parents=True, exist_ok=True)
        from kata.catalogue import find

        job = {"exercise": self.stem, "file": str(self.file.resolve()),
               "cases": [self.cases[n].job() for n in self._order],
               "timing": find(self.stem).track == "performance"}  # fmt: skip
        (self.work / "job.pkl").write_bytes(pickle.dumps(job))
        scratch = self.work / "cwd"
        scratch.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "grader.launcher", str(self.work)],
            cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        captured = _Tail(proc.stdout)
        try:
            code = proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            try:  # the submission may have left children behind
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        self.info["seconds"] = round(time.monotonic() - start, 2)
        self.info["output"] = captured.text()
        self.info["output_bytes"] = captured.total
        timing_file = self.work / "out" / "timing.json"
        if timing_file.exists():
            self.info["timing"] = json.loads(timing_file.read_text())
        status_file = self.work / "out" / "status.json"
        status = json.loads(status_file.read_text()) if status_file.exists() else None
        self.info["status"] = status
        if code is None:
            stopped = f"stopped after {self.timeout:.0f} s (an endless loop, or a kernel that never finishes?)"
        elif code is not None and code < 0:
            name = (
                signal.Signals(-code).name
                if -code in signal.Signals._value2member_map_
                else str(-code)
            )
            stopped = f"the submission's process was killed by {name}" + (
                " (a load or store outside its tensor? check the masks)"
                if name in ("SIGSEGV", "SIGBUS")
                else ""
            )
        elif code != 0:
            stopped = f"the submission's process exited with code {code} (os._exit, a crash, or a fatal signal)"
        else:
            stopped = None
        if status is None:
            self.info["error"] = stopped or (
                "the submission's process exited with code 0 while importing the file "
                "(os._exit(0) or another hard exit), so no kernel was run"
            )
        elif status.get("error"):
            self.info["error"] = status["error"]
        elif stopped:
            self.info["stopped"] = stopped

    def write_info(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "launch.json").write_text(json.dumps(self.info))


@pytest.fixture(scope="session")
def submission(request):
    sub = Submission(request.config)
    yield sub
    sub.write_info()


def pytest_json_runtest_metadata(item, call):
    check = item.callspec.params.get("check") if hasattr(item, "callspec") else None
    if check is None:
        return {}
    meta = {"check": check.id, "points_possible": check.points, "todo": check.todo}
    if call.when == "teardown":
        return meta
    if call.excinfo is None:
        if call.when == "call":
            meta.update(status="passed", message="")
        return meta
    exc = call.excinfo.value
    if isinstance(exc, CheckFailed):
        meta.update(status="failed", trap=exc.trap, message=exc.message)
    elif isinstance(exc, SubmissionError):
        meta.update(status="error", trap=None, message=str(exc))
    elif isinstance(exc, GraderError):
        meta.update(status="error", trap=None, message=str(exc), grader_fault=True)
    else:
        meta.update(status="error", trap=None, grader_fault=True,
                    message=f"grader error: {type(exc).__name__}: {exc}")  # fmt: skip
    return meta
