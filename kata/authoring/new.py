"""``nox -s new -- NN_name --interface NAME``: scaffold a new exercise, like rustlings' ``dev new``.

An exercise lives in four homes: its manifest entry (``exercises/info.toml``), its spec folder
(``grader/specs/<stem>/``), its solution (``solutions/<stem>.py``) and its docs page
(``docs/exercises/<stem>.md``). This writes all four, starting from the first exercise with the
same interface (the *model*): its solution with the kernel and host function renamed and its
marked regions kept, its public and hidden checks (the hidden gallery left empty: a gallery's
variants are the new exercise's own mistakes), and a page with the generated table. Then it
runs the generators, so that ``exercises/<stem>.py``, ``kata/skeletons.json`` and the docs'
generated sections follow; ``validate --static`` then reports only the placeholder text left to
replace (the hints, the solution's docstring, the page's task). What to write next is printed:
the kernel's idea, its regions, cases and traps, a gallery, hints, the page.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from kata import catalogue, kinds
from kata.catalogue import ALL_EXERCISES, EXERCISES, ROOT, SOLUTIONS, TRACK_NAMES

STEM = re.compile(r"(?P<number>\d\d)_(?P<name>[a-z][a-z0-9_]*)")
MANIFEST = EXERCISES / "info.toml"
SPECS = ROOT / "grader" / "specs"
PAGES = ROOT / "docs" / "exercises"


# The scaffold's stand-in text, which the author replaces. ``validate --static`` reports each one
# still there (``placeholders_left``), so that a scaffold never passes for a finished exercise.
HINTS = (
    "The first hint: the idea the TODO needs, never the code (nox -s hint shows one level at a "
    "time).",
    "The second hint: closer to the code, still not the code.",
)
SOLUTION_NOTE = "the kernel below is still that exercise's."
TASK = "What the kernel computes, the idea it teaches, and why it matters on a GPU."


def placeholders_left(ex: catalogue.Exercise) -> list[str]:
    """Where ``ex`` still holds the scaffold's stand-in text: one line per file, naming it."""

    def flat(text: str) -> str:
        return " ".join(text.split())

    left = []
    hints = [flat(level) for ladder in ex.ladders.values() for level in ladder]
    if any(flat(h) in hints for h in HINTS):
        left.append(f"{MANIFEST.relative_to(ROOT)} (its hints)")
    for path, text in ((SOLUTIONS / ex.filename, SOLUTION_NOTE), (PAGES / f"{ex.stem}.md", TASK)):
        try:
            if flat(text) in flat(path.read_text()):
                left.append(str(path.relative_to(ROOT)))
        except OSError:
            continue  # a missing file is reported on its own
    return [
        f"{ex.stem}: {where} still holds `nox -s new`'s placeholder text: write the exercise's own"
        for where in left
    ]


class ScaffoldError(ValueError):
    """The new exercise cannot be written: a bad stem, a taken number, an unknown interface."""


def model_of(interface: str) -> catalogue.Exercise:
    """The first exercise of the manifest with ``interface``."""
    for ex in ALL_EXERCISES:
        if ex.interface == interface:
            return ex
    known = ", ".join(sorted(kinds.KINDS))
    raise ScaffoldError(f"no exercise uses interface {interface!r} yet (known: {known})")


def check_stem(stem: str) -> re.Match:
    found = STEM.fullmatch(stem)
    if not found:
        raise ScaffoldError(
            f"{stem!r} is not an exercise stem: two digits, an underscore, then lower-case "
            "letters, digits and underscores (e.g. 11_paged_attention)"
        )
    taken = [ex.stem for ex in ALL_EXERCISES if ex.stem[:2] == found["number"]]
    if taken:
        raise ScaffoldError(f"exercise number {found['number']} is taken by {taken[0]}")
    for path in (SOLUTIONS / f"{stem}.py", SPECS / stem, PAGES / f"{stem}.md"):
        if path.exists():
            raise ScaffoldError(f"{path.relative_to(ROOT)} already exists")
    return found


def _rename(text: str, model: catalogue.Exercise, kernel: str, host: str) -> str:
    text = re.sub(rf"\b{re.escape(model.kernel)}\b", kernel, text)
    return re.sub(rf"\b{re.escape(model.host)}\b", host, text)


def solution(model: catalogue.Exercise, number: str, title: str, kernel: str, host: str) -> str:
    """The model's solution, renamed, under a docstring for the new exercise."""
    text = (SOLUTIONS / model.filename).read_text()
    docstring = re.match(r'"""(?:.|\n)*?"""\n', text)
    head = (
        f'"""Exercise {number}: {title}.\n\n'
        f"Scaffolded from exercise {model.stem[:2]} ({model.title}) by `nox -s new`:\n"
        f"{SOLUTION_NOTE} Make it this one's: say here what it computes and the\n"
        "idea its TODOs teach, change the kernel, and move the BEGIN/END SOLUTION markers to the\n"
        "lines the student writes.\n"
        '"""\n'
    )
    return head + _rename(text[docstring.end() if docstring else 0 :], model, kernel, host)


def spec(model: catalogue.Exercise, number: str, checkset: str) -> str:
    """The model's spec file for ``checkset``; a hidden one with an empty gallery."""
    text = (SPECS / model.stem / f"{checkset}.py").read_text()
    text = re.sub(rf"\bExercise {model.stem[:2]}\b", f"Exercise {number}", text, count=1)
    if checkset == "hidden":
        gallery = re.search(r"^GALLERY = \[\n(?:.|\n)*?^\]\n", text, re.M)
        if gallery is None:
            raise ScaffoldError(f"{model.stem}'s hidden.py has no GALLERY = [...] table to empty")
        empty = (
            "# The wrong kernels a student is likely to write, each with what it must score, and\n"
            "# right kernels written differently (grader.model's wrong() and right()).\n"
            "GALLERY = []\n"
        )
        text = text[: gallery.start()] + empty + text[gallery.end() :]
    return text


def manifest_entry(
    model: catalogue.Exercise, stem: str, title: str, track: str, kernel: str, host: str
) -> str:
    """The ``[[exercise]]`` entry of the new exercise, appended to the manifest."""
    todos = ", ".join(
        f'{{ id = "{t.id}", points = {t.points}, title = "{t.title}" }}' for t in model.todos
    )
    causal = "causal = true\n" if model.causal else ""
    return (
        f'\n[[exercise]]\nstem = "{stem}"\ntitle = "{title}"\ntrack = "{track}"\n'
        f'kernel = "{kernel}"\ninterface = "{model.interface}"\n{causal}host = "{host}"\n'
        f"todos = [{todos}]\n"
        "hints = [\n" + "".join(f'  """{hint}""",\n' for hint in HINTS) + "]\n"
    )


def page(stem: str, number: str, title: str, track: str, kernel: str, model) -> str:
    todos = "\n".join(f"- **`TODO({t.id})`**: {t.title}." for t in model.todos)
    return (
        f"# Exercise {number}: {title}\n\n"
        f"File: `exercises/{stem}.py`, kernel `{kernel}`. Track: {track}.\n\n"
        "## The task\n\n"
        f"{TASK}\n\n"
        "## What to fill in\n\n"
        f"{todos}\n\n"
        "## How it is graded\n\n"
        "<!-- BEGIN GENERATED: checks (python -m kata.authoring.docs; edit grader/specs/, not this) -->\n"
        "<!-- END GENERATED: checks -->\n"
    )


def scaffold(stem: str, interface: str, track: str, title: str | None) -> list[Path]:
    """Write the new exercise's four homes; returns the paths written (generated ones follow)."""
    found = check_stem(stem)
    number, name = found["number"], found["name"]
    if track not in TRACK_NAMES:
        raise ScaffoldError(f"track must be one of {', '.join(TRACK_NAMES)}, got {track!r}")
    model = model_of(interface)
    title = title or name.replace("_", " ")
    kernel, host = f"{name}_kernel", name
    written = {
        SOLUTIONS / f"{stem}.py": solution(model, number, title, kernel, host),
        SPECS / stem / "public.py": spec(model, number, "public"),
        SPECS / stem / "hidden.py": spec(model, number, "hidden"),
        PAGES / f"{stem}.md": page(stem, number, title, track, kernel, model),
    }
    for path, text in written.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    with MANIFEST.open("a") as manifest:
        manifest.write(manifest_entry(model, stem, title, track, kernel, host))
    return [MANIFEST, *written]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nox -s new --", description=__doc__.split("\n")[0])
    p.add_argument("stem", help="NN_name: the exercise's number and name, e.g. 11_paged_attention")
    p.add_argument(
        "--interface",
        required=True,
        choices=sorted(kinds.KINDS),
        help="the kernel's fixed parameters and launch (kata/kinds/)",
    )
    p.add_argument("--track", default="extensions", help="core, performance or extensions")
    p.add_argument("--title", help="a few words for the manifest and the page")
    args = p.parse_args(argv)
    try:
        paths = scaffold(args.stem, args.interface, args.track, args.title)
    except ScaffoldError as exc:
        print(f"new: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(f"wrote {path.relative_to(ROOT)}")
    # The generators read the manifest at import: they run in a fresh Python.
    for module in ("kata.authoring.generate", "kata.authoring.docs"):
        subprocess.run([sys.executable, "-m", module], cwd=ROOT, check=True)
    print(
        f"\n{args.stem} is a copy of exercise {model_of(args.interface).stem[:2]} under new names. "
        "Next: the kernel and its regions (solutions/), cases, checks, traps and a gallery "
        "(grader/specs/), hints (exercises/info.toml), the page (docs/exercises/); then "
        "`nox -s generate` and `nox -s validate`."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
