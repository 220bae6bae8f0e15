"""Turn exceptions from a submission into one line a student can act on."""

from __future__ import annotations

import linecache
import re
import traceback
from pathlib import Path

# The graded file's line -> the submission's (``grader.run.splice``): what ran is the skeleton
# with the student's regions spliced in, what the student reads is their own file. None: the
# file ran as written.
LINES: dict[int, int] | None = None


def use_lines(lines: dict[int, int] | None) -> None:
    global LINES
    LINES = lines


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


# Known causes -> what to do instead (one line, no code). Matched against Triton's messages. A
# small dot reads "Input shapes should have M >= 1, N >= 1 and K >= 16": only K, the reduction
# dimension, has a floor above 1, and its value depends on the inputs' type and Triton's version.
# fmt: off
ADVICE = (
    ("unsupported AST node type: Continue", "`continue` does not compile: bound the loop instead, so it stops at the last tile it needs"),
    ("unsupported AST node type: Break", "`break` does not compile: bound the loop instead, so it stops at the last tile it needs"),
    ("Input shapes should have M >= ", "a compiled tl.dot's reduction (K) dimension is below the compiler's minimum (16 for 16-bit inputs): pad the block that feeds it (BLOCK_D for q @ k^T, BLOCK_N for p @ v) up to 16"),
    ("equal reduction dimensions", "tl.dot's inner dimensions differ: (M, K) @ (K, N); check which operand needs tl.trans"),
    ("arange's arguments must be of type tl.constexpr", "block sizes must be `tl.constexpr` parameters (tl.arange needs compile-time bounds)"),
)
# fmt: on


def advice(text: str) -> str | None:
    for needle, hint in ADVICE:
        if needle in text:
            return hint
    return None


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
        cause = re.sub(r"\s+", " ", str(cause).strip().splitlines()[-1])[:300]
        line = _compilation_line(exc, file) or _student_line(exc, file)
        where = f" (line {line} of {Path(file).name})" if line else ""
        hint = advice(text + " " + cause)
        return f"Triton could not compile the kernel{where}: {cause}" + (
            f". Hint: {hint}" if hint else ""
        )
    first = text.splitlines()[0] if text else ""
    first = re.sub(r"\s+", " ", first)[:300]
    line = _student_line(exc, file)
    where = f" at line {line} of {Path(file).name}" if line else ""
    hint = advice(" ".join(str(e) for e in _chain(exc)))
    tail = f". Hint: {hint}" if hint else ""
    return (f"{name}{where}: {first}" if first else f"{name}{where}") + tail
