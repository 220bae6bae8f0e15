"""A kernel file's text, read as Python reads a source file, and its lines as Python counts them.

Editors save the same program in many ways: a UTF-8 byte-order mark (Notepad, Visual Studio,
PowerShell), a PEP 263 coding line, ``\\r\\n``, ``\\r`` or ``\\r\\r\\n`` line ends, form feeds,
U+2028 in a pasted comment. Python's tokenizer ends a line at ``\\n``, ``\\r\\n`` and ``\\r`` only;
``str.splitlines`` also splits at form feeds, U+2028 and friends, so any line cache built with it
numbers lines differently from the syntax tree and the tracebacks (Triton reads a kernel's
source back from ``linecache``).
"""

from __future__ import annotations

import io
import re
import tokenize


class SourceError(ValueError):
    """The bytes are not a Python source file; the message says why, for a student."""


def read(data: bytes, name: str = "the file") -> str:
    """``data`` decoded as Python decodes a source file (BOM, coding line, UTF-8 by default),
    with every line end made ``\\n``."""
    if b"\x00" in data:
        at = data.index(b"\x00")
        raise SourceError(
            f"{name} is not a text file (it holds binary data: a NUL byte at byte {at}); "
            "save your kernel as plain Python source"
        )
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except SyntaxError as exc:  # an unknown coding, or a BOM beside another coding
        raise SourceError(f"{name}: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"{name} is not valid {exc.encoding} (byte {exc.start}): save it as UTF-8"
        ) from None
    text = text.removeprefix("\ufeff")  # a BOM the coding line did not consume
    # \r\n first: \r\r\n is then \r + \n, two line ends, as Python's tokenizer reads it.
    return text.replace("\r\n", "\n").replace("\r", "\n")


_LINE = re.compile(r"[^\n]*\n|[^\n]+$")


def lines(text: str) -> list[str]:
    """``text``'s lines with their ends, split where Python's tokenizer ends a line (``\\n`` in
    text from ``read``): what ``linecache`` must hold for tracebacks and Triton."""
    return _LINE.findall(text)
