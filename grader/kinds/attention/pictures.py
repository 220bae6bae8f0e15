"""Attention's pictures (01, 02, 04, 06) for the HTML report: the probe's attention weights
against the right ones, and the largest error of each query row."""

from __future__ import annotations

import math

from markupsafe import Markup

from grader.kinds.svg import (
    NAN_COLOUR,
    frame,
    legend,
    level_colour,
    png,
    text,
)


def probe_heatmap(probe: dict) -> Markup:
    """Query row x key: how wrong the weight each query gave each key is, with the key blocks
    (and for a causal kernel the diagonal and the future keys it must hide) drawn over it."""
    rows, keys = probe["rows"], probe["keys"]
    cell = 6
    left, top_pad = 46, 28
    w, h = keys * cell, rows * cell
    levels = probe["levels"]
    image = png([[level_colour(ch) for ch in row] for row in levels])
    body = [
        text(left + w / 2, 14, "key j (v = identity: column j is the weight of key j)", "middle"),
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
            text(left + w - 4, top_pad + 14, "future keys: weight 0", "end", 'font-weight="600"')
        )
        body.append(
            f'<line x1="{left}" y1="{top_pad}" x2="{left + d}" y2="{top_pad + d}" '
            'stroke="#111" stroke-width="1"/>'
        )
    for r in range(0, rows, probe["block_m"]):
        body.append(text(left - 4, top_pad + r * cell + 9, r, "end"))
    body.append(
        text(
            12,
            top_pad + h / 2,
            "query row i",
            "middle",
            f'transform="rotate(-90 12 {top_pad + h / 2:.0f})"',
        )
    )
    for n0 in range(0, keys, probe["block_n"]):
        body.append(
            text(
                left + (n0 + probe["block_n"] / 2) * cell,
                top_pad + h + 13,
                f"block {n0 // probe['block_n']}",
                "middle",
            )
        )
    tol, top = probe["tolerance"], probe["max_error"] or probe["tolerance"]
    body += legend(left + w + 24, top_pad + 14, tol, top, any("x" in row for row in levels))
    return frame(left + w + 230, top_pad + h + 24, body, "error of each attention weight")


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
    body.append(text(left + width + 4, ty + 4, f"tolerance {tol:.0e}"))
    body.append(text(left - 4, y(top) + 4, f"{top:.2g}", "end"))
    body.append(text(left - 4, pad + height, f"{bottom:.0e}", "end"))
    group = details["row_step"]
    label = "query row" if group == 1 else f"query rows, {group} per bar"
    body.append(
        text(left + width / 2, pad + height + 16, f"{label} (0 .. {details['rows'] - 1})", "middle")
    )
    body.append(text(left, 12, "largest error in each row"))
    return frame(left + width + 110, pad + height + 24, body, "largest error per query row")


def pictures(check) -> list[tuple[str, Markup]]:
    """(caption, inline SVG) of a failed attention check: the probe's weights, on the first
    failing check of a TODO, and the error row by row."""
    found = []
    details = check.details or {}
    if details.get("probe"):
        found.append(
            (
                "Your kernel's attention weights on a probe (48 queries x 48 keys, v = identity, so "
                "output column j is the weight of key j), against the right ones. Blue lines: the "
                "16 x 16 tiles.",
                probe_heatmap(details["probe"]),
            )
        )
    if details.get("kind") == "attention" and details.get("row_error"):
        shape = ", ".join(f"{k}={v}" for k, v in details["shape"].items())
        found.append(
            (
                f"{check.id}: where the output is wrong, row by row ({shape}).",
                row_profile(details),
            )
        )
    return found
