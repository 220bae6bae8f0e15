"""What a new student meets: commands printed as they can be pasted, hint without an argument,
advice only where it helps, output sized to the terminal, the kernel files run with a bare
python3, nested uploads found."""

import io
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from grader.report import summary
from grader.report.records import CheckResult, ExerciseResult, Report
from grader.run import discover
from kata import catalogue, commands, terminal
from kata.student import hints, progress

ROOT = catalogue.ROOT
slow = pytest.mark.slow
E01, E02, E03, E04 = (catalogue.find(n) for n in ("01", "02", "03", "04"))


def test_commands_are_spelled_as_nox_was_started(monkeypatch):
    monkeypatch.setenv("KATA_NOX", ".venv/bin/nox")
    assert commands.nox("hint", "01") == ".venv/bin/nox -s hint -- 01"
    monkeypatch.delenv("KATA_NOX")
    monkeypatch.setattr(commands.shutil, "which", lambda name: None)
    monkeypatch.setattr(commands, "ROOT", Path("/nowhere"))
    assert commands.nox("grade") == "nox -s grade"  # no venv: the docs' spelling


def test_noxfile_passes_how_nox_was_started():
    text = (ROOT / "noxfile.py").read_text()
    assert 'os.environ.setdefault("KATA_NOX", _nox_as_typed())' in text
    assert '"uv binary not found."' in text  # nox's noise on every session is filtered


def _check(status, trap=None, message="m", todo="rescale-acc"):
    return CheckResult(
        id=f"c-{status}",
        todo=todo,
        status=status,
        points=0,
        max_points=10,
        trap=trap,
        message=message,
    )


def _report(target, *exercises):
    return Report(
        target=str(target),
        device="interpreter: cpu",
        versions={},
        exercises=list(exercises),
        duration_s=1.0,
    )


def _exercise(checks, error=None, file=f"/nowhere/{E01.filename}", **kw):
    return ExerciseResult(
        id=E01.stem,
        file=file,
        track="core",
        score=0,
        max_score=25,
        checks=checks,
        error=error,
        **kw,
    )


def _printed(report, advice=True, tty_width=None, monkeypatch=None) -> str:
    class Terminal(io.StringIO):
        def isatty(self):
            return tty_width is not None

    out = Terminal()
    if tty_width is not None:
        monkeypatch.setattr(terminal, "width", lambda: tty_width)
        monkeypatch.setenv("NO_COLOR", "1")
    summary.Printer(stream=out, advice=advice).finish(report, Path("r.json"), None)
    return out.getvalue()


def test_stuck_advice_only_after_a_wrong_answer(monkeypatch, tmp_path):
    monkeypatch.setenv("KATA_NOX", ".venv/bin/nox")
    wrong = _report(tmp_path, _exercise([_check("failed", "acc-not-rescaled")]))
    assert "Stuck? `.venv/bin/nox -s hint -- 01` shows a hint." in _printed(wrong)
    assert "Stuck?" not in _printed(wrong, advice=False)  # Gradescope's log
    crashed = _report(tmp_path, _exercise([_check("error")], error="the file failed to import"))
    assert "Stuck?" not in _printed(crashed) and "reset" not in _printed(crashed)
    missing = _report(catalogue.EXERCISES, _exercise([_check("error")], error="not found"))
    assert "`.venv/bin/nox -s reset -- 01` puts the skeleton" in _printed(missing)


def test_summary_fits_a_narrow_terminal(monkeypatch, tmp_path):
    checks = [
        _check("failed", "acc-not-rescaled", message="word " * 60),
        _check("blocked", "reference-not-running-max"),
    ]
    report = _report(tmp_path, _exercise(checks))
    for width in (44, 60):
        out = _printed(report, tty_width=width, monkeypatch=monkeypatch)
        assert max(len(line) for line in out.splitlines()) <= width, out
        assert "rescale acc by alpha, as l_i is" in " ".join(out.split())  # wrapped, not cut
    printer = summary.Printer(stream=io.StringIO())
    assert printer.width == 80  # a pipe: 80 columns


def test_interpreter_says_timing_was_skipped(tmp_path):
    from grader.run import timing

    ex = ExerciseResult(
        id=E04.stem,
        file=E04.filename,
        track="performance",
        score=50,
        max_score=50,
        checks=[],
        performance=timing.score(None, True),
    )
    out = _printed(_report(tmp_path, ex))
    assert "Performance: not timed (timing needs a CUDA GPU" in out and "0/10" not in out


def test_hint_without_an_argument_picks_the_exercise_you_are_on(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(hints, "STATE", tmp_path / "hints.json")
    score = tmp_path / "score.json"
    monkeypatch.setattr(progress, "REPORTS", (score,))
    assert hints.main([]) == 0  # never graded: the first exercise
    assert f"Hints for {E01.stem}" in capsys.readouterr().out
    exercises = [
        {"id": ex.stem, "score": ex.points if ex.number == "01" else 0, "max_score": ex.points}
        for ex in catalogue.EXERCISE_LIST
    ]
    score.write_text(json.dumps({"target": str(catalogue.EXERCISES), "exercises": exercises}))
    assert hints.main([]) == 0
    out = capsys.readouterr().out
    assert f"Hints for {E02.stem}" in out and "below full marks" in out
    for e in exercises:
        e["score"] = e["max_score"]
    score.write_text(json.dumps({"target": str(catalogue.EXERCISES), "exercises": exercises}))
    assert hints.main([]) == 0 and "No hint needed" in capsys.readouterr().out


def test_03s_hints_are_a_ladder_per_todo(monkeypatch, capsys, tmp_path):
    """A student stuck on renormalize reads its ladder only, none of the top-2 mask's; without
    a TODO, the hint follows the first TODO the last grade did not pass."""
    monkeypatch.setattr(hints, "STATE", tmp_path / "hints.json")
    score = tmp_path / "score.json"
    monkeypatch.setattr(progress, "REPORTS", (score,))
    ex = catalogue.find("03")
    ladders = ex.ladders
    assert list(ladders) == list(ex.todo_ids) == ["top2-mask", "renormalize"]
    top2 = " ".join(" ".join(level.split()) for level in ladders["top2-mask"])
    for level in ladders["renormalize"]:  # no level of one ladder names the other's ideas
        assert not {"argmax", "-inf", "position", "index"} & set(level.replace(",", " ").split())
    assert "sum" not in top2 and "renormal" not in top2
    assert hints.main(["03", "renormalize", "--all"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "TODO(renormalize): level 3 of 3" in out
    assert all(" ".join(level.split()) in out for level in ladders["renormalize"])
    assert (
        ladders["top2-mask"][0].split()[0] not in out.split("level 3 of 3")[1].split("Hints for")[0]
    )
    assert "nox -s hint -- 03 top2-mask" in out  # the other ladder, named
    assert hints.main(["03", "nope"]) == 2 and "top2-mask, renormalize" in capsys.readouterr().out
    checks = [
        {"todo": "top2-mask", "status": "passed"},
        {"todo": "renormalize", "status": "failed"},
    ]
    report = {"id": ex.stem, "score": 25, "max_score": 50, "checks": checks}
    score.write_text(json.dumps({"target": str(catalogue.EXERCISES), "exercises": [report]}))
    assert hints.main(["03", "--reset"]) == 0
    out = capsys.readouterr().out
    assert "(TODO(renormalize): the first TODO below full marks" in out and "level 1 of 3" in out
    assert hints.main(["03", "top2-mask"]) == 0 and "level 1 of 3" in capsys.readouterr().out
    assert hints.main(["03"]) == 0 and "level 2 of 3" in capsys.readouterr().out  # its own count


def test_nested_uploads_are_found(tmp_path):
    (tmp_path / "__MACOSX" / "x").mkdir(parents=True)
    (tmp_path / "__MACOSX" / "x" / E01.filename).write_text("")
    assert discover.exercise_folder(tmp_path) is None
    deep = tmp_path / "upload" / "exercises"
    deep.mkdir(parents=True)
    for ex in catalogue.EXERCISE_LIST:
        (deep / ex.filename).write_text("")
    (tmp_path / "upload" / E01.filename).write_text("")  # one stray file
    assert discover.exercise_folder(tmp_path) == deep  # the folder with the most files
    (tmp_path / E03.filename).write_text("")
    assert discover.exercise_folder(tmp_path) == deep


@slow
def test_grader_finds_files_below_the_target(tmp_path):
    deep = tmp_path / "student" / "exercises"
    deep.mkdir(parents=True)
    (deep / E03.filename).write_text((catalogue.SOLUTIONS / E03.filename).read_text())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            "03",
            "--target",
            str(tmp_path / "student"),
            "--report",
            str(tmp_path / "s.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"grading {deep}" in done.stderr
    assert json.loads((tmp_path / "s.json").read_text())["score"] == 50


@slow
def test_a_kernel_file_run_by_a_python_without_torch(tmp_path):
    """`python3 exercises/01_*.py` from a fresh clone: rerun with .nox/kata when it exists,
    else one line saying what to run, never a traceback."""
    bare = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(bare)  # no site packages: no torch, no triton
    python = bare / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KATA_REEXEC")}
    script = str(catalogue.EXERCISES / E01.filename)
    refused = subprocess.run(
        [str(python), script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**env, "KATA_REEXEC": "1"},
        timeout=120,
        check=False,
    )
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert f"{E01.filename} needs torch" in line and "-s run -- 01`" in line
    if not (ROOT / ".nox" / "kata" / "bin" / "python").exists():
        pytest.skip("no .nox/kata here to rerun the file with")
    rerun = subprocess.run(
        [str(python), script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert f"running {E01.filename} with .nox/kata/bin/python" in rerun.stderr
    assert "21.1 flash attention core" in rerun.stdout  # the worked example ran


def test_setup_sh_pins_the_building_environment(tmp_path):
    import zipfile
    from importlib import metadata

    from kata.authoring import bundles

    text = zipfile.ZipFile(bundles.autograder(tmp_path / "a.zip")).read("setup.sh").decode()
    assert f"TORCH_VERSION={metadata.version('torch').split('+')[0]}" in text
    assert f"triton=={metadata.version('triton')}" in text
    pinned = zipfile.ZipFile(bundles.autograder(tmp_path / "b.zip", ["torch==2.6.0"]))
    assert "TORCH_VERSION=2.6.0" in pinned.read("setup.sh").decode()
    with pytest.raises(SystemExit):
        bundles.pins(["torch"])
