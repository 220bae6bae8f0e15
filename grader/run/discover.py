"""Where a submission's exercise files are: the folder given, a folder below it, or a zip.

Students upload zipped folders (``ada/exercises/01_....py``, ``ada/my-upload/...``), and LMS and
Gradescope exports hand over ``.zip`` files as they were uploaded. A folder graded only at its
top would score 0 with nothing but "not found". The grader (``--target``), batch grading and
the Gradescope entry point all look here instead: the folder itself, the folder below it that
holds the most exercise files, or, when no folder holds one, the zips in it, unpacked safely
(``unpack``) into a folder of the caller's choosing.
"""

from __future__ import annotations

import re
import shutil
import stat
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kata.catalogue import EXERCISE_LIST, Exercise

IGNORED = {"__MACOSX", "__pycache__", "node_modules"}  # zip tools' and Python's clutter
# What one upload's zip may hold: exercise files are a few kB each, so these bound an archive
# built to fill the disk (a zip bomb) long before they bound a real upload.
MAX_MEMBERS = 1000
MAX_BYTES = 64 * 1024 * 1024  # unpacked, all members together


class UploadError(ValueError):
    """A zip that is not unpacked, and why (its name first)."""


def _count(folder: Path, names: set[str]) -> int:
    return sum((folder / name).is_file() for name in names)


def _kept(folder: Path, path: Path) -> bool:
    parts = path.relative_to(folder).parts
    return not any(part in IGNORED or part.startswith(".") for part in parts)


def exercise_folder(folder: Path, exercises: Iterable[Exercise] = EXERCISE_LIST) -> Path | None:
    """The folder holding the most of ``exercises``' files, ``folder`` itself or one below it
    (on a tie the shallowest, then the first by name); None when no folder holds any."""
    names = {ex.filename for ex in exercises}
    below = [folder] + [p for p in folder.rglob("*") if p.is_dir() and _kept(folder, p)]
    scored = [(_count(p, names), p) for p in below]
    best = max((n for n, _ in scored), default=0)
    if not best:
        return None
    return min((p for n, p in scored if n == best), key=lambda p: (len(p.parts), str(p)))


def zips_in(folder: Path) -> list[Path]:
    """The ``.zip`` files in ``folder`` or below it (not in hidden or clutter folders)."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.suffix.lower() == ".zip" and p.is_file() and _kept(folder, p)
    )


def _member_path(name: str) -> PurePosixPath:
    """A member's path inside the folder it is unpacked into; UploadError where it would land
    elsewhere (an absolute path, a drive, a ``..``)."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or re.match(r"^[A-Za-z]:", name):
        raise UploadError(f"member {name!r} has an absolute path")
    if ".." in path.parts:
        raise UploadError(f"member {name!r} climbs out of the folder ('..')")
    return path


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack the zip ``archive`` into ``dest`` (made afresh), safely: no member may have an
    absolute path, a ``..`` or be a link, and there may be at most MAX_MEMBERS of them, holding
    at most MAX_BYTES in all.
    Returns ``dest``; raises UploadError naming the archive and the problem."""
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UploadError(f"{archive.name}: not a readable zip ({exc})") from None
    with zf:
        members = zf.infolist()
        try:
            if len(members) > MAX_MEMBERS:
                raise UploadError(f"{len(members)} members, more than {MAX_MEMBERS}")
            for info in members:
                _member_path(info.filename)
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise UploadError(f"member {info.filename!r} is a symbolic link")
                if info.flag_bits & 0x1:
                    raise UploadError(f"member {info.filename!r} is encrypted")
            if sum(i.file_size for i in members) > MAX_BYTES:
                raise UploadError(f"it unpacks to more than {MAX_BYTES // 2**20} MiB")
        except UploadError as exc:
            raise UploadError(f"{archive.name}: {exc}: not unpacked") from None
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        # zipfile stops each member at its stated size (and fails its CRC if there was more),
        # so the sizes checked above bound what is written.
        try:
            for info in members:
                target = dest.joinpath(*_member_path(info.filename).parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
        except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
            shutil.rmtree(dest, ignore_errors=True)
            raise UploadError(f"{archive.name}: damaged ({exc}): not unpacked") from None
    return dest


def near_names(folder: Path, ex: Exercise, below: bool = False) -> list[str]:
    """Files in ``folder`` (and below it, with ``below``) whose names look like ``ex``'s but are
    not it: a browser's duplicate (``NN_name (1).py``), another case or suffix
    (``NN_Name.py``, ``NN_name.py.txt``), the name without its number. Relative to
    ``folder``."""
    import difflib

    if not folder.is_dir():
        return []
    found = []
    paths = folder.rglob("*") if below else folder.iterdir()
    for path in sorted(paths):
        if not path.is_file() or not _kept(folder, path) or path.name == ex.filename:
            continue
        name = path.name.lower()
        close = difflib.SequenceMatcher(None, name, ex.filename).ratio() >= 0.8
        if name.startswith(f"{ex.number}_") or ex.stem[3:] in name or close:
            found.append(path.relative_to(folder).as_posix())
    return found


def rename_hint(folder: Path, ex: Exercise, below: bool = False) -> str:
    """``; 'NN_name (1).py' looks like it: rename it to NN_name.py``, or ``""``."""
    names = near_names(folder, ex, below)
    if not names:
        return ""
    shown = ", ".join(f"'{n}'" for n in names[:3])
    return f"; {shown} look{'s' if len(names) == 1 else ''} like it: rename it to {ex.filename}"


def contents(folder: Path, most: int = 6) -> str:
    """What a folder holds, for a message: ``3 files: a.txt, notes/b.pdf, c.py`` or ``nothing``."""
    if folder.is_file():
        return f"the file {folder.name}"
    files = sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and _kept(folder, p)
    )
    if not files:
        return "nothing"
    shown = ", ".join(files[:most]) + (
        f", ... ({len(files) - most} more)" if len(files) > most else ""
    )
    return f"{len(files)} file(s): {shown}"


@dataclass
class Found:
    """Where a submission's exercise files are (``folder``; None: nowhere), what was unpacked to
    get there, and, when nowhere, what the upload holds instead."""

    folder: Path | None
    unpacked: list[Path] = field(default_factory=list)  # the zips opened
    problems: list[str] = field(default_factory=list)  # zips refused, and why
    holds: str = ""  # what the upload holds, when no exercise file was found

    def why_not(self, where: Path) -> str:
        """One line on why no exercise file was found in ``where``."""
        refused = f"; {'; '.join(self.problems)}" if self.problems else ""
        return f"no exercise files in {where}: it holds {self.holds}{refused}"


def locate(target: Path, scratch: Path, exercises: Iterable[Exercise] = EXERCISE_LIST) -> Found:
    """The folder to grade for ``target`` (a folder or a zip file): a folder that holds
    exercise files, or the zips in it (or ``target`` itself) unpacked into ``scratch/<name>``
    (``scratch`` is emptied first) when no folder does."""
    exercises = list(exercises)
    if target.is_dir():
        folder = exercise_folder(target, exercises)
        if folder is not None:
            return Found(folder)
        archives = zips_in(target)
    else:
        archives = [target] if target.suffix.lower() == ".zip" else []
    found = Found(None)
    if archives and scratch.exists():  # the caller's folder for unpacked uploads: made afresh
        shutil.rmtree(scratch)
    for archive in archives:
        try:
            unpack(archive, scratch / archive.stem)
        except UploadError as exc:
            found.problems.append(str(exc))
            continue
        found.unpacked.append(archive)
    if found.unpacked:
        found.folder = exercise_folder(scratch, exercises)
    if found.folder is None:
        found.holds = contents(target)
    return found
