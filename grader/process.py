"""Child processes of the grader: the environment they get, and how they are run, limited in
time and output, and killed with everything they started.

Two kinds are started: the runner starts one pytest process per exercise (the checks), and
each of those starts one launcher process (the only one that runs the student's code).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT_LIMIT = 4096  # bytes of a child's output kept at each end


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a grader child: no pytest variables inherited, the kata importable,
    no bytecode written next to submissions, and ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


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


@dataclass
class Finished:
    code: int | None  # None: killed at the time limit
    output: str  # stdout and stderr together, cut to its head and tail
    output_bytes: int
    seconds: float

    def stopped(self, timeout: float) -> str | None:
        """Why the process did not end normally, in a sentence; None if it did."""
        if self.code is None:
            return (
                f"stopped after {timeout:.0f} s (an endless loop, or a kernel that never finishes?)"
            )
        if self.code < 0:
            number = -self.code
            name = (
                signal.Signals(number).name
                if number in signal.Signals._value2member_map_
                else str(number)
            )
            memory = " (a load or store outside its tensor? check the masks)"
            return f"the process was killed by {name}" + (
                memory if name in ("SIGSEGV", "SIGBUS") else ""
            )
        if self.code:
            return (
                f"the process exited with code {self.code} (os._exit, a crash, or a fatal signal)"
            )
        return None


def run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> Finished:
    """Run ``cmd`` in its own session; at the time limit, or when it ends, kill its whole
    process group (a submission may leave children behind)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    captured = _Tail(proc.stdout)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    return Finished(code, captured.text(), captured.total, round(time.monotonic() - start, 2))


def python(*args: str) -> list[str]:
    return [sys.executable, *args]
