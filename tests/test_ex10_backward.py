"""Exercise 10, flash-attention backward: the solution and the kind's oracle against torch
autograd in float64, and each named trap's float64 replay against the solution with that slip
written into it.

Shapes stay small: the interpreter runs every program in Python.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch

from grader.kinds.attention_backward import traps
from kata import catalogue, regions, runtime
from kata.kinds import attention_backward as kind

SOLUTION = catalogue.SOLUTIONS / "10_flash_attention_backward.py"

# The same right lines stand in both kernels; each slip rewrites every copy, as a student who
# makes it in one TODO would make it in the other.
RIGHT_P = "p = tl.where(visible, tl.exp(qk * scale - lse[:, None]), 0.0)"
RIGHT_DS = "ds = p * (dp - delta[:, None]) * scale"
SLIPS = {
    "p-not-normalized-by-lse": {RIGHT_P: "p = tl.where(visible, tl.exp(qk * scale), 0.0)"},
    "causal-mask-missing-in-backward": {RIGHT_P: "p = tl.exp(qk * scale - lse[:, None])"},
    "dv-from-unmasked-p": {
        RIGHT_P: "p = tl.exp(qk * scale - lse[:, None])",
        RIGHT_DS: "ds = tl.where(visible, p * (dp - delta[:, None]), 0.0) * scale",
    },
    "delta-missing": {RIGHT_DS: "ds = p * dp * scale"},
    "scale-dropped": {RIGHT_DS: "ds = p * (dp - delta[:, None])"},
    "scale-doubled": {RIGHT_DS: "ds = p * (dp - delta[:, None]) * scale * scale"},
}
# Trap forms are told apart as the chapter's checks tell answers apart, at atol = rtol = 1e-4,
# and a case proves a trap only where it lies 100 such tolerances from the right answer.
ATOL = 1e-4
APART = 100 * ATOL


@functools.cache
def solution():
    return catalogue.load_file(SOLUTION)


def forward(q, k, v, causal):
    """O and lse of the kind's float64 forward, as torch tensors."""
    return tuple(torch.from_numpy(x) for x in kind.forward(q, k, v, causal))


def autograd_backward(q, k, v, do, causal):
    """dQ, dK, dV of sum(O * dO) by torch autograd through the whole attention, in float64:
    nothing tiled, nothing in closed form."""
    q, k, v = (x.detach().to(torch.float64).requires_grad_() for x in (q, k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        S = q.shape[-2]
        scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return torch.autograd.grad(out, (q, k, v), do.detach().to(torch.float64))


def make_case(B, H, S, D, causal, seed=0):
    """fp32 q, k, v, dO drawn from a seeded generator; O and lse from the float64 forward,
    rounded to fp32 as a forward kernel would store them."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v, do = (torch.randn(B, H, S, D, generator=gen) for _ in range(4))
    o, lse = forward(q, k, v, causal)
    return q, k, v, o.float(), do, lse.float()


def run(module, case, causal, **blocks):
    inputs = [x.to(runtime.DEVICE) for x in case]
    return [
        g.cpu().double().numpy()
        for g in module.flash_attention_backward(*inputs, causal=causal, **blocks)
    ]


def autograd(case, causal):
    q, k, v, _, do, _ = case
    return [g.numpy() for g in autograd_backward(q, k, v, do, causal)]


def assert_within_bound(got, case, causal, o_unit=traps.U32):
    """Every element within twice the first-order worst-case bound of the kernels' fp32
    arithmetic (``traps.error_bound``: Higham's gamma_n per dot product, u per operation); the
    factor 2 covers the second-order terms the bound leaves out, which at n u < 1e-5 are far
    smaller than the first-order ones."""
    want = autograd(case, causal)
    bounds = traps.error_bound(*case, causal, o_unit)
    for name, g, w, b in zip(("dq", "dk", "dv"), got, want, bounds):
        excess = np.abs(g - w) - 2 * b
        worst = np.unravel_index(np.argmax(excess), excess.shape)
        assert excess[worst] <= 0, (
            f"{name}{list(worst)}: off by {abs(g - w)[worst]:.3g}, bound {2 * b[worst]:.3g}"
        )


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [16, 24, 64])
@pytest.mark.parametrize("S", [1, 15, 16, 17, 33])
def test_solution_matches_autograd(S, D, causal):
    case = make_case(1, 2, S, D, causal, seed=S * 100 + D)
    assert_within_bound(run(solution(), case, causal), case, causal)


@pytest.mark.parametrize("block_m, block_n", [(32, 16), (16, 32)], ids=["rows-wider", "keys-wider"])
def test_unequal_blocks(block_m, block_n):
    """Causal walks round the diagonal to whole blocks of the *other* axis: with BLOCK_M !=
    BLOCK_N a key block's first query block starts before it, and a query block's last key tile
    reaches past it."""
    case = make_case(2, 1, 45, 16, True, seed=7)
    got = run(solution(), case, True, BLOCK_M=block_m, BLOCK_N=block_n)
    assert_within_bound(got, case, True)


def test_half_precision_inputs():
    """float16 inputs are widened to fp32 as they load: the right answer for the float16
    numbers themselves, within the fp32 bound plus o's float16 rounding (o enters delta)."""
    gen = torch.Generator().manual_seed(3)
    q, k, v, do = (torch.randn(1, 2, 17, 16, generator=gen).half() for _ in range(4))
    o, lse = forward(q, k, v, True)
    o = o.half()  # a float16 forward stores a float16 output
    halves = [q, k, v, o, do, lse.float()]
    got = run(solution(), halves, True)
    assert_within_bound(got, [x.float() for x in halves], True, o_unit=2.0**-11)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_kinds_oracle_is_autograd(causal):
    """The grader's oracle (closed form, float64) agrees with torch autograd to float64
    rounding, causal and not, on several (batch, head) pairs and a padded D."""
    q, k, v, _, do, _ = make_case(2, 2, 33, 24, causal, seed=12)
    want = autograd(make_case(2, 2, 33, 24, causal, seed=12), causal)
    got = kind.backward(q, k, v, do, causal)
    for name, w in zip(("dq", "dk", "dv"), want):
        np.testing.assert_allclose(got[name], w, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_replay_without_slips_is_autograd(causal):
    """The replay with every switch off is the right answer: the closed-form backward agrees
    with torch autograd to float64 rounding, so a trap's form differs from the right answer
    only by its slip."""
    case = make_case(2, 2, 33, 24, causal, seed=11)
    q, k, v, _, do, _ = case
    o, lse = forward(q, k, v, causal)  # float64, unrounded
    for got, want in zip(traps.replay(q, k, v, o, do, lse, causal), autograd(case, causal)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def slipped(tmp_path, name, edits=None):
    """The solution with a slip (the trap's, or ``edits``) in every copy of its lines, loaded
    as a module."""
    text = SOLUTION.read_text()
    for right, wrong in (edits or SLIPS[name]).items():
        assert text.count(right) == 2, f"{right!r} should stand once in each kernel"
        text = text.replace(right, wrong)
    folder = tmp_path / name.replace("-", "_")
    folder.mkdir()
    (folder / SOLUTION.name).write_text(text)
    return catalogue.load_file(folder / SOLUTION.name)


def assert_is_trap(got, form, right, differ=("dq", "dk", "dv")):
    """``got`` matches the trap's form everywhere, and misses the right answer in each output
    the trap changes, by at least APART somewhere (so the case can tell them apart)."""
    for name, g, f, r in zip(("dq", "dk", "dv"), got, form, right):
        np.testing.assert_allclose(g, f, rtol=ATOL, atol=ATOL, err_msg=f"{name} vs the trap")
        if name in differ:
            assert np.abs(f - r).max() > APART, f"{name}: trap and right answer agree here"
            assert not np.allclose(g, r, rtol=ATOL, atol=ATOL), f"{name} is right"
        else:
            np.testing.assert_allclose(g, r, rtol=ATOL, atol=ATOL, err_msg=f"{name} vs right")


@pytest.mark.parametrize("name", [t.id for t in traps.TRAPS])
def test_slip_computes_its_trap(tmp_path, name):
    """Causal, S = 33 (two whole tiles and one row), D = 24 (padded to 32): every trap of the
    list differs from the right answer there."""
    causal = True
    case = make_case(1, 2, 33, 24, causal, seed=5)
    got = run(slipped(tmp_path, name), case, causal)
    form = traps.trap_grads(name, *case, causal)
    # Moving the mask from P to dS leaves dS, hence dK and dQ, right.
    differ = ("dv",) if name == "dv-from-unmasked-p" else ("dq", "dk", "dv")
    if name in ("delta-missing", "scale-dropped", "scale-doubled"):
        differ = ("dq", "dk")  # dS feeds dQ and dK only
    assert_is_trap(got, form, autograd(case, causal), differ)
    with pytest.raises(AssertionError):  # the right answer's bound refuses it too
        assert_within_bound(got, case, causal)


def test_mask_missing_depends_on_the_tiles(tmp_path):
    """The missing mask lets in the future pairs of visited tiles only: with BLOCK_M = 32 and
    BLOCK_N = 16 the two kernels visit different pairs, and the replay follows each."""
    case = make_case(1, 2, 40, 16, True, seed=9)
    name = "causal-mask-missing-in-backward"
    got = run(slipped(tmp_path, name), case, True, BLOCK_M=32, BLOCK_N=16)
    form = traps.trap_grads(name, *case, True, block_m=32, block_n=16)
    square = traps.trap_grads(name, *case, True)
    assert_is_trap(got, form, autograd(case, True))
    assert max(np.abs(a - b).max() for a, b in zip(form, square)) > APART


def test_skeleton_computes_its_traps(tmp_path):
    """The exercise text (solution regions replaced by the skeleton's lines) runs and computes
    P not normalized and delta missing together, in both kernels."""
    sk = regions.skeleton(SOLUTION.read_text(), SOLUTION.name)
    assert sorted(r.todo for r in sk.regions) == ["ds", "ds", "recompute-p", "recompute-p"]
    (tmp_path / SOLUTION.name).write_text(sk.text)
    module = catalogue.load_file(tmp_path / SOLUTION.name)
    for causal in (False, True):
        case = make_case(1, 2, 17, 16, causal, seed=1)
        got = run(module, case, causal)
        form = traps.trap_grads(traps.SKELETON, *case, causal)
        assert_is_trap(got, form, autograd(case, causal))


def test_one_row_has_no_score_gradient():
    """S = 1: one key, P = 1 and dS = 0, so dQ = dK = 0 and dV = dO; the delta-missing trap
    gives dQ, dK of dO . v instead, so S = 1 alone tells it apart."""
    case = make_case(1, 2, 1, 16, False, seed=2)
    dq, dk, dv = autograd(case, False)
    assert not dq.any() and not dk.any()
    np.testing.assert_array_equal(dv, case[4].numpy())
    wrong = traps.trap_grads("delta-missing", *case, False)
    assert np.abs(wrong[0]).max() > APART and np.abs(wrong[1]).max() > APART


# Slips that are right on ordinary inputs and wrong at one edge (the traps module's docstring
# lists them): the edit, an ordinary case it passes and the edge case that finds it, each as
# (S, D, causal, input scale). Scaling q and k by 12 puts scores near +100.
EDGE_SLIPS = {
    "delta-from-the-tile": (
        {RIGHT_DS: "ds = p * (dp - tl.sum(p * dp, axis=1)[:, None]) * scale"},
        (16, 16, False, 1.0),
        (17, 16, False, 1.0),
    ),
    "scale-from-block-d": (
        {RIGHT_DS: "ds = p * (dp - delta[:, None]) / tl.sqrt(BLOCK_D * 1.0)"},
        (17, 16, False, 1.0),
        (17, 24, False, 1.0),
    ),
    "mask-by-multiplying": (
        {RIGHT_P: "p = tl.exp(qk * scale - lse[:, None]) * visible"},
        (17, 16, True, 1.0),
        (17, 16, True, 12.0),
    ),
    "exp-divided-by-exp": (
        {RIGHT_P: "p = tl.where(visible, tl.exp(qk * scale) / tl.exp(lse[:, None]), 0.0)"},
        (17, 16, True, 1.0),
        (17, 16, True, 12.0),
    ),
}


def scaled_case(S, D, causal, factor):
    q, k, v, _, do, _ = make_case(1, 2, S, D, causal, seed=4)
    q, k = q * factor, k * factor
    o, lse = forward(q, k, v, causal)
    return q, k, v, o.float(), do, lse.float()


@pytest.mark.parametrize("name", list(EDGE_SLIPS))
def test_edge_slip_is_found_by_its_case(tmp_path, name):
    edits, ordinary, edge = EDGE_SLIPS[name]
    module = slipped(tmp_path, name, edits)
    case = scaled_case(*ordinary)
    assert_within_bound(run(module, case, ordinary[2]), case, ordinary[2])
    case = scaled_case(*edge)
    with np.errstate(all="ignore"):  # the interpreter's exp overflows on purpose here
        got = run(module, case, edge[2])
    with pytest.raises(AssertionError):
        assert_within_bound(got, case, edge[2])


@pytest.mark.parametrize("blocks", [{"BLOCK_M": 8}, {"BLOCK_N": 24}])
def test_blocks_a_gpu_cannot_compile_are_refused(blocks):
    """Blocks below 16 run in the interpreter but not compiled (tl.dot), and tl.arange needs a
    power of two: the host refuses both on every backend, so the two agree."""
    with pytest.raises(ValueError, match="power of two of at least 16"):
        run(solution(), make_case(1, 2, 17, 16, False), False, **blocks)
