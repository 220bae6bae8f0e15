"""The generators of boundary cases (grader/kinds/*/boundary.py): the classes they derive for a
tile set (residues modulo the tiles, M != N both ways, windows whose edge lies apart from the diagonal
and crosses three key tiles under 32-row blocks and five under query blocks over more than two
key tiles, windows no wider than a key tile under taller blocks, WINDOW >= N with M > N,
creeping maxima, logits out of exp's range, CAPACITY = 0), and the hidden specs that must draw
their cases from it. Nothing here launches a kernel."""

from __future__ import annotations

import numpy as np
import pytest

from grader import specs
from grader.kinds import base
from grader.kinds.attention import boundary
from grader.kinds.gating import boundary as gating_boundary
from grader.kinds.moe_dispatch import boundary as dispatch_boundary
from kata import oracles
from kata.catalogue import find

TILES = [(16, 16), (16, 32), (32, 16)]
# Query blocks over more than two key tiles: a block's diagonal crosses four of them.
TALL = [(64, 16), (128, 32)]
EDGES = {-1, 0, 1}

STEM = {n: find(n).stem for n in ("01", "02", "03", "05", "06")}  # through the manifest


@pytest.mark.parametrize("block_m, block_n", TILES)
def test_ragged_sizes_sit_on_every_tile_edge(block_m, block_n):
    shapes = boundary.ragged(block_m, block_n)
    for tile in {block_m, block_n}:  # both tile sizes, for M and for N
        assert {base.residue(s.M, tile) for s in shapes} == EDGES
        assert {base.residue(s.N, tile) for s in shapes} == EDGES
    assert {np.sign(s.M - s.N) for s in shapes} == {-1, 0, 1}  # M < N, M > N, M = N
    for s in shapes:
        assert (s.block_m, s.block_n) == (block_m, block_n) and s.window is None
        assert max(s.M, s.N) > max(block_m, block_n)  # more than one tile: a loop, not one step
        assert f"M={s.M}" in s.about or f"M=N={s.M}" in s.about


@pytest.mark.parametrize("block_m, block_n", TILES + TALL)
def test_windows_sit_on_key_tile_edges_apart_from_the_diagonal(block_m, block_n):
    shapes = boundary.windows(block_m, block_n)
    assert {base.residue(s.window, block_n) for s in shapes} == EDGES
    for s in shapes:
        assert s.window > block_m + block_n and s.window < s.N  # wider than both; not causal
        starts = boundary.first_keys(s)
        assert starts, f"{s.name}: no block's window begins past key 0"
        r0, oldest = starts[0]
        newest = min(r0 + block_m, s.M) - s.window  # the block's last row's oldest key
        assert newest // block_n < r0 // block_n, f"{s.name}: the edge reaches the diagonal"
        assert f"WINDOW={s.window}" in s.about
    most = max(boundary.edge_tiles(s) for s in shapes)
    # A block's window edge holds block_m consecutive keys: three 16-key tiles for 32 rows,
    # five for 64 rows (and 32-key tiles for 128 rows).
    assert most == (block_m // block_n + 1 if block_m >= block_n else 1)


def test_ragged_windows_are_one_short_of_a_tile():
    shapes = boundary.ragged(16, 16, window=15)
    assert all(s.window == 15 and base.residue(s.window, 16) == -1 for s in shapes)
    assert len({s.name for s in shapes}) == len(shapes)


def test_narrow_windows_hide_keys_of_the_blocks_own_diagonal_tiles():
    shapes = boundary.narrow(32, 16)
    assert [s.window for s in shapes] == [15, 16]  # one key short of and exactly a key tile
    for s in shapes:
        mask = oracles.causal_mask(s.M, s.N, s.window)
        for r0 in range(0, s.M, s.block_m):
            last = min(r0 + s.block_m, s.M) - 1
            # The block's last row sees none of its first diagonal key tile ...
            assert not mask[last, r0 : r0 + s.block_n].any(), s.name
            # ... and with 15 keys, not all of the next one: a key past the first diagonal tile
            # that is causal yet outside the window, which only 32-row blocks over 16-key tiles
            # with a window below BLOCK_M - BLOCK_N have.
            later = (
                ~mask[:, r0 + s.block_n : r0 + s.block_m]
                & oracles.causal_mask(s.M, s.N)[:, r0 + s.block_n : r0 + s.block_m]
            )
            assert later[r0 : last + 1].any() == (s.window < s.block_m - s.block_n), s.name
    with pytest.raises(ValueError, match="taller"):
        boundary.narrow(16, 16)


@pytest.mark.parametrize("block_m, block_n", [(16, 16), (32, 16)])
def test_long_windows_over_fewer_keys_are_not_plain_causal(block_m, block_n):
    shapes = boundary.long_windows(block_m, block_n)
    assert {s.window for s in shapes} == {shapes[0].N, shapes[0].M - 1}
    for s in shapes:
        assert s.M > s.N and s.window >= s.N
        windowed, causal = oracles.causal_mask(s.M, s.N, s.window), oracles.causal_mask(s.M, s.N)
        lost = np.flatnonzero((causal & ~windowed).any(axis=1))  # rows that lose keys
        assert lost.size and lost.min() == s.window, s.name
        assert windowed.any(axis=1).all(), s.name  # and every row still sees a key
    assert boundary.attention(shapes, 0)  # within the contract: no row without keys


def test_no_window_case_has_a_row_without_keys():
    # Row i sees keys i - WINDOW + 1 .. i below N: none at all once i - WINDOW + 1 >= N.
    with pytest.raises(ValueError, match="see no key"):
        boundary.attention(boundary.ragged(32, 16, window=15), 0)
    cases = specs.load(STEM["06"], "hidden").cases.values()
    for c in cases:
        M, N = len(c.inputs["q"]), len(c.inputs["k"])
        assert oracles.causal_mask(M, N, c.window).any(axis=1).all(), c.name


def test_maxima_creep_by_a_thousandth_per_key_tile():
    case = boundary.creep(1)
    q, k = (case.inputs[n].astype(np.float64) for n in "qk")
    scores = q @ k.T / np.sqrt(q.shape[1])
    tile_max = scores.reshape(len(q), -1, case.block_n).max(axis=2)
    steps = np.diff(tile_max, axis=1)
    assert np.allclose(steps, 1e-3, atol=1e-6)  # every row, every tile
    assert np.exp(-steps).min() > 0.99  # alpha: a rescale skipped near 1 is skipped here


@pytest.mark.parametrize("E", [2, *gating_boundary.experts(8)])
def test_extreme_logits_leave_exps_range(E):
    kinds = ("high", "low", "mixed", "tie-high", "tie-low")
    x = gating_boundary.extremes(3, 10, E, kinds).inputs["logits"].astype(np.float64)
    high, low, mixed, tie_high, tie_low = (x[i :: len(kinds)] for i in range(len(kinds)))
    assert (high > 88).all() and (low < -100).all()
    assert ((mixed > 88).any(axis=1) & (mixed < -100).any(axis=1)).all()
    assert (tie_high == tie_high[:, :1]).all() and (tie_low == tie_low[:, :1]).all()
    assert np.isfinite(oracles.softmax(x)).all()  # the oracle subtracts each row's maximum
    with np.errstate(over="ignore", invalid="ignore"):
        raw = np.exp(x.astype(np.float32))
        assert not np.isfinite(raw / raw.sum(axis=1, keepdims=True)).all()


def test_experts_are_not_powers_of_two():
    assert all(E & (E - 1) for E in gating_boundary.experts(8))


# ---- the hidden specs draw their cases from the generator ----------------------------------


def _cases_of(stem: str, check_id: str):
    spec = specs.load(stem, "hidden")
    check = next(c for c in spec.checks if c.id == check_id)
    assert check.points > 0
    return [spec.cases[n] for n in check.cases]


def _paid_cases(stem: str):
    spec = specs.load(stem, "hidden")
    return {n: spec.cases[n] for c in spec.checks if c.points for n in c.cases}


# fmt: off
@pytest.mark.parametrize("stem, tiles", [
    (STEM["01"], [(16, 16), (16, 32)]),
    (STEM["02"], TILES + TALL),
    (STEM["06"], TILES + TALL),
])
# fmt: on
def test_attention_specs_pay_for_every_edge_of_their_tiles(stem, tiles):
    cases = _paid_cases(stem).values()
    for block_m, block_n in tiles:
        ours = [c for c in cases if (c.block_m, c.block_n) == (block_m, block_n)]
        Ns = {len(c.inputs["k"]) for c in ours}
        for tile in {block_m, block_n}:
            assert {base.residue(n, tile) for n in Ns} >= EDGES, (block_m, block_n, tile)
        # Query rows only meet block_m: the last block's rows, whatever the key tiles.
        Ms = {len(c.inputs["q"]) for c in cases if c.block_m == block_m}
        assert {base.residue(m, block_m) for m in Ms} >= EDGES, (block_m, block_n)
        shapes = {(len(c.inputs["q"]), len(c.inputs["k"])) for c in ours}
        assert any(m < n for m, n in shapes) and any(m > n for m, n in shapes)


def test_window_spec_pays_for_window_edges_and_five_tile_spans():
    cases = _paid_cases(STEM["06"])
    for block_m, block_n in TILES + TALL:
        for shape in boundary.windows(block_m, block_n):
            assert shape.name in cases
    spans = [
        boundary.edge_tiles(boundary.Shape(len(c.inputs["q"]), len(c.inputs["k"]), c.block_m,
                                           c.block_n, window=c.window))
        for c in cases.values()
    ]
    assert max(spans) >= 5  # more key tiles than a 32-row block's edge can cross (three)


def test_window_spec_pays_for_narrow_and_long_windows():
    cases = _paid_cases(STEM["06"])
    long = boundary.long_windows(16, 16) + boundary.long_windows(32, 16)
    for shape in boundary.narrow(32, 16) + long:
        assert shape.name in cases, shape.name
        case = cases[shape.name]
        assert (case.block_m, case.block_n) == (shape.block_m, shape.block_n)
        assert (len(case.inputs["q"]), len(case.inputs["k"])) == (shape.M, shape.N)
        assert case.window == shape.window


def test_rescale_is_paid_on_creeping_maxima():
    assert "creeping-max-16x64" in {c.name for c in _cases_of(STEM["01"],
                                                               "running-max-grows")}


# fmt: off
@pytest.mark.parametrize("stem, check_id", [
    (STEM["03"], "renormalized-random"),
    (STEM["03"], "renormalized-padded-experts"),
    (STEM["03"], "renormalized-ties-and-two-experts"),
    (STEM["05"], "fast-gating-weights"),
])
# fmt: on
def test_every_weights_check_sees_logits_out_of_exps_range(stem, check_id):
    rows = np.concatenate([c.inputs["logits"].max(axis=1) for c in _cases_of(stem, check_id)])
    lows = np.concatenate([c.inputs["logits"].min(axis=1) for c in _cases_of(stem, check_id)])
    assert (rows < -100).any(), "a row wholly below -100"
    assert (lows > 88).any(), "a row wholly above 88"
    assert ((rows > 88) & (lows < -100)).any(), "a row with both"


# ---- MoE dispatch (09): pair counts against the blocks, capacities at their edge ----------


@pytest.mark.parametrize("K", [1, 2, 3])
def test_ragged_tokens_sit_on_the_pair_blocks_edges(K):
    step = 1 if K % 2 else 2  # top-2 routing only makes even pair counts
    Ms = dispatch_boundary.ragged_tokens(16, K)
    assert [(M * K) % 16 for M in Ms] == [16 - step, 0, step]
    assert all(M * K > 32 for M in Ms)  # more than two blocks: the carry is used
    assert "pairs" in dispatch_boundary.pairs_against(Ms[0], K, 16)


def test_capacity_met_has_an_expert_at_and_one_past_the_capacity():
    routing, capacity = dispatch_boundary.capacity_met(3, 40, 8)
    counts = np.bincount(routing["idx"].ravel(), minlength=8)
    assert capacity in counts and capacity + 1 in counts


def test_dispatch_spec_pays_for_every_boundary_class():
    from kata import oracles

    cases = _paid_cases(find("09").stem)
    blocks = {}
    for c in cases.values():
        p = c.params
        blocks.setdefault(p["BLOCK"], set()).add(base.residue(c.inputs["idx"].size, p["BLOCK"]))
    assert blocks[16] >= EDGES, "pair counts one short of, a multiple of and one past a block"
    experts = {c.params["E"] for c in cases.values()}
    assert {8, 60} <= experts and any(E > 2 and (E - 1) & (E - 2) == 0 for E in experts), "E = 8, 60, 2^k + 1"
    met = one_past = cap_zero = cap_one = cap_m = at_edge = empty = skewed = last_over = False
    for c in cases.values():
        idx, E, C, B = c.inputs["idx"], c.params["E"], c.params["CAPACITY"], c.params["BLOCK"]
        routed = np.bincount(idx.ravel(), minlength=E)
        right = oracles.moe_dispatch(idx, E, C)
        dropping = (right["slot"] < 0).any()
        met |= dropping and C in routed
        one_past |= dropping and C + 1 in routed
        cap_zero |= C == 0 and bool((right["slot"] < 0).all()) and not right["counts"].any()
        cap_one |= C == 1 and dropping
        cap_m |= C == len(idx) and routed.max() == len(idx)
        at_edge |= any(p % B == 0 for p in dispatch_boundary.first_dropped(idx, E, C).values())
        empty |= (routed == 0).any() and routed[-1] == 0
        skewed |= routed.max() >= len(idx) // 2
        last_over |= routed[-1] > C
    assert met and one_past, "an expert routed exactly CAPACITY pairs beside one routed one more"
    assert cap_one and cap_m, "CAPACITY = 1, and CAPACITY = M met by an expert routed every token"
    assert cap_zero, "CAPACITY = 0: every pair dropped, no row filled (the contract's least)"
    assert at_edge, "an expert's first dropped pair on a block's first pair"
    assert empty and skewed and last_over, "empty experts, one with half the tokens, the last over"


@pytest.mark.parametrize("checkset", ["hidden", "public"])
def test_dispatch_capacity_cases_tell_the_capacity_mistakes_apart(checkset):
    """Every case that drops has an expert routed CAPACITY + 2 pairs or more, so that keeping
    every pair and keeping one too many give different layouts; and every capacity check has a
    case whose last expert stays under its capacity, so that a kernel writing rows for pairs it
    should not (keep without the hit flag) writes past the last row filled, which no race
    between programs can hide."""
    spec = specs.load(find("09").stem, checkset)
    for check in spec.checks:
        if check.todo != "capacity-drop":
            continue
        under = False
        for name in check.cases:
            c = spec.cases[name]
            C = c.params["CAPACITY"]
            routed = np.bincount(c.inputs["idx"].ravel(), minlength=c.params["E"])
            if routed.max() > C:
                assert routed.max() >= C + 2, name
                under |= routed[-1] < C
        assert under, check.id
