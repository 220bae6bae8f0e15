"""A real one-node Slurm on this machine, for ``nox -s slurm-test``.

``running(state_dir)`` uses the cluster that ``sinfo`` already reaches, if any. Otherwise (as root)
it installs Debian's ``slurm-wlm`` and ``munge`` with apt-get when they are missing, writes a
``slurm.conf`` for one node (this machine) into ``state_dir``, starts munged (unless one
answers), slurmctld and slurmd, and on leaving stops the daemons it started, by PID.

    python tests/slurm/cluster.py up|down [--dir .slurm-test]   # by hand; `up` prints SLURM_CONF
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")  # started in this order, stopped in reverse


def _run(cmd: list[str], env: dict | None = None, check: bool = True, **kw):
    return subprocess.run(cmd, env=env, check=check, text=True, capture_output=True, **kw)


def answers(env: dict) -> bool:
    """Does a Slurm controller answer with this environment?"""
    if shutil.which("sinfo") is None:
        return False
    return _run(["sinfo", "-h"], env=env, check=False, timeout=30).returncode == 0


def munge_answers() -> bool:
    if shutil.which("munge") is None:
        return False
    enc = _run(["munge", "-n"], check=False)
    return enc.returncode == 0 and _run(["unmunge"], check=False, input=enc.stdout).returncode == 0


def install(log) -> None:
    if all(shutil.which(c) for c in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    log("installing slurm-wlm and munge with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "slurm-wlm", "munge"],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def config(state: Path) -> str:
    host = socket.gethostname().split(".")[0]
    cpus = max(4, os.cpu_count() or 1)  # more slots than cores: some test tasks only sleep
    mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 2
    return f"""\
# One node, this machine: written by tests/slurm/cluster.py for nox -s slurm-test.
ClusterName=kata
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
# Ended jobs stay visible to squeue for 10 minutes (no accounting here, so no sacct).
MinJobAge=600
KillWait=5
SlurmdParameters=config_overrides
StateSaveLocation={state}/ctld
SlurmdSpoolDir={state}/spool
SlurmctldPidFile={state}/slurmctld.pid
SlurmdPidFile={state}/slurmd.pid
SlurmctldLogFile={state}/slurmctld.log
SlurmdLogFile={state}/slurmd.log
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _wait_for(check, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {seconds:.0f} s waiting for {what}")
        time.sleep(0.25)


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """Running, and not a zombie (a container's PID 1 may never reap the daemons)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def up(state: Path, log=print) -> dict:
    """Start the cluster (or find one); returns the environment its clients need. The PIDs of
    what was started are written to state/started."""
    if answers(dict(os.environ)):
        log("a Slurm cluster already answers: using it")
        return {}
    if os.geteuid() != 0:
        raise RuntimeError(
            "no Slurm cluster answers here, and bringing one up needs root "
            "(apt-get, munged, slurmctld, slurmd)"
        )
    down(state, log)  # leftovers of an earlier run
    start = time.monotonic()
    install(log)
    shutil.rmtree(state, ignore_errors=True)
    (state / "ctld").mkdir(parents=True)
    (state / "spool").mkdir()
    conf = state / "slurm.conf"
    conf.write_text(config(state))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started = []
    if not munge_answers():
        run_dir = Path("/run/munge")
        run_dir.mkdir(exist_ok=True)
        shutil.chown(run_dir, "munge", "munge")
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            _run(["mungekey", "--create"])
            shutil.chown(key, "munge", "munge")
        _run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"])
        _wait_for(munge_answers, 15, "munged")
        started.append(("munged", _pid(run_dir / "munged.pid")))
    _run(["slurmctld", "-f", str(conf)], env=env)
    _wait_for(lambda: _pid(state / "slurmctld.pid"), 15, "slurmctld's PID file")
    started.append(("slurmctld", _pid(state / "slurmctld.pid")))
    _run(["slurmd", "-f", str(conf)], env=env)
    _wait_for(lambda: _pid(state / "slurmd.pid"), 15, "slurmd's PID file")
    started.append(("slurmd", _pid(state / "slurmd.pid")))
    (state / "started").write_text("".join(f"{name} {pid}\n" for name, pid in started))

    def idle():
        r = _run(["sinfo", "-h", "-N", "-o", "%T"], env=env, check=False)
        return r.returncode == 0 and r.stdout.strip() == "idle"

    _wait_for(idle, 60, "the node to be idle")
    nodes = _run(["sinfo", "-N", "-o", "%N %P %c %T"], env=env).stdout.strip()
    log(
        f"Slurm up in {time.monotonic() - start:.1f} s (SLURM_CONF={conf}; started "
        f"{', '.join(f'{n} {p}' for n, p in started)}):\n{nodes}"
    )
    return {"SLURM_CONF": str(conf)}


def down(state: Path, log=print) -> None:
    """Stop the daemons that ``up`` started, by PID, newest first."""
    listed = state / "started"
    if not listed.exists():
        return
    entries = [line.split() for line in listed.read_text().splitlines() if line.strip()]
    for name, pid in reversed(entries):
        pid = int(pid)
        try:
            ours = _alive(pid) and name in Path(f"/proc/{pid}/cmdline").read_text()
        except OSError:
            ours = False
        if not ours:
            continue  # gone already, or the PID now belongs to something else
        os.kill(pid, signal.SIGTERM)
        try:
            _wait_for(lambda p=pid: not _alive(p), 20, f"{name} ({pid}) to stop")
        except RuntimeError:
            os.kill(pid, signal.SIGKILL)
        log(f"stopped {name} ({pid})")
    listed.unlink()


@contextlib.contextmanager
def running(state: Path, log=print):
    env = up(state, log)
    try:
        yield env
    finally:
        down(state, log)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tests/slurm/cluster.py")
    p.add_argument("action", choices=("up", "down"))
    p.add_argument("--dir", type=Path, default=Path(__file__).resolve().parents[2] / ".slurm-test")
    args = p.parse_args(argv)
    state = args.dir.resolve()
    if args.action == "up":
        env = up(state)
        if env:
            print(f"export SLURM_CONF={env['SLURM_CONF']}")
    else:
        down(state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
