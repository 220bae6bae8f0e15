"""The student and instructor tools: hints, reset, watch, batch grading, the handout zip and
the Gradescope autograder zip."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kata import catalogue, skeletons
from kata.authoring.bundles import autograder, handout, instructors_only
from kata.student import hints, reset

ROOT = catalogue.ROOT
slow = pytest.mark.slow
e2e = pytest.mark.e2e
STEMS = [ex.stem for ex in catalogue.EXERCISE_LIST]


def copy_skeleton(ex, folder: Path) -> None:
    (folder / ex.filename).write_text(skeletons.pristine(ex.stem).text)


def outside_path() -> str:
    """PYTHONPATH without this checkout (packages may live on PYTHONPATH, as on a GPU box)."""
    keep = [
        p
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if p and not Path(p).resolve().is_relative_to(ROOT)
    ]
    return os.pathsep.join(keep)


def run(*args, cwd=ROOT, env=None, timeout=600):
    env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_hints_reveal_one_level_at_a_time(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(hints, "STATE", tmp_path / "hints.json")
    levels = catalogue.find("02").hints
    assert len(levels) >= 2
    for shown in range(1, len(levels) + 2):
        assert hints.main(["02"]) == 0
        out = capsys.readouterr().out
        expect = min(shown, len(levels))
        assert f"level {expect} of {len(levels)}" in out
        assert (f"{expect}. " in out) and (f"{expect + 1}. " not in out)
    assert hints.main(["2", "--reset"]) == 0 and "level 1 of" in capsys.readouterr().out
    assert hints.main(["99"]) == 2


def test_hints_never_contain_the_solution_code():
    """No hint may hold a line of a solution region (the exercises' answers). A line that is one
    name or a closing bracket (an argument of a call the formatter laid out one per line) is no
    answer on its own."""
    answers = []
    for ex in catalogue.ALL_EXERCISES:
        text = (catalogue.SOLUTIONS / ex.filename).read_text()
        inside = False
        for line in text.splitlines():
            if "# BEGIN SOLUTION" in line or "# END SOLUTION" in line:
                inside = "BEGIN" in line
            elif inside and not re.fullmatch(r"\s*([\w.]+|[)\]}]+),?", line):
                answers.append(" ".join(line.split()))
    assert answers
    every_hint = " ".join(
        " ".join(level.split())
        for ex in catalogue.ALL_EXERCISES
        for ladder in ex.ladders.values()
        for level in ladder
    )
    for answer in answers:
        assert answer not in every_hint, answer


def test_every_exercise_has_hints():
    for ex in catalogue.ALL_EXERCISES:
        assert all(len(levels) >= 2 for levels in ex.ladders.values()), ex.stem
        assert None in ex.ladders or list(ex.ladders) == list(ex.todo_ids), ex.stem


def test_reset_restores_the_skeleton_and_keeps_backups(tmp_path):
    ex = catalogue.find("02")
    path = tmp_path / ex.filename
    assert reset.reset(ex, tmp_path) is None and path.read_text() == reset.skeleton(ex)
    for n, suffix in enumerate((".bak", ".bak2"), 1):
        path.write_text(f"# my work {n}\n")
        backup = reset.reset(ex, tmp_path)
        assert backup.name == ex.filename + suffix and backup.read_text() == f"# my work {n}\n"
        assert path.read_text() == skeletons.pristine(ex.stem).text
    assert reset.reset(ex, tmp_path) is None  # already pristine: nothing to back up


@slow
def test_watch_of_one_exercise_stops_at_full_marks_and_says_what_is_next(tmp_path):
    """`watch -- 02` at full marks names 03 and its page and exits, where it used to watch on
    (the timeout only bounds that hang)."""
    shutil.copy(catalogue.SOLUTIONS / catalogue.find("02").filename, tmp_path)
    proc = run("-m", "kata.student.watch", "02", "--target", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "watching" in proc.stdout and "25/25" in proc.stdout
    said = " ".join(proc.stdout.split())
    assert f"02 done: next, 03 (docs/exercises/{STEMS[2]}.md): `" in said
    assert "-s watch -- 03`" in said
    assert proc.stdout.count("=== watching") == 1
    # The backend is chosen once: its notice (on a machine without a GPU) is not repeated by
    # every grading watch starts.
    assert proc.stderr.count("no CUDA GPU found") <= 1, proc.stderr


def test_watch_stops_when_the_grader_cannot_grade(tmp_path):
    proc = run("-m", "kata.student.watch", "03", "--target", str(tmp_path), "--max-runs", "3")
    assert proc.returncode == 2  # an empty folder: said once, not watched forever
    assert proc.stderr.count("no exercise files in") == 1, proc.stderr


@slow
@e2e
def test_batch_grades_a_class_and_resumes(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    for student, source in (("ada", "solutions"), ("bob", "exercises"), ("cy", "mixed")):
        folder = subs / student
        folder.mkdir(parents=True)
        for ex in catalogue.EXERCISE_LIST:
            if source == "solutions" or (source == "mixed" and ex.number != "02"):
                shutil.copy(catalogue.SOLUTIONS / ex.filename, folder)
            else:
                copy_skeleton(ex, folder)
    proc = run(
        "-m", "grader.classroom.batch", "--submissions", str(subs), "--out", str(out), "--jobs", "2"
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    rows = {r["student"]: r for r in csv.DictReader(open(out / "gradebook.csv"))}
    assert (rows["ada"]["score"], rows["bob"]["score"], rows["cy"]["score"]) == ("100", "0", "75")
    assert {r["status"] for r in rows.values()} == {"graded"}
    assert rows["cy"][catalogue.find("02").stem] == "0"
    assert rows["cy"]["traps"] == "causal-mask-missing"
    assert set(rows["bob"]["traps"].split(";")) == {
        "acc-not-rescaled",
        "causal-mask-missing",
        "top2-not-masked",
        "weights-not-renormalized",
    }
    assert json.loads((out / "ada" / "score.json").read_text())["score"] == 100

    again = run("-m", "grader.classroom.batch", "--submissions", str(subs), "--out", str(out))
    assert "grading 0, 3 already graded" in again.stdout
    forced = run(
        "-m",
        "grader.classroom.batch",
        "--submissions",
        str(subs),
        "--out",
        str(out),
        "--force",
        "--jobs",
        "2",
    )
    assert "grading 3, 0 already graded" in forced.stdout


def test_handout_holds_no_solutions_or_hidden_checks(tmp_path):
    names = zipfile.ZipFile(handout(tmp_path / "h.zip")).namelist()
    assert not [n for n in names if "/solutions/" in n or "/tests/" in n]
    inside = [Path(n).relative_to("triton-kata") for n in names]
    assert not [n for n in inside if instructors_only(n)]
    assert not [n for n in inside if n.name == "hidden.py" or "gallery" in n.parts[2:]]
    assert not [n for n in inside if n.name == "boundary.py"]  # each kind's boundary classes
    for ex in catalogue.EXERCISE_LIST:
        assert f"triton-kata/exercises/{ex.filename}" in names
        assert f"triton-kata/grader/specs/{ex.stem}/public.py" in names
    for name in ("README.md", "kata/skeletons.json", "exercises/info.toml"):
        assert f"triton-kata/{name}" in names
    assert not [n for n in names if n.startswith("triton-kata/grader/classroom/")]
    assert "triton-kata/docs/instructors.md" not in names


def _mentioned(name: str, text: str) -> bool:
    """A case name in the text: as a whole token when it is distinctive (has a digit or a
    hyphen), else only quoted or in backticks (plain words like "strided" are prose too)."""
    if re.search(r"[\d-]", name) and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
        return True
    return any(f"{q}{name}{q}" in text for q in ('"', "'", "`"))


def test_no_hidden_case_reaches_the_handout(tmp_path):
    """The names of hidden cases appear nowhere in the handout's files (the ids of hidden
    checks may: students see them in their grades, with what they cover, never their inputs)."""
    from grader import specs

    bundle = zipfile.ZipFile(handout(tmp_path / "h.zip"))
    text = "\n".join(bundle.read(n).decode(errors="replace") for n in bundle.namelist())
    for ex in catalogue.ALL_EXERCISES:
        names = {c.name for c in specs.load(ex.stem, "hidden").cases.values() if c.hidden}
        assert names
        leaked = sorted(n for n in names if _mentioned(n, text))
        assert not leaked, f"{ex.stem}: hidden names in the handout: {leaked}"


@slow
@e2e
def test_handout_works_on_its_own(tmp_path):
    zipfile.ZipFile(handout(tmp_path / "h.zip")).extractall(tmp_path)
    top = tmp_path / "triton-kata"
    readme = (top / "README.md").read_text()
    assert "nox -s grade" in readme and "nox -s tests" not in readme
    env = {"PYTHONPATH": outside_path()}  # nothing from this checkout
    proc = run("-m", "grader", "--report", str(tmp_path / "score.json"), cwd=top, env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "score.json").read_text())
    assert (report["score"], report["checkset"]) == (0, "public")
    assert set(report["traps"]) == {
        "acc-not-rescaled",
        "causal-mask-missing",
        "top2-not-masked",
        "weights-not-renormalized",
    }
    assert "hidden ones" in proc.stdout
    # Every track's public checks load from the handout alone (08's once imported its boundary
    # module, which the handout leaves out: `nox -s grade -- 08` failed there).
    load = (
        "from grader import specs; from kata import catalogue\n"
        "for ex in catalogue.ALL_EXERCISES: specs.load(ex.stem, 'public')"
    )
    proc = run("-c", load, cwd=top, env=env)
    assert proc.returncode == 0, proc.stderr
    # reset works without solutions, from the frozen skeletons
    ex = catalogue.find("01")
    target = top / "exercises" / ex.filename
    target.write_text("# broken\n")
    assert run("-m", "kata.student.reset", "01", cwd=top, env=env).returncode == 0
    assert target.read_text() == skeletons.pristine(ex.stem).text


@slow
@e2e
def test_autograder_grades_a_submission(tmp_path):
    root = tmp_path / "autograder"
    bundle = zipfile.ZipFile(autograder(tmp_path / "a.zip"))
    bundle.extractall(
        root / "source"
    )  # (extractall drops modes; unzip, as Gradescope uses, keeps them)
    for script in ("run_autograder", "setup.sh"):
        assert bundle.getinfo(script).external_attr >> 16 & 0o111, f"{script} is not executable"
    assert (root / "source" / "setup.sh").exists()
    # Students often zip a folder, and a zip upload reaches the autograder as it came.
    nested = tmp_path / "my-upload"
    nested.mkdir(parents=True)
    for ex in catalogue.EXERCISE_LIST:
        if ex.number == "02":
            copy_skeleton(ex, nested)
        else:
            shutil.copy(catalogue.SOLUTIONS / ex.filename, nested)
    (root / "submission").mkdir(parents=True)
    with zipfile.ZipFile(root / "submission" / "upload.zip", "w") as zf:
        for path in sorted(nested.iterdir()):
            zf.write(path, f"my-upload/{path.name}")
    # run_autograder calls `python3`: let that be this interpreter, as setup.sh makes it there.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "PYTHONPATH": outside_path(), "PATH": path}
    proc = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 75, results["output"] + proc.stdout[-2000:]
    assert {t["name"].split(":")[0] for t in results["tests"]} == set(STEMS)
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert failed and all(t["name"].startswith("02_") for t in failed)
    assert all("causal-mask-missing" in t["output"] for t in failed)
    assert json.loads((root / "results" / "score.json").read_text())["checkset"] == "hidden"
    assert "unpacked from upload.zip" in proc.stderr


def _copy_of_the_tree(dest: Path) -> Path:
    """The folders an exercise lives in, copied: a scaffolding test never touches the checkout."""
    for folder in ("exercises", "solutions", "grader", "kata", "docs"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest)
    return dest


@slow
def test_a_new_exercise_is_consistent_at_once_and_its_placeholders_are_reported(tmp_path):
    """A scaffold agrees with itself (every static problem is a placeholder to replace), each
    placeholder is named by its file, and `new` lists only the files it changed."""
    tree = _copy_of_the_tree(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    new = [
        sys.executable,
        "-m",
        "kata.authoring.new",
        "11_paged_attention",
        "--interface",
        "attention",
        "--title",
        "paged attention",
    ]
    proc = subprocess.run(new, cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stem = "11_paged_attention"
    wrote = sorted(re.findall(r"^wrote (\S+)$", proc.stdout, re.M))
    assert f"exercises/{stem}.py" in wrote and "kata/skeletons.json" in wrote
    assert not [w for w in wrote if re.match(r"exercises/0\d_", w)], wrote  # unchanged ones
    for path in (
        f"solutions/{stem}.py",
        f"exercises/{stem}.py",
        f"grader/specs/{stem}/public.py",
        f"grader/specs/{stem}/hidden.py",
        f"docs/exercises/{stem}.md",
    ):
        assert (tree / path).is_file(), path
    assert f'stem = "{stem}"' in (tree / "exercises" / "info.toml").read_text()
    assert f"(exercises/{stem}.md)" in (tree / "docs" / "README.md").read_text()
    assert "| `running-max-grows` |" in (tree / "docs" / "exercises" / f"{stem}.md").read_text()
    static = [sys.executable, "-m", "grader.validate", "--static"]
    proc = subprocess.run(static, cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    problems = re.findall(r"^static: (.*(?:\n  .*)*)", proc.stdout, re.M)
    left = [" ".join(p.split()) for p in problems]
    placeholder = "still holds `nox -s new`'s placeholder text"
    assert "static checks: 3 problem(s)" in proc.stdout, proc.stdout + proc.stderr
    assert all(placeholder in p for p in left), left
    for where in (
        "exercises/info.toml (its hints)",
        f"solutions/{stem}.py",
        f"docs/exercises/{stem}.md",
    ):
        assert any(p.startswith(f"{stem}: {where} still holds") for p in left), (where, left)
    again = subprocess.run(new, cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "number 11 is taken" in again.stderr


def _nox_program() -> str | None:
    """The nox that runs these tests (the noxfile says how it was started), or the README's."""
    given = os.environ.get("KATA_NOX", "").strip()
    if given:
        path = Path(given) if Path(given).is_absolute() else ROOT / given
        if path.exists():
            return str(path)
        return shutil.which(given)
    local = ROOT / ".venv" / "bin" / "nox"
    return str(local) if local.exists() else shutil.which("nox")


@slow
@e2e
def test_the_instructor_guides_gradescope_recipe_works_as_typed(tmp_path):
    """docs/instructors.md's "try the bundle locally", line by line as printed (its /tmp/agr
    moved under tmp_path): a fresh virtual environment, setup.sh, run_autograder, a score of
    100 for the reference solutions. torch comes from pip's own configuration here
    (TORCH_INDEX_URL empty), so that a machine with a local mirror needs no network for it."""
    nox = _nox_program()
    if nox is None:
        pytest.skip("no nox to run `nox -s autograder` with")
    guide = (ROOT / "docs" / "instructors.md").read_text()
    block = guide.split("Try the bundle locally", 1)[1].split("```\n", 2)[1]
    assert block.startswith("nox -s autograder\n") and "run_autograder" in block
    script = block.replace("/tmp/agr", str(tmp_path / "agr"))
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "nox").symlink_to(nox)
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME", "KATA_NOX")
    }
    env.update(
        PATH=f"{shim}{os.pathsep}{env['PATH']}",
        PYTHONPATH=outside_path(),
        TORCH_INDEX_URL="",
    )
    proc = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert '"score": 100' in proc.stdout, proc.stdout[-3000:]
    results = json.loads((tmp_path / "agr" / "results" / "results.json").read_text())
    assert results["score"] == 100 and len(results["tests"]) > 10


def test_the_bundles_missing_package_message_says_to_run_its_setup(tmp_path):
    """The grader in the Gradescope bundle, run by a Python without torch: the message names
    the bundle's setup.sh, not a nox session the bundle does not have."""
    root = tmp_path / "agr"
    zipfile.ZipFile(autograder(tmp_path / "a.zip")).extractall(root / "source")
    (root / "submission").mkdir()
    copy_skeleton(catalogue.find("01"), root / "submission")
    env = {**os.environ, "PYTHONPATH": "", "PYTHONNOUSERSITE": "1"}
    # -S: no site packages at all, so torch is missing whatever this machine has installed.
    proc = subprocess.run(
        [sys.executable, "-S", "-m", "grader.autograder", "--root", str(root)],
        cwd=root / "source",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "missing Python packages: torch" in proc.stderr, proc.stderr
    assert f"bash {root / 'source' / 'setup.sh'}` installs them" in proc.stderr
    assert "nox" not in proc.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and "could not grade" in results["output"]


# ---- uploads: zips, empty uploads, a student's folder given as the class ---------------------


def _zip(path: Path, members: dict[str, bytes], link: str | None = None) -> Path:
    """A zip of ``members`` (name -> bytes), and a symbolic link named ``link`` if given."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.external_attr = (0o120777) << 16  # S_IFLNK
            zf.writestr(info, "/etc/passwd")
    return path


def test_a_zip_upload_is_unpacked_where_asked_and_graded_there(tmp_path):
    from grader.run import discover

    ex = catalogue.find("01")
    upload = tmp_path / "ada"
    upload.mkdir()
    _zip(upload / "my work.zip", {f"work/exercises/{ex.filename}": b"x = 1\n", "notes.txt": b""})
    found = discover.locate(upload, tmp_path / "scratch")
    assert found.folder == tmp_path / "scratch" / "my work" / "work" / "exercises"
    assert [z.name for z in found.unpacked] == ["my work.zip"] and not found.problems
    given = discover.locate(upload / "my work.zip", tmp_path / "again")  # the zip itself
    assert given.folder == tmp_path / "again" / "my work" / "work" / "exercises"
    nothing = discover.locate(tmp_path / "scratch" / "my work", tmp_path / "x")
    assert nothing.folder is not None  # the unpacked folder itself: found, nothing unpacked
    empty = tmp_path / "bob"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "report.pdf").write_bytes(b"%PDF")
    found = discover.locate(empty, tmp_path / "scratch-bob")
    assert found.folder is None
    assert (
        found.why_not(empty) == f"no exercise files in {empty}: it holds 1 file(s): sub/report.pdf"
    )


@pytest.mark.parametrize(
    ("members", "link", "limits", "said"),
    [
        ({"/etc/cron.d/x": b"x"}, None, {}, "has an absolute path"),
        ({"C:/x.py": b"x"}, None, {}, "has an absolute path"),
        ({"ok/../../x.py": b"x"}, None, {}, "climbs out of the folder"),
        ({"a\\..\\..\\x.py": b"x"}, None, {}, "climbs out of the folder"),
        ({"a.py": b"x"}, "evil", {}, "is a symbolic link"),
        ({f"f{i}.py": b"x" for i in range(4)}, None, {"MAX_MEMBERS": 3}, "4 members, more than 3"),
        ({"big.py": b"x" * 4096}, None, {"MAX_BYTES": 2048}, "unpacks to more than"),
    ],
    ids=["absolute", "drive", "dot-dot", "backslash-dot-dot", "symlink", "members", "size"],
)
def test_an_unsafe_zip_is_refused_with_its_reason(
    tmp_path, monkeypatch, members, link, limits, said
):
    from grader.run import discover

    for name, value in limits.items():
        monkeypatch.setattr(discover, name, value)
    archive = _zip(tmp_path / "up.zip", members, link)
    with pytest.raises(discover.UploadError, match=said) as refused:
        discover.unpack(archive, tmp_path / "dest")
    assert str(refused.value).startswith("up.zip: ")
    assert not (tmp_path / "dest").exists()  # refused before anything was written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["up.zip"]


def test_a_damaged_or_fake_zip_is_refused_with_its_reason(tmp_path):
    from grader.run import discover

    fake = tmp_path / "fake.zip"
    fake.write_bytes(b"not a zip at all")
    with pytest.raises(discover.UploadError, match="fake.zip: not a readable zip"):
        discover.unpack(fake, tmp_path / "a")
    data = bytearray(_zip(tmp_path / "bad.zip", {"a.py": b"x" * 1000}).read_bytes())
    data[data.find(b"x" * 100)] = ord("y")  # stored, not compressed: the CRC no longer holds
    (tmp_path / "bad.zip").write_bytes(bytes(data))
    with pytest.raises(discover.UploadError, match="bad.zip: damaged"):
        discover.unpack(tmp_path / "bad.zip", tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_batch_says_what_an_upload_without_exercise_files_holds_and_never_scores_it(tmp_path):
    """eve uploaded notes, fay a zip that climbs out of its folder: neither is graded (no score,
    never a 0), the gradebook and the class page say what each upload holds."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "eve").mkdir(parents=True)
    (subs / "eve" / "notes.txt").write_text("I did it on paper\n")
    _zip(subs / "fay.zip", {"../../01_flash_attention_stolen.py": b"x"})
    proc = run("-m", "grader.classroom.batch", "--submissions", str(subs), "--out", str(out))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "grading 0, 0 already graded, 2 without exercise files" in proc.stdout
    rows = {r["student"]: r for r in csv.DictReader(open(out / "gradebook.csv"))}
    assert {s: (r["status"], r["score"], r["max_score"]) for s, r in rows.items()} == {
        "eve": ("no_files", "", ""),
        "fay": ("no_files", "", ""),
    }
    assert "it holds 1 file(s): notes.txt" in rows["eve"]["note"]
    assert "fay.zip: member '../../" in rows["fay"]["note"] and "climbs out" in rows["fay"]["note"]
    assert not (out / "fay" / "upload").exists()
    assert "eve: no_files: no exercise files in" in proc.stdout
    page = (out / "class.html").read_text()
    assert 'id="no-files"' in page and "notes.txt" in page and "0 graded" in page


def test_batch_refuses_one_students_folder_and_an_empty_class(tmp_path):
    one = tmp_path / "ada"
    one.mkdir()
    copy_skeleton(catalogue.find("01"), one)
    proc = run(
        "-m", "grader.classroom.batch", "--submissions", str(one), "--out", str(tmp_path / "o")
    )
    assert proc.returncode == 2
    assert "looks like one student's folder" in proc.stderr
    assert f"--target {one}" in proc.stderr
    assert not (tmp_path / "o").exists()
    empty = tmp_path / "class"
    empty.mkdir()
    proc = run(
        "-m", "grader.classroom.batch", "--submissions", str(empty), "--out", str(tmp_path / "o")
    )
    assert proc.returncode == 2 and "holds no student folder or zip (nothing)" in proc.stderr


def test_the_autograder_tells_a_student_whose_upload_holds_no_exercise_file_what_it_holds(tmp_path):
    root = tmp_path / "agr"
    (root / "submission").mkdir(parents=True)
    (root / "submission" / "homework.pdf").write_bytes(b"%PDF")
    ex = catalogue.find("03")
    (root / "submission" / f"{ex.stem} (1).py").write_text("x = 1\n")
    proc = run("-m", "grader.autograder", "--root", str(root))
    assert proc.returncode == 0, proc.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and results["tests"] == []
    said = results["output"]
    assert said.startswith("No exercise file was found in your upload, which holds 2 file(s): ")
    assert f"'{ex.stem} (1).py' looks like it: rename it to {ex.filename}" in said
    assert "tell your instructor" not in said  # the student's to fix, not the grader's failure


def test_help_shows_the_command_as_the_student_typed_it():
    env = {"KATA_SESSION": "grade", "KATA_NOX": ".venv/bin/nox"}
    assert run("-m", "grader", "--help", env=env).stdout.startswith(
        "usage: .venv/bin/nox -s grade -- "
    )
    assert run("-m", "grader", "--help").stdout.startswith("usage: python -m grader ")
    helped = run("-m", "grader", "--help").stdout
    assert "0: no limit" in " ".join(helped.split())
    refused = run("-m", "grader", "--timeout", "-5")
    assert refused.returncode == 2 and "--timeout -5: give seconds" in refused.stderr


@e2e
def test_a_students_sessions_print_no_nox_lines(tmp_path):
    """`nox -s hint -- 01` prints the hint, not nox's session, probe and command lines."""
    nox = _nox_program()
    if nox is None or not (ROOT / ".nox" / "kata").exists():
        pytest.skip("no nox, or no .nox/kata yet (its first run prints what it installs)")
    state = hints.STATE
    saved = state.read_bytes() if state.exists() else None
    try:
        proc = subprocess.run(
            [nox, "-s", "hint", "--", "01"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:  # the student's hint level, as it was
        if saved is None:
            state.unlink(missing_ok=True)
        else:
            state.write_bytes(saved)
    assert proc.returncode == 0, proc.stderr
    noise = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("nox >")]
    assert noise == [] and "Hints for" in proc.stdout


@pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="needs a machine without a CUDA GPU"
)
def test_asking_for_cuda_without_a_gpu_names_what_asked_for_it():
    flag = run("-m", "grader", "--device", "cuda")
    assert flag.returncode == 2
    assert "--device cuda was requested but torch sees no CUDA GPU (" in flag.stderr
    assert "KATA_DEVICE" not in flag.stderr and "--device interpreter or auto" in flag.stderr
    env = run("-m", "grader", env={"KATA_DEVICE": "cuda"})
    assert env.returncode == 2
    assert "KATA_DEVICE=cuda (set in the environment) was requested" in env.stderr


def test_the_ncu_summary_keeps_each_kernels_figures():
    """scripts/attention_ncu.py reads ncu's CSV details page, after ncu's own log lines, into
    one entry per kernel launch with the kept metrics and their units (the stall reasons asked
    for with --metrics among them), and drops the others."""
    module = catalogue.load_file(catalogue.ROOT / "scripts" / "attention_ncu.py")
    head = '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"'
    rows = [
        '"0","attention_fwd_kernel","GPU Speed Of Light Throughput","Duration","us","812.3"',
        '"0","attention_fwd_kernel","Occupancy","Achieved Occupancy","%","11.9"',
        '"0","attention_fwd_kernel","Launch Statistics","Grid Size","","1024"',
        '"0","attention_fwd_kernel","Command line profiler metrics",'
        '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","inst","1.55"',
        '"1","cudnn_sdpa_fprop","Launch Statistics","Registers Per Thread","register/thread","168"',
    ]
    text = "==PROF== Connected to process 1\n" + "\n".join([head, *rows]) + "\n"
    assert module.summary(text) == [
        {
            "kernel": "attention_fwd_kernel",
            "metrics": {
                "Duration (us)": "812.3",
                "Achieved Occupancy (%)": "11.9",
                "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio (inst)": "1.55",
            },
        },
        {
            "kernel": "cudnn_sdpa_fprop",
            "metrics": {"Registers Per Thread (register/thread)": "168"},
        },
    ]
    assert module.summary("==ERROR== no kernels were profiled\n") == []


def _attention_sass():
    return catalogue.load_file(catalogue.ROOT / "scripts" / "attention_sass.py")


def test_the_sass_reading_finds_the_key_loop_and_what_each_wgmma_overlaps():
    """scripts/attention_sass.py finds the loop with a wgmma in SASS and counts, for each wgmma
    group, the instructions issued before a WARPGROUP.DEPBAR retires it, around the back edge
    and with waits that leave groups pending; and how many programs fit on an SM."""
    sass = _attention_sass()

    def code(first_wait: str):
        return list(
            enumerate(
                [
                    "MOV R1, c[0x0][0x28]",
                    "WARPGROUP.ARRIVE",
                    "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT",
                    "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], R24, gsb0",
                    f"WARPGROUP.DEPBAR.LE gsb0, {first_wait}",
                    "MUFU.EX2 R0, R1",
                    "FFMA R2, R3, R4, R5",
                    "WARPGROUP.ARRIVE",
                    "HGMMA.64x128x16.F32.BF16 R88, R244, gdesc[UR12].tnspB, R88, gsb0",
                    "LDGSTS.E.BYPASS.128 [R5], desc[UR6][R6.64]",
                    "@!P0 BRA 0x10",
                    "WARPGROUP.DEPBAR.LE gsb0, 0x0",
                    "EXIT",
                ]
            )
        )

    found = [(16 * i, ins) for i, ins in code("0x0")]
    assert sass.loops(found) == [(1, 10)] and sass.main_loop(found) == (1, 10)
    body = [ins for _, ins in found[1:11]]
    # The scores are waited for at once; P @ V overlaps the load and the branch.
    assert sass.in_flight(body) == [0, 2]
    # Waiting for all but one group lets the scores overlap the rest of the trip.
    waits_one = [ins for _, ins in [(16 * i, ins) for i, ins in code("0x1")][1:11]]
    assert sass.in_flight(waits_one) == [4, 2]
    assert sass.hgmma_macs(body[7]) == 64 * 128 * 16
    assert sass.occupancy(255, 96 * 1024, 4) == 2  # registers and shared memory: 2
    assert sass.occupancy(116, 64 * 1024, 8) == 2  # registers: 2, shared memory: 3
    assert sass.occupancy(128, 48 * 1024, 4) == 4  # registers: 4, shared memory: 4


def test_the_attention_variants_apply_to_04_and_the_fma_exp2_stays_within_tolerance():
    """Every variant's edits find their text in solutions/04 once and give valid Python; the
    exp2 that runs half the tile on the FMA pipe is within 2e-4 of exp2 and, in the
    interpreter, within 04's grader tolerance, while changing 04's output (the polynomial
    runs)."""
    import numpy as np
    import torch

    sass = _attention_sass()
    for name in sass.VARIANTS:
        compile(sass.variant_source(name), name, "exec")
    c1, c2, c3 = sass._exp2_coefficients()
    f = np.linspace(-0.5, 0.5, 1001)
    assert np.abs((1 + c1 * f + c2 * f**2 + c3 * f**3) / np.exp2(f) - 1).max() < 2e-4

    from kata.kinds.bhsd_attention import INTERFACE, launch_fast_attention

    tol = INTERFACE.tolerance("out", "bfloat16")
    fma, own = sass.load_variant("exp2_fma"), sass.load_variant("04")
    torch.manual_seed(0)
    q, k, v = (3 * torch.randn(1, 2, 130, 64).to(torch.bfloat16) for _ in "qkv")
    for causal in (False, True):
        want = torch.nn.functional.scaled_dot_product_attention(
            q.double(), k.double(), v.double(), is_causal=causal
        )
        assert sass.wrong_configs(fma, q, k, v, causal, want, tol) == {}
    ours = launch_fast_attention(fma.attention_fwd_kernel, q, k, v)
    assert (ours != launch_fast_attention(own.attention_fwd_kernel, q, k, v)).any()


def test_fa3_knobs_compiles_its_copy_of_07_apart():
    """scripts/fa3_knobs.py sets constants on a second copy of 07. Triton must hash a
    constexpr global's value into the kernel's cache key, or the copy would reuse 07's binary
    from the cache and time 07 against itself; the same value gives the same key. A constant
    07 does not have is refused by name."""
    knobs = catalogue.load_file(catalogue.ROOT / "scripts" / "fa3_knobs.py")
    fa3 = knobs.FA3.attention_fwd_kernel.fn
    same = knobs.variant({"STAGES": int(knobs.FA3.STAGES)}).attention_fwd_kernel.fn
    changed = knobs.variant({"STAGES": 3})
    assert int(changed.STAGES) == 3 and int(knobs.FA3.STAGES) == 2
    assert changed.attention_fwd_kernel.fn.cache_key != fa3.cache_key
    assert same.cache_key == fa3.cache_key
    with pytest.raises(SystemExit, match="07 has no constexpr constant NOPE"):
        knobs.variant({"NOPE": 1})


def test_gating_sweeps_variants_apply_to_05_and_route_right(monkeypatch):
    """scripts/gating_sweep.py --sweep rewrites anchors in 05's solution (a fixed chunk width, the
    stride rounded to a multiple): every variant it plans must find its anchors, or the sweep
    silently times nothing but the shipped file. Two of them, run in the interpreter, route a
    ragged batch with ties and extreme logits exactly."""
    sweep = catalogue.load_file(catalogue.ROOT / "scripts" / "gating_sweep.py")
    monkeypatch.setattr(sweep, "DRY", True)
    base = (catalogue.SOLUTIONS / f"{catalogue.find('05').stem}.py").read_text()
    for E in sweep.EXPERTS:
        for dtype in sweep.DTYPES:
            plans = sweep.variants_for(E, dtype, base)
            assert len(plans) >= 2, (E, dtype)
            for label, w, h in plans:
                assert sweep.variant_text(base, w, h) is not None, (E, dtype, label)
    for E, dtype, w, h in ((160, "bfloat16", 128, None), (60, "float32", 32, 4)):
        text = sweep.variant_text(base, w, h)
        assert f"CHUNK: tl.constexpr = min(BLOCK_E, {w} * 8 // BITS)" in text
        kernel = sweep.load_variant(text, f"test_{E}").moe_top2_gating_fast_kernel
        x = sweep.special_logits(37, E, dtype, seed=E)
        outs = sweep.pinned_call(sweep.inner_of(kernel), x, sweep.outputs(37), 16, 4)()
        assert sweep.check(outs, sweep.exact_top2(x))["ok"], (E, dtype)
