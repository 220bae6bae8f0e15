"""The grader's child processes: the environment they get, how they run (limited in time and
output), and containment, so that nothing a submission starts outlives its grading.

The grader starts one kind of child, ``python -m grader.run.launcher``: the only process that runs
a submission's code. A launcher runs in a session of its own and is killed with its process
group when it ends. A child that leaves that group (``start_new_session=True``, a double fork)
is caught by containment: the grading process is a *child subreaper* (Linux's
``PR_SET_CHILD_SUBREAPER``), so every orphan of a launcher is re-parented to it instead of to
init, and ``reap`` kills every child that is not a launcher still running. The grader reaps after each
launcher and before it writes a report; a report is written only when no descendant is left.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTPUT_LIMIT = 4096  # bytes of a child's output kept at each end
# Seconds one exercise's launchers may take, the compile for the GPU included: (backend, track)
# -> limit. See docs/instructors.md#timings for the slowest correct gradings these cover (09's
# reference takes 42 s in the interpreter on a busy 2-core CPU: its cases run twice, the second
# time with the grid reversed).
# fmt: off
TIME_LIMITS = {
    ("interpreter", "core"): 60.0, ("interpreter", "performance"): 120.0,
    ("interpreter", "extensions"): 120.0,
    ("cuda", "core"): 90.0, ("cuda", "performance"): 300.0, ("cuda", "extensions"): 90.0,
}
# fmt: on
PR_SET_CHILD_SUBREAPER = 36

_started: set[int] = set()  # pids of the launchers running now: reap spares them
_lock = threading.Lock()
_contained = False  # contain() succeeded: every orphan of a launcher comes back here


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a grader child: no pytest variables inherited, the kata importable,
    no bytecode written next to submissions, and ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def contain() -> bool:
    """Make this process the subreaper of everything it starts. False where the system cannot
    (not Linux): then only each launcher's process group is killed."""
    global _contained
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    _contained = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _contained


def family() -> dict[int, list[int]]:
    """Every process's children, by parent pid, from /proc."""
    found: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: the ppid follows the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            found.setdefault(int(fields[1]), []).append(int(entry))
    return found


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    children, todo, found = family(), [pid], []
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def _children() -> list[int]:
    """This process's children (the re-parented orphans among them)."""
    return family().get(os.getpid(), [])


def reap(spare: bool = True) -> int:
    """Kill and wait for every child of this process that no running launcher is (all of them
    with ``spare=False``), again until none is left: a child killed re-parents its own children
    here. Returns how many were killed. Only in a contained process: elsewhere (the grader run
    as a library, by the tests) a child may be someone else's."""
    killed = 0
    if not _contained:
        return killed
    for _ in range(100):
        with _lock:
            alive = [p for p in _children() if not (spare and p in _started)]
        if not alive:
            return killed
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        for pid in alive:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:  # a Popen of another thread waits for it
                pass
        time.sleep(0.01)
    return killed


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

    def stopped(self, timeout: float | None) -> str | None:
        """Why the process did not end normally, as a predicate ("was stopped after ..."), or
        None if it did. ``timeout``: the limit it ran under (None: none)."""
        if self.code is None and timeout is None:
            return "was stopped from outside (the grader's fork server ended)"
        if self.code is None:
            return f"was stopped after {timeout:.0f} s (an endless loop, or a kernel that never finishes?)"
        if self.code < 0:
            number = -self.code
            known = number in signal.Signals._value2member_map_
            name = signal.Signals(number).name if known else str(number)
            memory = " (a load or store outside its tensor? check the masks)"
            return f"was killed by {name}" + (memory if name in ("SIGSEGV", "SIGBUS") else "")
        if self.code:
            return f"exited with code {self.code} (os._exit, a crash, or a fatal signal)"
        return None


class Forkserver:
    """The grader's end of ``grader.run.forkserver``: started on first use, one per process."""

    _instance: Forkserver | None = None
    _start = threading.Lock()

    def __init__(self):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with _lock:
            self.proc = subprocess.Popen(
                python("-m", "grader.run.forkserver", str(theirs.fileno())),
                cwd=ROOT,
                env=child_env(),
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
            _started.add(self.proc.pid)
        theirs.close()
        self.sock = mine
        self.replies: queue.Queue = queue.Queue()
        self.exits: dict[int, int] = {}
        self.ended = threading.Condition()
        self.request = threading.Lock()  # one request at a time: its reply is the next "pid"
        threading.Thread(target=self._listen, daemon=True).start()

    @classmethod
    def get(cls) -> Forkserver:
        with cls._start:
            if cls._instance is None or cls._instance.proc.poll() is not None:
                cls._instance = cls()
            return cls._instance

    def _listen(self) -> None:
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:  # the server is gone: whatever still runs counts as killed
                with self.ended:
                    self.ended.notify_all()
                self.replies.put(None)
                return
            message = json.loads(data)
            if "pid" in message:
                self.replies.put(message["pid"])
            else:
                with self.ended:
                    self.exits[message["exit"]] = message["code"]
                    self.ended.notify_all()

    def spawn(self, argv: list[str], env: dict, cwd: Path, fds: tuple[int, int, int]) -> int:
        """Fork ``python -m argv[0] argv[1:]`` with stdin, output and channel ``fds``."""
        message = json.dumps({"argv": argv, "env": env, "cwd": str(cwd)}).encode()
        with self.request:
            socket.send_fds(self.sock, [message], list(fds))
            pid = self.replies.get(timeout=60)
        if pid is None:
            raise OSError("the grader's fork server ended")
        return pid

    def wait(self, pid: int, timeout: float | None) -> int | None:
        """The child's exit code, or None if it still runs after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.ended:
            while pid not in self.exits:
                left = None if deadline is None else deadline - time.monotonic()
                if (left is not None and left <= 0) or self.proc.poll() is not None:
                    return None
                self.ended.wait(timeout=left if left is None else min(left, 1.0))
            return self.exits.pop(pid)


def run(
    cmd: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float | None,
    stdin: bytes = b"",
    pass_fds: tuple[int, ...] = (),
    on_start=None,
    warm: bool = False,
) -> Finished:
    """Run ``cmd`` in its own session with ``stdin`` as its input; at the time limit, or when it
    ends, kill its whole process group, then reap what escaped the group. ``on_start(proc)`` is
    called once it runs (to close the parent's ends of ``pass_fds``, say). ``warm``: fork it
    from the fork server (``cmd`` is ``python -m MODULE CHANNEL ...``, ``pass_fds`` that one
    channel; CPU work only)."""
    if warm:
        return _run_forked(
            cmd,
            cwd=cwd,
            env=env,
            timeout=timeout,
            stdin=stdin,
            channel=pass_fds[0],
            on_start=on_start,
        )
    start = time.monotonic()
    with _lock:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=pass_fds,
        )
        _started.add(proc.pid)
    if on_start:
        on_start(proc)
    captured = _Tail(proc.stdout)
    feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
    feeder.start()
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
        with _lock:
            _started.discard(proc.pid)
    reap()
    return Finished(code, captured.text(), captured.total, round(time.monotonic() - start, 2))


def _run_forked(cmd, *, cwd, env, timeout, stdin, channel, on_start) -> Finished:
    start = time.monotonic()
    server = Forkserver.get()
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    module, rest = cmd[2], cmd[3:]  # python -m MODULE ...
    try:
        pid = server.spawn([module, *rest], env, cwd, (stdin_r, out_w, channel))
    finally:
        for fd in (stdin_r, out_w):
            os.close(fd)
        if on_start:
            on_start(None)
    captured = _Tail(os.fdopen(out_r, "rb"))
    feeder = threading.Thread(target=_feed, args=(os.fdopen(stdin_w, "wb"), stdin), daemon=True)
    feeder.start()
    code = server.wait(pid, timeout)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if code is None:
        server.wait(pid, 5)
    reap()
    return Finished(code, captured.text(), captured.total, round(time.monotonic() - start, 2))


def _feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except (BrokenPipeError, OSError):  # the child ended without reading it all
        pass


def python(*args: str) -> list[str]:
    return [sys.executable, *args]
