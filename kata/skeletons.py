"""The pristine skeletons, frozen in ``kata/skeletons.json`` by ``nox -s generate``: what the
grader splices a submission's TODO regions into (``grader.run.splice``).

The grader, ``nox -s reset``, and the validation galleries all read the skeletons from here, so
none of them depends on ``solutions/`` still holding the kata's own reference kernels.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from kata.regions import SKELETONS, Region, Skeleton


class SkeletonError(LookupError):
    pass


@functools.cache
def _frozen(path: Path = SKELETONS) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise SkeletonError(f"{path} is missing: run `nox -s generate`") from None


def pristine(stem: str) -> Skeleton:
    """The untouched skeleton of exercise ``stem`` with its regions."""
    entry = _frozen().get(stem)
    if entry is None:
        raise SkeletonError(f"no frozen skeleton for {stem}: run `nox -s generate`")
    return Skeleton(
        entry["text"],
        tuple(Region(**r) for r in entry["regions"]),
        tuple(tuple(c) for c in entry["comments"]),
    )
