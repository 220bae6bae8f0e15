"""Exercise 08, split-KV decoding: the solution's two kernels against attention over ragged
lengths, the untouched skeleton computing exactly its trap, the host's checks, the partials the
grader builds and the boundary classes its hidden cases come from, the hostile cases that only a
merge measured from the maximum survives, and the worked example."""

import math

import numpy as np
import pytest
import torch
from conftest import run_examples

from grader import specs
from grader.kinds import base, compare
from grader.kinds.split_kv_merge import boundary, inputs, traps
from grader.model import Case
from kata import host, kinds, oracles, runtime
from kata.catalogue import SOLUTIONS, find

STEM = find("08").stem


def decode_problem(lengths, N=48, D=24, group=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    C = len(lengths)
    q = torch.randn(C * group, D, generator=gen)
    k, v = (torch.randn(C, N, D, generator=gen) for _ in "kv")
    return q, k, v, torch.tensor(lengths)


def on_device(*xs):
    return [x.to(runtime.DEVICE) for x in xs]


def test_the_solution_is_attention_over_each_length(solution):
    lengths = [48, 17, 16, 1]  # a full cache, one past a split, a whole split, a single key
    q, k, v, n = decode_problem(lengths)
    out, lse = (x.cpu() for x in solution("08").split_kv_decoding(*on_device(q, k, v, n), 3, 16))
    np.testing.assert_allclose(out, oracles.decode_attention(q, k, v, n, 2), atol=1e-5)
    np.testing.assert_allclose(lse, oracles.decode_lse(q, k, n, 2), atol=1e-5)


def test_the_untouched_skeleton_averages_the_splits(solution, exercise):
    q, k, v, n = on_device(*decode_problem([48, 33, 1]))
    m, l, acc = host.launch_split_kv_partials(  # noqa: E741
        solution("08").split_kv_partial_kernel, q, k, v, n, 3, block_n=16
    )
    out, lse = host.launch_split_kv_merge(exercise("08").split_kv_merge_kernel, m, l, acc)
    case = Case(
        name="x",
        about="",
        inputs={"m": m.cpu().numpy(), "l": l.cpu().numpy(), "acc": acc.cpu().numpy()},
        params={"NUM_SPLITS": 3},
    )
    form_out, form_lse = (next(iter(f.values())) for f in traps._averaged(case, {}))
    np.testing.assert_allclose(out.cpu(), form_out, atol=1e-6)
    np.testing.assert_allclose(lse.cpu(), form_lse, atol=1e-5)
    right, right_lse = oracles.split_kv_merge(
        case.inputs["m"], case.inputs["l"], case.inputs["acc"]
    )
    assert np.abs(out.cpu().numpy() - right).max() > 0.1
    assert np.abs(lse.cpu().numpy() - right_lse).max() > 0.1


@pytest.mark.parametrize(
    ("lengths", "error", "match"),
    [
        pytest.param([48, 0], ValueError, r"lengths\[1\] is 0: every sequence needs", id="zero"),
        pytest.param([-3, 5], ValueError, r"lengths\[0\] is -3", id="negative"),
        pytest.param(
            [49, 5], ValueError, r"a length of 49 is longer than the cache's 48", id="long"
        ),
        pytest.param([48], ValueError, r"lengths must have shape \(2,\)", id="one-length"),
        pytest.param([48.0, 5.0], TypeError, r"lengths must be an int32 or int64", id="floats"),
    ],
)
def test_the_host_refuses_bad_lengths(solution, lengths, error, match):
    q, k, v, _ = decode_problem([48, 5])
    with pytest.raises(error, match=match):
        solution("08").split_kv_decoding(*on_device(q, k, v, torch.tensor(lengths)))


def test_the_host_refuses_rows_that_are_not_whole_groups(solution):
    q, k, v, n = decode_problem([48, 5])
    with pytest.raises(ValueError, match="one or more query rows per cache"):
        solution("08").split_kv_decoding(*on_device(q[:3], k, v, n))


def test_the_grader_partials_merge_to_attention():
    """The float32 partials the grader builds merge, in float64, to attention over each length:
    empty splits are -inf, 0, 0 and weigh nothing."""
    q, k, v, n = (x.numpy() for x in decode_problem([48, 33, 16, 1], group=1))
    scores = np.einsum("bd,bnd->bn", q, k) / np.float32(math.sqrt(q.shape[1]))
    parts = inputs.split_partials(scores, v, n, 16)
    assert parts["m"].shape == (4, 3)
    assert np.isneginf(parts["m"][2:, 1:]).all() and not parts["l"][2:, 1:].any()
    out, lse = oracles.split_kv_merge(parts["m"], parts["l"], parts["acc"])
    np.testing.assert_allclose(out, oracles.decode_attention(q, k, v, n), atol=1e-6)
    np.testing.assert_allclose(lse, oracles.decode_lse(q, k, n), atol=1e-5)


def test_split_lengths_sit_on_every_split_edge():
    for split, splits in ((16, 4), (32, 3), (8, 13)):
        full = boundary.split_lengths(split, splits, empty=False)
        assert {base.residue(n, split) for n in full} == {-1, 0, 1}
        assert all(-(-n // split) == splits for n in full)  # every split holds keys
        short = boundary.split_lengths(split, splits, empty=True)
        assert {base.residue(n, split) for n in short} == {-1, 0, 1} and 1 in short
        assert all(-(-n // split) < splits for n in short)  # the last splits empty


def test_the_hidden_cases_cover_the_boundary_classes():
    cases = specs.load(STEM, "hidden").cases.values()
    splits = {c.params["NUM_SPLITS"] for c in cases}
    assert (
        1 in splits
        and any(s & (s - 1) for s in splits)
        and any(s > 1 and not s & (s - 1) for s in splits)
    )
    dims = {c.inputs["acc"].shape[2] for c in cases}
    assert 16 in dims and any(d & (d - 1) for d in dims)
    empty = [c for c in cases if np.isneginf(c.inputs["m"]).any()]
    assert empty and any((np.isfinite(c.inputs["m"]).sum(axis=1) == 1).any() for c in empty)


@pytest.mark.parametrize(
    "name", ["high-scores", "low-scores", "dominant-split", "far-apart-splits"]
)
def test_the_hostile_cases_break_only_an_unshifted_merge(name):
    case = specs.load(STEM, "hidden").cases[name]
    right = kinds.get("split-kv-merge").expected(case)
    out, lse, _, _ = traps.merged(case)
    np.testing.assert_allclose(out, right["out"], atol=1e-5)
    unshifted, unshifted_lse, _, _ = traps.merged(case, shift=False)
    hostile = np.arange(len(out)) % 2 == 0
    assert np.isnan(unshifted[hostile]).all()
    assert not np.isfinite(unshifted_lse[hostile]).any()
    np.testing.assert_allclose(unshifted[~hostile], right["out"][~hostile], atol=1e-5)


def _merged_from_the_mean(case):
    """The merge measured from the mean of the filled splits' maxima, in float32 (a wrong
    reference point: between the maxima, not at the largest)."""
    m, l, acc = (case.inputs[n] for n in ("m", "l", "acc"))  # noqa: E741
    filled = l > 0
    ref = (np.where(filled, m, 0).sum(axis=1) / filled.sum(axis=1)).astype(np.float32)
    with np.errstate(all="ignore"):
        w = np.exp(m - ref[:, None])
        return (w[:, :, None] * acc).sum(axis=1) / (w * l).sum(axis=1)[:, None]


@pytest.mark.parametrize(("name", "gap"), [("dominant-split", 100), ("far-apart-splits", 200)])
def test_split_maxima_far_apart_break_a_reference_between_them(name, gap):
    """On every other row one split's maximum lies ``gap`` above the others'. At 100, a merge
    measured from the mean of the maxima keeps every exp() in float32's range and is right; at
    200 (with a row whose only other filled split makes the mean the midpoint) it overflows."""
    case = specs.load(STEM, "hidden").cases[name]
    m = case.inputs["m"]
    hostile = np.arange(len(m)) % 2 == 0
    finite = np.where(np.isfinite(m), m, np.nan)
    spread = np.nanmax(finite, axis=1) - np.nanmin(finite, axis=1)
    assert (spread[hostile] > gap - 5).all() and (spread[~hostile] < 10).all()
    right = kinds.get("split-kv-merge").expected(case)["out"]
    out = _merged_from_the_mean(case)
    if gap == 100:
        np.testing.assert_allclose(out, right, atol=1e-5)
    else:
        assert (np.isfinite(m).sum(axis=1)[hostile] == 2).any()
        assert np.isnan(out[hostile]).all()
        np.testing.assert_allclose(out[~hostile], right[~hostile], atol=1e-5)


def test_an_infinity_is_close_only_to_itself():
    tol = (1e-5, 1e-5)
    got = np.array([np.inf, -np.inf, 3.0, np.inf, np.nan])
    want = np.array([np.inf, -np.inf, np.inf, -np.inf, np.nan])
    assert compare.bad_mask(got, want, tol).tolist() == [False, False, True, True, False]
    assert compare.distance(np.array([np.inf, 1.0]), np.array([np.inf, 1.0])) == 0.0


def test_padded_partials_have_wider_strides():
    case = specs.load(STEM, "hidden").cases["wide-buffers-3x16"]
    ins = kinds.get("split-kv-merge").inputs(case, runtime.DEVICE)
    B, S, D = case.inputs["acc"].shape
    assert ins["m"].stride() == ins["l"].stride() == (S + 3, 1)
    assert ins["acc"].stride() == ((S + 1) * (D + 8), D + 8, 1)
    np.testing.assert_array_equal(ins["acc"].cpu().numpy(), case.inputs["acc"])


@pytest.mark.slow
def test_the_worked_example_passes_solved_and_fails_untouched(skeleton_dir):
    name = find("08").filename
    runs = run_examples([SOLUTIONS / name, skeleton_dir / name])
    rc, out = runs[SOLUTIONS / name]
    assert rc == 0 and "!!" not in out, out
    rc, out = runs[skeleton_dir / name]
    assert rc == 1 and "!! out vs attention over each length" in out, out
