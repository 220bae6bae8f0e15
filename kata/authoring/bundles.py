"""``nox -s handout`` and ``nox -s autograder``: the two zips a course hands out.

* The student handout: exercises, the manifest (hints included), docs, README, noxfile and the
  grader's machinery with only its *public* checks. One rule keeps the instructor's part out:
  no ``hidden.py`` under ``grader/specs/``, no ``grader/specs/*/gallery/``, no kind's
  ``boundary.py``, no instructor tools, no solutions. Unzipped on its own, the README's commands work and ``nox -s grade`` gives 0.
* The Gradescope autograder: ``setup.sh`` and ``run_autograder`` at the top, the kata and the
  full grader beside them; it grades ``/autograder/submission`` into
  ``/autograder/results/results.json``, in the CPU interpreter or on CUDA where present.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import zipfile
from pathlib import Path

from kata import skeletons
from kata.catalogue import ALL_EXERCISES, ROOT

DIST = ROOT / "dist"
# What the handout leaves out: the grader's stages for instructors whole, and the instructors'
# modules beside the student's (the case generators for hidden checks, the Gradescope entry
# point, the docs generator).
INSTRUCTOR_STAGES = {"classroom", "validate"}
INSTRUCTOR_TOOLS = {"grader/autograder.py", "kata/authoring/docs.py"}
INSTRUCTOR_DOCS = {
    "instructors.md",
    "bench_h200.json",
    "bench_h100.json",
    "mutants.md",
}  # not for the student handout


def instructors_only(relative: Path) -> bool:
    """The one rule of the handout: hidden checks, galleries and instructor tools stay out."""
    parts = relative.parts
    if (
        relative.as_posix() in INSTRUCTOR_TOOLS
        or relative.match("grader/kinds/*/boundary.py")
        or relative.match("grader/kinds/*/hidden.py")
    ):
        return True  # a kind's boundary classes and hidden cases say where the hidden cases sit
    if parts[0] != "grader" or len(parts) < 3:
        return False
    hidden = ("hidden.py", "equivalent-mutants.toml")  # the latter quotes the reference code
    if parts[1] == "specs" and (relative.name in hidden or "gallery" in parts):
        return True
    return parts[1] in INSTRUCTOR_STAGES


TEXT_SUFFIXES = {".py", ".md", ".toml", ".ini", ".txt", ".sh", ""}


def _files(folder: str, pattern: str = "**/*") -> list[Path]:
    return sorted(
        p for p in (ROOT / folder).glob(pattern) if p.is_file() and "__pycache__" not in p.parts
    )


def _zip(path: Path, entries: dict[str, bytes | Path], executable: set[str] = frozenset()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(entries):
            data = entries[name]
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))  # reproducible zips
            info.external_attr = (0o755 if name in executable else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data.read_bytes() if isinstance(data, Path) else data)
    return path


def handout_readme() -> bytes:
    """The README without instructor-only sections, and a word on the handout's checks."""
    text = (ROOT / "README.md").read_text()
    text = re.sub(
        r"<!-- instructors-only -->.*?<!-- /instructors-only -->\n?", "", text, flags=re.S
    )
    text = text.replace(
        "It runs exercise 01's worked example on your file and prints one line per comparison (`!!`\n"
        "until the TODO is done, `ok` after).",
        "It runs exercise 01's worked example on your file and prints one line per comparison (`!!`\n"
        "until the TODO is done, `ok` after). The grader in this handout uses public checks; your\n"
        "instructor grades with hidden ones.",
    )
    return text.encode()


LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def unlink_missing(text: str, page: str, names: set[str]) -> str:
    """``[text](target)`` -> ``text`` where a relative link of the handout page ``page`` points
    at a file the handout leaves out (the instructor guide, say): no dead links for students.
    A table row that is about such a page (its first cell is the link) is left out whole."""

    def missing(target: str) -> bool:
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            return False  # an address, or an anchor on the same page
        path = os.path.normpath(os.path.join(os.path.dirname(page), target.split("#")[0]))
        return path not in names

    lines = []
    for line in text.splitlines(keepends=True):
        first = LINK.match(line.removeprefix("| ")) if line.startswith("| [") else None
        if first and missing(first.group(2)):
            continue
        lines.append(LINK.sub(lambda m: m.group(1) if missing(m.group(2)) else m.group(0), line))
    return "".join(lines)


def handout(dest: Path = DIST / "triton-kata-handout.zip") -> Path:
    top = "triton-kata/"
    entries: dict[str, bytes | Path] = {top + "README.md": handout_readme()}
    for name in ("noxfile.py", "pyproject.toml", ".gitignore"):
        entries[top + name] = ROOT / name
    # The frozen skeletons, never the working copy: an instructor who solved exercises/ in
    # this checkout must not hand the solutions out.
    for ex in ALL_EXERCISES:
        entries[top + f"exercises/{ex.filename}"] = skeletons.pristine(ex.stem).text.encode()
    entries[top + "exercises/info.toml"] = ROOT / "exercises" / "info.toml"
    for path in _files("docs"):
        if path.name not in INSTRUCTOR_DOCS:
            entries[top + str(path.relative_to(ROOT))] = path
    for path in _files("kata", "**/*.py") + [ROOT / "kata" / "skeletons.json"]:
        if not instructors_only(path.relative_to(ROOT)):
            entries[top + str(path.relative_to(ROOT))] = path
    for path in _files("grader"):
        if not instructors_only(path.relative_to(ROOT)):
            entries[top + str(path.relative_to(ROOT))] = path
    names = {name.removeprefix(top) for name in entries}
    for name in sorted(entries):
        if name.endswith(".md"):
            data = entries[name]
            text = data.read_text() if isinstance(data, Path) else data.decode()
            entries[name] = unlink_missing(text, name.removeprefix(top), names).encode()
    return _zip(dest, entries)


SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once while building the image.
# The versions are those of the environment that built this bundle (`nox -s autograder`, the
# environment `nox -s validate` proves the grader in). To use others, rebuild it with
# `python -m kata.authoring.bundles autograder --pin torch==X --pin triton==Y`, or edit these two lines.
TORCH_VERSION={torch}
PACKAGES="{packages}"
# Where a CPU-only image gets torch's small CPU build; set TORCH_INDEX_URL empty to use pip's own
# configuration instead (a machine with a local mirror, say).
TORCH_INDEX_URL=${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}
set -euo pipefail
cd "$(dirname "$0")"
python3 -m pip install --upgrade pip
have=$(python3 -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null || true)
if [ "$have" != "$TORCH_VERSION" ]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    python3 -m pip install "torch==$TORCH_VERSION"
  else  # a CPU-only image: the small CPU build; kernels run in Triton's interpreter
    python3 -m pip install "torch==$TORCH_VERSION" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
  fi
fi
python3 -m pip install $PACKAGES
"""
# What setup.sh installs besides torch, pinned to the building environment's versions.
PINNED = ("triton", "numpy", "pytest", "pytest-json-report")


def pins(overrides: list[str] = ()) -> dict[str, str]:
    """name -> version for setup.sh: this environment's, then ``name==version`` overrides."""
    from importlib import metadata

    found = {}
    for name in ("torch", *PINNED):
        try:
            found[name] = metadata.version(name).split("+")[0]  # 2.13.0+cpu -> 2.13.0
        except metadata.PackageNotFoundError:
            raise SystemExit(f"cannot pin {name}: it is not installed here") from None
    for item in overrides:
        name, sep, version = item.partition("==")
        if not sep or name not in found:
            raise SystemExit(f"--pin {item!r}: use NAME==VERSION, NAME one of {', '.join(found)}")
        found[name] = version
    return found


def setup_sh(versions: dict[str, str]) -> str:
    packages = " ".join(f"{name}=={versions[name]}" for name in PINNED)
    return SETUP_SH.replace("{torch}", versions["torch"]).replace("{packages}", packages)


RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission. AUTOGRADER_ROOT redirects /autograder for tests.
root=${AUTOGRADER_ROOT:-/autograder}
cd "$root/source" || exit 1
python3 -m grader.autograder --root "$root"
"""


def autograder(dest: Path = DIST / "triton-kata-autograder.zip", pin: list[str] = ()) -> Path:
    entries: dict[str, bytes | Path] = {
        "setup.sh": setup_sh(pins(pin)).encode(),
        "run_autograder": RUN_AUTOGRADER.encode(),
    }
    for folder in ("kata", "grader"):
        for path in _files(folder):
            relative = path.relative_to(ROOT)
            if "gallery" not in relative.parts and relative.parts[:2] != ("grader", "validate"):
                entries[str(relative)] = path
    entries["pyproject.toml"] = ROOT / "pyproject.toml"
    entries["exercises/info.toml"] = ROOT / "exercises" / "info.toml"  # the manifest
    return _zip(dest, entries, executable={"setup.sh", "run_autograder"})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kata.authoring.bundles")
    p.add_argument("which", choices=("handout", "autograder"))
    p.add_argument("--out", type=Path, help="zip to write (default: dist/triton-kata-<which>.zip)")
    p.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="NAME==VERSION",
        help="autograder: a version for setup.sh other than this environment's",
    )
    args = p.parse_args(argv)
    if args.which == "handout":
        path = handout(args.out) if args.out else handout()
    else:
        path = autograder(args.out, args.pin) if args.out else autograder(pin=args.pin)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
