"""The grader's records, declared with keywords in the specs (``grader/specs/<stem>/``).

* ``Case``: the inputs one launch of a kernel gets, built deterministically from fixed seeds.
* ``Trap``: one classic wrong answer: its id, the TODO it belongs to, what a student is told,
  and its *forms*, the outputs the mistake produces on a case.
* ``Check``: the points one judgement is worth, the TODO it charges (``None`` for a 0-point note
  about given code), its cases, its judge and the traps it can name.

``hidden`` is a flag on cases and checks: ``public.py`` of a spec declares the ones a student's
handout ships, ``hidden.py`` the instructor's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

Output = dict[str, np.ndarray]


@dataclass(frozen=True, kw_only=True)
class Case:
    name: str
    about: str  # what a student reads in a failure message
    inputs: dict[str, np.ndarray]
    layout: dict[str, str] = field(default_factory=dict)  # "transposed" | "sliced" | "row-sliced"
    block_m: int = 16  # tiles the grader launches 2-D attention with
    block_n: int = 16
    dtype: str | None = None  # cast the inputs to this torch dtype on the device
    causal: bool = False
    window: int | None = None  # sliding-window attention
    twin: str | None = None  # a case with the same numbers in a plain layout (for notes)
    hidden: bool = True
    # Autotuned kernels (the performance track): the tile configuration the launcher pins,
    # past the kernel's autotuner ({"BLOCK_M": 64, ..., "num_warps": 4, "num_stages": 2}), or
    # ``each_config``: run once under every configuration the file's own autotuner could pick
    # on a GPU.
    config: dict | None = None
    each_config: bool = False

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, kw_only=True)
class Trap:
    id: str
    todo: str  # the TODO id to revisit
    summary: str  # one line, for tables
    message: str  # what went wrong, in a sentence or two, without the code
    hint: str  # one line for summary tables: what to do, and where
    forms: Callable[[Case, Output], list[Output]]  # outputs this mistake gives (partial dicts)
    why: str = ""  # the docs' explanation (markdown)
    invariant: str = ""  # the property of a right kernel that this mistake breaks (trap cards)

    def __str__(self) -> str:
        return self.id


@dataclass(frozen=True, kw_only=True)
class Check:
    id: str
    todo: str | None  # None: a note on given code, worth no points
    points: int
    about: str
    cases: tuple[str, ...]
    judge: str  # a judge the exercise's interface offers (kata.interfaces)
    traps: tuple[Trap, ...] = ()
    hidden: bool = True
    # A TODO whose checks must pass before this one can be judged (04's causal stages cannot be
    # told apart from a wrong exp2 scale): until then a failure here is "blocked", not "failed".
    requires: str | None = None
    proof: Callable[[list[Case]], None] | None = None  # a chapter demonstration, kept as a check
    # A note on inputs the exercise's contract accepts (strided tensors: the chapter's kernels
    # take strides). It costs nothing on its own; failed by a file that edited given code, it
    # costs the exercise (grader.runner). False: inputs outside the contract (float16 into the
    # chapter's float32 kernels), which never cost anything.
    contract: bool = False

    def __post_init__(self):
        if self.todo is None and self.points:
            raise ValueError(f"check {self.id}: a note (todo=None) is worth no points")

    def __str__(self) -> str:
        return self.id

    @property
    def note(self) -> bool:
        return self.todo is None
