"""A warm process that forks the grader's launchers, so that each does not pay for importing
torch again (over a second, most of a small grading's time on two cores).

    python -m grader.run.forkserver FD

imports numpy and torch once (never triton or the kata's runtime: each child chooses its backend
with ``kata.runtime.configure()`` from the environment its request brings), then serves requests on the Unix socket FD (a
``SOCK_SEQPACKET`` pair: one message is one request), one at a time, in one thread (a fork from
a process with other threads may inherit a held lock): each request is a JSON object
``{"argv", "env", "cwd"}`` sent with three file descriptors, the
child's stdin, its output (stdout and stderr) and its channel to the grader. The server forks;
the child starts a session of its own, takes those descriptors as 0, 1, 2 and ``argv``'s
channel number, and runs ``python -m <argv[0]>`` as if it had been started so. The server
answers ``{"pid"}``, and ``{"exit": pid, "code"}`` when a child ends (the code as
``subprocess`` gives it: negative for a signal). Only for CPU work: CUDA does not survive a fork.
"""

from __future__ import annotations

import json
import os
import runpy
import select
import socket
import sys


def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: become the requested program; never returns."""
    code = 1
    try:
        os.setsid()
        stdin, out, channel = fds
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        target = int(request["argv"][1])  # the launcher's channel number, as argv names it
        os.dup2(channel, target)
        for fd in (stdin, out, channel):
            if fd not in (0, 1, 2, target):
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:0] = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.argv = ["-m", *request["argv"][1:]]
        try:
            runpy.run_module(request["argv"][0], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001  (whatever it was, the child ends here)
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _send(sock: socket.socket, message: dict) -> None:
    sock.send(json.dumps(message).encode())


def serve(sock: socket.socket) -> None:
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([sock], [], [], 0.05)
        if readable:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
            if not data:
                return  # the grader is gone
            request = json.loads(data)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                sock.close()
                _child(request, fds)
            for fd in fds:
                os.close(fd)
            children.add(pid)
            _send(sock, {"pid": pid})
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            children.discard(pid)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            _send(sock, {"exit": pid, "code": code})


def main(fd: int) -> int:
    import numpy  # noqa: F401  (the imports every launcher makes, made once)
    import torch  # noqa: F401

    serve(socket.socket(fileno=fd))
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
