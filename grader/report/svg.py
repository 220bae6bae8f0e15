"""Inline SVG figures for the HTML pages: the report's pictures of where an output is wrong, and
the class dashboard's charts.

SVG drawn here rather than with matplotlib: a student's install stays small, the page stays one
self-contained file, and the figures stay crisp at any zoom. Every piece of text goes through
``escape``; everything else written into the SVG is a number this module formatted.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib

from markupsafe import Markup, escape

NAN_COLOUR = "#5b2a86"  # NaN, inf or never written
OK_COLOUR = "#f4f6f8"  # within the tolerance
FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def _heat(t: float) -> str:
    """0..1 -> pale yellow .. orange .. dark red."""
    stops = [(255, 237, 160), (253, 141, 60), (189, 0, 38), (103, 0, 13)]
    t = min(1.0, max(0.0, t)) * (len(stops) - 1)
    i = min(int(t), len(stops) - 2)
    f = t - i
    r, g, b = (round(a + (c - a) * f) for a, c in zip(stops[i], stops[i + 1]))
    return f"#{r:02x}{g:02x}{b:02x}"


def colour(err: float | None, tol: float, top: float) -> str:
    """An error's colour on a log scale from the tolerance (palest) to ``top`` (darkest)."""
    if err is None:
        return NAN_COLOUR
    if err <= tol:
        return OK_COLOUR
    span = max(math.log10(max(top, tol * 10) / tol), 1e-9)
    return _heat(math.log10(err / tol) / span)


def _svg(width: float, height: float, body: list[str], label: str) -> Markup:
    return Markup(
        f'<svg class="figure" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'aria-label="{escape(label)}">' + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text, anchor: str = "start", extra: str = "") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {FONT} {extra}>'
        f"{escape(str(text))}</text>"
    )


def _legend(x: float, y: float, tol: float, top: float, has_nan: bool) -> list[str]:
    """A colour bar from the tolerance to the largest error, and the NaN swatch."""
    parts = [_text(x, y - 4, "error (log scale)")]
    for i in range(40):
        err = tol * (max(top, tol * 10) / tol) ** (i / 39)
        parts.append(
            f'<rect x="{x + i * 4:.1f}" y="{y:.1f}" width="4" height="10" '
            f'fill="{colour(err * 1.0001, tol, top)}"/>'
        )
    parts.append(_text(x, y + 22, f"{tol:.0e} (tolerance)"))
    parts.append(_text(x + 160, y + 22, f"{max(top, tol * 10):.2g}", "end"))
    parts.append(
        f'<rect x="{x:.1f}" y="{y + 30:.1f}" width="10" height="10" fill="{OK_COLOUR}" '
        'stroke="#999"/>'
    )
    parts.append(_text(x + 14, y + 39, "within tolerance"))
    if has_nan:
        parts.append(
            f'<rect x="{x:.1f}" y="{y + 46:.1f}" width="10" height="10" fill="{NAN_COLOUR}"/>'
        )
        parts.append(_text(x + 14, y + 55, "NaN, inf or never written"))
    return parts


def png(pixels: list[list[str]]) -> str:
    """A data: URI of an RGB PNG, one pixel per ``#rrggbb`` entry (stdlib only: a heatmap of
    2304 cells is a few hundred bytes as an image and 180 kB as SVG rectangles)."""
    height, width = len(pixels), len(pixels[0])
    raw = b"".join(b"\0" + bytes.fromhex("".join(c[1:] for c in row)) for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )
    return "data:image/png;base64," + base64.b64encode(data).decode()


def _level_colour(char: str) -> str:
    if char == "x":
        return NAN_COLOUR
    if char == ".":
        return OK_COLOUR
    return _heat(int(char) / 9)


def probe_heatmap(probe: dict) -> Markup:
    """Query row x key: how wrong the weight each query gave each key is, with the key blocks
    (and for a causal kernel the diagonal and the future keys it must hide) drawn over it."""
    rows, keys = probe["rows"], probe["keys"]
    cell = 6
    left, top_pad = 46, 28
    w, h = keys * cell, rows * cell
    levels = probe["levels"]
    image = png([[_level_colour(ch) for ch in row] for row in levels])
    body = [
        _text(left + w / 2, 14, "key j (v = identity: column j is the weight of key j)", "middle"),
        f'<image x="{left}" y="{top_pad}" width="{w}" height="{h}" preserveAspectRatio="none" '
        f'style="image-rendering: pixelated" href="{image}"/>',
    ]
    grid = 'stroke="#2b6cb0" stroke-width="1.2"'
    for n0 in range(0, keys + 1, probe["block_n"]):
        x = left + n0 * cell
        body.append(f'<line x1="{x}" y1="{top_pad}" x2="{x}" y2="{top_pad + h}" {grid}/>')
    for m0 in range(0, rows + 1, probe["block_m"]):
        y = top_pad + m0 * cell
        body.append(
            f'<line x1="{left}" y1="{y}" x2="{left + w}" y2="{y}" {grid} stroke-dasharray="3 2"/>'
        )
    if probe["causal"]:  # the triangle a causal kernel must leave at weight 0
        d = min(rows, keys) * cell
        body.append(
            f'<polygon points="{left + cell},{top_pad} {left + w},{top_pad} '
            f'{left + w},{top_pad + d - cell}" fill="none" stroke="#111" '
            'stroke-width="1.5" stroke-dasharray="5 3"/>'
        )
        body.append(
            _text(left + w - 4, top_pad + 14, "future keys: weight 0", "end", 'font-weight="600"')
        )
        body.append(
            f'<line x1="{left}" y1="{top_pad}" x2="{left + d}" y2="{top_pad + d}" '
            'stroke="#111" stroke-width="1"/>'
        )
    for r in range(0, rows, probe["block_m"]):
        body.append(_text(left - 4, top_pad + r * cell + 9, r, "end"))
    body.append(
        _text(
            12,
            top_pad + h / 2,
            "query row i",
            "middle",
            f'transform="rotate(-90 12 {top_pad + h / 2:.0f})"',
        )
    )
    for n0 in range(0, keys, probe["block_n"]):
        body.append(
            _text(
                left + (n0 + probe["block_n"] / 2) * cell,
                top_pad + h + 13,
                f"block {n0 // probe['block_n']}",
                "middle",
            )
        )
    tol, top = probe["tolerance"], probe["max_error"] or probe["tolerance"]
    body += _legend(left + w + 24, top_pad + 14, tol, top, any("x" in row for row in levels))
    return _svg(left + w + 230, top_pad + h + 24, body, "error of each attention weight")


def row_profile(details: dict) -> Markup:
    """The largest error of each group of query rows on the failing case, on a log axis, with
    the tolerance drawn."""
    tol = details["tolerance"][0]
    errors = details["row_error"]
    finite = [e for e in errors if e is not None]
    top = max(finite + [tol * 10])
    bottom = tol / 10
    left, width, height, pad = 52, 360, 120, 22
    step = width / max(len(errors), 1)

    def y(err: float) -> float:
        t = (math.log10(max(err, bottom)) - math.log10(bottom)) / (
            math.log10(top) - math.log10(bottom)
        )
        return pad + height * (1 - t)

    body = []
    for i, err in enumerate(errors):
        x = left + i * step
        if err is None:
            body.append(
                f'<rect x="{x + 0.5:.1f}" y="{pad}" width="{max(step - 1, 1):.1f}" '
                f'height="{height}" fill="{NAN_COLOUR}"/>'
            )
            continue
        fill = "#38a169" if err <= tol else "#c53030"
        body.append(
            f'<rect x="{x + 0.5:.1f}" y="{y(err):.1f}" width="{max(step - 1, 1):.1f}" '
            f'height="{pad + height - y(err):.1f}" fill="{fill}"/>'
        )
    ty = y(tol)
    body.append(
        f'<line x1="{left}" y1="{ty:.1f}" x2="{left + width}" y2="{ty:.1f}" '
        'stroke="#111" stroke-dasharray="4 3"/>'
    )
    body.append(_text(left + width + 4, ty + 4, f"tolerance {tol:.0e}"))
    body.append(_text(left - 4, y(top) + 4, f"{top:.2g}", "end"))
    body.append(_text(left - 4, pad + height, f"{bottom:.0e}", "end"))
    group = details["row_step"]
    label = "query row" if group == 1 else f"query rows, {group} per bar"
    body.append(
        _text(
            left + width / 2, pad + height + 16, f"{label} (0 .. {details['rows'] - 1})", "middle"
        )
    )
    body.append(_text(left, 12, "largest error in each row"))
    return _svg(left + width + 110, pad + height + 24, body, "largest error per query row")


def _chosen_marks(
    chosen: list, expected: list, y0: float, left: float, cell: int, grid_w: float
) -> list[str]:
    """One token's chosen experts, numbered by rank, green where they are the expected ones."""
    body = []
    for rank, e in enumerate(chosen):
        if e is None:  # outside [0, E): said in the legend line of this token
            body.append(_text(left + grid_w + 4, y0 + 12, "?", extra='fill="#c53030"'))
            continue
        right = e == expected[rank]
        fill = "#2f855a" if right else "#c53030"
        # top-1 on the left half of the cell, top-2 on the right: both show when they are
        # the same expert (the top2-not-masked trap)
        cx = left + e * cell + (5 if rank == 0 else cell - 5)
        body.append(f'<circle cx="{cx}" cy="{y0 + cell / 2}" r="4" fill="{fill}"/>')
        body.append(
            _text(
                cx,
                y0 + cell / 2 + 3,
                rank + 1,
                "middle",
                'fill="#fff" font-size="7" font-weight="700"',
            )
        )
    return body


def _weight_bar(
    total, expected_sum: float, bars_x: float, bar_w: float, y0: float, cell: int
) -> list[str]:
    """One token's w0 + w1 as a bar against 1, orange where it is off (grey where NaN)."""
    body = []
    if total is None:
        body.append(
            f'<rect x="{bars_x}" y="{y0 + 3}" width="{bar_w}" height="{cell - 6}" '
            f'fill="{NAN_COLOUR}"/>'
        )
    else:
        ok = abs(total - expected_sum) <= 1e-5
        length = bar_w * min(max(total, 0.0), 1.2) / 1.2
        body.append(
            f'<rect x="{bars_x}" y="{y0 + 3}" width="{length:.1f}" '
            f'height="{cell - 6}" fill="{"#2f855a" if ok else "#dd6b20"}"/>'
        )
        body.append(_text(bars_x + bar_w + 6, y0 + 12, f"{total:.3f}"))
    return body


def gating_grid(details: dict) -> Markup:
    """Token x expert: the experts the kernel chose (filled) against the ones expected
    (outlined), and beside each token the sum of its two weights against 1."""
    E = details["shape"]["E"]
    cell = 16
    left, top_pad = 50, 34
    tokens = details["tokens"]
    grid_w = E * cell
    bars_x = left + grid_w + 28
    bar_w = 120
    body = [
        _text(left + grid_w / 2, 12, "expert", "middle"),
        _text(left - 6, top_pad - 6, "token", "end"),
        _text(bars_x, 12, "w0 + w1 (should be 1)"),
    ]
    for e in range(E):
        body.append(_text(left + e * cell + cell / 2, top_pad - 6, e, "middle"))
    for r, token in enumerate(tokens):
        y0 = top_pad + r * cell
        chosen = details["chosen"][r]
        expected = details["expected"][r]
        wrong = chosen != expected
        body.append(
            _text(
                left - 6, y0 + 12, token, "end", 'font-weight="700" fill="#c53030"' if wrong else ""
            )
        )
        for e in expected:
            body.append(
                f'<rect x="{left + e * cell + 1.5}" y="{y0 + 1.5}" width="{cell - 3}" '
                f'height="{cell - 3}" fill="none" stroke="#2b6cb0" stroke-width="2"/>'
            )
        body += _chosen_marks(chosen, expected, y0, left, cell, grid_w)
        body += _weight_bar(
            details["weight_sum"][r], details["expected_sum"], bars_x, bar_w, y0, cell
        )
    bottom = top_pad + len(tokens) * cell
    for e in range(E + 1):  # the grid: lines, not a rectangle per cell (E may be 128)
        x = left + e * cell
        body.insert(2, f'<line x1="{x}" y1="{top_pad}" x2="{x}" y2="{bottom}" stroke="#ddd"/>')
    for r in range(len(tokens) + 1):
        y = top_pad + r * cell
        body.insert(2, f'<line x1="{left}" y1="{y}" x2="{left + grid_w}" y2="{y}" stroke="#ddd"/>')
    one = bars_x + bar_w / 1.2
    body.append(
        f'<line x1="{one:.1f}" y1="{top_pad - 4}" x2="{one:.1f}" y2="{bottom + 2}" '
        'stroke="#111" stroke-dasharray="3 2"/>'
    )
    body.append(_text(one, top_pad - 6, "1", "middle"))
    ly = bottom + 16
    body += [
        f'<circle cx="{left + 5}" cy="{ly - 4}" r="5" fill="#2f855a"/>',
        _text(left + 14, ly, "chosen, right"),
        f'<circle cx="{left + 105}" cy="{ly - 4}" r="5" fill="#c53030"/>',
        _text(left + 114, ly, "chosen, wrong"),
        f'<rect x="{left + 203}" y="{ly - 10}" width="12" height="12" fill="none" '
        'stroke="#2b6cb0" stroke-width="2"/>',
        _text(left + 220, ly, "expected; 1 and 2: top-1 and top-2"),
    ]
    width = max(bars_x + bar_w + 60, left + 420)  # the legend's line is 420 wide
    return _svg(width, ly + 10, body, "chosen and expected experts per token")


def dispatch_layout(details: dict) -> Markup:
    """09's layout, expert by expert: each expert's count and offset as the kernel wrote them
    (red where wrong, the expected value under it), then the first pairs whose slot is wrong."""
    experts = len(details["counts"]["got"])
    cell, left, top_pad = 34, 64, 28
    body = [_text(left + experts * cell / 2, 12, "expert", "middle")]
    for e in range(experts):
        body.append(_text(left + e * cell + cell / 2, top_pad - 6, e, "middle"))
    for r, key in enumerate(("counts", "offsets")):
        y0 = top_pad + r * (cell + 4)
        body.append(_text(left - 6, y0 + cell / 2 + 4, key[:-1], "end"))
        for e, (got, want) in enumerate(zip(details[key]["got"], details[key]["expected"])):
            right = got == want
            body.append(
                f'<rect x="{left + e * cell + 1}" y="{y0}" width="{cell - 2}" height="{cell}" '
                f'fill="{OK_COLOUR if right else "#fed7d7"}" stroke="#ddd"/>'
            )
            shown = "-" if got is None else got
            colour_ = "" if right else 'fill="#c53030" font-weight="700"'
            body.append(_text(left + e * cell + cell / 2, y0 + 14, shown, "middle", colour_))
            if not right:
                body.append(_text(left + e * cell + cell / 2, y0 + 28, want, "middle"))
    y = top_pad + 2 * (cell + 4) + 14
    body.append(
        _text(
            left,
            y,
            f"{details['bad_experts']} of {details['shape']['E']} experts with a wrong count or "
            f"offset; {details['bad_pairs']} of {details['shape']['M'] * details['shape']['K']} "
            "pairs with a wrong slot (red: the kernel's value, under it: the expected one)",
        )
    )
    for n, (pair, (got, want)) in enumerate(zip(details["pairs"][:8], details["slots"][:8])):
        shown = "never written" if got is None else got
        body.append(_text(left, y + 16 * (n + 1), f"pair {pair}: slot {shown}, expected {want}"))
    height = y + 16 * (min(len(details["pairs"]), 8) + 1)
    width = max(left + experts * cell + 10, left + 640)
    return _svg(width, height, body, "counts, offsets and slots against the expected layout")


def histogram(scores: list[int], top: int, bins: int = 10) -> Markup:
    """How many students scored in each tenth of the maximum."""
    counts = [0] * bins
    for s in scores:
        counts[min(bins - 1, int(bins * s / max(top, 1)))] += 1
    left, width, height, pad = 30, 400, 120, 16
    most = max(counts + [1])
    step = width / bins
    body = []
    for i, n in enumerate(counts):
        h = height * n / most
        x = left + i * step
        body.append(
            f'<rect x="{x + 2:.1f}" y="{pad + height - h:.1f}" width="{step - 4:.1f}" '
            f'height="{h:.1f}" fill="#3182ce"/>'
        )
        if n:
            body.append(_text(x + step / 2, pad + height - h - 3, n, "middle"))
        lo = round(top * i / bins)
        body.append(_text(x + step / 2, pad + height + 14, f"{lo}-", "middle"))
    body.append(
        f'<line x1="{left}" y1="{pad + height}" x2="{left + width}" '
        f'y2="{pad + height}" stroke="#333"/>'
    )
    body.append(_text(left + width / 2, pad + height + 30, f"score (of {top})", "middle"))
    return _svg(left + width + 10, pad + height + 36, body, "score distribution")
