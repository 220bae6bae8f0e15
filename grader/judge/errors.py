"""Turn exceptions from a submission into one line a student can act on."""

from __future__ import annotations

import linecache
import re
import traceback
from dataclasses import dataclass
from pathlib import Path

# The graded file's line -> the submission's (``grader.run.splice``): what ran is the skeleton
# with the student's regions spliced in, what the student reads is their own file. None: the
# file ran as written.
LINES: dict[int, int] | None = None
# Each TODO's regions, as [first, last] lines of the submission (``splice.Spliced.regions``):
# a compile error on one of them is named by its TODO. None: not known (a file run as written).
REGIONS: dict[str, list[list[int]]] | None = None

# How a compile error's message begins: the report, the class page and the gradebook's reasons
# (grader.report.reasons) recognise the student's compile error by it.
DOES_NOT_COMPILE = "your kernel does not compile"


def use_lines(
    lines: dict[int, int] | None, regions: dict[str, list[list[int]]] | None = None
) -> None:
    global LINES, REGIONS
    LINES, REGIONS = lines, regions


def region_of(line: int | None) -> str | None:
    """The TODO whose region holds the submission's ``line``, or None."""
    for todo, spans in (REGIONS or {}).items():
        if line is not None and any(a <= line <= b for a, b in spans):
            return todo
    return None


def _shown(line: int | None) -> int | None:
    return line if line is None or LINES is None else LINES.get(line, line)


def _student_line(exc: BaseException, file: str) -> int | None:
    """The last line of the student's file in the traceback, if any. Triton's interpreter
    re-raises a kernel's error as ``InterpreterError(...) from e``, so the student's frames are
    in the chained exception's traceback: look there too."""
    target = str(Path(file).resolve())
    line = None
    seen, chained = set(), exc
    while line is None and chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        for frame in traceback.extract_tb(chained.__traceback__):
            if str(Path(frame.filename).resolve()) == target:
                line = frame.lineno
        chained = chained.__cause__ or chained.__context__
    if isinstance(exc, SyntaxError) and exc.lineno:
        line = exc.lineno
    return _shown(line)


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _is_compilation_error(exc: BaseException) -> bool:
    return any(k.__name__ == "CompilationError" for k in type(exc).__mro__)


def _compilation_line(exc: BaseException, file: str) -> int | None:
    """Triton's CompilationError holds the jitted function's source (from its ``def`` line) and
    the failing AST node, numbered from that line: find the ``def`` in the student's file. The
    innermost error of a chain is where the problem is (a helper called by the kernel)."""
    # The text that ran, as Triton read it back: not the file on disk.
    lines = [ln.strip() for ln in linecache.getlines(str(Path(file).resolve()))]
    if not lines:
        return None
    found = None
    for e in _chain(exc):
        src, lineno = getattr(e, "src", None), getattr(getattr(e, "node", None), "lineno", None)
        if not (src and lineno):
            continue
        first = src.strip().splitlines()[0].strip()
        if first in lines:
            found = lines.index(first) + lineno
    return _shown(found)


@dataclass(frozen=True, kw_only=True)
class Known:
    """A message of Triton's compiler a student meets, and what it means in plain words."""

    id: str
    needle: str  # a piece of the compiler's message (Triton 3.6 and 3.9 alike)
    plain: str  # the cause in plain words, and what to do instead: one or two sentences


# Matched in order, the first that fits: a specific message before a general one. Each entry's
# test (tests/test_grader.py, test_a_known_compile_message_gets_its_plain_words) provokes the
# message from a real compile for the course's GPU. tl.dot's minimum: the compiler says
# "M >= 1, N >= 1 and K >= 16"; only K, the reduction dimension, has a floor above 1, and its
# value depends on the inputs' type and Triton's version.
# fmt: off
KNOWN = (
    Known(id="shape-mismatch", needle="Cannot make_shape_compatible",
          plain="two blocks in one operation have shapes that do not line up (the compiler "
                "names the two sizes), and neither can be stretched to the other. A value per "
                "row, of shape [BLOCK_M], meets a [BLOCK_M, BLOCK_D] block only once it has a "
                "column axis: x[:, None]."),
    Known(id="dot-too-small", needle="Input shapes should have M >= ",
          plain="a compiled tl.dot's reduction (K) dimension is below the compiler's minimum "
                "(16 for 16-bit inputs): pad the block that feeds it (BLOCK_D for q @ k^T, "
                "BLOCK_N for p @ v) up to 16."),
    Known(id="dot-inner-mismatch", needle="equal reduction dimensions",
          plain="tl.dot's inner dimensions differ: it multiplies (M, K) by (K, N). Check which "
                "operand needs tl.trans."),
    Known(id="dot-not-2d", needle="input and other must have equal ranks >= 2",
          plain="tl.dot multiplies two 2-D blocks, and one of these is 1-D. Give it a second "
                "axis (x[None, :] or x[:, None]), or write the product as tl.sum(a * b, axis=...)."),
    Known(id="continue", needle="unsupported AST node type: Continue",
          plain="`continue` does not compile: bound the loop instead, so it stops at the last "
                "tile it needs."),
    Known(id="break", needle="unsupported AST node type: Break",
          plain="`break` does not compile: bound the loop instead, so it stops at the last tile "
                "it needs."),
    Known(id="unsupported-syntax", needle="unsupported AST node type",
          plain="this piece of Python (named above) is not part of the language Triton "
                "compiles. A kernel is made of assignments, if, for and while loops, and tl "
                "functions."),
    Known(id="arange-not-constexpr", needle="arange's arguments must be of type tl.constexpr",
          plain="block sizes must be tl.constexpr parameters: tl.arange needs bounds known when "
                "the kernel compiles, not a runtime size such as N."),
    Known(id="arange-not-power-of-2", needle="arange's range must be a power of 2",
          plain="a block's length, tl.arange(0, n), must be a power of 2 (16, 32, 64, ...): take "
                "the next one up and mask the lanes past the end."),
    Known(id="shape-not-constexpr", needle="must have type `constexpr[int]`",
          plain="a block's shape (tl.zeros, tl.full) must be known when the kernel compiles: "
                "build it from tl.constexpr parameters such as BLOCK_M, not from a runtime size."),
    Known(id="loop-changes-type", needle="Loop-carried variable",
          plain="a variable carried from one step of the loop to the next changed its shape or "
                "type inside the loop. It must keep the shape and type it had before the loop: "
                "look for a reduction or a broadcast on that line."),
    Known(id="branch-changes-type", needle="block redefines it as",
          plain="an if gives a variable a value of another shape or type than the one it had "
                "before. Both ways through the if must leave it the same; tl.where often says "
                "what the if meant."),
    Known(id="name-not-defined", needle="NameError('",
          plain="the kernel uses a name it cannot see. A kernel reads its arguments, its own "
                "variables and the module's tl.constexpr globals: pass anything else in as an "
                "argument."),
    Known(id="pointer-plus-float", needle="invalid operands of type pointer",
          plain="a pointer was combined with a float. Offsets added to a pointer are integers "
                "(tl.arange, integer arguments, strides): keep floats for the values loaded."),
    Known(id="trans-1d", needle="tl.trans invoked with a 0- or 1-dimensional tensor",
          plain="tl.trans swaps the two axes of a 2-D block; a 1-D block has none to swap."),
    Known(id="range-not-int", needle="For loop bounds and step must all be ints",
          plain="range() in a kernel takes integers only, for its start, stop and step."),
    Known(id="unknown-keyword", needle="got an unexpected keyword argument",
          plain="a Triton function was called with an argument name it does not take (Triton "
                "writes axis=, where torch writes dim=)."),
)
# fmt: on


def known(text: str) -> Known | None:
    """The first entry of KNOWN whose needle is in ``text``."""
    return next((k for k in KNOWN if k.needle in text), None)


def _plain(text: str) -> str:
    found = known(text)
    return f" In plain words: {found.plain}" if found else ""


class NotLaunched(RuntimeError):
    """The kernel object was called, but no launch reached Triton."""


def explain(exc: BaseException, file: str) -> str:
    name = type(exc).__name__
    if isinstance(exc, NotLaunched):
        return f"{exc}: a kernel must run as Triton code, not compute its answer in Python"
    if isinstance(exc, SystemExit):
        return f"the file called sys.exit({exc.code!r})"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    text = str(exc).strip()
    if _is_compilation_error(exc) or "CompilationError" in text[:200]:
        # The message quotes the kernel's source and a caret; the cause is the innermost
        # error_message of the chain (an outer error may only point at the call site).
        causes = [m for e in _chain(exc) if (m := getattr(e, "error_message", None))]
        useful = [ln for ln in text.splitlines() if ln.strip() and ln.strip() != "^"]
        cause = causes[-1] if causes else (useful[-1] if useful else name)
        # Whole: the compiler's own words are the student's best lead (only a flood is cut).
        cause = re.sub(r"\s+", " ", str(cause).strip().splitlines()[-1])[:1000].rstrip(".")
        line = _compilation_line(exc, file) or _student_line(exc, file)
        todo = region_of(line)
        where = (
            f", line {line} (in TODO({todo}))"
            if todo
            else f", line {line} of {Path(file).name}"
            if line
            else ""
        )
        return f"{DOES_NOT_COMPILE}{where}: Triton's compiler says: {cause}." + _plain(
            text + " " + cause
        )
    first = text.splitlines()[0] if text else ""
    first = re.sub(r"\s+", " ", first)[:300]
    line = _student_line(exc, file)
    where = f" at line {line} of {Path(file).name}" if line else ""
    plain = _plain(" ".join(str(e) for e in _chain(exc)))
    said = f"{name}{where}: {first}" if first else f"{name}{where}"
    return (said.rstrip(".") + "." + plain) if plain else said
