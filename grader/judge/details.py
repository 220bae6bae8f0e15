"""Figures of a check's judgement, for the HTML report: how far the output was from the right
answer, and for a failure, *where*.

Computed in the checks' process (grader.judge.checking), where the outputs and the right answers
are; they travel to the runner in the check's pytest metadata and land in the report as the
check's optional ``details``. Small by construction (every list is capped), and never a value
of a check's inputs: a hidden check's inputs stay hidden; its outputs' errors, placed on the
output's shape, are what the student is told anyway.

Shapes (all numbers finite or null; null means NaN, inf or never written):

* every judged check: ``{"max_error": float|null, "tolerance": [atol, rtol]}``
  (``"exact": true`` instead for expert indices and every other integer output);
* a failed or blocked attention check adds ``"kind": "attention"``, ``"case"``,
  ``"hidden"``, ``"shape"`` ({"M", "N", "D"} or {"B", "H", "S", "D"}), ``"block_m"``,
  ``"block_n"``, ``"causal"``, ``"bad_values"``, ``"values"``, ``"rows"`` (row count),
  ``"row_step"`` and ``"row_error"`` (the largest error in each group of ``row_step`` query
  rows, at most ``MAX_BINS`` groups), and, on the first failing check of each TODO of a 2-D
  attention exercise, ``"probe"`` (see ``probe_details``: a text heatmap of 48 x 48 characters);
* a failed or blocked gating check adds ``"kind": "gating"``, ``"case"``, ``"hidden"``,
  ``"shape"`` ({"M", "E"}), ``"bad_tokens"``, ``"tokens"`` (the token numbers shown, at most
  ``MAX_TOKENS``), ``"chosen"`` and ``"expected"`` ([idx0, idx1] per token shown; an index
  outside [0, E) is null), ``"weight_sum"`` (w0 + w1 per token shown) and
  ``"expected_sum"`` (1.0: renormalized weights);
* a failed or blocked split-KV merge check (08) adds ``"kind": "split-kv"``, ``"case"``,
  ``"hidden"``, ``"shape"`` ({"B", "S", "D"}: rows, splits, head dimension), ``"bad_rows"``,
  ``"rows"`` and ``"row_error"`` (the largest error of each row, in out or lse, for the first
  ``MAX_BINS`` rows);
* a failed or blocked MoE dispatch check (09) adds ``"kind": "dispatch"``, ``"case"``,
  ``"hidden"``, ``"shape"`` ({"M", "K", "E"}: tokens, choices, experts), ``"counts"`` and
  ``"offsets"`` ({"got", "expected"}, one entry per expert for the first ``MAX_BINS``
  experts; null where never written), ``"bad_experts"`` (experts whose count or offset is
  wrong), ``"bad_pairs"`` (pairs whose slot is wrong), ``"pairs"`` and ``"slots"`` (the first
  ``MAX_TOKENS`` wrong pairs, by number in (token, choice) order, with [got, expected] slots).
"""

from __future__ import annotations

import numpy as np

from grader import kinds
from grader.kinds.base import error as _error
from grader.kinds.base import num as _num
from grader.model import Case, Output


def max_error(judge, case: Case, got: Output) -> dict:
    """The figures of one judged case: the largest error against the tolerance."""
    keys = [
        k
        for k in judge.keys
        if not judge.interface.exact(k) and not np.issubdtype(np.asarray(got[k]).dtype, np.integer)
    ]
    if not keys:
        return {"exact": True}
    want = judge.expected(case, got)
    worst = max(float(_error(got[k], want[k]).max(initial=0.0)) for k in keys)
    return {"max_error": _num(worst), "tolerance": list(judge.tol(keys[0], case))}


def merge(figures: list[dict]) -> dict:
    """The figures of several cases of one check: the worst of them."""
    if not figures or "exact" in figures[0]:
        return figures[0] if figures else {}
    errors = [f["max_error"] for f in figures]
    worst = None if None in errors else max(errors)
    return {"max_error": worst, "tolerance": figures[0]["tolerance"]}


def failure(judge, case: Case, got: Output) -> dict:
    """Where the output of a failing case is wrong, on the output's own shape: each kind's
    figure (``grader/kinds/<kind>/figures.py``)."""
    return kinds.home(judge.interface.name).failure(judge, case, got)
