"""Gating's boundary classes (instructor-only: the handout leaves every grader/kinds/*/boundary.py out): numbers of
experts one short of and one past a power of two (``experts``), and logits beyond float32's exp
range, both in one row, and ties among them (``extremes``)."""

from __future__ import annotations

from grader.kinds.gating import inputs
from grader.model import Case


def experts(power: int) -> tuple[int, int]:
    """Numbers of experts one short of and one past a power of two: one padded slot, and
    almost half the slots padded."""
    return power - 1, power + 1


_KINDS = {
    "high": "near +100 (exp overflows past 88.7)",
    "low": "near -120 (exp underflows below -103)",
    "mixed": "both in one row",
    "tie-high": "all tied at +100",
    "tie-low": "all tied at -120",
}


def extremes(seed: int, M: int, E: int, kinds=("high", "low", "mixed"), **fields) -> Case:
    """Logits beyond float32's exp range, token by token in turn through ``kinds`` (see
    ``grader.kinds.gating.inputs.extremes``); ``fields``: more of the case's (a configuration to pin)."""
    block = 1 << (E - 1).bit_length()
    padded = f" (padded to {block})" if block != E else ""
    about = f"{M} tokens x {E} experts{padded}, logits " + ", ".join(_KINDS[k] for k in kinds)
    return Case(
        name=f"extreme-logits-{M}x{E}",
        about=about,
        inputs=inputs.extremes(seed, M, E, kinds),
        **fields,
    )
