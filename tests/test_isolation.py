"""Isolation: a launcher, the only process that runs a submission's code, may write only its own
scratch folder (Linux Landlock, ``grader.run.isolation``); and the grading process reads nothing
of the grader's after its first launcher starts (``grader.run.runner.prepare``), so that where
Landlock is missing a launcher that rewrites the grader's files still changes no verdict.

The Landlock tests skip, with the reason, where this machine's kernel offers none; CI's has it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from grader.run import isolation, process
from kata import runtime, skeletons
from kata.catalogue import ROOT, SOLUTIONS, find

STATE = isolation.state()
landlock = pytest.mark.skipif(
    not STATE.startswith("landlock"), reason=f"Landlock is not in force here ({STATE})"
)
# These grade in the interpreter whatever the machine (its launchers are the fork server's), so
# they cannot run where it is broken: the GPU image's triton 3.6 with numpy 2.5 (every check
# ended in error there, 2026-12-06).
FAULT = runtime.interpreter_fault()
interpreter = pytest.mark.skipif(FAULT is not None, reason=f"no interpreter here: {FAULT}")

# Run in a launcher's place, with a launcher's environment: restricts itself as the launcher
# does first (isolation.enter), then tries each way of writing and says how each ended.
ATTEMPTS = r"""
import os, subprocess, sys, tempfile
from pathlib import Path
from grader.run import isolation

isolation.enter()
probe, outside, folder = map(Path, sys.argv[1:4])


def attempt(label, action):
    try:
        action()
        print(label, "ok")
    except OSError as exc:
        print(label, type(exc).__name__, exc.errno)


def child():
    code = f"open({str(probe)!r}, 'w').write('x')"
    if subprocess.run([sys.executable, "-c", code], capture_output=True).returncode:
        raise PermissionError(13, "the child could not write")


attempt("repository", lambda: probe.write_text("x"))
attempt("outside-write", lambda: outside.write_text("changed"))
attempt("outside-truncate", lambda: os.truncate(outside, 0))
attempt("outside-remove", lambda: outside.unlink())
attempt("outside-mkdir", lambda: (folder / "made").mkdir())
attempt("scratch", lambda: Path("mine.txt").write_text("x"))
attempt("tempfile", lambda: tempfile.NamedTemporaryFile(delete=False).write(b"x"))
attempt("link-in", lambda: os.link(outside, "linked"))
attempt("rename-out", lambda: os.rename("mine.txt", folder / "moved.txt"))
attempt("symlink-through", lambda: (os.symlink(outside, "via"), Path("via").write_text("x")))
attempt("devnull", lambda: open(os.devnull, "w").write("x"))
attempt("own-proc", lambda: open(f"/proc/{os.getpid()}/comm", "w").write("kata-launcher"))
attempt("parent-memory", lambda: open(f"/proc/{os.getppid()}/mem", "rb").close())
attempt("child", child)
print("home", os.environ["HOME"] == os.getcwd(), os.environ["TMPDIR"] == os.getcwd())
"""


@landlock
def test_a_restricted_process_writes_only_its_scratch_folder(tmp_path):
    scratch, folder = tmp_path / "scratch", tmp_path / "outside"
    scratch.mkdir()
    folder.mkdir()
    outside = folder / "kept.txt"
    outside.write_text("kept")
    probe = ROOT / "grader" / f"isolation-probe-{uuid.uuid4().hex}"
    env = process.child_env(**isolation.launcher_env(scratch))
    assert env["KATA_ISOLATION"] == "landlock"
    try:
        done = process.run(
            process.python("-c", ATTEMPTS, str(probe), str(outside), str(folder)),
            cwd=scratch,
            env=env,
            timeout=120,
        )
        assert not probe.exists(), "a restricted process wrote into the repository"
    finally:
        probe.unlink(missing_ok=True)
    assert done.code == 0, done.output
    said = dict(line.split(" ", 1) for line in done.output.splitlines() if " " in line)
    for label in ("repository", "outside-write", "outside-truncate", "outside-remove"):
        assert said[label] == "PermissionError 13", (label, done.output)
    assert said["outside-mkdir"] == "PermissionError 13", done.output
    assert said["child"] == "PermissionError 13", done.output  # what it starts is bound too
    assert said["symlink-through"] == "PermissionError 13", done.output
    # A file moved out: nothing may be made there. A hard link to a file outside, made in the
    # scratch folder, would give that file the scratch folder's rights: EXDEV.
    assert said["rename-out"] == "PermissionError 13", done.output
    assert said["link-in"] == "OSError 18", done.output
    # The memory of a process outside the restriction (the grading process here) is closed.
    assert said["parent-memory"] == "PermissionError 13", done.output
    for label in ("scratch", "tempfile", "devnull", "own-proc"):
        assert said[label] == "ok", (label, done.output)
    assert said["home"] == "True True"
    assert outside.read_text() == "kept"
    assert sorted(p.name for p in folder.iterdir()) == ["kept.txt"]


@landlock
def test_a_launcher_started_afresh_isolates_itself(tmp_path):
    # On a GPU every launcher is a fresh `python -m grader.run.launcher` (the fork server serves
    # CPU work only). Landlock binds one thread, so restricting fails in a process that has
    # started a second: numpy's BLAS starts one per core when imported. The launcher's imports
    # before isolation.enter() must start none (grader.model once imported numpy: every GPU
    # launcher then exited with "16 threads: restrict before starting any").
    env = process.child_env(**isolation.launcher_env(tmp_path))
    done = process.run(
        process.python("-m", "grader.run.launcher", "1"), cwd=ROOT, env=env, timeout=120
    )
    assert "could not be isolated" not in done.output, done.output
    assert "EOFError" in done.output, done.output  # isolated, then found no job on stdin


def test_a_launcher_keeps_everything_it_writes_in_its_scratch_folder(tmp_path):
    env = isolation.launcher_env(tmp_path)
    assert env["KATA_SCRATCH"] == str(tmp_path)
    for key in ("HOME", "TMPDIR", "XDG_CACHE_HOME", "TRITON_HOME", "TRITON_CACHE_DIR"):
        assert Path(env[key]).is_relative_to(tmp_path), key
    assert env["KATA_ISOLATION"] == ("landlock" if STATE.startswith("landlock") else "none")


def test_the_rules_grant_no_folder_of_dev_nor_another_process(tmp_path):
    """Beneath /dev only /dev/shm is a folder the launcher may fill; of /proc, its own entry
    only, and there only writing (CUDA's need)."""
    writing = isolation.WRITE_FILE | isolation.TRUNCATE
    rules = dict(isolation.rules(tmp_path, 7))
    assert rules[str(tmp_path)] == isolation.handled(7)
    for path, allowed in rules.items():
        if path.startswith("/dev/") and path != "/dev/shm" or path.startswith("/proc/"):
            assert allowed == writing, path
    assert "/dev" not in rules and "/proc" not in rules
    own = [f"/proc/{os.getpid()}"] if os.path.isdir("/proc/self") else []
    assert [p for p in rules if p.startswith("/proc/")] == own


def grade(target: Path, report: Path, numbers: list[str], *args: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "grader",
        *numbers,
        "--target",
        str(target),
        "--device",
        "interpreter",
        "--report",
        str(report),
        *args,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(report.read_text())


@landlock
@interpreter
def test_the_solutions_get_full_marks_under_landlock(tmp_path):
    report = grade(SOLUTIONS, tmp_path / "score.json", ["01"])
    assert report["isolation"] == STATE
    assert report["score"] == report["max_score"] == 25, report["exercises"][0]["checks"]


@landlock
@interpreter
def test_a_submission_cannot_write_the_repository_from_the_launcher(tmp_path):
    """Both launchers that import the file, the compiler's and the interpreter's (each forked by
    the fork server), are refused; the grading itself is unaffected."""
    ex = find("01")
    probe = ROOT / "grader" / f"isolation-probe-{uuid.uuid4().hex}"
    target = tmp_path / "target"
    target.mkdir()
    (target / ex.filename).write_text(
        (SOLUTIONS / ex.filename).read_text()
        + f"""
import os as _os, pathlib as _pl
try:
    _pl.Path({str(probe)!r}).write_text("written by a submission")
    print("repository: written")
except OSError as _exc:
    print("repository:", type(_exc).__name__)
_pl.Path("mine.txt").write_text("x")
print("scratch: ok", _os.getcwd() == _os.environ["KATA_SCRATCH"])
"""
    )
    try:
        # --free-form: a file run as written, so that its module-level code runs at all.
        report = grade(target, tmp_path / "score.json", ["01"], "--free-form")
        assert not probe.exists(), "a launcher wrote into the repository"
    finally:
        probe.unlink(missing_ok=True)
    (got,) = report["exercises"]
    assert "repository: PermissionError" in got["output"], got["output"]
    assert "scratch: ok True" in got["output"], got["output"]
    assert got["score"] == got["max_score"], got["checks"]
    assert report["isolation"] == STATE


def test_no_isolation_is_said_in_the_report(tmp_path):
    report = grade(SOLUTIONS, tmp_path / "score.json", ["03"], "--no-isolation", "--no-html")
    assert report["isolation"] == "none: --no-isolation"
    assert report["score"] == report["max_score"], report["exercises"][0]["checks"]


# ---- nothing is read from the grader's files once a launcher has started -----------------------

# Grades with the check folder and the page's templates replaced by copies (the repository's own
# files stay untouched while other tests grade), and plays a launcher that rewrites them: at the
# end of the first launcher, or, with "before", before the grading starts (which shows that
# the planted files win when they are read). Prints the report's path and the modules imported
# after the first launcher started.
PLAYED = r"""
import json, shutil, sys
from pathlib import Path

from grader.report import html
from grader.run import process, runner

copies, mode, *argv = sys.argv[1:]
checks, templates = Path(copies, "checks"), Path(copies, "templates")
shutil.copytree(runner.CHECKS, checks)
shutil.copytree(html.TEMPLATES, templates)
runner.CHECKS, html.TEMPLATES = checks, templates


def plant():
    (checks / "test_checks.py").write_text("def test_check(check, submission):\n    pass\n")
    if mode == "before":  # pytest would not find the plugin yet: the check folder is not on sys.path
        return
    (checks / "pytest.ini").write_text("[pytest]\naddopts = -p kata_planted\n")
    marker = Path(copies, "PLANTED_PLUGIN_RAN")
    (checks / "kata_planted.py").write_text(f"open({str(marker)!r}, 'w').write('yes')\n")
    page = templates / "score.html.j2"
    page.write_text(page.read_text().replace("<main>", "<main>PLANTED_TEMPLATE"))


seen = {}
real = process.run


def run(*args, **kwargs):
    first = not seen
    if first:
        seen["modules"] = set(sys.modules)
    done = real(*args, **kwargs)
    if first and mode == "after":
        plant()
    return done


process.run = run
if mode == "before":
    plant()
from grader import cli

code = cli.main(argv)
print(json.dumps({"code": code, "late": sorted(set(sys.modules) - seen["modules"])}))
"""


def played(tmp_path: Path, mode: str) -> tuple[dict, dict, Path]:
    """Grade 01 (the solution), 02 (the skeleton) and 03 (the skeleton and a module-level raise), one
    after another, with the check files rewritten ``mode`` ("after" the first launcher, or
    "before" the grading). (the report, what the script printed, the copies' folder)."""
    target, copies, report = tmp_path / "target", tmp_path / "copies", tmp_path / "score.json"
    target.mkdir()
    copies.mkdir()
    one, two, three = find("01"), find("02"), find("03")
    shutil.copy(SOLUTIONS / one.filename, target / one.filename)
    (target / two.filename).write_text(skeletons.pristine(two.stem).text)
    (target / three.filename).write_text(
        skeletons.pristine(three.stem).text + "\nraise RuntimeError('no import')\n"
    )
    args = ["01", "02", "03", "--target", str(target), "--device", "interpreter", "--jobs", "1"]
    args += ["--report", str(report), "--gradescope", str(tmp_path / "results.json")]
    env = {**process.child_env(), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", PLAYED, str(copies), mode, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    assert said["code"] == 0, proc.stdout + proc.stderr
    return json.loads(report.read_text()), said, copies


@interpreter
def test_check_files_rewritten_by_a_launcher_change_no_verdict(tmp_path):
    report, said, copies = played(tmp_path, "after")
    one, two, three = report["exercises"]
    assert one["score"] == one["max_score"], one["checks"]
    assert two["score"] == 0, two["checks"]
    assert {c["status"] for c in two["checks"] if c["todo"]} == {"failed"}, two["checks"]
    # Its module-level raise is given code changed: not run; its skeleton regions score 0.
    assert three["score"] == 0 and not three["integrity"]["ok"], three["checks"]
    assert not (copies / "PLANTED_PLUGIN_RAN").exists(), "pytest read the rewritten pytest.ini"
    page = (tmp_path / "score.html").read_text()
    assert "PLANTED_TEMPLATE" not in page, "the page was drawn from a rewritten template"
    # Every module the judging, the reports and the page needed was imported before.
    assert said["late"] == [], said["late"]


def test_planted_check_files_read_before_grading_would_pass_everything(tmp_path):
    """The other side of the test above: the planted check module, read, passes a skeleton."""
    report, _, _ = played(tmp_path, "before")
    two = report["exercises"][1]
    assert two["score"] == two["max_score"], two["checks"]


@pytest.mark.parametrize(
    "triton_v, numpy_v, broken",
    [("3.6.0", "2.5.2", True), ("3.6.0", "2.3.1", False), ("3.9.0", "2.5.2", False)],
)
def test_the_interpreter_fault_is_named_where_triton_and_numpy_disagree(
    monkeypatch, triton_v, numpy_v, broken
):
    from importlib import metadata

    versions = {"triton": triton_v, "numpy": numpy_v}
    monkeypatch.setattr(metadata, "version", versions.__getitem__)
    fault = runtime.interpreter_fault()
    assert (fault is not None) == broken
    if broken:
        assert "9171" in fault and "triton 3.6" in fault and "numpy 2.5" in fault
