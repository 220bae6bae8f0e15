"""09's picture for the HTML report: each expert's count and first row, and the pairs on the
wrong row."""

from __future__ import annotations

from markupsafe import Markup

from grader.kinds.svg import (
    OK_COLOUR,
    frame,
    text,
)


def dispatch_layout(details: dict) -> Markup:
    """09's layout, expert by expert: each expert's count and offset as the kernel wrote them
    (red where wrong, the expected value under it), then the first pairs whose slot is wrong."""
    experts = len(details["counts"]["got"])
    cell, left, top_pad = 34, 64, 28
    body = [text(left + experts * cell / 2, 12, "expert", "middle")]
    for e in range(experts):
        body.append(text(left + e * cell + cell / 2, top_pad - 6, e, "middle"))
    for r, key in enumerate(("counts", "offsets")):
        y0 = top_pad + r * (cell + 4)
        body.append(text(left - 6, y0 + cell / 2 + 4, key[:-1], "end"))
        for e, (got, want) in enumerate(zip(details[key]["got"], details[key]["expected"])):
            right = got == want
            body.append(
                f'<rect x="{left + e * cell + 1}" y="{y0}" width="{cell - 2}" height="{cell}" '
                f'fill="{OK_COLOUR if right else "#fed7d7"}" stroke="#ddd"/>'
            )
            shown = "-" if got is None else got
            colour_ = "" if right else 'fill="#c53030" font-weight="700"'
            body.append(text(left + e * cell + cell / 2, y0 + 14, shown, "middle", colour_))
            if not right:
                body.append(text(left + e * cell + cell / 2, y0 + 28, want, "middle"))
    y = top_pad + 2 * (cell + 4) + 14
    body.append(
        text(
            left,
            y,
            f"{details['bad_experts']} of {details['shape']['E']} experts with a wrong count or "
            f"offset; {details['bad_pairs']} of {details['shape']['M'] * details['shape']['K']} "
            "pairs with a wrong slot (red: the kernel's value, under it: the expected one)",
        )
    )
    for n, (pair, (got, want)) in enumerate(zip(details["pairs"][:8], details["slots"][:8])):
        shown = "never written" if got is None else got
        body.append(text(left, y + 16 * (n + 1), f"pair {pair}: slot {shown}, expected {want}"))
    height = y + 16 * (min(len(details["pairs"]), 8) + 1)
    width = max(left + experts * cell + 10, left + 640)
    return frame(width, height, body, "counts, offsets and slots against the expected layout")


def pictures(check) -> list[tuple[str, Markup]]:
    """(caption, inline SVG) of a failed dispatch check: its layout against the right one."""
    details = check.details or {}
    if details.get("kind") != "dispatch":
        return []
    shape = ", ".join(f"{k}={v}" for k, v in details["shape"].items())
    caption = (
        f"{check.id}: each expert's count and first row, and the pairs on the wrong row ({shape})."
    )
    return [(caption, dispatch_layout(details))]
