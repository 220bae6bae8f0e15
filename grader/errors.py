"""Turn exceptions from a submission into one line a student can act on."""

from __future__ import annotations

import re
import traceback
from pathlib import Path


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
    return line


def _compilation_line(exc: BaseException) -> int | None:
    """Triton's CompilationError knows the AST node, relative to the kernel's first line."""
    node = getattr(exc, "node", None)
    lineno = getattr(node, "lineno", None)
    fn = getattr(exc, "fn", None) if hasattr(exc, "fn") else None
    start = getattr(fn, "starting_line_number", None) if fn else None
    if lineno and start:
        return start + lineno - 1
    return None


def explain(exc: BaseException, file: str) -> str:
    name = type(exc).__name__
    if isinstance(exc, SystemExit):
        return f"the file called sys.exit({exc.code!r})"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    text = str(exc).strip()
    if name == "CompilationError" or "CompilationError" in text[:200]:
        # The message starts with the kernel source and a caret; the cause is the last line.
        cause = [ln for ln in text.splitlines() if ln.strip()][-1] if text else name
        line = _compilation_line(exc) or _student_line(exc, file)
        where = f" (line {line} of {Path(file).name})" if line else ""
        return f"Triton could not compile the kernel{where}: {cause}"
    first = text.splitlines()[0] if text else ""
    first = re.sub(r"\s+", " ", first)[:300]
    line = _student_line(exc, file)
    where = f" at line {line} of {Path(file).name}" if line else ""
    return f"{name}{where}: {first}" if first else f"{name}{where}"
