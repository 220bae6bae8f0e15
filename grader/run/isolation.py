"""What a launcher may write: its own scratch folder, and nothing else of the machine's files.

The launcher (``grader.run.launcher``) is the only process that runs a submission's code. As its
very first act, before it reads its job and before it imports the kata, Triton or torch, it calls
``enter``: with ``KATA_ISOLATION=landlock`` in its environment it restricts itself, and so every
process it starts, with Linux's Landlock (kernel 5.13 or later, ``man 7 landlock``):

* every write-side filesystem right is *handled* (writing a file, truncating it, removing,
  creating files, folders, links, sockets, pipes and device nodes, and linking or renaming a file
  into another folder: ``REFER``), which Landlock then refuses everywhere except
* beneath the launcher's scratch folder (``KATA_SCRATCH``, a new temporary folder per launcher
  that the grading process makes, deletes afterwards, and makes the launcher's working folder),
  and ``/dev/shm``, where every one of them is granted; and
* on ``/dev/null``, ``/dev/zero``, ``/dev/full``, the NVIDIA devices (``/dev/nvidia*``: CUDA
  opens them for writing) and the launcher's own ``/proc/PID`` (CUDA does not start without
  writing there), where writing and truncating are granted. Not the rest of ``/dev``: a root
  process could write a disk's block device.

Reading and running programs stay allowed everywhere. Landlock binds root too, so this works as
root (CI, Gradescope) as well as for an ordinary user. The restriction applies to the thread that
asks for it and to what it starts later: ``restrict`` refuses to run in a process that has a
second thread already. Whether it is in force is decided once per grading process by a trial
(``state``): a throwaway process restricts itself and must fail to write beside its scratch
folder. The report says what was in force (``isolation``): ``landlock (ABI N)``, or ``none:
<reason>`` where the kernel has no Landlock, a container refuses its system calls, or the
grading ran with ``--no-isolation``; the launcher then runs unrestricted, as before. A launcher
told to isolate itself that cannot stops before it reads its job.

``launcher_env`` points everything a launcher may write on its own into its scratch folder: the
temporary folder, the home folder, the caches (Triton's included: a cache another launcher could
write is a cache a submission could poison).

Not restricted by this: reading (a submission can read every file the grader's user can), file
metadata (``chmod``, ``chown``, timestamps: Landlock has no right for them), sockets and the
network, and signals to processes of the same user.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# <linux/landlock.h>, <linux/prctl.h>; the system call numbers are the same on every architecture.
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

WRITE_FILE = 1 << 1
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
WRITES_V1 = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_CHAR
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_BLOCK
    | MAKE_SYM
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full")  # written to, never created or removed


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]  # the ABI 1 size; later fields stay 0


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _fail(call: str) -> OSError:
    number = ctypes.get_errno()
    return OSError(number, f"{call}: {os.strerror(number)} ({errno.errorcode.get(number, number)})")


def abi() -> int:
    """The Landlock ABI version this kernel offers; OSError where it offers none."""
    if not sys.platform.startswith("linux"):
        raise OSError(errno.ENOSYS, "not Linux")
    libc = _libc()
    version = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    if version < 0:
        raise _fail("landlock_create_ruleset")
    return int(version)


def handled(version: int) -> int:
    """The write-side rights an ABI ``version`` knows."""
    rights = WRITES_V1
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    return rights


def rules(scratch: Path, version: int) -> list[tuple[str, int]]:
    """(path, the rights granted beneath it) for a launcher whose scratch folder is ``scratch``."""
    everything, writing = handled(version), handled(version) & (WRITE_FILE | TRUNCATE)
    found = [(str(scratch), everything)]
    if os.path.isdir("/dev/shm"):
        found.append(("/dev/shm", everything))
    for device in (*DEVICES, *sorted(glob.glob("/dev/nvidia*"))):
        if os.path.exists(device):
            found.append((device, writing))
    # The process's own /proc entry: CUDA does not start without writing there, nor without the
    # NVIDIA devices (both seen on an H200, Linux 6.18). Its own: not its children's, nor any
    # other process's.
    own = f"/proc/{os.getpid()}"
    if os.path.isdir(own):
        found.append((own, writing))
    return found


def restrict(scratch: Path) -> int:
    """Restrict this process, and everything it starts, to writing beneath ``scratch`` (and the
    devices of ``rules``). Returns the ABI version used; OSError if it could not."""
    scratch = Path(scratch)
    if not scratch.is_absolute() or not scratch.is_dir():
        raise OSError(errno.EINVAL, f"no scratch folder {scratch}")
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # Landlock binds the calling thread only: another would stay free
        raise OSError(errno.EBUSY, f"{threads} threads: restrict before starting any")
    version = abi()
    libc = _libc()
    attr = _RulesetAttr(handled(version))
    ruleset = libc.syscall(
        SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0
    )
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    try:
        for path, allowed in rules(scratch, version):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(allowed, fd)
                if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                    raise _fail(f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0):
            raise _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return version


def enter() -> None:
    """The launcher's first act: restrict it as its environment says (``launcher_env``). A
    launcher that should be isolated and cannot be ends here, before it reads its job."""
    if os.environ.get("KATA_ISOLATION") != "landlock":
        return
    try:
        restrict(Path(os.environ.get("KATA_SCRATCH", "")))
    except OSError as exc:
        print(f"grader: the launcher could not be isolated: {exc}", file=sys.stderr, flush=True)
        os._exit(1)


# ---- in the grading process -------------------------------------------------------------------

_state: str | None = None
_lock = threading.Lock()


def disable(reason: str) -> None:
    """Run the launchers unrestricted (``--no-isolation``: to test the defences behind this one)."""
    global _state
    with _lock:
        _state = f"none: {reason}"


def state() -> str:
    """What isolation the launchers of this grading get: ``landlock (ABI N)`` when a trial showed
    a restricted process could not write beside its scratch folder, else ``none: <reason>``.
    Decided once per process."""
    global _state
    with _lock:
        if _state is None:
            _state = _trial()
        return _state


def unavailable(exc: OSError) -> str:
    """Why ``abi`` found no Landlock, as the report says it."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if exc.errno == errno.ENOSYS:
        return f"this kernel has no Landlock (Linux 5.13 or later has it): {exc.strerror}"
    if exc.errno == errno.EOPNOTSUPP:
        return f"Landlock is built into this kernel but not enabled at boot: {exc.strerror}"
    return f"Landlock is refused here: {exc.strerror}"


def _trial() -> str:
    try:
        version = abi()
    except OSError as exc:
        return f"none: {unavailable(exc)}"
    with tempfile.TemporaryDirectory(prefix="kata-isolation-") as base:
        inside, outside = Path(base, "scratch"), Path(base, "outside")
        inside.mkdir()
        outside.mkdir()
        code = (
            "import sys; from pathlib import Path; from grader.run import isolation\n"
            "isolation.restrict(Path(sys.argv[1]))\n"
            "Path(sys.argv[1], 'ok').write_text('ok')\n"
            "try:\n"
            "    Path(sys.argv[2], 'escaped').write_text('no')\n"
            "except PermissionError:\n"
            "    sys.exit(0)\n"
            "sys.exit('a write outside the scratch folder was not refused')\n"
        )
        try:
            done = subprocess.run(
                [sys.executable, "-c", code, str(inside), str(outside)],
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                cwd=inside,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"none: the Landlock trial did not run ({exc})"
        held = done.returncode == 0 and (inside / "ok").is_file()
        if not held or (outside / "escaped").exists():
            why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            return f"none: Landlock ABI {version} is offered, but a trial failed: {why}"
    return f"landlock (ABI {version})"


def launcher_env(scratch: Path) -> dict[str, str]:
    """The environment a launcher gets on top of ``process.child_env``: everything it may write
    on its own inside ``scratch``, and whether to restrict itself to it."""
    scratch = Path(scratch)
    cache = scratch / ".cache"
    return {
        "KATA_ISOLATION": "landlock" if state().startswith("landlock") else "none",
        "KATA_SCRATCH": str(scratch),
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "TEMP": str(scratch),
        "TMP": str(scratch),
        "XDG_CACHE_HOME": str(cache),
        "XDG_CONFIG_HOME": str(scratch / ".config"),
        "TRITON_HOME": str(scratch),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor"),
    }
