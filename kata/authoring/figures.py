"""``nox -s figures``: the docs' figures, drawn from the reference kernels' own outputs.

* causal_tiles.png: which (query, key) pairs the causal kernel lets through, read off its output
  with v = identity (then out = the attention matrix), over the tile grid coloured by kind.
* raw_top2_sums.png: the chapter's six tokens, p[top-1] + p[top-2] for the experts the gating
  kernel chose: what the weights would sum to without renormalization.
* running_max.png: for one query row of the chapter's 21.1 data, the running maximum across key
  blocks and the rescale it causes (1 - alpha: zero where nothing happens), with the kernel's
  output checked against the same loop.
* flash_tiling.png: 01's grid and key loop with 01's own blocks: one program's query rows, the
  K and V tiles streaming past, what stays on chip, and the elements the grid moves against
  plain attention's, whose scores and probabilities go to memory and back.
* causal_stages.png: which key tiles 04's causal stages visit, with 04's own tiles; the stage
  bounds are read from 04's kernel source and evaluated tile by tile.
* mma_shapes.png: the tensor-core instructions a tl.dot compiles to (read from PTX that Triton
  compiles here, for sm_80 and sm_90, no GPU needed), and q @ k^T cut into their K steps.
* dispatch_ranking.png: 09's ranking of one expert's pairs, block by block, on its worked
  example: the statements of the solution's loop, read from its source and run on each block.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from kata import catalogue, oracles, runtime  # noqa: E402

OUT = catalogue.ROOT / "docs" / "figures"


def _solution(number: str):
    return catalogue.load_file(catalogue.SOLUTIONS / catalogue.find(number).filename)


def causal_tiles(M: int = 40, N: int = 56, block_m: int = 16, block_n: int = 16) -> Path:
    causal = _solution("02").causal_flash_attention
    q = torch.randn(M, N, generator=torch.Generator().manual_seed(0)) * 0.1
    k = torch.randn(N, N, generator=torch.Generator().manual_seed(1)) * 0.1
    v = torch.eye(N)  # out = attention matrix (D = N)
    dev = [x.to(runtime.DEVICE) for x in (q, k, v)]
    visible = causal(*dev, BLOCK_M=block_m, BLOCK_N=block_n).cpu().numpy() > 0

    fig, ax = plt.subplots(figsize=(7, 5.2))
    colours = {"full": "#9ecae1", "diagonal": "#fdae6b", "skipped": "#eeeeee"}
    for m0 in range(0, M, block_m):
        hi = min(N, (m0 // block_m + 1) * block_m)  # the kernel's loop bound
        for n0 in range(0, N, block_n):
            tile = visible[m0 : m0 + block_m, n0 : n0 + block_n]
            kind = "skipped" if n0 >= hi else ("full" if tile.all() else "diagonal")
            h, w = min(block_m, M - m0), min(block_n, N - n0)
            ax.add_patch(plt.Rectangle((n0, m0), w, h, color=colours[kind], ec="k", lw=1))
    rows, cols = np.nonzero(visible)
    ax.scatter(cols + 0.5, rows + 0.5, s=2, c="#08306b", label="pair the kernel lets through")
    for kind, colour in colours.items():
        ax.add_patch(plt.Rectangle((0, 0), 0, 0, color=colour, label=f"{kind} tile"))
    ax.set(
        xlim=(0, N),
        ylim=(M, 0),
        xlabel="key index",
        ylabel="query index",
        aspect="equal",
        title=f"Causal tiles, M={M}, N={N}, {block_m}x{block_n} blocks (top-left aligned)",
    )
    ax.legend(loc="lower left", fontsize=8, framealpha=0.9)
    return _save(fig, "causal_tiles.png")


def raw_top2_sums() -> Path:
    route = _solution("03").moe_top2_gating
    torch.manual_seed(0)
    logits = torch.randn(6, 8)  # the chapter's worked example
    _, _, i0, i1 = (t.cpu().long() for t in route(logits.to(runtime.DEVICE)))
    probs = oracles.softmax(logits)
    rows = np.arange(6)
    raw = probs[rows, i0.numpy()] + probs[rows, i1.numpy()]

    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.bar(rows, raw, color="#6baed6", label="p[top-1] + p[top-2] (raw weights)")
    ax.axhline(1.0, color="k", lw=1, ls="--", label="renormalized: exactly 1")
    ax.axhline(raw.mean(), color="#e6550d", lw=1, label=f"mean {raw.mean():.3f}")
    for r, value in zip(rows, raw):
        ax.text(r, value + 0.02, f"{value:.2f}", ha="center", fontsize=8)
    ax.set(
        xticks=rows,
        xlabel="token",
        ylabel="sum of the two weights",
        ylim=(0, 1.15),
        title="Raw top-2 sums of the chapter's six tokens (8 experts, seed 0)",
    )
    ax.legend(loc="upper left", fontsize=8)
    return _save(fig, "raw_top2_sums.png")


def _draw_rescale(low, alphas: list[float], block_n: int) -> None:
    """The rescale of each key block, drawn as 1 - alpha: how much acc and l_i shrink."""
    blocks = np.arange(len(alphas))
    shrink = [1 - a for a in alphas]
    colours = ["#bdbdbd"] + ["#e6550d"] * (len(shrink) - 1)
    low.bar(blocks, shrink, color=colours, width=0.6)
    low.bar([0], [shrink[0]], color="none", edgecolor="#636363", hatch="//", width=0.6)
    for b, (a, s) in enumerate(zip(alphas, shrink)):
        if b == 0:
            text = "first block"
        elif s == 0:
            text = "alpha = 1"
        else:
            text = f"alpha = {a:.2f}"
        low.text(b, s + 0.04, text, ha="center", va="bottom", fontsize=7.5)
    low.set(
        xlabel=f"key block ({block_n} keys each)",
        ylabel="1 - alpha",
        ylim=(0, 1.6),
        xticks=blocks,
        yticks=[0, 0.5, 1],
    )
    low.text(
        0.99,
        0.95,
        "how much acc and l_i shrink: 1 - alpha, alpha = exp(m_old - m_new)\n"
        "alpha = 1: m_i did not grow, nothing to rescale; first block: nothing summed yet",
        transform=low.transAxes,
        ha="right",
        va="top",
        fontsize=7.5,
        color="#444",
    )


def running_max(row: int = 0, block_n: int = 4) -> Path:
    """The loop of 21.1 replayed in float64 for one row, 4-key blocks as in the chapter."""
    flash = _solution("01").flash_attention
    torch.manual_seed(0)
    q, k, v = torch.randn(17, 8), torch.randn(23, 8), torch.randn(23, 8)
    out = flash(*(x.to(runtime.DEVICE) for x in (q, k, v))).cpu().numpy()
    s = (q.double() @ k.double().T / np.sqrt(8))[row].numpy()
    m, l_i, acc, ms, alphas, block_max = -np.inf, 0.0, np.zeros(8), [], [], []
    for n0 in range(0, 23, block_n):
        blk = s[n0 : n0 + block_n]
        m_new = max(m, blk.max())
        alpha = np.exp(m - m_new)
        p = np.exp(blk - m_new)
        l_i = alpha * l_i + p.sum()
        acc = alpha * acc + p @ v.double().numpy()[n0 : n0 + block_n]
        ms.append(m_new)
        alphas.append(alpha)
        block_max.append(blk.max())
        m = m_new
    assert np.allclose(acc / l_i, out[row], atol=1e-4), "the replay must match the kernel"

    # Two panels on one x axis: the scores (when does m_i grow?) and the rescale it causes.
    # The rescale is drawn as 1 - alpha, how much acc and l_i shrink: tall where something
    # happens, zero where alpha = 1 and nothing does.
    blocks = np.arange(len(ms))
    fig, (ax, low) = plt.subplots(
        2,
        1,
        figsize=(7, 4.8),
        sharex=True,
        layout="constrained",
        gridspec_kw={"height_ratios": [3, 2]},
    )
    ax.plot(blocks, block_max, "o:", color="#9e9ac8", label="max score in this block")
    ax.step(blocks, ms, where="mid", color="#3182bd", lw=2, label="running max m_i")
    for b in blocks[1:]:
        if ms[b] > ms[b - 1]:
            ax.annotate(
                "m_i grows",
                (b, ms[b]),
                xytext=(0, 9),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color="#3182bd",
            )
    ax.set(
        ylabel="score",
        ylim=(min(block_max) - 0.4, max(ms) + 0.5),
        title=f"Query row {row} of the 21.1 example: acc and l_i shrink only when m_i grows",
    )
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)

    _draw_rescale(low, alphas, block_n)
    return _save(fig, "running_max.png")


def _box(ax, x, y, w, h, colour, text="", size=8, **kw) -> None:
    """A rectangle at (x, y), w wide and h tall (y grows downwards), with centred text."""
    ax.add_patch(plt.Rectangle((x, y), w, h, facecolor=colour, edgecolor="k", lw=1, **kw))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)


def _arrow(ax, start, end, text="", colour="#636363", **kw) -> None:
    ax.annotate(
        text,
        end,
        xytext=start,
        fontsize=7.5,
        color=colour,
        arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.2},
        **kw,
    )


def attention_traffic(M: int, N: int, D: int, block_m: int) -> dict[str, int]:
    """Elements that one head's attention moves between memory and the chip. ``flash``: 01's
    grid, which reads Q and writes out once and reads K and V once per program. ``plain``: the
    unfused path, which reads Q, K and V and writes out once, and besides writes the scores S,
    reads them back for the softmax, writes the probabilities P and reads them back for P @ v.
    The terms that grow with M x N are ``kv_rereads`` (2 M N D / BLOCK_M) and ``s_and_p``
    (4 M N); their ratio is D / (2 BLOCK_M)."""
    programs = -(-M // block_m)
    q_out = 2 * M * D
    kv_rereads = 2 * programs * N * D
    s_and_p = 4 * M * N
    return {
        "programs": programs,
        "q_out": q_out,
        "kv_rereads": kv_rereads,
        "kv_once": 2 * N * D,
        "s_and_p": s_and_p,
        "flash": q_out + kv_rereads,
        "plain": q_out + 2 * N * D + s_and_p,
    }


@dataclass(frozen=True)
class _Tiling:
    """01's grid for one shape and where flash_tiling.png draws its parts (y grows downwards)."""

    M: int
    N: int
    D: int
    block_m: int
    block_n: int
    block_d: int
    pid: int
    programs: int
    tiles: range
    m0: int
    n0: int
    x_q: int
    x_chip: int
    chip_w: int
    x_out: int
    y_k: int
    y_chip: int
    chip_h: int
    y_v: int
    top: int
    low: int


_TILING_COLOURS = ("#deebf7", "#6baed6", "#c6dbef", "#fdae6b", "#bcbddc")


def _draw_operands(ax, t: _Tiling) -> None:
    """Q and out beside the chip, program pid's rows marked; K and V on their sides above and
    below it, the tiles done, the one the loop is at and those to come."""
    M, N, D, block_m, block_n, tiles = t.M, t.N, t.D, t.block_m, t.block_n, t.tiles
    m0, n0, x_q, x_chip, x_out, y_k = t.m0, t.n0, t.x_q, t.x_chip, t.x_out, t.y_k
    y_chip, y_v = t.y_chip, t.y_v
    light, mine, done, now, kept = _TILING_COLOURS
    for name, x in (("Q", x_q), ("out", x_out)):
        for r0 in range(0, M, block_m):
            colour = mine if r0 == m0 else light
            _box(ax, x, y_chip + r0, D, min(block_m, M - r0), colour)
        ax.text(x + D / 2, y_chip - 2, f"{name} ({M} x {D})", ha="center", fontsize=8.5)
        ax.text(
            x + D / 2,
            y_chip + m0 + block_m / 2,
            f"rows\n{m0}-{m0 + block_m - 1}",
            ha="center",
            va="center",
            fontsize=7,
        )
    for name, y in (("K", y_k), ("V", y_v)):
        for t in tiles:
            colour = now if t == n0 else (done if t < n0 else "white")
            _box(ax, x_chip + t, y, min(block_n, N - t), D, colour)
        ax.text(
            x_chip - 2,
            y + D / 2,
            f"{name} ({N} x {D}),\non its side",
            ha="right",
            va="center",
            fontsize=8,
        )
    ax.text(
        x_chip + N + 2,
        y_v + D / 2,
        "blue: tiles done\norange: this iteration\nwhite: tiles to come",
        va="center",
        fontsize=7,
    )
    ax.text(
        x_chip + n0 + block_n / 2,
        y_k - 2,
        f"keys {n0}-{n0 + block_n - 1}: this iteration",
        ha="center",
        fontsize=7.5,
    )


def _draw_chip(ax, t: _Tiling) -> None:
    """What program pid holds on chip while its loop runs, and where each part comes from."""
    D, block_m, block_n, block_d, pid, programs = (
        t.D,
        t.block_m,
        t.block_n,
        t.block_d,
        t.pid,
        t.programs,
    )
    m0, n0, x_q, x_chip, chip_w, x_out = t.m0, t.n0, t.x_q, t.x_chip, t.chip_w, t.x_out
    y_k, y_chip, chip_h, y_v, top, low = t.y_k, t.y_chip, t.chip_h, t.y_v, t.top, t.low
    light, mine, done, now, kept = _TILING_COLOURS
    ax.add_patch(
        plt.Rectangle(
            (x_chip, y_chip),
            chip_w,
            chip_h,
            facecolor="#f7f7f7",
            edgecolor="#3182bd",
            lw=2,
            zorder=0,
        )
    )
    ax.text(
        x_chip + chip_w - 1,
        y_chip + chip_h - 2,
        f"on chip: program pid = {pid}, one of {programs}",
        ha="right",
        va="bottom",
        fontsize=8.5,
        color="#3182bd",
    )
    _box(ax, x_chip + 2, top, block_d, block_m, mine, f"q\n{block_m}x{block_d}\nloaded\nonce", 7)
    _box(ax, x_chip + n0, top, block_n, block_m, now, f"scores\n{block_m}x{block_n}", 7)
    _box(ax, x_chip + n0, low, block_d, block_m, kept, f"acc\n{block_m}x{block_d}", 7)
    for name, dx in (("m_i", -13), ("l_i", -6)):
        _box(ax, x_chip + n0 + dx, low, 2, block_m, kept)
        ax.text(x_chip + n0 + dx + 1, low - 1.5, name, ha="center", fontsize=7)
    ax.text(
        x_chip + n0 + max(block_n, block_d) + 3,
        top + block_m / 2,
        "m_i, l_i and acc are carried from tile\nto tile (l_i and acc rescaled by alpha\n"
        "when m_i grows); a tile's scores live\nonly here, for one iteration",
        va="center",
        fontsize=7.5,
    )
    _arrow(ax, (x_q + D, y_chip + m0 + block_m / 2), (x_chip + 2, top + block_m / 2))
    _arrow(ax, (x_chip + n0 + block_n / 2, y_k + D), (x_chip + n0 + block_n / 2, top))
    _arrow(ax, (x_chip + n0 + block_d / 2, y_v), (x_chip + n0 + block_d / 2, low + block_m))
    _arrow(
        ax,
        (x_chip + n0 + block_n / 2, top + block_m),
        (x_chip + n0 + block_n / 2, low),
        colour="#e6550d",
    )
    ax.text(
        x_chip + n0 + block_n / 2 + 1,
        (top + block_m + low) / 2,
        "p @ v",
        va="center",
        fontsize=7,
        color="#e6550d",
    )
    _arrow(ax, (x_chip + n0 + block_d, low + block_m / 2), (x_out, y_chip + m0 + block_m / 2))
    ax.text(
        x_chip + n0 + block_d + 3,
        low + block_m / 2 + 1,
        "out = acc / l_i, once, after the last tile",
        va="top",
        fontsize=7,
    )


def _draw_traffic(ax, t: _Tiling) -> int:
    """Below the picture, the elements this grid moves against plain attention's; the y the
    text starts at."""
    M, N, D, block_m, programs, tiles = t.M, t.N, t.D, t.block_m, t.programs, t.tiles
    x_q, y_v = t.x_q, t.y_v
    io = attention_traffic(M, N, D, block_m)
    assert io["programs"] == programs
    bottom = y_v + D + 10
    ax.text(
        x_q,
        bottom,
        f"This grid: cdiv(M, BLOCK_M) = cdiv({M}, {block_m}) = {programs} programs, each "
        f"walking all {len(tiles)} key tiles, so K and V are read {programs} times each "
        f"({programs} x {N} x {D} = {programs * N * D}\nelements apiece), and Q and out move "
        f"once ({M * D} each): {io['flash']} elements in all. The {M} x {N} scores never leave "
        f"the chip.\n"
        f"Plain attention reads K and V once ({io['kv_once']} in all), but writes the "
        f"{M * N} scores S, reads them back for the softmax, writes the probabilities P\n"
        f"and reads them back for P @ v: 4 x {M * N} = {io['s_and_p']}, so {io['plain']} "
        f"elements in all. This grid moves {io['flash'] / io['plain']:.0%} as much.\n"
        f"The re-reads of K and V grow as 2 M N D / BLOCK_M, S and P as 4 M N: their ratio, "
        f"D / (2 BLOCK_M), improves as BLOCK_M grows past D.",
        va="top",
        fontsize=8.5,
    )
    return bottom


def flash_tiling(M: int = 64, N: int = 80, D: int = 16, pid: int = 1, step: int = 2) -> Path:
    """01's grid and key loop for one shape, with 01's own block sizes: program ``pid`` at key
    tile ``step``, what it keeps on chip, and how many times the grid reads K and V."""
    from kata import host  # imports triton: only once runtime.configure() has run

    defaults = inspect.signature(_solution("01").flash_attention).parameters
    block_m, block_n, block_d = host.attention_blocks(
        D, defaults["BLOCK_M"].default, defaults["BLOCK_N"].default
    )
    programs = -(-M // block_m)  # the grid, cdiv(M, BLOCK_M)
    tiles = range(0, N, block_n)  # every program's key loop
    assert 0 <= pid < programs and 0 <= step < len(tiles) and D <= block_d
    n0, m0 = tiles[step], pid * block_m

    # K and V lie on their sides, above and below the chip, so that the tile the loop is at
    # sits right over the scores it makes and right under the acc it feeds.
    fig, ax = plt.subplots(figsize=(9, 5.4))
    x_q, x_chip, chip_w = 0, 34, max(N, 2 * block_d + block_n + 12) + 44
    x_out = x_chip + chip_w + 18
    y_k, y_chip, chip_h = 0, D + 10, 2 * block_m + 22
    y_v, top, low = y_chip + chip_h + 8, y_chip + 6, y_chip + chip_h - 6 - block_m
    t = _Tiling(
        M=M,
        N=N,
        D=D,
        block_m=block_m,
        block_n=block_n,
        block_d=block_d,
        pid=pid,
        programs=programs,
        tiles=tiles,
        m0=m0,
        n0=n0,
        x_q=x_q,
        x_chip=x_chip,
        chip_w=chip_w,
        x_out=x_out,
        y_k=y_k,
        y_chip=y_chip,
        chip_h=chip_h,
        y_v=y_v,
        top=top,
        low=low,
    )
    _draw_operands(ax, t)
    _draw_chip(ax, t)
    bottom = _draw_traffic(ax, t)
    ax.set(
        xlim=(x_q - 1, x_out + D + 1),
        ylim=(bottom + 26, y_k - 8),
        aspect="equal",
        title=f"01's loop, M={M}, N={N}, D={D}, {block_m}x{block_n} blocks: "
        f"program pid = {pid} at key tile {step}",
    )
    ax.axis("off")
    return _save(fig, "flash_tiling.png")


def causal_stages_of_04() -> list[dict[str, str]]:
    """04's causal key loop as its kernel writes it: for each ``_attend_tiles`` call under
    ``if CAUSAL:``, in the order they run, the source text of its ``lo``, ``hi`` and ``MASK``."""
    source = (catalogue.SOLUTIONS / catalogue.find("04").filename).read_text()
    functions = {f.name: f for f in ast.parse(source).body if isinstance(f, ast.FunctionDef)}
    params = [a.arg for a in functions["_attend_tiles"].args.args]
    stages = []
    for node in ast.walk(functions["attention_fwd_kernel"]):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "CAUSAL":
            for statement in node.body:
                for call in ast.walk(statement):
                    if isinstance(call, ast.Call) and ast.unparse(call.func) == "_attend_tiles":
                        args = dict(zip(params, map(ast.unparse, call.args)))
                        stages.append({key: args[key] for key in ("lo", "hi", "MASK")})
    return stages


def causal_stage_tiles(S: int, block_m: int, block_n: int) -> dict[tuple[int, int], int]:
    """(first query row, first key) of every tile 04's causal path visits, mapped to its stage
    (1, 2, ...): the loop bounds evaluated the way the kernel evaluates them, tile by tile."""
    visited = {}
    for pid_m in range(-(-S // block_m)):
        for stage, bounds in enumerate(causal_stages_of_04(), 1):
            names = {"pid_m": pid_m, "BLOCK_M": block_m, "BLOCK_N": block_n, "S": S}
            lo, hi = (eval(bounds[b], {"__builtins__": {}}, names) for b in ("lo", "hi"))
            for n0 in range(lo, hi, block_n):  # the kernel's tl.range(lo, hi, BLOCK_N)
                assert (pid_m * block_m, n0) not in visited, "a tile visited twice"
                visited[pid_m * block_m, n0] = stage
    return visited


def _above_diagonal(x0: float, y0: float, w: float, h: float) -> np.ndarray:
    """The part of the rectangle (x0, y0, w, h) where y <= x (query <= key, x the key): the
    rectangle clipped by one half-plane, corner by corner."""
    corners = [(x0, y0), (x0 + w, y0), (x0 + w, y0 + h), (x0, y0 + h)]
    kept = []
    for (xa, ya), (xb, yb) in zip(corners, corners[1:] + corners[:1]):
        if ya <= xa:
            kept.append((xa, ya))
        if (ya <= xa) != (yb <= xb):  # the edge crosses y = x
            t = (xa - ya) / ((xa - ya) - (xb - yb))
            kept.append((xa + t * (xb - xa), ya + t * (yb - ya)))
    return np.array(kept)


def _configs_of_04() -> list[tuple]:
    source = (catalogue.SOLUTIONS / catalogue.find("04").filename).read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CONFIGS":
            return list(ast.literal_eval(node.value.generators[0].iter))
    raise LookupError("04 has no CONFIGS list")


def _draw_stage_tiles(ax, visited, stages, colours, S, block_m, block_n, edge) -> None:
    """Every tile of the grid, coloured by the stage that visits it; in the last stage's
    (diagonal) tiles, the pairs the mask hides and the rows that see none of the keys."""
    for m0 in range(0, edge, block_m):
        for n0 in range(0, edge, block_n):
            stage = visited.get((m0, n0), 0)
            ax.add_patch(plt.Rectangle((n0, m0), block_n, block_m, fc=colours[stage], ec="k", lw=1))
            if stage:
                ax.text(n0 + block_n / 2, m0 + 14, f"stage {stage}", ha="center", fontsize=7.5)
            if stage != len(stages):
                continue
            # Inside a diagonal tile: the pairs the mask hides (key > query), and the rows
            # that see none of the tile's keys.
            hidden = _above_diagonal(n0, m0, block_n, block_m)
            ax.add_patch(plt.Polygon(hidden, fc="white", alpha=0.6, lw=0))
            blind = [r for r in range(m0, min(m0 + block_m, S)) if r < n0]
            if blind:
                ax.add_patch(
                    plt.Rectangle(
                        (n0, blind[0]),
                        block_n,
                        len(blind),
                        fill=False,
                        hatch="xx",
                        ec="#d94801",
                        lw=0,
                    )
                )


def _shade_past_s(ax, S: int, edge: int) -> None:
    """What lies past S: rows never stored, keys that no real row may see."""
    for rect in ((0, S, edge, edge - S), (S, 0, edge - S, S)):
        ax.add_patch(plt.Rectangle(rect[:2], *rect[2:], fc="#636363", alpha=0.18, lw=0))
    ax.text(
        8,
        S + (edge - S) / 2,
        f"rows past S = {S}: computed, never stored",
        va="center",
        fontsize=7.5,
    )
    ax.text(
        S + (edge - S) / 2,
        S / 2,
        "keys past S: loaded as zeros, and no real row may see them",
        rotation=90,
        ha="center",
        va="center",
        fontsize=7.5,
    )


def _annotate_stages(ax, visited, stages, programs, block_m, block_n) -> None:
    """Why a stage-2 tile may hide all its keys from some rows, and why pid_m = 0 needs no
    stage 1."""
    # The argument for the hatched rows, for the last query tile that has a stage 1.
    m0 = (programs - 2) * block_m if programs > 1 else 0
    first = min(n for (m, n), st in visited.items() if m == m0 and st == len(stages))
    n0 = first + block_n
    ax.annotate(
        f"rows {m0}-{n0 - 1} see none of keys {n0}-{n0 + block_n - 1}: every\n"
        f"pair is masked, so p = 0, and alpha = 1 because\n"
        f"m_i is finite already: stage 1 showed them\n"
        f"keys 0-{m0 - 1}, the first diagonal tile their own",
        (n0 + block_n / 2, m0 + (n0 - m0) / 2),
        xytext=(m0, m0 - block_m + 16),
        fontsize=7.5,
        arrowprops={"arrowstyle": "->", "color": "#d94801"},
        bbox={"fc": "white", "ec": "#d94801", "lw": 0.8},
    )
    ax.annotate(
        "pid_m = 0: no stage 1, but key 0 is in\nits first diagonal tile, for every row",
        (block_n / 2, block_m / 2),
        xytext=(2 * block_m + 8, block_m * 0.3),
        fontsize=7.5,
        arrowprops={"arrowstyle": "->", "color": "#636363"},
        bbox={"fc": "white", "ec": "#636363", "lw": 0.8},
    )


def causal_stages(S: int = 448, block_m: int = 128, block_n: int = 64) -> Path:
    """04's two-stage causal loop with 04's own tiles: which key tiles each query tile visits in
    stage 1 and in stage 2, which of its rows a stage-2 tile hides entirely, and where S ends."""
    assert any(c[:2] == (block_m, block_n) for c in _configs_of_04()), "not one of 04's tiles"
    stages = causal_stages_of_04()
    visited = causal_stage_tiles(S, block_m, block_n)
    programs = -(-S // block_m)
    edge = programs * block_m  # the last query tile's rows, and the last key tile's keys
    colours = {1: "#9ecae1", 2: "#fdae6b", 0: "#eeeeee"}

    fig, ax = plt.subplots(figsize=(8.6, 8), layout="constrained")
    _draw_stage_tiles(ax, visited, stages, colours, S, block_m, block_n, edge)
    (diagonal,) = ax.plot([0, S], [0, S], color="#08306b", lw=1.5)
    if edge > S:
        _shade_past_s(ax, S, edge)
    _annotate_stages(ax, visited, stages, programs, block_m, block_n)
    right = ax.secondary_yaxis("right")
    right.set_yticks(
        [m0 + block_m / 2 for m0 in range(0, edge, block_m)],
        [f"pid_m = {p}\nprogram_id {programs - 1 - p}" for p in range(programs)],
        fontsize=7.5,
    )
    right.tick_params(length=0)
    labels = [
        f"stage {n}: keys range({b['lo']}, {b['hi']}, BLOCK_N), MASK = {b['MASK']}"
        for n, b in enumerate(stages, 1)
    ]
    handles = [plt.Rectangle((0, 0), 1, 1, fc=colours[n]) for n in range(1, len(stages) + 1)]
    handles += [
        plt.Rectangle((0, 0), 1, 1, fc=colours[0]),
        plt.Rectangle((0, 0), 1, 1, fc=colours[2], hatch="xx", ec="#d94801"),
    ]
    handles += [plt.Rectangle((0, 0), 1, 1, fc=colours[2], alpha=0.4), diagonal]
    labels += [
        "never visited",
        "rows that see no key of this diagonal tile",
        "pairs the mask hides (key > query)",
        "key = query",
    ]
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=7.5, frameon=False)
    ticks = list(range(0, edge + 1, block_n))
    ax.set(
        xlim=(0, edge),
        ylim=(edge, 0),
        aspect="equal",
        xticks=ticks,
        yticks=list(range(0, edge + 1, block_m)),
        xlabel="key index",
        ylabel="query index",
        title=f"04's causal stages: S = {S}, BLOCK_M = {block_m}, BLOCK_N = {block_n}",
    )
    ax.tick_params(labelsize=7.5)
    return _save(fig, "causal_stages.png")


# A tl.dot compiled for a GPU without one (Triton's compiler needs none): the tensor-core
# instructions its PTX holds. Run in a subprocess, because a kernel defined while
# TRITON_INTERPRET is set is an interpreter kernel, which does not compile.
_DOT_PROBE = """
import json
import re
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, P: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(c_ptr + m[:, None] * N + n[None, :], tl.dot(a, b, input_precision=P))


found = {}
for arch, dtype, size, precision, *rows in json.loads(sys.argv[1]):
    types = {"a_ptr": "*" + dtype, "b_ptr": "*" + dtype, "c_ptr": "*fp32"}
    sizes = {"M": rows[0] if rows else size, "N": size, "K": size, "P": precision}
    source = ASTSource(dot, signature={**types, **dict.fromkeys(sizes, "constexpr")},
                       constexprs=sizes)
    ptx = triton.compile(source, target=GPUTarget("cuda", arch, 32)).asm["ptx"]
    shapes = re.findall(r"(mma[.]sync|wgmma[.]mma_async)[.a-z]*[.]m(\\d+)n(\\d+)k(\\d+)", ptx)
    found[" ".join(map(str, [arch, dtype, size, precision, *rows]))] = sorted({(i, *map(int, s)) for i, *s in shapes})
print(json.dumps(found))
"""
DOT_PROBES = (  # (sm_, operand type, M = N = K, input_precision)
    (80, "fp16", 16, "ieee"),
    (80, "fp32", 16, "tf32"),
    (90, "fp16", 64, "ieee"),
    (90, "fp32", 64, "tf32"),
    (90, "fp32", 64, "ieee"),
)
# A single query row times a 64 x 64 tile (M = 1, N = K = 64), as 08's decoding would write it:
# only K has a floor, and the compiler pads M up to the instruction's.
ONE_ROW_PROBE = (90, "fp16", 64, "ieee", 1)


def compiled_mma(probes: tuple = DOT_PROBES) -> dict[tuple, list[tuple[str, int, int, int]]]:
    """For each probe (sm_, operand type, N = K and M unless given, input_precision[, M]), the
    (instruction, m, n, k) the compiled PTX holds."""
    import json
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "dot_probe.py"
        probe.write_text(_DOT_PROBE)
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_CACHE_DIR"] = str(Path(tmp) / "cache")
        proc = subprocess.run(
            [sys.executable, str(probe), json.dumps(probes)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"compiling the probe dots failed:\n{proc.stderr[-2000:]}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    return {p: [tuple(i) for i in found[" ".join(map(str, p))]] for p in probes}


def min_dot_k() -> dict[str, int]:
    """The smallest K that the installed Triton's NVIDIA backend lets tl.dot have, by operand
    type (read from the backend, so that the figure says what this Triton does)."""
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import min_dot_size

    check = min_dot_size(GPUTarget("cuda", 90, 32))
    types = {"8-bit": tl.float8e4nv, "16-bit": tl.float16, "32-bit": tl.float32}
    return {
        name: check(tl.block_type(t, [16, 16]), tl.block_type(t, [16, 16]))[2]
        for name, t in types.items()
    }


def _matrix(ax, x, y, rows, cols, colour, title="", below="", highlight=None) -> None:
    """A rows x cols matrix at (x, y), one cell per element; ``highlight`` = (first column,
    last column + 1, colour) shades a band of columns, or with a leading "rows", of rows."""
    ax.add_patch(plt.Rectangle((x, y), cols, rows, fc=colour, ec="none"))
    if highlight:
        kind, a, b, shade = highlight
        band = (x + a, y, b - a, rows) if kind == "cols" else (x, y + a, cols, b - a)
        ax.add_patch(plt.Rectangle(band[:2], *band[2:], fc=shade, ec="none"))
    for i in range(1, cols):
        ax.plot([x + i, x + i], [y, y + rows], color="white", lw=0.4)
    for j in range(1, rows):
        ax.plot([x, x + cols], [y + j, y + j], color="white", lw=0.4)
    ax.add_patch(plt.Rectangle((x, y), cols, rows, fill=False, ec="k", lw=1))
    if title:
        ax.text(x + cols / 2, y - 1.2, title, ha="center", va="bottom", fontsize=7.5)
    if below:
        ax.text(x + cols / 2, y + rows + 1.2, below, ha="center", va="top", fontsize=7)


_MMA_COLOURS = ("#9ecae1", "#fdae6b", "#bcbddc")  # A, B and C of an instruction


def _draw_instructions(top, emitted: dict, floors: dict[str, int]) -> list[tuple]:
    """The tensor-core instructions the compiler emits, one cell per element, beside what they
    mean; the Hopper instructions for fp16 and tf32, as (name, m, n, k)."""
    import triton

    def only(probe):
        (found,) = emitted[probe]  # one kind of instruction per dot
        return found

    a_col, b_col, c_col = _MMA_COLOURS
    # One instruction each, one cell per element, for one warp of 32 threads.
    x, gap = 0, 7
    for probe, label, width in (
        (DOT_PROBES[0], "fp16", 2),
        (DOT_PROBES[1], "tf32", 4),
    ):
        name, m, n, k = only(probe)
        top.text(x, -8, f"sm_{probe[0]}, {label}: {name}.m{m}n{n}k{k}", fontsize=8)
        _matrix(top, x, 0, m, k, a_col, f"A: m x k = {m} x {k}", f"{m * k // 32} per thread")
        _matrix(top, x + k + gap, 0, k, n, b_col, f"B: {k} x {n}", f"{k * n // 32} per thread")
        _matrix(
            top, x + k + n + 2 * gap, 0, m, n, c_col, f"C: {m} x {n}", f"{m * n // 32} per thread"
        )
        top.text(x + k + gap / 2, m / 2, "x", ha="center", va="center", fontsize=11)
        top.text(x + k + n + 1.5 * gap, m / 2, "+=", ha="center", va="center", fontsize=10)
        top.text(x, m + 5, f"a row of A: {k} x {width} bytes = {k * width} bytes", fontsize=7.5)
        x += k + 2 * n + 2 * gap + 12
    hopper = [only(p) for p in DOT_PROBES[2:4]]
    ieee = emitted[DOT_PROBES[4]]
    lines = [
        "per thread: the elements each of the",
        "warp's 32 threads holds in registers",
        "",
        "sm_90 (Hopper), M = N = K = 64: one",
        "warpgroup (4 warps) issues",
        *(f"  {i}.m{m}n{n}k{k}" for i, m, n, k in hopper),
        "for fp16 and tf32: k is again 32 bytes.",
        "fp32 with input_precision ieee: "
        + ("no tensor core." if not ieee else ", ".join(i for i, *_ in ieee)),
        "",
        "The smallest K tl.dot accepts (min_dot_size",
        f"of the NVIDIA backend, triton {triton.__version__}):",
        ", ".join(f"{name} {k}" for name, k in floors.items()),
    ]
    top.text(x, -10, "\n".join(lines), fontsize=7.5, va="top")
    top.set(xlim=(-1, x + 48), ylim=(24, -10), aspect="equal")
    top.axis("off")
    return hopper


def _draw_k_steps(low, hopper: list[tuple], floors: dict[str, int]) -> None:
    """q @ k^T cut into K steps along the head dimension, and why K must fill a step."""
    a_col, b_col, c_col = _MMA_COLOURS
    # One query tile, with the Hopper instruction for fp16 and its own m, n and k.
    name, block_m, block_n, k16 = hopper[0]
    head_dim = DOT_PROBES[2][2]
    steps, step = head_dim // k16, 1
    band = (step * k16, (step + 1) * k16)
    _matrix(
        low,
        0,
        0,
        block_m,
        head_dim,
        "#deebf7",
        f"q: BLOCK_M x HEAD_DIM = {block_m} x {head_dim}",
        highlight=("cols", *band, a_col),
    )
    x_k = head_dim + 10
    _matrix(
        low,
        x_k,
        0,
        head_dim,
        block_n,
        "#fee6ce",
        f"k^T: HEAD_DIM x BLOCK_N = {head_dim} x {block_n}",
        highlight=("rows", *band, b_col),
    )
    x_s = x_k + block_n + 10
    _matrix(low, x_s, 0, block_m, block_n, c_col, f"scores: {block_m} x {block_n}, fp32")
    low.text(head_dim + 5, block_m / 2, "@", ha="center", va="center", fontsize=13)
    low.text(x_k + block_n + 5, block_m / 2, "=", ha="center", va="center", fontsize=13)
    for i in range(1, steps):
        low.plot([i * k16] * 2, [0, block_m], color="#3182bd", lw=1.2, ls="--")
        low.plot([x_k, x_k + block_n], [i * k16] * 2, color="#e6550d", lw=1.2, ls="--")
    for i in range(steps):
        low.text(i * k16 + k16 / 2, block_m + 3, f"step {i + 1}", ha="center", fontsize=7)
    text = (
        f"HEAD_DIM = {head_dim} is {steps} K steps of {k16}: {steps} {name}.m{block_m}n{block_n}"
        f"k{k16} in a row, each adding one slice's products into the same scores. Step "
        f"{step + 1} (shaded) multiplies columns {band[0]}-{band[1] - 1} of q by rows "
        f"{band[0]}-{band[1] - 1} of k^T. A head dimension of 8 would fill half a step; triton "
        f'refuses that dot before it picks an instruction ("M >= 1, N >= 1 and K >= '
        f'{floors["16-bit"]}"): its floor on K is the k of the instruction it would emit. '
        "Padding BLOCK_D to 16 with zeros fills the step, and the zero columns add nothing to "
        "any score. An M or N below the instruction's is no problem: the compiler pads those "
        "by itself."
    )
    low.text(0, block_m + 9, textwrap.fill(text, 128), fontsize=8, va="top")
    low.set(xlim=(-1, x_s + block_n + 1), ylim=(block_m + 32, -6), aspect="equal")
    low.axis("off")


def mma_shapes() -> Path:
    """Why tl.dot wants K >= 16 on 16-bit inputs: the fragments of the tensor-core instructions
    the compiler emits (A m x k, B k x n, C m x n), and q @ k^T cut into K steps along the head
    dimension. Every shape is read from PTX that Triton compiled here, for sm_80 and sm_90."""
    emitted = compiled_mma()
    floors = min_dot_k()
    fig, (top, low) = plt.subplots(
        2, 1, figsize=(9, 7), layout="constrained", gridspec_kw={"height_ratios": [1.1, 2.6]}
    )
    hopper = _draw_instructions(top, emitted, floors)
    _draw_k_steps(low, hopper, floors)
    fig.suptitle(
        "Why tl.dot wants K >= 16: the tensor-core instructions, and q @ k^T in K steps",
        fontsize=10,
    )
    return _save(fig, "mma_shapes.png")


# ---- 09's ranking, block by block ------------------------------------------------------------


class _Lanes(np.ndarray):
    """A block of lanes as NumPy holds it, with the ``.to(dtype)`` of a Triton tensor."""

    def to(self, dtype):
        return self.astype(dtype).view(_Lanes)


def _lanes(values) -> _Lanes:
    return np.asarray(values).view(_Lanes)


def ranking_of_09() -> dict[str, list[str]]:
    """09's kernel as its solution writes it: the statement that sets ``offset``, and the
    statements of the ranking loop (the second loop over the pairs) that compute values, loads
    and stores left out, each as source text."""
    source = (catalogue.SOLUTIONS / catalogue.find("09").filename).read_text()
    kernel = next(
        f for f in ast.parse(source).body if getattr(f, "name", "") == "moe_dispatch_kernel"
    )
    offset = [
        ast.unparse(n)
        for n in kernel.body
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "offset"
    ]
    loops = [n for n in kernel.body if isinstance(n, ast.For)]
    body = [
        ast.unparse(n)
        for n in loops[1].body
        if isinstance(n, (ast.Assign, ast.AugAssign)) and "tl.load" not in ast.unparse(n)
    ]
    return {"offset": offset, "loop": body}


def ranking_steps(idx, E: int, capacity: int, expert: int, block: int) -> list[dict]:
    """The ranking loop of 09's solution run block by block for one expert, with NumPy standing
    in for ``tl``: per block, the pairs' experts, the hit flags, the inclusive ``tl.cumsum`` the
    loop takes, the rank, ``seen`` before and after, the rows and which pairs are kept."""
    flat = np.asarray(idx, np.int64).reshape(-1)
    scans = []

    def cumsum(x, axis=0):
        scans.append(np.cumsum(x, axis=axis).view(_Lanes))
        return scans[-1]

    tl = type("tl", (), {})
    tl.cumsum, tl.int32 = staticmethod(cumsum), np.int32
    tl.sum = staticmethod(lambda x, axis=None: np.sum(x, axis=axis))
    tl.where, tl.arange = staticmethod(np.where), staticmethod(np.arange)
    tl.minimum, tl.maximum = staticmethod(np.minimum), staticmethod(np.maximum)
    code = ranking_of_09()
    routed = np.bincount(flat, minlength=E)
    names = {
        "tl": tl,
        "e": expert,
        "CAPACITY": capacity,
        "BLOCK": block,
        "experts": _lanes(np.arange(E)),
        "kept": _lanes(np.minimum(routed, capacity)),
        "seen": 0,
    }
    for statement in code["offset"]:
        exec(statement, {"__builtins__": {}}, names)
    steps = []
    for p0 in range(0, flat.size, block):
        pairs = p0 + np.arange(block)
        names["p0"] = p0  # padded lanes past the last pair load expert -1, as the kernel's do
        names["ids"] = _lanes(
            np.where(pairs < flat.size, flat[np.minimum(pairs, flat.size - 1)], -1)
        )
        before, scans[:] = int(names["seen"]), []
        for statement in code["loop"]:
            exec(statement, {"__builtins__": {}}, names)
        assert len(scans) == 1, "the loop should take one tl.cumsum per block"
        steps.append(
            {
                "pairs": pairs,
                "ids": np.asarray(names["ids"]),
                "hit": np.asarray(names["hit"]).astype(int),
                "cumsum": np.asarray(scans[0]),
                "rank": np.asarray(names["rank"]),
                "seen": (before, int(names["seen"])),
                "row": np.asarray(names["row"]),
                "keep": np.asarray(names["keep"]).astype(bool),
                "offset": int(names["offset"]),
            }
        )
    return steps


def _slot_text(step: dict, j: int) -> str:
    """What the kernel stores as the pair's slot: its row when kept, -1 when dropped."""
    if not step["hit"][j]:
        return ""
    return str(step["row"][j]) if step["keep"][j] else "-1"


def worked_example_routing_of_09() -> tuple:
    """(idx, E, CAPACITY) of 09's worked example: 12 tokens, top-2 of 4 experts, seed 0."""
    torch.manual_seed(0)
    idx = torch.topk(torch.randn(12, 4), 2, dim=-1).indices.numpy()
    return idx, 4, 5


def dispatch_ranking(expert: int = 3, block: int = 8) -> Path:
    """09's ranking for one expert of the worked example, block by block: the hit flags, their
    inclusive cumsum, minus the own flag, plus the carry ``seen``, the rows and the drops."""
    idx, E, capacity = worked_example_routing_of_09()
    K = idx.shape[1]
    steps = ranking_steps(idx, E, capacity, expert, block)
    gap, h = 1.6, 1.0
    labels = [
        ("pair p", lambda s, j: str(s["pairs"][j])),
        ("(token, choice)", lambda s, j: f"{s['pairs'][j] // K},{s['pairs'][j] % K}"),
        ("expert idx", lambda s, j: str(s["ids"][j])),
        ("hit", lambda s, j: str(s["hit"][j])),
        ("tl.cumsum(hit)", lambda s, j: str(s["cumsum"][j])),
        ("cumsum - hit", lambda s, j: str(s["cumsum"][j] - s["hit"][j])),
        ("rank = seen + ...", lambda s, j: str(s["rank"][j]) if s["hit"][j] else ""),
        (
            "keep = rank < CAP.",
            lambda s, j: ("yes" if s["keep"][j] else "no") if s["hit"][j] else "",
        ),
        ("slot: offset + rank", lambda s, j: _slot_text(s, j)),
    ]
    fig, ax = plt.subplots(figsize=(13, 5.4))
    x_of = lambda b, j: b * (block + gap) + j  # noqa: E731
    for b, step in enumerate(steps):
        for r, (_, text) in enumerate(labels):
            for j in range(block):
                hit = step["hit"][j]
                colour = "#ffffff"
                if hit and r >= 2:
                    colour = "#c6dbef"
                if r >= len(labels) - 2 and hit:
                    colour = "#a1d99b" if step["keep"][j] else "#fc9272"
                if r == 4 and hit:
                    colour = "#fdd0a2"  # the inclusive count: one too many on a hit
                _box(ax, x_of(b, j), r * h, 1, h, colour, text(step, j), size=7.5)
        x0 = x_of(b, 0)
        ax.text(
            x0 + block / 2,
            -0.6,
            f"block {b}: pairs {step['pairs'][0]}..{step['pairs'][-1]}",
            ha="center",
            fontsize=9,
        )
        first, after = step["seen"]
        ax.text(
            x0 + block / 2,
            len(labels) * h + 0.7,
            f"seen = {first} coming in, {after} going out",
            ha="center",
            fontsize=8.5,
        )
        if b + 1 < len(steps):
            y = len(labels) * h + 0.55
            _arrow(ax, (x0 + block + 0.1, y), (x_of(b + 1, 0) - 0.1, y), colour="#08519c")
            ax.text(
                x0 + block + gap / 2,
                y + 0.55,
                f"carry {after}",
                ha="center",
                fontsize=8,
                color="#08519c",
            )
    for r, (label, _) in enumerate(labels):
        ax.text(-0.3, r * h + h / 2, label, ha="right", va="center", fontsize=8.5)
    offset = steps[0]["offset"]
    ax.text(
        0,
        len(labels) * h + 1.8,
        f"offset = {offset} (rows kept by experts 0..{expert - 1}); CAPACITY = {capacity}: "
        f"ranks {capacity} and above are dropped. Orange: the inclusive count, one too many "
        "on a hit; cumsum - hit makes it exclusive.",
        fontsize=8.5,
    )
    ax.set(
        xlim=(-4.8, x_of(len(steps) - 1, block) + 0.2),
        ylim=(len(labels) * h + 2.4, -1.2),
        title=f"09's ranking for expert {expert}, worked example (seed 0), BLOCK = {block}",
    )
    ax.axis("off")
    return _save(fig, "dispatch_ranking.png")


def _save(fig, name: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def main() -> int:
    runtime.configure()
    for make in (
        causal_tiles,
        raw_top2_sums,
        running_max,
        flash_tiling,
        causal_stages,
        mma_shapes,
        dispatch_ranking,
    ):
        print(f"wrote {make().relative_to(catalogue.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
