"""The figures that explain the kernels (``nox -s figures``): each is drawn here, and what it
claims is checked against the code it was drawn from: 04's loop bounds, the compiler's
tensor-core instructions."""

import inspect
import re

import pytest

pytest.importorskip("matplotlib")

from kata import catalogue  # noqa: E402
from kata.authoring import figures  # noqa: E402

slow = pytest.mark.slow
DOCS = catalogue.ROOT / "docs"


def _text(path) -> str:
    """A page with its line breaks undone, so that a quoted sentence is found whole."""
    return " ".join(path.read_text().split())


def _defaults(function) -> dict:
    return {n: p.default for n, p in inspect.signature(function).parameters.items()}


@pytest.fixture(autouse=True)
def drawn_elsewhere(tmp_path, monkeypatch):
    """The figures go to a temporary folder, never over docs/figures."""
    monkeypatch.setattr(figures, "OUT", tmp_path)
    return tmp_path


def _is_png(path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_flash_tiling_is_drawn_and_its_caption_says_what_it_shows(drawn_elsewhere):
    path = figures.flash_tiling()
    assert path.parent == drawn_elsewhere and _is_png(path)
    shape = _defaults(figures.flash_tiling)
    M, N, D = shape["M"], shape["N"], shape["D"]
    block = _defaults(figures._solution("01").flash_attention)["BLOCK_M"]
    programs = -(-M // block)
    guide = _text(DOCS / "guide.md")
    assert f"loop for M = {M}, N = {N}, D = {D}, with 01's {block} x {block} blocks" in guide
    assert f"Program {shape['pid']} owns query rows {block} to {2 * block - 1}" in guide
    assert f"All cdiv(M, BLOCK_M) = {programs} programs walk all of K and V" in guide
    assert f"reads K and V {programs} times each" in guide and f"The {M} x {N} scores" in guide

    # The IO argument (teaching review M2): plain attention's S and P round trips against the
    # grid's re-reads of K and V, recounted here tile by tile from the loop the figure draws.
    io = figures.attention_traffic(M, N, D, block)
    tiles = [min(block, N - n0) for n0 in range(0, N, block)]
    assert io["flash"] == 2 * M * D + programs * 2 * sum(tiles) * D
    assert io["plain"] == 2 * M * D + 2 * N * D + 4 * M * N
    assert io["flash"] < io["plain"], "the figure must show a saving"
    assert io["kv_rereads"] == 2 * M * N, "at D = BLOCK_M, S's round trip alone shows none"
    for number in (io["s_and_p"], io["kv_rereads"], io["flash"], io["plain"]):
        assert re.search(rf"(?<![\d.]){number}(?![\d.]\d)", guide), number
    assert "grid moves 12288 elements and plain attention 25088, about half" in guide
    assert round(io["flash"] / io["plain"], 1) == 0.5
    # 04's tiles at D = 64: the growing terms in the ratio D / (2 BLOCK_M), a quarter.
    big = figures.attention_traffic(4096, 4096, 64, 128)
    assert big["kv_rereads"] * 4 == big["s_and_p"]
    assert "04's 128-row tiles at D = 64, the re-reads are a quarter of what S and P move" in guide


@pytest.mark.parametrize("S", [1, 64, 127, 128, 448, 512, 700])
@pytest.mark.parametrize(("block_m", "block_n"), [(128, 64), (64, 64), (128, 128)])
def test_04s_causal_stages_cover_each_visible_key_once(S, block_m, block_n):
    """The tiles the figure colours, from 04's own bounds: every visible pair (key <= query < S)
    lies in exactly one visited tile; stage 1 needs no mask; and every row has seen a visible
    key before it meets a stage-2 tile that hides all of its keys (so alpha is never NaN)."""
    stages = figures.causal_stages_of_04()
    assert [s["MASK"] for s in stages] == ["NO_MASK", "DIAGONAL"]
    visited = figures.causal_stage_tiles(S, block_m, block_n)
    for row in range(S):
        m0 = row // block_m * block_m
        tiles = sorted((n0, stage) for (m, n0), stage in visited.items() if m == m0)
        keys = [k for n0, _ in tiles for k in range(n0, n0 + block_n) if k <= row]
        assert keys == list(range(row + 1)), row  # each visible key once, in order
        seen = False
        for n0, stage in tiles:
            visible = n0 <= row
            if stage == 1:
                assert n0 + block_n - 1 <= m0  # every key of the tile precedes every row
            assert seen or visible, (row, n0)  # a fully hidden tile only after a real key
            seen = seen or visible


def test_the_prunes_dropped_tiles_would_leak_future_keys():
    """With 64-row query tiles and 128-key tiles (what 04's prune drops), stage 1 loads keys
    that rows of its own query tile must not see."""
    visited = figures.causal_stage_tiles(256, 64, 128)
    leaks = [(m0, n0) for (m0, n0), stage in visited.items() if stage == 1 and n0 + 127 > m0]
    assert leaks


def test_causal_stages_is_drawn_and_its_caption_counts_its_tiles(drawn_elsewhere):
    assert _is_png(figures.causal_stages())
    shape = _defaults(figures.causal_stages)
    S, block_m, block_n = shape["S"], shape["block_m"], shape["block_n"]
    visited = figures.causal_stage_tiles(S, block_m, block_n)
    tiles = (-(-S // block_m)) * (-(-S // block_m) * block_m // block_n)
    stage = [sum(1 for s in visited.values() if s == n) for n in (1, 2)]
    page = _text(DOCS / "exercises" / f"{catalogue.find('04').stem}.md")
    assert f"for S = {S} with {block_m} x {block_n} tiles" in page
    assert (
        f"Of the {tiles} tiles, {stage[0]} run in stage 1, {stage[1]} in stage 2, and "
        f"{tiles - len(visited)} are never loaded" in page
    )
    assert f"the first {block_n} rows of the query tile (hatched)" in page
    with pytest.raises(AssertionError, match="not one of 04's tiles"):
        figures.causal_stages(block_m=96)


@slow
def test_the_mma_figure_shows_what_the_compiler_emits(drawn_elsewhere):
    """Compiled here for sm_80 and sm_90: 16-bit dots run instructions with k = 16 and tf32 dots
    k = 8, the floors the backend sets on K; IEEE fp32 uses no tensor-core instruction."""
    import triton

    emitted = figures.compiled_mma()
    floors = figures.min_dot_k()
    (sm80_16,), (sm80_tf32,) = emitted[figures.DOT_PROBES[0]], emitted[figures.DOT_PROBES[1]]
    (sm90_16,), (sm90_tf32,) = emitted[figures.DOT_PROBES[2]], emitted[figures.DOT_PROBES[3]]
    assert sm80_16 == ("mma.sync", 16, 8, 16) and sm80_tf32 == ("mma.sync", 16, 8, 8)
    assert sm90_16 == ("wgmma.mma_async", 64, 64, 16)
    assert sm90_tf32 == ("wgmma.mma_async", 64, 64, 8)
    assert emitted[figures.DOT_PROBES[4]] == []
    assert floors["16-bit"] == sm80_16[3] == sm90_16[3] == 16
    if tuple(int(x) for x in triton.__version__.split(".")[:2]) >= (3, 9):
        assert floors["32-bit"] == sm90_tf32[3] == 8  # 3.6 asked 16 of fp32 too
    assert _is_png(figures.mma_shapes())
    per_thread = [[m * k // 32, k * n // 32, m * n // 32] for _, m, n, k in (sm80_16, sm80_tf32)]
    (a16, b16, c16), (a32, b32, c32) = per_thread
    assert c16 == c32
    guide = _text(DOCS / "guide.md")
    assert f"(A: {a16} and {a32}, B: {b16} and {b32}, C: {c16})" in guide
    assert "mma.sync.m16n8k16" in guide and "wgmma.mma_async.m64n64k16" in guide
    assert "`mma.sync.m16n8k8` and `wgmma.mma_async.m64n64k8`" in guide


@slow
def test_a_one_row_dot_compiles_as_08s_page_says():
    """Teaching review H1: a 1 x 64 by 64 x 64 tl.dot compiles for sm_90 (only K has a floor;
    the compiler pads M), to an MMA whose 16 rows the single row would mostly waste."""
    ((instruction, m, n, k),) = figures.compiled_mma((figures.ONE_ROW_PROBE,))[
        figures.ONE_ROW_PROBE
    ]
    assert k == 16 and m == 16, (instruction, m, n, k)
    page = _text(DOCS / "exercises" / f"{catalogue.find('08').stem}.md")
    assert (
        "A one-row `tl.dot` would compile: only its reduction dimension K must be at least 16"
        in page
    )
    assert "one row fills 1 of an MMA instruction's 16 rows" in page
    assert "at least 16 rows" not in page


def test_09s_ranking_replays_the_solutions_loop():
    """The figure's numbers come from the solution's own statements, run block by block: for
    every expert of random routings (blocks of 4, 8 and 16 pairs, capacities that drop), the
    slots they give are the oracle's, and the scan they take is the inclusive one."""
    import numpy as np

    from kata import oracles

    code = figures.ranking_of_09()
    assert code["offset"] and any("tl.cumsum" in line for line in code["loop"])
    rng = np.random.default_rng(9)
    for M, E, K, capacity, block in [(12, 4, 2, 5, 8), (19, 5, 3, 4, 4), (40, 8, 2, 7, 16)]:
        idx = np.argsort(rng.standard_normal((M, E)), axis=1)[:, :K]
        right = oracles.moe_dispatch(idx, E, capacity)["slot"].reshape(-1)
        flat = idx.reshape(-1)
        for e in range(E):
            for step in figures.ranking_steps(idx, E, capacity, e, block):
                assert np.array_equal(step["cumsum"], np.cumsum(step["hit"]))
                mine = step["pairs"][step["hit"] == 1]
                assert (flat[mine] == e).all()
                got = np.where(step["keep"], step["row"], -1)[step["hit"] == 1]
                assert np.array_equal(got, right[mine]), (M, E, K, e)


def test_dispatch_ranking_is_drawn_and_its_caption_says_what_it_shows(drawn_elsewhere):
    import numpy as np

    assert _is_png(figures.dispatch_ranking())
    shape = _defaults(figures.dispatch_ranking)
    expert, block = shape["expert"], shape["block"]
    idx, E, capacity = figures.worked_example_routing_of_09()
    steps = figures.ranking_steps(idx, E, capacity, expert, block)
    routed = sum(int(s["hit"].sum()) for s in steps)
    dropped = sum(int((s["hit"].astype(bool) & ~s["keep"]).sum()) for s in steps)
    assert [s["seen"][0] for s in steps][1:] == [s["seen"][1] for s in steps][:-1]
    page = _text(DOCS / "exercises" / f"{catalogue.find('09').stem}.md")
    # The routing drawn is the page's worked example, row for row of its table.
    row = page.split("| experts (`idx`) |")[1].split("| rows")[0]
    quoted = [[int(x) for x in cell.split(",")] for cell in row.strip(" |").split(" | ")]
    assert np.array_equal(idx, np.array(quoted))
    assert "![09's ranking, block by block](../figures/dispatch_ranking.png)" in page
    assert (
        f"run on the worked example with `BLOCK = {block}` for expert {expert} ({routed} pairs, "
        f"the last {dropped} dropped)" in page
    )
    assert f"with `CAPACITY = {capacity}` (seed 0)" in page
