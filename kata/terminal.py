"""The width the kata's output is set to: the terminal's, within reason.

Fixed 80 columns wrapped badly on narrow terminals; unbounded width makes paragraphs hard to
read on wide ones. ``COLUMNS`` overrides; a pipe or file gets 80.
"""

from __future__ import annotations

import shutil

NARROWEST, WIDEST = 40, 100


def width() -> int:
    columns = shutil.get_terminal_size((80, 24)).columns
    return max(NARROWEST, min(WIDEST, columns))
