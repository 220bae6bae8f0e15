"""The kinds' registry under its old name, for ``kata/authoring/bench.py`` until its rows move
into the kinds' homes. Everything of a kind lives in ``kata/kinds/``."""

from kata.kinds import KINDS as INTERFACES
from kata.kinds import get

__all__ = ["INTERFACES", "get"]
