"""The class dashboard's charts, in inline SVG (the primitives are ``grader.kinds.svg``'s)."""

from __future__ import annotations

from markupsafe import Markup

from grader.kinds.svg import frame, text


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
            body.append(text(x + step / 2, pad + height - h - 3, n, "middle"))
        lo = round(top * i / bins)
        body.append(text(x + step / 2, pad + height + 14, f"{lo}-", "middle"))
    body.append(
        f'<line x1="{left}" y1="{pad + height}" x2="{left + width}" '
        f'y2="{pad + height}" stroke="#333"/>'
    )
    body.append(text(left + width / 2, pad + height + 30, f"score (of {top})", "middle"))
    return frame(left + width + 10, pad + height + 36, body, "score distribution")
