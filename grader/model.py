"""The grader's records, declared with keywords in the specs (``grader/specs/<stem>/``).

* ``Case``: the inputs one launch of a kernel gets, built deterministically from fixed seeds.
* ``Trap``: one classic wrong answer: its id, the TODO it belongs to, what a student is told,
  and its *forms*, the outputs the mistake produces on a case.
* ``Check``: the points one judgement is worth, the TODO it charges (``None`` for a 0-point note
  about given code), its cases, its judge and the traps it can name.

* ``Variant`` (made by ``wrong`` and ``right``): a kernel of the validation gallery, a wrong one
  or a right one written differently, with the ``Expect`` it must score (``grader.validate``
  grades them).

``GraderError``: the grader's own premise failed (a spec or a check raises it).

``hidden`` is a flag on cases and checks: ``public.py`` of a spec declares the ones a student's
handout ships, ``hidden.py`` the instructor's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the launcher imports this before it isolates itself: numpy starts threads
    import numpy as np

Output = dict[str, "np.ndarray"]

# The label of a case's second run with its programs in reverse order, and why a kernel must
# give the same answer there (grader.run.order runs it; the judge names it in a failure).
REVERSED = "programs in reverse order"
WHY = (
    "programs of a GPU grid run in any order, at once: a program must not read what another "
    "program of the same launch writes"
)


@dataclass(frozen=True, kw_only=True)
class Case:
    name: str
    about: str  # what a student reads in a failure message
    inputs: dict[str, np.ndarray]
    # "transposed" | "sliced" | "row-sliced" | "padded" (kata.kinds.base._tensor)
    layout: dict[str, str] = field(default_factory=dict)
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
    # Scalar launch parameters of exercises past the chapter (08's NUM_SPLITS, 09's CAPACITY),
    # by the kernel parameter's name; the interface reads them.
    params: dict[str, int] = field(default_factory=dict)

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
    # Where the forms are different slips (one pair too many, one too few): a message per form,
    # in the forms' order, so that the student reads which one was seen. Empty: ``message``.
    messages: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.id

    def message_for(self, form: int) -> str:
        """The message for a kernel whose output matched form number ``form``."""
        return self.messages[form] if self.messages else self.message


@dataclass(frozen=True, kw_only=True)
class Check:
    id: str
    todo: str | None  # None: a note on given code, worth no points
    points: int
    about: str
    cases: tuple[str, ...]
    judge: str  # a judge the exercise's interface offers (kata.kinds)
    traps: tuple[Trap, ...] = ()
    hidden: bool = True
    # A TODO whose checks must pass before this one can be judged (04's causal stages cannot be
    # told apart from a wrong exp2 scale): until then a failure here is "blocked", not "failed".
    requires: str | None = None
    proof: Callable[[list[Case]], None] | None = None  # a chapter demonstration, kept as a check
    # A note on inputs the exercise's contract accepts (strided tensors: the chapter's kernels
    # take strides). It costs nothing on its own; failed by a file that edited given code, it
    # costs the exercise (grader.run.runner). False: inputs outside the contract (float16 into the
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


@dataclass(frozen=True, kw_only=True)
class Forbidden:
    """Triton functions an exercise refuses before anything runs (``grader.run.screen``): every
    name that starts with ``prefix`` (an attribute, a name, an imported name), anywhere in the
    file. For a mistake whose output the two backends would judge differently (09's atomic
    counter: in token order in the CPU interpreter, in any order on a GPU), so that both refuse
    it alike, naming its ``trap``; ``why`` is what the student reads."""

    prefix: str
    trap: str
    why: str


# ---- the validation gallery's variants ----

Edit = tuple[str, str]


@dataclass(frozen=True, kw_only=True)
class Expect:
    """What one graded file must get. ``score``: "full", "zero" or "less" (loses points)."""

    score: str
    traps: tuple[str, ...] = ()  # exactly these trap ids must be named
    failed: tuple[str, ...] = ()  # these checks must have status "failed"
    passed: tuple[str, ...] = ()  # these checks must pass (blocked is not enough)
    breaks: str | None = None  # its TODO: every check of another TODO must pass (or be blocked)
    integrity: bool | None = False  # it edits given code (None: not judged)
    notes_failed: tuple[str, ...] = ()  # 0-point notes allowed to fail
    error: str | None = None  # a regular expression the exercise's error must match
    message: str | None = None  # a regular expression some failed check's message must match
    warning: str | None = None  # a regular expression one of its warnings must match

    def label(self, max_score: int) -> str:
        return {"full": f"={max_score}", "zero": "=0", "less": f"<{max_score}"}[self.score]


@dataclass(frozen=True, kw_only=True)
class Variant:
    name: str
    why: str
    expect: Expect
    fills: dict[str, str | tuple[str, ...]] = field(default_factory=dict)  # TODO -> code
    edits: tuple[Edit, ...] = ()  # exact (old, new) replacements on the filled file
    file: str | None = None  # a whole file in the spec's gallery/ folder instead
    on_cuda: Expect | None = None  # where the compiled backend must differ

    def expectation(self, backend: str) -> Expect:
        return self.on_cuda if backend == "cuda" and self.on_cuda else self.expect

    @property
    def full_marks(self) -> bool:
        return self.expect.score == "full"


def wrong(
    name: str, why: str, *, traps=(), failed=(), breaks=None, integrity=None, **kw
) -> Variant:
    """A kernel the grader must fail (``integrity`` defaults to "it has edits")."""
    edits = tuple(kw.pop("edits", ()))
    flagged = bool(edits) if integrity is None else integrity
    expect = Expect(
        score=kw.pop("score", "less"),
        traps=tuple(traps),
        failed=tuple(failed),
        breaks=breaks,
        integrity=flagged,
        **kw.pop("expect", {}),
    )
    return Variant(name=name, why=why, expect=expect, edits=edits, **kw)


def right(name: str, why: str, *, integrity=None, **kw) -> Variant:
    """A kernel written differently that must keep full marks."""
    edits = tuple(kw.pop("edits", ()))
    flagged = bool(edits) if integrity is None else integrity
    expect = Expect(score="full", integrity=flagged, **kw.pop("expect", {}))
    return Variant(name=name, why=why, expect=expect, edits=edits, **kw)


class GraderError(Exception):
    """The grader's own premise failed (e.g. a trap not visible on a check's inputs)."""
