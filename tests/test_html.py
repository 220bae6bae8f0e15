"""The HTML pages: a student's report (reports/score.html) and the class dashboard (class.html).

The pages are rendered by a real browser, headless Chromium (Debian's ``chromium`` package;
.ci/run installs it), and the tests assert on what it shows: the score, each check's row, the
figures drawn (inline SVG, and the PNG heatmaps decoded), no request made, no script run but
the test's own probe. Skipped only where Chromium is not installed, and never when
``KATA_REQUIRE_CHROMIUM=1`` (CI sets it).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import endless_01

from grader.report import html
from grader.report.records import CheckResult, ExerciseResult, Report
from kata import catalogue, skeletons

ROOT = catalogue.ROOT
slow = pytest.mark.slow
EVIL = '<script>document.title="pwned"</script><img src="https://example.org/x.png">'

# Appended to a copy of a page: waits for every embedded PNG to decode, then writes what the
# browser shows into <pre id="kata-probe"> for --dump-dom to carry out.
PROBE = """<script>
(async function () {
  const shown = (el) => { const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none"; };
  const pngs = [...document.querySelectorAll("svg image")].map((i) => i.getAttribute("href"));
  const decoded = await Promise.all(pngs.map(async (src) => {
    const img = new Image(); img.src = src;
    try { await img.decode(); return img.naturalWidth; } catch (e) { return 0; } }));
  const out = {
    title: document.title,
    score: (document.getElementById("score") || {}).innerText || null,
    students: (document.getElementById("students") || {}).innerText || null,
    text: document.body.innerText,
    checks: [...document.querySelectorAll("tr.check")].filter(shown).map((e) => e.dataset.check),
    trapRows: [...document.querySelectorAll("tr.trap")].filter(shown).map((e) => e.dataset.trap),
    figures: [...document.querySelectorAll("svg.figure")].map((s) => ({
      shown: shown(s), width: s.getBoundingClientRect().width, parts: s.childElementCount })),
    pngs: decoded,
    outputs: [...document.querySelectorAll("pre.output")].map((e) => e.textContent),
    scripts: document.scripts.length,
    images: document.images.length,
    requests: performance.getEntriesByType("resource").map((e) => e.name),
  };
  const pre = document.createElement("pre");
  pre.id = "kata-probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("KATA_REQUIRE_CHROMIUM") == "1":
        pytest.fail("KATA_REQUIRE_CHROMIUM=1 but no chromium on PATH (apt-get install chromium)")
    pytest.skip("chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")


def browse(page: Path, tmp_path: Path) -> dict:
    """What headless Chromium shows of ``page``: the probe's findings."""
    browser = chromium()
    text = page.read_text()
    # The page forbids every script; the copy lets the probe (and only inline code) run.
    copy = tmp_path / f"browsed-{page.name}"
    copy.write_text(
        text.replace(
            "default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';"
        ).replace("</body>", PROBE + "</body>")
    )
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=15000",
            "--window-size=1200,900",
            "--dump-dom",
            copy.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    found = re.search(r'<pre id="kata-probe">(.*?)</pre>', done.stdout, flags=re.S)
    assert found, f"chromium showed no probe (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(
        found.group(1)
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", '"')
        .replace("&amp;", "&")
    )


def static_requests(text: str) -> list[str]:
    """What the page itself would fetch: any src, stylesheet link, CSS url() or import."""
    found = re.findall(r'\bsrc="([^"]*)"', text) + re.findall(r"url\(([^)]*)\)", text)
    found += re.findall(r"<link[^>]*>", text) + re.findall(r"@import[^;]*", text)
    return [f for f in found if not f.startswith("data:")]


def _grade(target: Path, report: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KATA_DEVICE": os.environ.get("KATA_DEVICE", "auto")}
    return subprocess.run(
        [sys.executable, "-m", "grader", "--target", str(target), "--report", str(report), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


# ---- without a browser: what the page says and escapes ----------------------------------------


def _report(**overrides) -> Report:
    check = CheckResult(
        id="running-max-grows",
        todo="rescale-acc",
        status="failed",
        points=0,
        max_points=10,
        trap="acc-not-rescaled",
        message=f"it broke {EVIL}",
        details={"max_error": 1.2, "tolerance": [1e-4, 1e-4]},
    )
    first = catalogue.find("01")
    ex = ExerciseResult(
        id=first.stem,
        file=f"/nowhere/{first.filename}",
        track="core",
        score=0,
        max_score=25,
        checks=[check],
        output=f"printed {EVIL}",
        warnings=[f"warned {EVIL}"],
        **overrides,
    )
    return Report(
        target=EVIL,
        device="interpreter: cpu",
        versions={"torch": EVIL},
        exercises=[ex],
        duration_s=1.0,
    )


def test_page_escapes_everything_a_submission_can_write():
    page = html.render(_report())
    assert "<script>" not in page and 'src="https://' not in page
    assert page.count("&lt;script&gt;") >= 5  # message, output, warning, target, version
    assert static_requests(page) == []
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_card_names_the_trap_invariant_todo_and_hint():
    page = html.render(_report())
    assert "acc-not-rescaled" in page and "invariant that broke" in page
    assert "acc and l_i are always weighted against the same running maximum" in page
    assert "TODO(rescale-acc)" in page and "-s hint -- 01" in page


def test_failure_figures_hold_shapes_and_outputs_never_inputs():
    """A hidden check's figures: where the output is wrong, on the output's shape; no input
    value, and small."""
    from grader import specs
    from grader.judge import details, judges

    spec = specs.load(catalogue.find("03").stem, "hidden")
    case = spec.cases["random-64x8"]
    got = dict(spec.interface.expected(case))
    got["idx1"] = got["idx0"].copy()  # the skeleton's trap: the top-1 twice
    found = details.failure(judges.make("top2", spec.interface), case, got)
    assert set(found) == {
        "kind",
        "case",
        "hidden",
        "shape",
        "bad_tokens",
        "tokens",
        "chosen",
        "expected",
        "weight_sum",
        "expected_sum",
    }
    assert found["hidden"] and found["bad_tokens"] == 64 and len(found["tokens"]) == 32
    assert all(a == b for a, b in found["chosen"]) and len(json.dumps(found)) < 4000


def test_a_dispatch_failure_has_its_own_figure_and_picture():
    """09's outputs (counts, offsets, slot, token_of_slot) get the dispatch figure: before it,
    they fell into the attention figure, which reads "out"."""
    from grader import specs
    from grader.judge import details, judges
    from grader.kinds.base import MAX_BINS

    spec = specs.load(catalogue.find("09").stem, "hidden")
    case = spec.cases[next(iter(spec.cases))]
    got = dict(spec.interface.expected(case))
    got["offsets"] = got["offsets"] * 0  # 09-offset-missing: every block at row 0
    got["slot"] = got["slot"] - spec.interface.expected(case)["offsets"][case.inputs["idx"]]
    found = details.failure(judges.make("dispatch-slots", spec.interface), case, got)
    assert found["kind"] == "dispatch" and found["bad_pairs"] > 0
    E = case.params["E"]
    assert found["offsets"]["got"] == [0] * min(E, MAX_BINS)
    assert found["bad_experts"] == sum(1 for o in found["offsets"]["expected"] if o)
    assert found["pairs"] and all(g != w for g, w in found["slots"])
    check = CheckResult(
        id="slots-e8",
        todo="dest-slot",
        status="failed",
        points=0,
        max_points=5,
        trap=None,
        message="wrong",
        details=found,
    )
    ((caption, picture),) = html.pictures(check, "moe-dispatch")
    assert "slots-e8" in caption and "<svg" in picture and "expected" in picture


def test_a_compile_error_of_the_whole_exercise_is_titled_as_the_students():
    said = (
        "every case failed the same way: your kernel does not compile, line 91 (in "
        "TODO(rescale-acc)): Triton's compiler says: ..."
    )
    assert "<strong>Your code does not compile:</strong>" in html.render(_report(error=said))
    assert "<strong>Nothing could be judged:</strong>" in html.render(_report(error="gone"))


def test_a_figure_that_fails_to_draw_is_recorded():
    """A figure is an illustration: its failure changes no verdict, but it is recorded in the
    check's details and said on the card, not swallowed."""
    from grader.judge import checking

    class Submission:
        details = {}

    def broken():
        raise KeyError("out")

    checking._figures(Submission, type("C", (), {"id": "x"}), broken)
    assert Submission.details == {"x": {"figure_error": "KeyError: 'out'"}}
    report = _report()
    report.exercises[0].checks[0].details = Submission.details["x"]
    assert 'data-unpictured="running-max-grows"' in html.render(report)


@slow
def test_a_wrong_09_kernel_gets_its_figure(tmp_path):
    """A gallery kernel of 09 graded end to end: every failing check carries the dispatch
    figure (it used to carry none: the figure raised KeyError('out') and was dropped)."""
    from grader import specs
    from grader.run import runner
    from grader.validate import gallery

    ex = catalogue.find("09")
    spec = specs.load(ex.stem, "hidden")
    variant = next(v for v in spec.gallery if v.name == "09-offset-missing")
    (tmp_path / ex.filename).write_text(gallery.source(variant, spec))
    result = runner.grade_exercise(ex, tmp_path, "interpreter", timed=False)
    failing = [c for c in result.checks if c.status in ("failed", "blocked")]
    assert failing
    for check in failing:
        assert (check.details or {}).get("kind") == "dispatch", (check.id, check.details)
        assert "figure_error" not in check.details
    assert "counts, offsets and slots against the expected layout" in html.render(
        Report(target="t", device="d", versions={}, exercises=[result], duration_s=0.0)
    )


# ---- in the browser ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One grading of a mixed folder: 01 untouched (a trap), 02 solved, 03 untouched and
    printing HTML at import (to be shown as text). Graded --free-form: only then does a file's
    module-level code run at all, so only then can it print."""
    tmp = tmp_path_factory.mktemp("graded")
    target = tmp / "mine"
    target.mkdir()
    for ex in catalogue.EXERCISE_LIST:
        text = skeletons.pristine(ex.stem).text
        if ex.number == "02":
            text = (catalogue.SOLUTIONS / ex.filename).read_text()
        if ex.number == "03":
            text += f"\nprint({EVIL!r})\n"
        (target / ex.filename).write_text(text)
    done = _grade(target, tmp / "out" / "score.json", "--free-form")
    assert done.returncode == 0, done.stderr
    return tmp / "out", json.loads((tmp / "out" / "score.json").read_text())


@slow
def test_score_page_in_chromium(graded, tmp_path):
    out, report = graded
    page = out / "score.html"
    shown = browse(page, tmp_path)
    assert shown["score"] == f"{report['score']}/{report['max_score']}" == "25/100"
    ids = [c["id"] for ex in report["exercises"] for c in ex["checks"]]
    assert sorted(shown["checks"]) == sorted(ids)  # every check has a visible row
    for ex in report["exercises"]:
        assert f"{ex['id']} {ex['score']}/{ex['max_score']}" in " ".join(shown["text"].split())
    for trap in ("acc-not-rescaled", "top2-not-masked", "weights-not-renormalized"):
        assert f"Trap {trap}" in shown["text"]
    # the pictures: the attention probe (a PNG), row profiles, the gating grid, all drawn
    visible = [f for f in shown["figures"] if f["shown"]]
    assert len(visible) >= 3 and all(f["width"] > 100 and f["parts"] > 10 for f in visible)
    assert shown["pngs"] and all(w == 48 for w in shown["pngs"])
    # nothing fetched, nothing the submission printed run as code: only the probe script
    assert shown["requests"] == [] and static_requests(page.read_text()) == []
    assert shown["scripts"] == 1 and shown["images"] == 0 and shown["title"] != "pwned"
    assert any('<script>document.title="pwned"</script>' in o for o in shown["outputs"])


@slow
@pytest.mark.e2e
def test_class_of_four_in_chromium(tmp_path):
    """ada solved everything, bob nothing, cy all but 02 (cy's files in a folder below theirs),
    dee uploaded a zip (dee.zip, as an LMS export holds it, with upload/exercises/ inside) with
    01 untouched: cy and dee are graded, not silent 0s."""
    import zipfile

    subs, out = tmp_path / "subs", tmp_path / "out"
    solved = {"ada": "010203", "bob": "", "cy": "0103", "dee": "0203"}
    for student, numbers in solved.items():
        folder = subs / student / ("upload/exercises" if student in ("cy", "dee") else "")
        folder.mkdir(parents=True)
        for ex in catalogue.EXERCISE_LIST:
            source = (catalogue.SOLUTIONS / ex.filename).read_text()
            text = source if ex.number in numbers else skeletons.pristine(ex.stem).text
            (folder / ex.filename).write_text(text)
    with zipfile.ZipFile(subs / "dee.zip", "w") as zf:
        for path in sorted((subs / "dee").rglob("*.py")):
            zf.write(path, path.relative_to(subs / "dee").as_posix())
    shutil.rmtree(subs / "dee")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader.classroom.batch",
            "--submissions",
            str(subs),
            "--out",
            str(out),
            "--jobs",
            "2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    import csv

    rows = {r["student"]: r for r in csv.DictReader(open(out / "gradebook.csv"))}
    assert {s: rows[s]["score"] for s in solved} == {
        "ada": "100",
        "bob": "0",
        "cy": "75",
        "dee": "75",
    }
    assert rows["cy"]["note"] == "files found in cy/upload/exercises"
    assert rows["dee"]["note"] == "unpacked from dee.zip"
    assert (
        rows["dee"]["trap:acc-not-rescaled"] == "1" and rows["ada"]["trap:acc-not-rescaled"] == ""
    )
    assert rows["bob"]["trap:causal-mask-missing"] == rows["cy"]["trap:causal-mask-missing"] == "1"

    shown = browse(out / "class.html", tmp_path)
    assert shown["students"] == "4 students"
    assert shown["trapRows"][:2] == ["acc-not-rescaled", "causal-mask-missing"]  # 2 students each
    text = " ".join(shown["text"].split())
    assert "acc-not-rescaled 2/4" in text and "bob, dee" in text
    assert "causal-square" in text and "2/4" in text  # a check's pass rate
    assert "files found in cy/upload/exercises" in text and "unpacked from dee.zip" in text
    assert [f for f in shown["figures"] if f["shown"]]  # the score distribution
    assert shown["requests"] == [] and shown["scripts"] == 1
    assert (out / "dee" / "score.html").exists()


@slow
@pytest.mark.e2e
def test_class_page_says_why_each_zero_in_chromium(tmp_path):
    """Review persona M2: eve uploaded 03 as ``NN_name (1).py`` (and a 02 that does not
    parse), fay's 01 loops forever. Both score 0, and the gradebook and the class page say why
    for every exercise below full marks. Nothing here runs a kernel to its end: the class is
    quick, and the short time limit stops only fay's loop."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "eve").mkdir(parents=True)
    (subs / "fay").mkdir()
    gating = catalogue.find("03")
    shutil.copy(catalogue.SOLUTIONS / gating.filename, subs / "eve" / f"{gating.stem} (1).py")
    (subs / "eve" / catalogue.find("02").filename).write_text("def flash_attn_causal_kernel(:\n")
    first = catalogue.find("01")
    (subs / "fay" / first.filename).write_text(endless_01())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader.classroom.batch",
            "--submissions",
            str(subs),
            "--out",
            str(out),
            "--jobs",
            "2",
            "--device",
            "interpreter",
            "--timeout",
            "10",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    import csv

    rows = {r["student"]: r for r in csv.DictReader(open(out / "gradebook.csv"))}
    renamed = f"03: {gating.filename} not found ('{gating.stem} (1).py' looks like it)"
    assert rows["eve"]["score"] == rows["fay"]["score"] == "0"
    assert rows["eve"]["reasons"].split("; ") == [
        f"01: {first.filename} not found",
        "02: not valid Python, line 1",
        renamed,
    ]
    assert rows["fay"]["reasons"].startswith("01: stopped after 10 s, the time limit")
    assert f"03: {gating.filename} not found" in rows["fay"]["reasons"]

    shown = browse(out / "class.html", tmp_path)
    text = " ".join(shown["text"].split())
    assert shown["students"] == "2 students" and "below full marks: why" in text.lower()
    assert renamed.replace(":", "", 1) in text and "02 not valid Python, line 1" in text
    assert "01 stopped after 10 s, the time limit" in text
    assert shown["requests"] == [] and shown["scripts"] == 1


def test_every_trap_states_the_invariant_it_breaks():
    """A trap card leads with the invariant that broke: every trap needs one."""
    from grader.kinds import TRAPS

    assert [t.id for t in TRAPS.values() if not t.invariant] == []


def test_page_shows_timed_and_skipped_performance():
    """A timed performance entry carries no reason; a skipped one does (seen on an H200)."""
    from grader.run import timing

    shape = {
        "shape": "M=1M E=128 float32",
        "baseline": "torch",
        "kernel_ms": 0.14,
        "torch_ms": 6.1,
        "speedup": 43.4,
    }
    timed = timing.score({"timed": True, "device": "GPU", "shapes": [shape]}, correct=True)
    page = html.render(_report(performance=timed))
    assert "M=1M E=128 float32" in page and "x43.40 vs torch" in page
    skipped = html.render(_report(performance=timing.score(None, correct=True)))
    assert "timing skipped: timing needs a CUDA GPU" in skipped


def test_a_page_graded_by_one_check_set_badges_no_check_hidden():
    """In a full checkout every check is hidden: a badge on each row says nothing. One line
    says which checks graded; a badge marks hidden checks only beside public ones."""
    report = _report()
    page = html.render(report)
    assert 'class="tag hidden"' not in page and 'id="checkset"' in page
    ex = report.exercises[0]
    public = CheckResult(
        id="public-online-softmax",
        todo="rescale-acc",
        status="passed",
        points=25,
        max_points=25,
        trap=None,
        message="",
        hidden=False,
    )
    ex.checks.append(public)
    assert html.render(report).count('class="tag hidden"') == 1  # the hidden one, beside it


def test_a_hidden_checks_card_says_its_values_are_hidden_not_what_it_shows():
    """A hidden check's message gives the inputs' shapes ("M=20, N=48, D=16"): the card says the
    values are never shown, and never that the inputs are (which the shapes beside it contradict)."""
    report = _report()
    report.exercises[0].checks[0].message = "M=20, N=48, D=16, BLOCK_M=16: acc was not rescaled"
    page = html.render(report)
    card = page[page.index('<article class="card') : page.index("</article>")]
    assert "M=20, N=48, D=16" in card
    assert "(the instructor's check: its input values are never shown)" in card
    assert "inputs are not shown" not in page and "never its inputs" not in page
