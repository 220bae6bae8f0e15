"""The docs against the code: generated sections up to date, links that resolve (in the
repository and in the student handout), no hidden case in the handout, and every number the
docs quote from a worked example equal to what the example prints."""

import json
import math
import re
import tempfile
import zipfile
from functools import cache
from pathlib import Path

import pytest
from conftest import run_examples

from grader import specs
from kata import catalogue, runtime, skeletons
from kata.authoring import docs
from kata.authoring.bundles import handout

ROOT = catalogue.ROOT
slow = pytest.mark.slow


# ---- generated sections ---------------------------------------------------------------------


def test_generated_docs_are_up_to_date():
    assert docs.problems() == [], "run `nox -s generate` (python -m kata.authoring.docs)"


def _copy_pages(tmp_path, monkeypatch) -> Path:
    """The generated pages copied to ``tmp_path``, and the generator pointed at the copies."""
    pages = tmp_path / "exercises"
    pages.mkdir()
    for page in docs.PAGES.glob("*.md"):
        (pages / page.name).write_text(page.read_text())
    traps = tmp_path / "traps.md"
    traps.write_text(docs.TRAPS_PAGE.read_text())
    index = tmp_path / "README.md"
    index.write_text(docs.INDEX.read_text())
    monkeypatch.setattr(docs, "PAGES", pages)
    monkeypatch.setattr(docs, "TRAPS_PAGE", traps)
    monkeypatch.setattr(docs, "INDEX", index)
    monkeypatch.setattr(docs, "ROOT", tmp_path)
    return tmp_path


def test_a_drifted_section_is_reported_and_rewritten(tmp_path, monkeypatch):
    root = _copy_pages(tmp_path, monkeypatch)
    stem = catalogue.find("01").stem
    page = root / "exercises" / f"{stem}.md"
    page.write_text(page.read_text().replace("| `running-max-grows` |", "| `running-max-grew` |"))
    traps = root / "traps.md"
    traps.write_text(traps.read_text().replace("## acc-not-rescaled\n", "## acc-unscaled\n"))
    index = root / "README.md"
    index.write_text(index.read_text().replace("| the chapter | rescale acc |", "| core | |"))
    found = docs.problems()
    assert any(f"{stem}.md differs" in p for p in found), found
    assert any("traps.md differs" in p for p in found), found
    assert any("README.md differs" in p for p in found), found
    assert docs.main([]) == 0 and docs.problems() == []


def test_a_page_without_markers_is_reported(tmp_path, monkeypatch):
    root = _copy_pages(tmp_path, monkeypatch)
    stem = catalogue.find("02").stem
    page = root / "exercises" / f"{stem}.md"
    page.write_text(re.sub(r"<!-- (BEGIN|END) GENERATED: checks[^>]*-->\n?", "", page.read_text()))
    assert any(f"{stem}.md has no generated 'checks'" in p for p in docs.problems())


def test_splice_replaces_only_its_section():
    text = f"intro\n{docs.begin('x', 'here')}\nold\n{docs.end('x')}\noutro\n"
    assert docs.splice(text, "x", "new\n") == text.replace("old\n", "new\n")
    with pytest.raises(docs.MarkerError):
        docs.splice("no markers\n", "x", "new\n")


def test_every_trap_is_explained_and_every_check_listed():
    page = docs.TRAPS_PAGE.read_text()
    for trap in docs.TRAPS.values():
        assert trap.why.strip(), trap.id
        assert f"\n## {trap.id}\n" in page
    for ex in catalogue.ALL_EXERCISES:
        path = docs.PAGES / f"{ex.stem}.md"
        if ex.stem in docs.PENDING_PAGES and "BEGIN GENERATED: checks" not in path.read_text():
            continue
        for checks in docs.checksets(ex).values():
            for check in checks:
                assert f"| `{check.id}` |" in path.read_text(), (ex.stem, check.id)


# ---- links ----------------------------------------------------------------------------------

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading.replace("`", "")).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        n = found.get(base, 0)
        found[base] = n + 1
        found[base if n == 0 else f"{base}-{n}"] = 1
    return set(found)


def links(text: str) -> list[str]:
    prose = CODE_SPAN.sub("", FENCE.sub("", text))
    return [t for t in LINK.findall(prose) if not re.match(r"[a-z][\w+.-]*:", t)]


def broken_links(root: Path, files: list[Path]) -> list[str]:
    problems = []
    for md in files:
        for target in links(md.read_text()):
            path, _, anchor = target.partition("#")
            dest = (md.parent / path).resolve() if path else md
            where = f"{md.relative_to(root)}: ({target})"
            if not dest.exists():
                problems.append(f"{where} points to a missing file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
                problems.append(f"{where}: no heading #{anchor} in {dest.name}")
    return problems


def repository_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_slugs_follow_github():
    assert slug("Alignment when M != N") == "alignment-when-m--n"
    assert slug("Why `acc` needs the same alpha as `l_i`") == "why-acc-needs-the-same-alpha-as-l_i"
    assert (
        slug("1. Online softmax becomes the flash loop")
        == "1-online-softmax-becomes-the-flash-loop"
    )
    assert slug("The chapter's trap: a correct kernel") == "the-chapters-trap-a-correct-kernel"


def test_every_relative_link_in_the_docs_resolves():
    assert broken_links(ROOT, repository_pages()) == []


def test_a_broken_link_is_caught(tmp_path):
    (tmp_path / "a.md").write_text(
        "# Top\n\n[ok](#top) [file](b.md) [gone](c.md) [x](b.md#nope)\n`[code](d.md)`\n"
    )
    (tmp_path / "b.md").write_text("# B\n")
    found = broken_links(tmp_path, [tmp_path / "a.md"])
    assert len(found) == 2 and "c.md" in found[0] and "#nope" in found[1]


@pytest.fixture(scope="module")
def handout_tree(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("handout")
    zipfile.ZipFile(handout(out / "handout.zip")).extractall(out)
    return out / "triton-kata"


def test_links_in_the_handout_resolve(handout_tree):
    """The handout leaves out the instructor guide and the bench data: no page it ships may
    point to them, nor to anything else it does not ship."""
    pages = [handout_tree / "README.md", *sorted((handout_tree / "docs").rglob("*.md"))]
    assert len(pages) > 5
    assert broken_links(handout_tree, pages) == []


# ---- nothing hidden in the handout ----------------------------------------------------------


def hidden_case_names() -> set[str]:
    """Names of the hidden cases that are not also a check id (a check id is public)."""
    names, check_ids = set(), set()
    for ex in catalogue.ALL_EXERCISES:
        if not specs.has_hidden(ex.stem):
            continue
        module = specs._module(ex.stem, "hidden")
        names |= {c.name for c in module.CASES}
        for checkset in specs.CHECKSETS:
            check_ids |= {c.id for c in specs.load(ex.stem, checkset).checks}
    return names - check_ids


def leaks(text: str, names: set[str]) -> list[str]:
    """The names that occur in ``text``. A name with a hyphen or a digit is an identifier and
    must not occur as a whole word anywhere (a hyphen continues a word); a name that is a plain
    English word ("strided") only counts in backticks or quotes, as a name."""
    found = []
    for n in names:
        if re.search(r"[-\d]", n):
            pattern = rf"(?<![\w-]){re.escape(n)}(?![\w-])"
        else:
            pattern = rf"[`'\"]{re.escape(n)}[`'\"]"
        if re.search(pattern, text):
            found.append(n)
    return sorted(found)


def test_the_leak_scan_finds_a_hidden_case_name():
    assert leaks("see the `grow-3-blocks` case", {"grow-3-blocks"}) == ["grow-3-blocks"]
    assert leaks("exact-ties-e8 and ties-e8s", {"ties-e8"}) == []
    assert leaks("strided inputs", {"strided"}) == [] and leaks('name="strided"', {"strided"})


def test_no_hidden_case_name_reaches_the_handout(handout_tree):
    names = hidden_case_names()
    assert len(names) > 20
    found = {}
    for path in handout_tree.rglob("*"):
        if path.is_file() and path.suffix in (".md", ".py", ".toml", ".json", ".txt", ""):
            hits = leaks(path.read_text(errors="replace"), names)
            if hits:
                found[str(path.relative_to(handout_tree))] = hits
    assert found == {}


# ---- numbers quoted from the worked examples ------------------------------------------------
#
# A number the docs quote from a worked example carries a tag right after it, naming the
# script and the value:   1.72<!-- example: solutions/02 | non-causal kernel vs causal oracle -->
# A list "(4, 5)" is compared element by element with the first values printed. A block of a
# script's output that follows <!-- transcript: exercises/01 --> is compared with a run.
#
# Two kinds of figure, compared differently, because float arithmetic is not the same on every
# machine: numpy's OpenBLAS picks a kernel per CPU (the interpreter's tl.dot is numpy's, and so
# are the oracles), and the same float32 error comes out 1.17088376 on one CPU, 1.17088341 on
# another. Every comparison runs under three of OpenBLAS's kernels (CORETYPES).
#
# * Float noise, a difference below NOISE: its digits are the machine's, not the math's (1.4e-07,
#   1.6e-07, 1.7e-07 for one example under the three kernels). It is quoted as a bound,
#   "below 1e-06", or as an order, "about 1e-07" (the same power of ten), and compared as such.
# * A figure of the math (a wrong kernel's error of order 1, a weight, a sum, an index): quoted
#   with three or four digits, and compared within one unit in its last quoted digit (an index
#   or a count, quoted without a decimal point, exactly). Why that
#   tolerance: float32 results differ between machines from the seventh significant digit, a
#   thousand times below it, so the only way a machine moves a quoted figure is a rounding edge
#   (…45 printed …4 or …5), which one unit covers; a different kernel moves these figures in their
#   first or second digit (01 missing its rescale: 1.17; the same kernel with alpha applied twice,
#   or with no running maximum, gives other errors entirely).

NOISE = (
    1e-5  # below both of the chapter's tolerances (1e-4 attention, 1e-5 gating), above fp32 noise
)
CORETYPES = {  # OpenBLAS kernel -> the CPU flags it needs
    "Haswell": {"avx2", "fma"},
    "SkylakeX": {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"},
    "Sandybridge": {"avx"},
}
NUMBER = r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?"
TAG = re.compile(
    rf"(?P<before>(?:(?:below|under|about)\s+)?)(?P<value>{NUMBER}|\({NUMBER}(?:, {NUMBER})+\))"
    r"<!-- example: (?P<script>(?:solutions|exercises)/\d\d) \| (?P<key>[^|>]+?) -->"
)
ANY_TAG = re.compile(r"<!-- example:")
TRANSCRIPT = re.compile(
    r"<!-- transcript: (?P<script>\w+/\d\d) -->\n```\w*\n(?P<text>.*?)```", re.S
)
VERDICT = re.compile(
    r"^\s*(?:ok|!!|--)\s+(?P<label>.+?)\s+max abs diff\s+(?P<diff>\S+)\s+allclose", re.M
)
ROW = re.compile(
    rf"^\s+(?P<label>v\[0\]|(?:non-)?causal kernel, out\[0\])\s+(?P<values>(?:{NUMBER}\s+)+)\.\.\.",
    re.M,
)
TOKEN = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$", re.M)
MEAN = re.compile(rf"raw top-2 sums range .*, mean ({NUMBER})")


def quoted_pages() -> list[Path]:
    return repository_pages()


@cache
def skeleton_folder() -> Path:
    """The untouched skeletons in a folder named exercises/ (the examples print that name):
    never the working copy, which a student edits."""
    folder = Path(tempfile.mkdtemp(prefix="kata-docs-")) / "exercises"
    folder.mkdir()
    for ex in catalogue.ALL_EXERCISES:
        (folder / ex.filename).write_text(skeletons.pristine(ex.stem).text)
    return folder


def script_path(script: str) -> Path:
    folder, number = script.split("/")
    base = skeleton_folder() if folder == "exercises" else ROOT / folder
    return base / catalogue.find(number).filename


def values(out: str) -> dict[str, list[float]]:
    """Every value a worked example prints, by the key a tag names."""
    found = {m["label"]: [float(m["diff"])] for m in VERDICT.finditer(out)}
    found |= {m["label"]: [float(x) for x in m["values"].split()] for m in ROW.finditer(out)}
    raws = []
    for m in TOKEN.finditer(out):
        t, k0, k1, t0, t1, raw, total = m.groups()
        found[f"kernel[{t}]"] = [int(k0), int(k1)]
        found[f"topk[{t}]"] = [int(t0), int(t1)]
        found[f"raw[{t}]"] = [float(raw)]
        found[f"w0+w1[{t}]"] = [float(total)]
        raws.append(float(raw))
    if raws:
        found["raw min"], found["raw max"] = [min(raws)], [max(raws)]
    mean = MEAN.search(out)
    if mean:
        found["raw mean"] = [float(mean[1])]
    return found


def unit(quoted: str) -> float:
    """One unit in the last digit of a quoted number."""
    mantissa, _, exponent = quoted.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def decade(x: float) -> int:
    return math.floor(math.log10(abs(x)))


def mismatch(before: str, quoted: str, printed: list[float]) -> str | None:
    """Why ``quoted`` (with the word ``before`` it) does not state ``printed``, or None."""
    parts = quoted.strip("()").split(", ")
    if len(parts) > len(printed):
        return f"quotes {len(parts)} values, the example prints {len(printed)}"
    word = before.strip()
    for text, value in zip(parts, printed):
        quoted_value = float(text)
        if word in ("below", "under"):
            if not value < quoted_value:
                return f"the example prints {value!r}, not below {text}"
        elif word == "about" or 0 < abs(quoted_value) < NOISE:
            if word != "about":
                return f"{text} is float noise: quote it as 'below ...' or 'about ...'"
            if value == 0 or decade(value) != decade(quoted_value):
                return f"the example prints {value!r}, not of the order of {text}"
        elif re.fullmatch(r"-?\d+", text):  # an index or a count: exact
            if value != quoted_value:
                return f"the example prints {value!r}, not {text}"
        elif abs(value - quoted_value) > unit(text) * (1 + 1e-9):
            return f"the example prints {value!r}, which is not {text}"
    return None


def tags() -> list[tuple[Path, re.Match]]:
    found = []
    for page in quoted_pages():
        text = page.read_text()
        matched = list(TAG.finditer(text))
        bare = [
            text[max(0, m.start() - 30) : m.end() + 40]
            for m in ANY_TAG.finditer(text)
            if not any(t.start("script") - 21 <= m.start() <= t.end() for t in matched)
        ]
        assert not bare, f"{page.name}: a tag follows no number: {bare}"
        found += [(page, m) for m in matched]
    return found


def test_tags_are_parsed_and_compared():
    text = (
        "by 1.72<!-- example: solutions/02 | x --> and below 1e-06<!-- example: "
        "solutions/01 | y -->, token 5, (4, 5)<!-- example: solutions/03 | z -->, about "
        "1e-07<!-- example: solutions/01 | y -->"
    )
    got = [(m["before"], m["value"], m["key"]) for m in TAG.finditer(text)]
    assert got == [
        ("", "1.72", "x"),
        ("below ", "1e-06", "y"),
        ("", "(4, 5)", "z"),
        ("about ", "1e-07", "y"),
    ]
    assert mismatch("", "1.72", [1.7221667766571045]) is None
    assert mismatch("", "1.72", [1.725]) is None  # a rounding edge: printed 1.72 or 1.73
    assert mismatch("", "1.74", [1.7221667766571045])  # a changed number fails
    assert mismatch("", "0.558", [0.5583722591400146]) is None
    assert mismatch("", "0.56", [0.5443]) and mismatch("", "1.17", [0.352])
    assert mismatch("below ", "1e-06", [1.4e-07]) is None and mismatch("below ", "1e-07", [1.4e-07])
    assert mismatch("about ", "1e-07", [1.44e-07]) is None
    assert mismatch("about ", "1e-07", [1.74e-07]) is None
    assert mismatch("about ", "1e-07", [2.2e-06]) and mismatch("about ", "1e-07", [0.0])
    assert "float noise" in mismatch("", "1.4e-07", [1.4e-07])  # noise quoted as a figure
    assert mismatch("", "(4, 5)", [4, 5]) is None and mismatch("", "(4, 6)", [4, 5])
    assert unit("0.5584") == pytest.approx(1e-4) and unit("2e-07") == pytest.approx(1e-7)


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def _uses_openblas() -> bool:
    import numpy as np

    config = np.show_config(mode="dicts")
    return "openblas" in str(config.get("Build Dependencies", {}).get("blas", {})).lower()


@pytest.fixture(scope="module", params=list(CORETYPES))
def printed(request) -> dict[str, dict[str, list[float]]]:
    """What each script the docs quote prints, with numpy's BLAS forced to one CPU kernel."""
    coretype = request.param
    if not _uses_openblas():
        pytest.skip("numpy is not built on OpenBLAS here: OPENBLAS_CORETYPE changes nothing")
    missing = CORETYPES[coretype] - _cpu_flags()
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(sorted(missing))} for OpenBLAS's {coretype} kernel")
    scripts = sorted(s for s in quoted_scripts() | {"solutions/02"} if not run_once(s))
    runs = run_examples([script_path(s) for s in scripts], OPENBLAS_CORETYPE=coretype)
    return _printed({s: runs[script_path(s)][1] for s in scripts})


def _printed(outs: dict[str, str]) -> dict:
    return {s: values(out) for s, out in outs.items()} | {
        f"{s} (text)": out for s, out in outs.items()
    }


def quoted_scripts() -> set[str]:
    return {m["script"] for _, m in tags()} | {m["script"] for m in transcripts()}


def run_once(script: str) -> bool:
    """The performance track's examples take tens of seconds each in the interpreter, and what
    the docs quote from them (bounds, words) does not depend on the BLAS kernel: run them once."""
    return catalogue.find(script.split("/")[1]).track == "performance"


@pytest.fixture(scope="module")
def once(tmp_path_factory) -> dict:
    """The slow runs, each once, two at a time: the performance track's worked examples
    (``printed``) and the gradings the docs quote (``graded``)."""
    from concurrent.futures import ThreadPoolExecutor

    scripts = sorted(s for s in quoted_scripts() if run_once(s))
    gradings = sorted({(m["exercises"], m["checks"], m["submission"]) for _, m in grader_outputs()})
    tmp = tmp_path_factory.mktemp("graded")
    skeleton_folder()  # made once, here: two threads making it at once would make two

    def run(job):
        kind, n, what = job
        if kind == "example":
            path = script_path(what)
            return run_examples([path])[path][1]
        exercises, checks, submission = what
        folder = _submission(tmp / f"s{n}", exercises.split(), submission)
        return _grade(folder, exercises.split(), checks)

    jobs = [("example", 0, s) for s in scripts] + [
        ("grading", n, key) for n, key in enumerate(gradings)
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outs = list(pool.map(run, jobs))
    done = {what: out for (_, _, what), out in zip(jobs, outs)}
    return {
        "printed": _printed({s: done[s] for s in scripts}),
        "graded": {key: done[key] for key in gradings},
    }


@slow
def test_every_quoted_number_matches_its_worked_example(printed, once):
    found = tags()
    assert len(found) >= 10
    printed = {**printed, **once["printed"]}
    problems = []
    for page, m in found:
        values_ = printed[m["script"]]
        where = f"{page.name}: {m['value']} ({m['script']} | {m['key']})"
        if m["key"] not in values_:
            problems.append(f"{where}: the example prints no such value")
            continue
        why = mismatch(m["before"], m["value"], values_[m["key"]])
        if why:
            problems.append(f"{where}: {why}")
    assert problems == []


def transcripts() -> list[re.Match]:
    return [m for page in quoted_pages() for m in TRANSCRIPT.finditer(page.read_text())]


ANY_WORD = "…"  # in a quoted output: any one word (a value read from uninitialised memory)


def output_mismatch(quoted: str, printed: str) -> str | None:
    """Why the output ``quoted`` is not what was ``printed``, or None: word by word, the numbers
    in a word compared as the tags' figures are (float noise by its order of magnitude)."""
    said, got = quoted.split(), printed.split()
    if len(said) != len(got):
        return f"{len(said)} words quoted, {len(got)} printed"
    for word, run in zip(said, got):
        if word == ANY_WORD:
            continue
        if re.sub(NUMBER, "#", word) != re.sub(NUMBER, "#", run):
            return f"{word!r} is printed {run!r}"
        for text, value in zip(re.findall(NUMBER, word), re.findall(NUMBER, run)):
            why = mismatch("about " if 0 < abs(float(text)) < NOISE else "", text, [float(value)])
            if why:
                return f"{word!r}: {why}"
    return None


def test_outputs_are_compared_word_by_word():
    assert output_mismatch("max abs diff 0.366 ok", "max abs diff  0.3661  ok") is None
    assert output_mismatch("diff 0.366", "diff 0.401") and output_mismatch("a b", "a b c")
    assert output_mismatch("diff … allclose", "diff 7.87e+34 allclose") is None
    assert output_mismatch("diff about", "diff nan") and output_mismatch("0/50", "25/50")
    assert output_mismatch("w 7.87e-08", "w 5.2e-08") is None  # noise: its order only


@slow
@pytest.mark.skipif(not runtime.INTERPRETER, reason="the quoted outputs are the interpreter's")
def test_quoted_outputs_are_what_the_examples_print(printed, once):
    found = transcripts()
    assert len(found) >= 3
    printed = {**printed, **once["printed"]}
    for m in found:
        why = output_mismatch(m["text"], printed[f"{m['script']} (text)"])
        assert why is None, f"{m['script']}: {why}"


# ---- what the grader prints, quoted ----------------------------------------------------------
#
# A block of the grader's console output follows a tag naming the exercises graded, the checks
# and the submission: the untouched skeletons, some TODOs filled with the reference code.
#
#   <!-- grader: 05 | public | skeleton + rows-per-program -->
#
# The block must be consecutive lines of that grading's output in the interpreter, compared word
# by word as above. Durations ("(12.0 s)", "cpu, 15 s)") are the machine's, never compared.

GRADER_OUTPUT = re.compile(
    r"<!-- grader: (?P<exercises>\d\d(?: \d\d)*) \| (?P<checks>hidden|public) \| "
    r"(?P<submission>skeleton(?: \+ [\w-]+)*) -->\n```\w*\n(?P<text>.*?)```",
    re.S,
)
DURATION = re.compile(r"\d+(?:\.\d+)? s\)")


def grader_outputs() -> list[tuple[Path, re.Match]]:
    return [(p, m) for p in quoted_pages() for m in GRADER_OUTPUT.finditer(p.read_text())]


def _submission(folder: Path, exercises: list[str], submission: str) -> Path:
    """The untouched skeletons of ``exercises``, with the TODOs ``submission`` names filled in
    with the reference code of the exercise's spec."""
    from grader.validate import gallery

    todos = submission.split(" + ")[1:]
    folder.mkdir(parents=True)
    for number in exercises:
        ex = catalogue.find(number)
        spec = specs.load(ex.stem, "hidden")
        fills = {todo: spec.reference[todo] for todo in todos if todo in ex.todo_ids}
        (folder / ex.filename).write_text(gallery.fill(skeletons.pristine(ex.stem), fills))
    unknown = set(todos) - {t for n in exercises for t in catalogue.find(n).todo_ids}
    assert not unknown, f"no TODO {unknown} in {exercises}"
    return folder


def _grade(folder: Path, exercises: list[str], checks: str) -> str:
    import subprocess
    import sys

    report = folder.parent / f"{folder.name}.json"
    cmd = [sys.executable, "-m", "grader", "--device", "interpreter", "--target", str(folder)]
    cmd += ["--checks", checks, "--report", str(report), "--no-html", *exercises]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def block_mismatch(quoted: str, printed: str) -> str | None:
    """Why the lines ``quoted`` are not consecutive lines of ``printed``, or None."""
    said = [DURATION.sub("N s)", ln) for ln in quoted.strip("\n").splitlines()]
    got = [DURATION.sub("N s)", ln) for ln in printed.splitlines()]
    best = "its first line is printed nowhere"
    for start in range(len(got) - len(said) + 1):
        if output_mismatch(said[0], got[start]) is not None:
            continue
        for n, line in enumerate(said[1:], start + 1):
            why = output_mismatch(line, got[n])
            if why:
                best = f"line {n - start + 1}: {why}"
                break
        else:
            return None
    return best


def test_grader_blocks_are_found_in_the_output():
    printed = "x\n05_fast_gating  0/50  (14.9 s)\n  FAIL a  0/25\n  WAIT b  0/25\nScore"
    assert block_mismatch("05_fast_gating  0/50  (8.1 s)\n  FAIL a  0/25\n", printed) is None
    assert block_mismatch("  FAIL a  0/25\n  WAIT b  0/25", printed) is None
    assert "line 2" in block_mismatch("05_fast_gating  0/50  (3.0 s)\n  PASS a  25/25", printed)
    assert block_mismatch("Performance: 0/20", printed) == "its first line is printed nowhere"


@slow
@pytest.mark.skipif(not runtime.INTERPRETER, reason="the quoted outputs are the interpreter's")
def test_quoted_gradings_are_what_the_grader_prints(once):
    found = grader_outputs()
    assert len(found) >= 3
    problems = []
    for page, m in found:
        printed = once["graded"][(m["exercises"], m["checks"], m["submission"])]
        why = block_mismatch(m["text"], printed)
        if why:
            problems.append(f"{page.name} ({m['exercises']} | {m['submission']}): {why}")
    assert problems == []


@slow
def test_the_causal_example_shows_row_0_is_v0(printed):
    assert "equal to v[0]: True" in printed["solutions/02 (text)"]


# ---- the guide's worked-by-hand figures -----------------------------------------------------


def _guide() -> str:
    return (ROOT / "docs" / "guide.md").read_text()


def test_the_hand_example_is_what_the_loop_computes():
    """The guide's one-row example, scores [1, 2 | 4] and values [10, 20 | 30], recomputed."""
    import math

    e = math.exp
    p1 = [e(1 - 2), 1.0]
    l1, acc1 = sum(p1), p1[0] * 10 + p1[1] * 20
    alpha = e(2 - 4)
    l2, acc2 = l1 * alpha + 1, acc1 * alpha + 30
    full = (e(1) * 10 + e(2) * 20 + e(4) * 30) / (e(1) + e(2) + e(4))
    table = _guide().split("<!-- hand example:")[1].split("\n\n")[0]
    figures = {
        "p": p1[0],
        "l1": l1,
        "acc1": acc1,
        "out1": acc1 / l1,
        "alpha": alpha,
        "l2": l2,
        "acc2": acc2,
        "out2": acc2 / l2,
        "broken acc": acc1 + 30,
        "broken out": (acc1 + 30) / l2,
    }
    assert abs(full - acc2 / l2) < 1e-12
    for name, value in figures.items():
        for decimals in (3, 2):
            if f"{value:.{decimals}f}" in table:
                break
        else:
            raise AssertionError(f"the hand example's {name} ({value:.4f}) is not in its table")


def mask_picture(M: int, N: int, align: str) -> str:
    rows = [
        [(j <= i + (N - M if align == "bottom-right" else 0)) for j in range(N)] for i in range(M)
    ]
    return "\n".join(" ".join("x" if seen else "." for seen in row) for row in rows)


def test_the_mask_pictures_are_the_masks():
    from kata import oracles

    pages = _guide() + (ROOT / "docs" / "self-check.md").read_text()
    found = re.findall(r"<!-- mask: M=(\d+) N=(\d+) ([\w-]+) -->\n```text\n(.*?)```", pages, re.S)
    assert len(found) == 4
    for M, N, align, block in found:
        M, N = int(M), int(N)
        picture = "\n".join(ln for ln in block.strip().splitlines() if ln != align)
        assert picture == mask_picture(M, N, align), (M, N, align)
        if align == "top-left":  # the kata's oracle agrees
            assert mask_picture(M, N, align) == "\n".join(
                " ".join("x" if s else "." for s in row) for row in oracles.causal_mask(M, N)
            )


def test_the_quoted_topk_tie_order():
    """The guide quotes torch.topk's order on eight equal probabilities, on torch 2.13's CPU."""
    import torch

    assert "[6, 5] on torch 2.13's CPU build" in _guide()
    if not torch.__version__.startswith("2.13"):
        pytest.skip(f"quoted for torch 2.13, this is {torch.__version__}")
    got = torch.topk(torch.softmax(torch.zeros(8), -1), 2).indices.tolist()
    assert got == [6, 5]


def test_the_quoted_tl_sort_and_tl_topk():
    """Self-check question 19 says what triton 3.9 offers: tl.sort, and tl.topk for a k that is
    a power of two no larger than the row, returning values only."""
    import inspect

    import triton
    import triton.language as tl

    text = " ".join((ROOT / "docs" / "self-check.md").read_text().split())
    assert "Triton 3.9 has both functions." in text
    assert "`tl.topk` wants k to be a power of two, no larger than the row" in text
    if tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 9):
        pytest.skip(f"quoted for triton 3.9, this is {triton.__version__}")
    assert hasattr(tl, "sort") and hasattr(tl, "topk")
    source = Path(tl.standard.__file__).read_text()  # under the interpreter, not a function
    assert "k must be a power of two" in source
    assert "k must not exceed the size of the selected dimension" in source
    assert list(inspect.signature(tl.topk.fn).parameters) == ["x", "k", "dim", "descending"]


# ---- 09's drop rules ------------------------------------------------------------------------


def _gshard_dropped(idx, E: int, capacity: int) -> list:
    """GShard's top-2 rule as fairscale's top2gate writes it, independently of the oracle:
    locations1 = cumsum(mask1) - 1, locations2 = cumsum(mask2) - 1 + sum(mask1), and a choice
    is dropped at a location >= capacity."""
    import numpy as np

    mask1, mask2 = (np.eye(E, dtype=np.int64)[np.asarray(idx)[:, k]] for k in (0, 1))
    locations1 = np.cumsum(mask1, axis=0) - 1
    locations2 = np.cumsum(mask2, axis=0) - 1 + mask1.sum(axis=0)
    dropped = []
    for t in range(len(idx)):
        for k, (mask, where) in enumerate(((mask1, locations1), (mask2, locations2))):
            if (where[t] * mask[t]).sum() >= capacity:
                dropped.append((t, k))
    return dropped


def test_first_choice_priority_is_gshards_rule():
    """The oracle's first-choice priority (idx transposed) drops what GShard's formula drops."""
    import numpy as np

    from kata import oracles

    rng = np.random.default_rng(23)
    for M, E, capacity in [(12, 4, 5), (30, 6, 7), (64, 8, 10), (9, 3, 2)]:
        idx = np.argsort(rng.standard_normal((M, E)), axis=1)[:, :2]
        ours = oracles.dropped_pairs(idx, E, capacity, first_choices_first=True)
        assert ours == _gshard_dropped(idx, E, capacity)


def test_09s_page_names_the_pairs_each_rule_drops():
    """The table under "Which pairs a full expert drops", recomputed on the worked example."""
    import torch

    from kata import oracles

    torch.manual_seed(0)
    idx = torch.topk(torch.randn(12, 4), 2, dim=-1).indices.numpy()
    page = (ROOT / "docs" / "exercises" / f"{catalogue.find('09').stem}.md").read_text()
    table = page.split("<!-- drop rules: worked example -->")[1].split("\n\n")[0]
    rows = dict(line.strip("|").split("|")[:2] for line in table.splitlines()[2:])
    quoted = {rule.strip(): re.findall(r"\((\d+), (\d+)\)", pairs) for rule, pairs in rows.items()}
    kata = oracles.dropped_pairs(idx, 4, 5)
    gshard = oracles.dropped_pairs(idx, 4, 5, first_choices_first=True)
    assert kata != gshard
    for rule, want in (
        ("the kata's: (token, choice) order", kata),
        ("GShard's: first choices first", gshard),
    ):
        assert [(int(t), int(k)) for t, k in quoted[rule]] == want, rule
    # The sentences after it: token 11 loses its first choice only under the kata's rule.
    assert (11, 0) in kata and (11, 0) not in gshard and (8, 1) in gshard and (8, 1) not in kata
    assert "token 11 loses its first choice, expert 1" in " ".join(page.split())
    assert idx[11, 0] == 1 and idx[8, 1] == 1


# ---- figures quoted from the code ------------------------------------------------------------


def _literal_configs(stem: str) -> list[tuple]:
    """The tuples a solution builds its GPU ``CONFIGS`` from (the interpreter replaces that list
    with one configuration, so it is read from the source)."""
    import ast

    tree = ast.parse((catalogue.SOLUTIONS / f"{stem}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CONFIGS":
            return list(ast.literal_eval(node.value.generators[0].iter))
    raise AssertionError(f"{stem}: no CONFIGS list")


def test_04s_page_counts_the_configurations_the_autotuner_times(solution):
    """The page lists 04's configurations and says how many the causal prune keeps."""
    import triton

    ex = catalogue.find("04")
    page = (docs.PAGES / f"{ex.stem}.md").read_text()
    text = " ".join(page.split())
    rows = _literal_configs(ex.stem)
    configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "TMA": tma}) for m, n, _, _, tma in rows]
    causal = solution("04")._whole_key_tiles(configs, {}, CAUSAL=True)
    assert solution("04")._whole_key_tiles(configs, {}, CAUSAL=False) == configs
    words = {6: "six", 7: "seven"}
    assert f"offers {words[len(rows)]} configurations" in text
    assert f"({words[len(rows)]} without the mask, {words[len(causal)]} with it)" in text
    dropped = [c for c in configs if c not in causal]
    assert [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) for c in dropped] == [(64, 128)]
    assert (
        "drops every configuration whose `BLOCK_N` does not divide `BLOCK_M`, here (64, 128)"
        in text
    )
    pointers = [r for r in rows if not r[4]]
    descriptors = [r for r in rows if r[4]]
    listed = "with pointers ({}, {}, {} warps, {} stages), ".format(*pointers[0][:4]) + ", ".join(
        "({}, {}, {}, {})".format(*r[:4]) for r in pointers[1:]
    )
    listed += "; with descriptors " + ", ".join(
        "({}, {}, {}, {})".format(*r[:4]) for r in descriptors
    )
    assert listed in text


def test_05s_chunk_widths_are_the_kernels():
    """The logits per chunk that 05's docstring and page quote at E = 128, and its comment at
    E = 160, computed with the kernel's own constexpr lines (a chunk is a quarter of the row, 64
    to 128 bytes, halved where that leaves no lane past E)."""
    ex = catalogue.find("05")
    source = (catalogue.SOLUTIONS / f"{ex.stem}.py").read_text()
    sweep = catalogue.load_file(catalogue.ROOT / "scripts" / "gating_sweep.py")

    def chunks(bits: int, E: int) -> tuple[int, int]:
        """(logits per chunk, chunks per row)."""
        return sweep.chunk_rule(source, bits, E)

    quoted = f"{chunks(32, 128)[0]} fp32 or {chunks(16, 128)[0]} bf16 logits at E = 128"
    page = (docs.PAGES / f"{ex.stem}.md").read_text()
    for where, text in (("docstring", source), ("page", page)):
        assert quoted in " ".join(text.split()), where
    assert chunks(32, 160) == chunks(16, 160)
    width, count = chunks(16, 160)
    comments = " ".join(source.replace("#", " ").split())
    assert f"E = 160 in {count} chunks of {width}" in comments
    # Rows of 120 bytes (E = 60 in bf16) in 32-byte chunks; E = 60 in fp32 keeps 64 bytes.
    assert chunks(16, 60) == chunks(32, 60) == (16, 4)


def _assigned(path: Path) -> set[str]:
    """The names a file binds: assignments, loop variables and parameters."""
    import ast

    tree = ast.parse(path.read_text())
    names = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    return names | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}


def test_the_guides_name_table_is_the_chapters_code_and_the_katas():
    """Every chapter name the guide's table gives is bound in the chapter's kernels (the
    gallery's chapter.py files), every kata name in the solutions of 01-03, and the names said to
    be kept in both."""
    text = _guide().split("<!-- names: chapter | kata -->")[1]
    table, _, after = text.partition("\n\n")
    stems = [catalogue.find(n).stem for n in ("01", "02", "03")]
    chapter = set().union(*(_assigned(specs.folder(s) / "gallery" / "chapter.py") for s in stems))
    kata = set().union(*(_assigned(catalogue.SOLUTIONS / f"{s}.py") for s in stems))
    rows = [ln.split("|")[1:3] for ln in table.splitlines()[2:]]
    assert len(rows) >= 8
    for theirs, ours in rows:
        assert set(re.findall(r"`(\w+)`", theirs)) <= chapter, theirs
        assert set(re.findall(r"`(\w+)`", ours)) <= kata, ours
    kept = set(re.findall(r"`(\w+)`", after.split("keep their names")[0]))
    assert len(kept) >= 10 and kept <= chapter & kata, kept - (chapter & kata)


def _tf32_dot(a, b):
    """A TF32 tensor-core dot in NumPy: each fp32 operand cut to 10 mantissa bits (what the
    H200's figures show: rounding to nearest instead gives a third of the product's error), the
    products summed without further loss, the result rounded to fp32."""
    import numpy as np

    def cut(x):
        return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)

    return (cut(a).astype(np.float64) @ cut(b).astype(np.float64)).astype(np.float32)


def _tf32_flash(q, k, v, block: int = 64):
    """01's loop with TF32 dots, on (S, D) fp32 arrays."""
    import numpy as np

    out = np.zeros(q.shape, np.float32)
    scale = np.float32(1 / np.sqrt(q.shape[1]))
    for m0 in range(0, len(q), block):
        rows = q[m0 : m0 + block]
        m_i, l_i = np.full(len(rows), -np.inf, np.float32), np.zeros(len(rows), np.float32)
        acc = np.zeros(rows.shape, np.float32)
        for n0 in range(0, len(k), block):
            scores = _tf32_dot(rows, k[n0 : n0 + block].T) * scale
            m_new = np.maximum(m_i, scores.max(axis=1))
            alpha, p = np.exp(m_i - m_new), np.exp(scores - m_new[:, None])
            l_i = alpha * l_i + p.sum(axis=1)
            acc = alpha[:, None] * acc + _tf32_dot(p, v[n0 : n0 + block])
            m_i = m_new
        out[m0 : m0 + block] = acc / l_i[:, None]
    return out


def test_the_guides_tf32_figures_are_tf32s_own():
    """The guide's TF32 errors (measured on an H200) come back when TF32 is emulated: about 1e-3
    for attention at D = 16 and 64, 2.3e-2 to 2.8e-2 for a 64^3 product, 1e-5 in IEEE fp32."""
    import numpy as np

    from kata import oracles

    text = " ".join(_guide().split())
    assert "by about 1e-3, at D = 64 as at D = 16" in text
    assert "finds 0.9e-3 to 1.7e-3 for attention at D = 16 and 64" in text
    assert "and 2.3e-2 to 2.8e-2 for the product" in text
    errors = []
    for D in (16, 64):
        for S in (128, 256):
            for seed in range(4):
                gen = np.random.default_rng(seed)
                q, k, v = (gen.standard_normal((S, D)).astype(np.float32) for _ in range(3))
                errors.append(np.abs(_tf32_flash(q, k, v) - oracles.attention(q, k, v)).max())
    assert 0.85e-3 <= min(errors) and max(errors) <= 1.75e-3, errors
    tf32, ieee = [], []
    for seed in range(4):
        gen = np.random.default_rng(seed)
        a, b = (gen.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
        exact = a.astype(np.float64) @ b.astype(np.float64)
        tf32.append(np.abs(_tf32_dot(a, b) - exact).max())
        ieee.append(np.abs(a @ b - exact).max())
    assert 2.25e-2 <= min(tf32) and max(tf32) <= 2.85e-2, tf32
    assert max(ieee) < 1e-5, ieee  # the guide's 7.6e-6


def test_one_grading_is_quoted_for_the_performance_points():
    """performance.md's grading table, its summary and report-schema.md's example are one
    grading of the reference solutions on the H200 (the bench run is another measurement)."""
    import json

    perf = (ROOT / "docs" / "performance.md").read_text()
    schema = (ROOT / "docs" / "report-schema.md").read_text()
    example = json.loads(
        schema.split("on an H200 (torch 2.11.0+cu130, triton 3.6.0):")[1]
        .split("```json\n")[1]
        .split("```")[0]
    )
    shapes = {s["shape"]: s for s in example["shapes"]}
    rows = {}
    for line in perf.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 9 and cells[1].startswith(("B=4", "M=1M")):
            rows[cells[1]] = cells
    for shape, s in shapes.items():
        _, _, kernel, torch_ms, speedup, spread, *_ = rows[shape]
        for quoted, value in (
            (kernel.split()[0], s["kernel_ms"]),
            (torch_ms.split()[0], s["torch_ms"]),
            (speedup, s["speedup"]),
        ):
            assert mismatch("", quoted, [value]) is None, (shape, quoted, value)
        lo, hi = spread.split("-")
        assert (
            abs(float(lo) - s["speedup_range"][0]) <= 0.0051
            and abs(float(hi) - s["speedup_range"][1]) <= 0.0051
        )
        assert f"{s['kernel_ms']:7.3f} ms  x{s['speedup']:.2f}" in perf  # the summary's line
    gated = rows["B=4 H=16 S=4096 D=128 bf16"]
    assert mismatch("", gated[6], [example["geomean_speedup"]]) is None
    assert gated[8].startswith(f"**{example['points']}/10**")
    speedups = re.search(
        r"05's entry has `speedup` ([\d.]+) \(fp32\) and ([\d.]+) \(bf16\)", schema
    )
    assert mismatch("", rows["M=1M E=128 float32"][4], [float(speedups[1])]) is None
    assert mismatch("", rows["M=1M E=128 bfloat16"][4], [float(speedups[2])]) is None


# ---- the H200 figures: one bench run, docs/bench_h200.json -----------------------------------


def test_h200_figures_keep_their_form_and_take_the_runs_values():
    from kata.authoring import bench_docs as b

    assert b.render("0.94-0.97x", [0.951, 0.9649]) == "0.95-0.96x"
    assert b.render("0.94-0.97x", [0.9211, 0.9249]) == "0.92x"  # one value at this precision
    assert b.render("**93%", [88.4]) == "**88%"
    assert (
        b.render("1.02e-2", [0.0019]) == "1.90e-3"
        and b.render("5.7-32x", [5.66, 32.4]) == "5.7-32x"
    )
    assert b.render("2.11.0", ["2.12.1"]) == "2.12.1" and b.render("700", ["650.00 W"]) == "650"
    with pytest.raises(b.FigureError, match="write a range"):
        b.render("0.92x", [0.92, 0.99])
    data = json.loads(b.BENCH.read_text())
    assert b.values(data, "max gating fast_pct_of_copy @ fp32") == [
        max(r["fast_pct_of_copy"] for r in data["gating"] if r["dtype"] == "float32")
    ]
    with pytest.raises(b.FigureError, match="no row matches"):
        b.values(data, "gating fast_ms @ E=7")


def test_h200_figures_come_from_the_bench_file(tmp_path, monkeypatch):
    """Another bench run in docs/bench_h200.json changes every tagged figure and table: the
    docs are regenerated from the file, never from numbers kept elsewhere."""
    from kata.authoring import bench_docs as b

    data = json.loads(b.BENCH.read_text())
    data["copy"]["tbps"] = 5.0
    for row in data["gating"]:
        row["fast_pct_of_copy"] *= 0.5
    (row,) = [r for r in data["gating"] if r["E"] == 128 and r["dtype"] == "float32"]
    halved = f"{row['fast_pct_of_copy']:.0f}%"
    table_row = (
        f"| 128 | fp32 | {row['mb_moved']:.0f} | {row['fast_ms'] * 1e3:.1f} | "
        f"{row['fast_tbps']:.2f} | **{halved}** |"
    )
    run = tmp_path / "bench_h200.json"
    run.write_text(json.dumps(data))
    monkeypatch.setattr(b, "BENCH", run)
    files, problems = docs.expected()
    assert problems == []
    readme = files[ROOT / "README.md"]
    assert f"**{halved}<!-- h200: gating fast_pct_of_copy @ fp32 E=128 -->**" in readme
    perf = files[docs.DOCS / "performance.md"]
    assert table_row in perf
    assert "**5.00<!-- h200: copy tbps --> TB/s**" in perf


def test_each_cards_figures_come_from_its_own_run(tmp_path, monkeypatch):
    """An ``h100:`` tag is filled from docs/bench_h100.json, never from the H200's run; a tag
    whose card has no run is a problem, not a figure left as it was."""
    from kata.authoring import bench_docs as b

    data = json.loads(b.run_path("h100").read_text())
    (row,) = [r for r in data["host"] if r["wrapper"].startswith("05 ")]
    row["fast_host_us_per_call"] = 123.4
    run = tmp_path / "bench_h100.json"
    run.write_text(json.dumps(data))
    monkeypatch.setitem(b.RUNS, "h100", run)
    files, problems = docs.expected()
    assert problems == []
    perf = files[docs.DOCS / "performance.md"]
    assert "**123.4<!-- h100: host fast_host_us_per_call @ wrapper=05 --> us**" in perf
    tag = "1.0<!-- h100: host fast_host_us_per_call @ wrapper=05 -->"
    assert b.rewrite_figures(tag, b.load(), "page", card="h200") == tag
    with pytest.raises(b.FigureError, match="names its wrapper"):
        b.values(data, "host fast_host_us_per_call @ fp32")
    monkeypatch.setitem(b.RUNS, "h100", tmp_path / "absent.json")
    _, problems = docs.expected()
    assert any("no bench run for ['h100']" in p for p in problems), problems


def test_the_self_check_answers_on_04_05_06_are_the_kernels(solution):
    """The figures in self-check questions 10, 11, 12 and 15, recomputed from the kernels' own
    rules: 04's stages and prune, 05's chunk width, 06's loop bounds and window."""
    import triton

    text = " ".join((ROOT / "docs" / "self-check.md").read_text().split())
    # 10: stage 2 at 128 x 64; the second key tile is future for the tile's first 64 rows.
    block_m, block_n, pid_m = 128, 64, 3
    rows = range(pid_m * block_m, (pid_m + 1) * block_m)
    second = range(pid_m * block_m + block_n, pid_m * block_m + 2 * block_n)
    blind = [r for r in rows if all(k > r for k in second)]
    assert blind == list(rows[:64]) and all(pid_m * block_m <= r for r in blind)
    assert "rows `pid_m * 128` to `pid_m * 128 + 63`, the first half of the query tile" in text
    # 11: the prune drops (64, 128) for causal attention only.
    configs = [
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128}),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}),
    ]
    assert solution("04")._whole_key_tiles(configs, {}, CAUSAL=True) == configs[1:]
    assert "drops `BLOCK_M = 64`, `BLOCK_N = 128`" in text
    # 12: at E = 128 a chunk is 32 logits, so experts 5 and 37 share slot 5.
    assert (
        "At E = 128 in fp32 a chunk is 32 logits, so experts 5 and 37 both land in slot 5" in text
    )
    assert "32 fp32 or 32 bf16 logits at E = 128" in " ".join(
        (docs.PAGES / f"{catalogue.find('05').stem}.md").read_text().split()
    )  # the page's figure, which test_05s_chunk_widths_are_the_kernels computes
    # 15: WINDOW = 5, 16 x 16 tiles, rows 32..47: tiles at 16 and 32; rows 36..47 blind at first.
    window, first = 5, 32
    lo = max(first - window + 1, 0) // 16 * 16
    tiles = list(range(lo, first + 16, 16))
    blind = [
        r
        for r in range(first, first + 16)
        if all(r - k >= window or k > r for k in range(lo, lo + 16))
    ]
    assert tiles == [16, 32] and blind == list(range(36, 48))
    assert "So it visits the tiles at keys 16 and 32." in text
    assert "rows 36 to 47 start at key 32 or later and see nothing there" in text
    assert "Those twelve rows" in text


# ---- 08: the merge is the student's, and the (output, lse) form beside it --------------------

MERGE_FORMULA = ("exp(m_j - m)", "m + ln L", "w_j acc_j")


def test_08_leaves_its_merge_to_the_student():
    """Teaching review M4: the page, the skeleton and the first hints give the invariant, not
    the formula; the hint ladder's last rung gives it."""
    ex = catalogue.find("08")
    page = (ROOT / "docs" / "exercises" / f"{ex.stem}.md").read_text()
    for where, text in {
        "page": page,
        "skeleton": skeletons.pristine(ex.stem).text,
        **{f"hint {n + 1}": hint for n, hint in enumerate(ex.hints[:-1])},
    }.items():
        found = [f for f in MERGE_FORMULA if f in " ".join(text.split())]
        assert found == [], f"08's {where} gives the merge away: {found}"
    assert all(f in " ".join(ex.hints[-1].split()) for f in MERGE_FORMULA)


def test_08s_lse_form_is_the_same_merge_with_the_numbers_quoted():
    """Teaching review M5: self-check 21's splits, merged in the (output, lse) form the page
    shows, give the (m, l, acc) merge's answer, and the page quotes those numbers."""
    import numpy as np

    from kata import oracles

    m, l, acc = np.array([[2.0, 5.0]]), np.array([[3.0, 1.0]]), np.array([[[6.0], [4.0]]])  # noqa: E741
    out, lse = oracles.split_kv_merge(m, l, acc)
    o, lse_j = acc[0, :, 0] / l[0], m[0] + np.log(l[0])
    w = np.exp(lse_j - lse_j.max())
    assert np.isclose((w * o).sum() / w.sum(), out[0, 0])
    assert np.isclose(lse_j.max() + np.log(w.sum()), lse[0])
    page = " ".join((ROOT / "docs" / "exercises" / "08_split_kv_decoding.md").read_text().split())
    quoted = (
        f"`lse = 2 + ln 3 = {lse_j[0]:.4f}`",
        f"`w_A = exp({lse_j[0]:.4f} - 5) = {w[0]:.4f}`",
        f"`out = ({w[0]:.4f} * 2 + 4) / {w.sum():.4f} = {out[0, 0]:.3f}`",
        f"`lse = 5 + ln {w.sum():.4f} = {lse[0]:.3f}`",
    )
    assert [q for q in quoted if q not in page] == []
    for name in ("merge_state", "merge_attn_states", "combine_attn_seqk_parallel", "#2113"):
        assert name in page
