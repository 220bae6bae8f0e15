"""Gating's picture (03, 05) for the HTML report: the experts chosen and expected per token,
and each token's weight sum."""

from __future__ import annotations

from markupsafe import Markup

from grader.kinds.svg import (
    NAN_COLOUR,
    frame,
    text,
)


def _chosen_marks(
    chosen: list, expected: list, y0: float, left: float, cell: int, grid_w: float
) -> list[str]:
    """One token's chosen experts, numbered by rank, green where they are the expected ones."""
    body = []
    for rank, e in enumerate(chosen):
        if e is None:  # outside [0, E): said in the legend line of this token
            body.append(text(left + grid_w + 4, y0 + 12, "?", extra='fill="#c53030"'))
            continue
        right = e == expected[rank]
        fill = "#2f855a" if right else "#c53030"
        # top-1 on the left half of the cell, top-2 on the right: both show when they are
        # the same expert (the top2-not-masked trap)
        cx = left + e * cell + (5 if rank == 0 else cell - 5)
        body.append(f'<circle cx="{cx}" cy="{y0 + cell / 2}" r="4" fill="{fill}"/>')
        body.append(
            text(
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
        body.append(text(bars_x + bar_w + 6, y0 + 12, f"{total:.3f}"))
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
        text(left + grid_w / 2, 12, "expert", "middle"),
        text(left - 6, top_pad - 6, "token", "end"),
        text(bars_x, 12, "w0 + w1 (should be 1)"),
    ]
    for e in range(E):
        body.append(text(left + e * cell + cell / 2, top_pad - 6, e, "middle"))
    for r, token in enumerate(tokens):
        y0 = top_pad + r * cell
        chosen = details["chosen"][r]
        expected = details["expected"][r]
        wrong = chosen != expected
        body.append(
            text(
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
    body.append(text(one, top_pad - 6, "1", "middle"))
    ly = bottom + 16
    body += [
        f'<circle cx="{left + 5}" cy="{ly - 4}" r="5" fill="#2f855a"/>',
        text(left + 14, ly, "chosen, right"),
        f'<circle cx="{left + 105}" cy="{ly - 4}" r="5" fill="#c53030"/>',
        text(left + 114, ly, "chosen, wrong"),
        f'<rect x="{left + 203}" y="{ly - 10}" width="12" height="12" fill="none" '
        'stroke="#2b6cb0" stroke-width="2"/>',
        text(left + 220, ly, "expected; 1 and 2: top-1 and top-2"),
    ]
    width = max(bars_x + bar_w + 60, left + 420)  # the legend's line is 420 wide
    return frame(width, ly + 10, body, "chosen and expected experts per token")


def pictures(check) -> list[tuple[str, Markup]]:
    """(caption, inline SVG) of a failed gating check: its grid of experts."""
    details = check.details or {}
    if details.get("kind") != "gating":
        return []
    shape = details["shape"]
    shown = len(details["tokens"])
    more = f"; {shown} of {shape['M']} tokens shown" if shown < shape["M"] else ""
    caption = (
        f"{check.id}: experts chosen and expected per token ({shape['M']} tokens x "
        f"{shape['E']} experts{more})."
    )
    return [(caption, gating_grid(details))]
