"""The judge a check names, for the exercise's interface: the kind's own (``JUDGES`` of
``grader/kinds/<kind>/``), or the twin judge of the notes on given code (``grader.kinds.base``).

A judge returns ``None`` for a right answer, a line of evidence for a wrong one, and raises
``Blocked`` when it cannot judge its own TODO because another TODO is not done yet (the weights
of two experts that are the same expert, say). Judges never look at a trap.
"""

from __future__ import annotations

from grader import kinds
from grader.kinds.base import Judge, TwinJudge
from kata.kinds.base import Interface


def make(name: str, interface: Interface) -> Judge:
    if name == "twin":
        return TwinJudge(interface)
    if name not in interface.judges:
        raise KeyError(f"interface {interface.name} offers no judge {name!r}")
    return kinds.home(interface.name).JUDGES[name](interface)
