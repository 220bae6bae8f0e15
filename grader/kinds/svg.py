"""What every inline SVG figure of the HTML pages shares: colours, text, the error legend, a
frame and a PNG for dense heatmaps. The kinds draw their pictures of where an output is wrong
with it (``grader/kinds/<kind>/pictures.py``), the class dashboard its charts.

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


def heat(t: float) -> str:
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
    return heat(math.log10(err / tol) / span)


def frame(width: float, height: float, body: list[str], label: str) -> Markup:
    return Markup(
        f'<svg class="figure" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'aria-label="{escape(label)}">' + "".join(body) + "</svg>"
    )


def text(x: float, y: float, words, anchor: str = "start", extra: str = "") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {FONT} {extra}>'
        f"{escape(str(words))}</text>"
    )


def legend(x: float, y: float, tol: float, top: float, has_nan: bool) -> list[str]:
    """A colour bar from the tolerance to the largest error, and the NaN swatch."""
    parts = [text(x, y - 4, "error (log scale)")]
    for i in range(40):
        err = tol * (max(top, tol * 10) / tol) ** (i / 39)
        parts.append(
            f'<rect x="{x + i * 4:.1f}" y="{y:.1f}" width="4" height="10" '
            f'fill="{colour(err * 1.0001, tol, top)}"/>'
        )
    parts.append(text(x, y + 22, f"{tol:.0e} (tolerance)"))
    parts.append(text(x + 160, y + 22, f"{max(top, tol * 10):.2g}", "end"))
    parts.append(
        f'<rect x="{x:.1f}" y="{y + 30:.1f}" width="10" height="10" fill="{OK_COLOUR}" '
        'stroke="#999"/>'
    )
    parts.append(text(x + 14, y + 39, "within tolerance"))
    if has_nan:
        parts.append(
            f'<rect x="{x:.1f}" y="{y + 46:.1f}" width="10" height="10" fill="{NAN_COLOUR}"/>'
        )
        parts.append(text(x + 14, y + 55, "NaN, inf or never written"))
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


def level_colour(char: str) -> str:
    if char == "x":
        return NAN_COLOUR
    if char == ".":
        return OK_COLOUR
    return heat(int(char) / 9)
