"""The GPU figures the docs quote, each from one bench run: ``docs/bench_h200.json`` (the
H200's, which the tables are drawn from) and ``docs/bench_h100.json`` (an H100's).

Every figure from a run carries a tag right after it, naming the card and what it is:

    **0.94-0.97x<!-- h200: attention fast_vs_sdpa @ bf16 D=64 S>=4096 -->** torch SDPA

A section of rows (``attention``, ``gating``, ``split_kv``, ...) selects rows of the run (after
``@``: ``bf16``, ``fp16``, ``fp32``, ``causal``, ``non-causal``, ``KEY=V``, ``KEY=V1,V2``,
``KEY>=V``, ``KEY<=V``; no ``|``, which would split a table's cell) and a field of them, a key of the JSON or a derived one
(``_derived``), or several separated by commas; the figure is the range of the values, or their
``min``/``max`` with that word first. ``host FIELD @ wrapper=05`` reads
the host rows (time per call), selected by exercise number. ``copy FIELD``, ``chapter FIELD`` (the chapter's 01 kernel,
timed for scale) and ``run PATH`` (``versions.torch``, ``gpu_state_after.clocks.sm``) read one
value. The figure keeps the form it has in the page: its decimals, its suffix, a range or a
single number. The attention and gating tables of performance.md and 07's table are whole
generated sections, each drawn by its kind's ``tables`` module (``TABLES``, ``DERIVED``; the
convention is in ``grader.kinds``).

``python -m kata.authoring.docs`` (``nox -s generate``) rewrites every tagged figure and section
from the JSON, so that a new bench run replaces them all; ``problems()`` reports drift. The
words around the figures stay hand-written: reread them after a new run.
"""

from __future__ import annotations

import functools
import json
import math
import re
from functools import cache
from pathlib import Path

from grader import kinds
from kata.catalogue import ROOT

BENCH = ROOT / "docs" / "bench_h200.json"
# The card a tag names -> its run. Only the H200's draws the generated tables.
RUNS = {"h200": "BENCH", "h100": ROOT / "docs" / "bench_h100.json"}

TAG = re.compile(r"(?P<figure>[^\s*(<>`]+)<!-- (?P<card>h[12]00): (?P<query>[^\n]+?) -->")
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?")
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


class FigureError(ValueError):
    """A tag names no data, or its figure cannot hold what the data says."""


@cache
def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def load(path: Path | None = None) -> dict:
    return _load(path or BENCH)


def run_path(card: str) -> Path:
    """The bench file of ``card`` (``BENCH`` itself for the H200, so that a test may swap it)."""
    path = RUNS[card]
    return BENCH if path == "BENCH" else path


# ---- what a tag asks for ---------------------------------------------------------------------


# The parts of a wrapper's host time that the bench times apart (a host row's keys); the
# descriptor scratch, where a row times it, is a part of the cached launch.
HOST_PARTS = ("checks", "one_allocation", "cached_launch")
# Before the wrappers launched directly, their launch was ``JITFunction.run``, the floor's, and
# these were timed as parts beside it.
OLD_HOST_PARTS = ("checks", "one_allocation", "descriptor_scratch", "global_checks")


def _rest_host_us(row: dict) -> float:
    """What a wrapper spends per call beyond the parts timed apart: its Python glue."""
    if "cached_launch_host_us_per_call" in row:
        return row["fast_host_us_per_call"] - sum(row[f"{p}_host_us_per_call"] for p in HOST_PARTS)
    parts = sum(row.get(f"{p}_host_us_per_call", 0.0) for p in OLD_HOST_PARTS)
    return row["fast_host_us_per_call"] - row["launch_floor_host_us_per_call"] - parts


def _derived(data: dict) -> dict:
    """Fields computed from a row (and the run), each kind's (``DERIVED`` of its ``tables``
    module) and the copy's."""
    found = {
        "spread_pct": lambda r: r["spread"] * 100,  # copy
        "rest_host_us": _rest_host_us,
        "allocation_over_floor": lambda r: (
            r["one_allocation_host_us_per_call"] / r["launch_floor_host_us_per_call"]
        ),
    }
    for module in kinds.tables():
        found.update(
            {name: functools.partial(fn, data=data) for name, fn in module.DERIVED.items()}
        )
    return found


def _sections_of(data: dict) -> list:
    """The run's sections of rows (a list each), the host rows aside."""
    return [v for k, v in data.items() if isinstance(v, list) and k != "host"]


def _matches(row: dict, word: str) -> bool:
    if word in DTYPES:
        return row.get("dtype") == DTYPES[word]
    if word in ("causal", "non-causal"):
        return row.get("causal") is (word == "causal")
    m = re.fullmatch(r"(\w+)(>=|<=|=)([\w.,]+)", word)
    if not m:
        raise FigureError(f"unknown filter {word!r}")
    key, op, value = m.groups()
    if key not in row:
        return False
    if key == "wrapper":  # "05 fast_top2_gating": the exercise number
        return op == "=" and str(row[key]).split()[0] in value.split(",")
    if op == "=":
        return str(row[key]) in value.split(",")
    return row[key] >= float(value) if op == ">=" else row[key] <= float(value)


def values(data: dict, query: str) -> list:
    """What a tag's query selects: one value or several (a range)."""
    head, _, filters = query.partition("@")
    words = head.split()
    op = words.pop(0) if words and words[0] in ("min", "max") else None
    if len(words) != 2:
        raise FigureError(f"{query!r}: expected '[min|max] TABLE FIELD @ FILTERS'")
    table, field = words
    derived = _derived(data)
    if table == "run":
        return [_path(data, field, query)]
    if table == "copy":
        rows = [data["copy"]]
    elif table == "chapter":  # a row timed for scale, named by its "kernel" (01's)
        rows = [r for rows in _sections_of(data) for r in rows if "kernel" in r]
    elif table == "host" and "wrapper=" not in filters:
        raise FigureError(f"{query!r}: a host figure names its wrapper (wrapper=05)")
    elif isinstance(data.get(table), list):
        rows = [r for r in data[table] if "kernel" not in r]
    else:
        raise FigureError(f"{query!r}: no table {table!r}")
    rows = [r for r in rows if all(_matches(r, w) for w in filters.split())]
    found = []
    for name in field.split(","):  # several fields: the range over all of them
        get = derived.get(name) or (lambda r, name=name: r[name])
        for r in rows:
            try:
                found.append(get(r))
            except (KeyError, TypeError):  # a row that did not time this (naive at S = 16384)
                continue
    if not found:
        raise FigureError(f"{query!r}: no row matches, or none has {field!r}")
    if op:
        return [min(found) if op == "min" else max(found)]
    return found


def _path(data: dict, path: str, query: str):
    """``gpu_state_after.clocks.max.sm``: a value of the run, whose keys may hold dots."""
    value, parts = data, path.split(".")
    while parts:
        for n in range(len(parts), 0, -1):
            key = ".".join(parts[:n])
            if isinstance(value, dict) and key in value:
                value, parts = value[key], parts[n:]
                break
        else:
            raise FigureError(f"{query!r}: the run has no {path}")
    return value


# ---- writing a figure in the form the page gives it ---------------------------------------------


def _fmt(value: float, like: str) -> str:
    """``value`` written like the number ``like``: as many decimals, or in its e-notation."""
    if "e" in like:
        mantissa, _, _ = like.partition("e")
        decimals = len(mantissa.partition(".")[2])
        exp = math.floor(math.log10(abs(value))) if value else 0
        m = round(value / 10**exp, decimals)
        if abs(m) >= 10:
            m, exp = m / 10, exp + 1
        return f"{m:.{decimals}f}e{exp}"
    decimals = len(like.partition(".")[2])
    return f"{value:.{decimals}f}"


def render(figure: str, found: list) -> str:
    """``figure`` rewritten to state ``found``: the same prefix, suffix and decimals; a range
    'lo-hi' when the values differ at the figure's precision, else a single number."""
    if any(isinstance(v, str) for v in found):
        if len(found) != 1:
            raise FigureError(f"{figure!r}: several texts for one figure")
        number = NUMBER.search(found[0])
        if not NUMBER.fullmatch(figure) or not number:  # a version, a driver: the text itself
            return found[0]
        found = [float(number.group())]  # "700.00 W" quoted as a number, 700
    numbers = list(NUMBER.finditer(figure))
    if not numbers or len(numbers) > 2:
        raise FigureError(f"{figure!r} is not a number or a range")
    prefix, suffix = figure[: numbers[0].start()], figure[numbers[-1].end() :]
    lo_like = numbers[0].group()
    hi_like = numbers[-1].group()
    if len(numbers) == 2 and figure[numbers[0].end() : numbers[1].start()] != "-":
        raise FigureError(f"{figure!r}: a range is written 'lo-hi'")
    lo, hi = _fmt(min(found), lo_like), _fmt(max(found), hi_like)
    if min(found) < 0 and lo != _fmt(max(found), lo_like):
        # "-2-6%" reads as a range from -2 and parses as "-" before one: say it in words.
        raise FigureError(
            f"{figure!r}: the run gives {lo} to {hi}; a range with a negative end "
            "cannot be written 'lo-hi': quote another figure"
        )
    if lo == _fmt(max(found), lo_like):
        return prefix + lo + suffix
    if len(numbers) == 1:
        raise FigureError(f"{figure!r} is one number; the run gives {lo} to {hi}: write a range")
    return f"{prefix}{lo}-{hi}{suffix}"


def rewrite_figures(text: str, data: dict, where: str = "page", card: str = "h200") -> str:
    """Every figure tagged with ``card`` rewritten from ``data``, that card's run."""

    def one(m: re.Match) -> str:
        if m["card"] != card:
            return m.group()
        try:
            new = render(m["figure"], values(data, m["query"]))
        except FigureError as exc:
            raise FigureError(f"{where}: {exc}") from None
        return m.group().replace(m["figure"], new, 1)

    return TAG.sub(one, text)


# ---- the generated tables ------------------------------------------------------------------


def ratio(v: float) -> str:
    """A speedup as the tables write it: two decimals and an x."""
    return f"{v:.2f}x"


def percent(v: float, decimals: int = 1) -> str:
    """A fraction as the tables write it, in percent."""
    return f"{v * 100:.{decimals}f}%"


def _sections() -> dict:
    """Each kind's generated sections (``TABLES`` of its ``tables`` module), by marker name."""
    found = {}
    for module in kinds.tables():
        found.update(module.TABLES)
    return found


def __getattr__(name: str):
    if name == "SECTIONS":  # marker name -> fn(data) -> the section's text
        return _sections()
    raise AttributeError(name)
