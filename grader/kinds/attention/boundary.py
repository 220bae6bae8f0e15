"""Cases derived from the classes of input that break tiled kernels, for the tiles a spec
launches with (``block_m`` query rows by ``block_n`` keys).

A tiled kernel that is wrong somewhere is wrong at an edge: where a size stops being a whole
number of tiles, where a window's edge crosses from one key tile into the next, where exp()
leaves float32's range. For each class this module gives its smallest member, the cheapest in
the interpreter, with the words a student reads in a failure (``Case.about``):

* ``ragged``: M and N one past (= 1), one short of (= -1) and a whole number of (= 0) tiles,
  modulo both tile sizes, with M < N, M > N and M = N;
* ``windows``: sliding windows one short of, a whole number of and one past key tiles, wider
  than a query block and a key tile together, so that a block's window edge lies tiles apart
  from its diagonal; with 32-row blocks over 16-key tiles the edge crosses three key tiles,
  with 64x16 and 128x32 tiles (a query block over twice a key tile) five;
* ``narrow``: windows one key short of and exactly one key tile under query blocks taller than
  a key tile, so that the key tiles of a block's own diagonal hold keys older than its last
  rows' windows;
* ``long_windows``: more queries than keys (M > N) with WINDOW >= N, which is not plain causal
  attention: rows from WINDOW on still lose their oldest keys;
* ``creep``: row maxima that rise by 0.001 per key tile (alpha = 0.999 on every tile);
* ``extremes``: logits above 88 and below -100 (exp overflows and underflows in float32), both
  in one row, and ties among them, for a number of experts from ``experts`` (one short of or one
  past a power of two);
* for MoE dispatch (09), ``ragged_tokens``: token counts whose M * K pairs are one short of, a
  whole number of and one past blocks of pairs; ``capacity_met``: routings where one expert
  gets exactly CAPACITY pairs and another one more; ``first_dropped``: where each expert's first
  dropped pair sits, to put it on a block's first pair.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.kinds.attention import inputs
from grader.kinds.base import NUMBERS, against, tiles_of, word
from grader.model import Case


@dataclass(frozen=True)
class Shape:
    """The sizes and tiles of one class's smallest 2-D attention case."""

    M: int
    N: int
    block_m: int = 16
    block_n: int = 16
    D: int = 16
    window: int | None = None
    what: str = ""  # what it exposes, after the sizes in the case's about

    @property
    def tiles(self) -> str:
        return "" if (self.block_m, self.block_n) == (16, 16) else f"-{self.block_m}x{self.block_n}"

    @property
    def name(self) -> str:
        if self.window is None:
            return f"edges-{self.M}x{self.N}{self.tiles}"
        return f"window-{self.M}x{self.N}-w{self.window}{self.tiles}"

    @property
    def about(self) -> str:
        sizes = f"M=N={self.M}" if self.M == self.N else f"M={self.M}, N={self.N}"
        sizes += f", D={self.D}" + (f", WINDOW={self.window}" if self.window else "")
        if self.tiles:
            sizes += f", {self.block_m}-row by {self.block_n}-key tiles"
        return f"{sizes}: {self.what}"


def ragged(block_m: int = 16, block_n: int = 16, window: int | None = None) -> list[Shape]:
    """M < N, M > N and M = N, the sizes one past, one short of and a whole number of tiles of
    both sizes (both are powers of two, so modulo the larger is modulo either), with a sliding
    ``window`` if given. The M > N case also pads its head dimension (24 of 32)."""
    big = max(block_m, block_n)
    shapes = []
    for M, N, D, order in (
        (big + 1, 2 * big - 1, 16, "M < N"),
        (2 * big - 1, big + 1, 24, "M > N"),
        (2 * big, 2 * big, 16, "M = N"),
    ):
        rows, keys = against(M, block_m, "row", "block"), against(N, block_n, "key", "tile")
        what = f"M {rows}, N {keys} ({order})"
        if window is not None:
            what += f"; WINDOW {against(window, block_n, 'key', 'tile')}"
        shapes.append(Shape(M, N, block_m, block_n, D, window, what))
    return shapes


def first_keys(shape: Shape) -> list[tuple[int, int]]:
    """(first row, first row's oldest key) of every query block whose window begins past key
    0: where a kernel must start its key loop, and mask."""
    found = []
    for r0 in range(0, shape.M, shape.block_m):
        if shape.window is not None and r0 - shape.window + 1 > 0:
            found.append((r0, r0 - shape.window + 1))
    return found


def edge_tiles(shape: Shape) -> int:
    """The most key tiles one block's window edge (its rows' oldest keys) crosses."""
    most = 0
    for r0, oldest in first_keys(shape):
        last = min(r0 + shape.block_m, shape.M) - 1
        newest = min(last - shape.window + 1, shape.N - 1)
        most = max(most, newest // shape.block_n - oldest // shape.block_n + 1)
    return most


def windows(block_m: int = 16, block_n: int = 16) -> list[Shape]:
    """Windows one short of, a whole number of and one past key tiles, each the smallest above
    block_m + block_n, in the shortest square sequence where some block's first row's window
    begins past key 0 (one more block follows it). A block's window edge holds block_m
    consecutive keys, so it crosses up to block_m // block_n + 1 key tiles (with block_m a
    multiple of block_n)."""
    shapes = []
    for r in (-1, 0, 1):
        window = block_m + block_n + 1
        window += (r - window) % block_n
        first = -(-window // block_m) * block_m  # the first block whose window begins past 0
        M = first + block_m
        shape = Shape(M, M, block_m, block_n, window=window)
        r0, oldest = first_keys(shape)[0]
        into = oldest % block_n
        where = {
            0: "on a key tile's first key",
            1: "one key into a key tile",
            block_n - 1: "on a key tile's last key",
        }.get(into, f"{word(into)} keys into a key tile")
        before = r0 // block_n - oldest // block_n
        what = (
            f"WINDOW {against(window, block_n, 'key', 'tile')}; rows {r0}-{r0 + block_m - 1}'s "
            f"windows begin {where}, {tiles_of(before, 'tile')} before their diagonal"
        )
        span = edge_tiles(shape)
        if span >= 3:
            what += f", and their window edge crosses {tiles_of(span, f'{block_n}-key tile')}"
        shapes.append(Shape(M, M, block_m, block_n, window=window, what=what))
    return shapes


def narrow(block_m: int = 32, block_n: int = 16) -> list[Shape]:
    """Windows one key short of and exactly one key tile, over two query blocks taller than a
    key tile: the last row of a block sees none of the block's first diagonal key tile, and with
    the shorter window not all of the next one either, so the window condition is needed on the
    diagonal's key tiles, not only on the tiles before them."""
    if block_m <= block_n:
        raise ValueError("narrow windows need query blocks taller than a key tile")
    shapes = []
    for window in (block_n - 1, block_n):
        second = "; nor the first key of the next one" if window < block_n else ""
        what = (
            f"WINDOW {against(window, block_n, 'key', 'tile')}, under {block_m}-row blocks: a "
            f"block's last row sees none of the block's first diagonal key tile{second}"
        )
        shapes.append(Shape(2 * block_m, 2 * block_m, block_m, block_n, window=window, what=what))
    return shapes


def long_windows(block_m: int = 16, block_n: int = 16) -> list[Shape]:
    """More queries than keys (``ragged``'s M > N shape: M one row short of two blocks, N one
    key past one) with WINDOW = N, and WINDOW = M - 1: a window as long as the cache or longer,
    which is still not plain causal attention, since rows from WINDOW on lose their oldest keys
    (with M - 1, only the last row loses key 0)."""
    big = max(block_m, block_n)
    M, N = 2 * big - 1, big + 1
    shapes = []
    for window, lost in (
        (N, f"rows {N}-{M - 1} lose their oldest keys"),
        (M - 1, f"only the last row, {M - 1}, loses key 0"),
    ):
        sizes = f"M {against(M, block_m, 'row', 'block')}, N {against(N, block_n, 'key', 'tile')}"
        what = f"{sizes} (M > N), WINDOW {'= N' if window == N else '> N'}: {lost}"
        shapes.append(Shape(M, N, block_m, block_n, 24, window, what))
    return shapes


def attention(shapes: list[Shape], seed: int, *, causal: bool = False) -> list[Case]:
    """Random q, k, v for each shape (seeds ``seed``, ``seed + 1``, ...); a window implies
    causal attention. A row whose window holds no key (M > N + WINDOW - 1) has no answer
    (0 / 0), so no shape may have one."""
    for s in shapes:
        if s.window is not None and s.M > s.N + s.window - 1:
            raise ValueError(f"{s.name}: rows {s.N + s.window - 1} and later see no key")
    return [
        Case(
            name=s.name,
            about=s.about,
            inputs=inputs.qkv(seed + i, s.M, s.N, s.D),
            block_m=s.block_m,
            block_n=s.block_n,
            causal=causal or s.window is not None,
            window=s.window,
        )
        for i, s in enumerate(shapes)
    ]


def creep(seed: int, M: int = 16, N: int = 64, D: int = 16, block_n: int = 16) -> Case:
    """Row maxima that rise by 0.001 per key tile: alpha = 0.999 on every tile but the first."""
    tiles = -(-N // block_n)
    about = (
        f"M={M}, N={N}, D={D}: each of the {NUMBERS[tiles]} key tiles raises every row's "
        "maximum by just 0.001 (alpha = 0.999)"
    )
    return Case(
        name=f"creeping-max-{M}x{N}",
        about=about,
        block_n=block_n,
        inputs=inputs.creeping(seed, M, N, D, block_n),
    )
