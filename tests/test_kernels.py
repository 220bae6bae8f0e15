"""The three reference kernels (solutions/) against the float64 oracles, through their host
functions, on the inputs that break kernels: ragged and strided shapes, growing row maxima, large
scores, half-precision inputs, other tile sizes, causal alignment, padded and tied experts."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from grader.kinds.attention.traps import masked_attention
from kata import oracles

ATOL_OUT = 1e-4  # the chapter's tolerance for attention outputs
ATOL_W = 1e-5  # and for gating weights
FAR = 0.1  # a different answer, not float noise


def as_np(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().double().numpy()


def assert_close(got: torch.Tensor, want: np.ndarray, atol: float) -> None:
    got64 = as_np(got)
    assert got64.shape == want.shape
    assert np.isfinite(got64).all(), "the kernel wrote NaN or inf"
    np.testing.assert_allclose(got64, want, rtol=0, atol=atol)


# ---- attention --------------------------------------------------------------------------------

ATTENTION = {  # id -> (exercise, host function, causal)
    "plain": ("01", "flash_attention", False),
    "causal": ("02", "causal_flash_attention", True),
}


@pytest.fixture(params=list(ATTENTION))
def attention(request, solution):
    """``(host function, causal)`` of one solution kernel; every attention test runs both."""
    number, host, causal = ATTENTION[request.param]
    return getattr(solution(number), host), causal


def run_attention(attention, q, k, v, **blocks) -> tuple[torch.Tensor, np.ndarray]:
    """The kernel's output, checked for shape, dtype and device, and the oracle's answer."""
    fn, causal = attention
    out = fn(q, k, v, **blocks)
    assert out.shape == q.shape
    assert out.dtype == torch.float32
    assert out.device == q.device
    return out, oracles.attention(q, k, v, causal=causal)


def qkv(randn, M, N, D, seed, scale=1.0, dtype=torch.float32):
    """q (M, D), k and v (N, D); q and k scaled by sqrt(scale) each, so scores grow by scale."""
    s = math.sqrt(scale)
    q = randn(M, D, seed=seed, scale=s, dtype=dtype)
    k = randn(N, D, seed=seed + 1, scale=s, dtype=dtype)
    return q, k, randn(N, D, seed=seed + 2, dtype=dtype)


@pytest.mark.parametrize(
    ("M", "N", "D"),
    [
        pytest.param(17, 23, 8, id="chapter-17x23-d8"),
        pytest.param(37, 53, 24, id="ragged-37x53-d24"),
        pytest.param(50, 19, 8, id="m-gt-n-50x19-d8"),
        pytest.param(19, 50, 24, id="m-lt-n-19x50-d24"),
        pytest.param(20, 45, 64, id="m-lt-n-20x45-d64"),
        pytest.param(45, 20, 64, id="m-gt-n-45x20-d64"),
        pytest.param(1, 40, 64, id="one-query-row-d64"),
        pytest.param(1, 1, 8, id="one-row-one-key"),
        pytest.param(5, 7, 8, id="n-below-block-5x7"),
        pytest.param(30, 9, 24, id="n-below-block-30x9"),
    ],
)
def test_attention_irregular_shapes(attention, randn, M, N, D):
    out, want = run_attention(attention, *qkv(randn, M, N, D, seed=M * N + D))
    assert_close(out, want, ATOL_OUT)


@pytest.mark.parametrize(
    ("block_m", "block_n"),
    [
        pytest.param(32, 16, id="tiles-32x16"),
        pytest.param(16, 32, id="tiles-16x32"),
        pytest.param(32, 32, id="tiles-32x32"),
    ],
)
@pytest.mark.parametrize(
    ("M", "N", "D"),
    [pytest.param(64, 64, 16, id="square-64-d16"), pytest.param(45, 70, 24, id="ragged-45x70-d24")],
)
def test_attention_other_tile_sizes(attention, randn, M, N, D, block_m, block_n):
    q, k, v = qkv(randn, M, N, D, seed=7)
    out, want = run_attention(attention, q, k, v, BLOCK_M=block_m, BLOCK_N=block_n)
    assert_close(out, want, ATOL_OUT)


def _transposed(x):  # column-major: strides (1, rows)
    return x.t().contiguous().t()


def _column_sliced(x):  # every third column of a wider tensor, starting at column 1
    buf = torch.zeros(x.shape[0], 3 * x.shape[1], dtype=x.dtype, device=x.device)
    buf[:, 1::3] = x
    return buf[:, 1::3]


def _row_sliced(x):  # every other row of a taller tensor
    buf = torch.zeros(2 * x.shape[0], x.shape[1], dtype=x.dtype, device=x.device)
    buf[::2] = x
    return buf[::2]


def _broadcast_rows(x):  # every row is row 0: stride 0 along the rows
    return x[:1].expand(x.shape[0], -1)


@pytest.mark.parametrize(
    "layouts",
    [
        pytest.param((_transposed, _column_sliced, _column_sliced), id="q-transposed-kv-sliced"),
        pytest.param((_transposed, _transposed, _transposed), id="all-transposed"),
        pytest.param((_column_sliced, _row_sliced, _transposed), id="mixed"),
        pytest.param((_broadcast_rows, _row_sliced, _row_sliced), id="q-stride-0-kv-rows"),
    ],
)
def test_attention_strided_inputs(attention, randn, layouts):
    q, k, v = (make(x) for make, x in zip(layouts, qkv(randn, 33, 45, 24, seed=3)))
    assert not any(x.is_contiguous() for x in (q, k, v))
    out, want = run_attention(attention, q, k, v)
    assert_close(out, want, ATOL_OUT)


@pytest.mark.parametrize(
    ("M", "N", "D", "block_n"),
    [
        pytest.param(20, 64, 16, 16, id="4-key-blocks-of-16"),
        pytest.param(40, 96, 32, 32, id="3-key-blocks-of-32"),
        pytest.param(48, 48, 8, 16, id="square-48-d8"),
    ],
)
def test_attention_running_max_grows_every_block(attention, growing, M, N, D, block_n):
    q, k, v = growing(M, N, D, block_n)
    scores = as_np(q) @ as_np(k).T / math.sqrt(D)
    block_max = np.stack([scores[:, j : j + block_n].max(axis=1) for j in range(0, N, block_n)])
    assert (np.diff(block_max, axis=0) > 1.0).all(), "the data must raise every row's max"
    out, want = run_attention(attention, q, k, v, BLOCK_N=block_n)
    assert_close(out, want, ATOL_OUT)


def test_attention_scores_30x_larger(attention, randn):
    q, k, v = qkv(randn, 24, 64, 16, seed=0, scale=30.0)
    scores = as_np(q) @ as_np(k).T / 4.0
    assert scores.max() > 89.0, "exp() of these scores must overflow float32 without a max"
    out, want = run_attention(attention, q, k, v)
    assert_close(out, want, ATOL_OUT)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_attention_half_precision_inputs(attention, randn, dtype):
    q, k, v = qkv(randn, 24, 40, 16, seed=11, dtype=dtype)
    assert q.dtype == k.dtype == v.dtype == dtype
    out, want = run_attention(attention, q, k, v)  # the oracle sees the rounded inputs
    assert_close(out, want, ATOL_OUT)


@pytest.mark.parametrize("N", [0, 7], ids=["no-keys", "7-keys"])
def test_attention_no_queries_gives_empty_output(attention, randn, N):
    q, k, v = qkv(randn, 0, N, 8, seed=0)
    fn, _ = attention
    out = fn(q, k, v)
    assert out.shape == (0, 8)
    assert out.dtype == torch.float32
    assert out.device == q.device


@pytest.mark.parametrize(
    ("M", "N"),
    [
        pytest.param(24, 56, id="m-lt-n-24x56"),
        pytest.param(56, 24, id="m-gt-n-56x24"),
        pytest.param(1, 40, id="one-row-40-keys"),
    ],
)
def test_causal_is_top_left_aligned_like_torch_sdpa(solution, randn, M, N):
    q, k, v = qkv(randn, M, N, 16, seed=5)
    q64, k64, v64 = (x.detach().cpu().double() for x in (q, k, v))
    sdpa = F.scaled_dot_product_attention(q64[None], k64[None], v64[None], is_causal=True)[0]
    sdpa = sdpa.numpy()
    # The oracle and torch agree on the convention: row i sees keys 0..i whatever N is.
    np.testing.assert_allclose(oracles.attention(q, k, v, causal=True), sdpa, rtol=0, atol=1e-12)
    out = solution("02").causal_flash_attention(q, k, v)
    assert_close(out, sdpa, ATOL_OUT)
    # Bottom-right alignment (FlashAttention >= 2.1: the last row sees the last key) would give a
    # different answer on these shapes, so the comparison above does pin the convention down.
    rows, cols = np.arange(M)[:, None], np.arange(N)[None, :]
    bottom_right = masked_attention(q64, k64, v64, rows + (N - M) >= cols)
    assert np.nanmax(np.abs(as_np(out) - bottom_right)) > FAR


def test_causal_kernel_differs_from_plain_attention(solution, randn):
    q, k, v = qkv(randn, 40, 40, 16, seed=9)
    out = solution("02").causal_flash_attention(q, k, v)
    assert np.abs(as_np(out) - oracles.attention(q, k, v, causal=False)).max() > FAR


# ---- gating -----------------------------------------------------------------------------------


def gate(solution, logits):
    """The kernel's four outputs on the CPU, after checking their shapes, dtypes and device."""
    outs = solution("03").moe_top2_gating(logits)
    assert len(outs) == 4
    for x, dtype in zip(outs, (torch.float32, torch.float32, torch.int32, torch.int32)):
        assert x.shape == (logits.shape[0],)
        assert x.dtype == dtype
        assert x.device == logits.device
    return tuple(x.cpu() for x in outs)


def assert_gating_invariants(w0, w1, idx0, idx1, E: int) -> None:
    assert ((idx0 >= 0) & (idx0 < E) & (idx1 >= 0) & (idx1 < E)).all()
    assert (idx0 != idx1).all(), "top-1 and top-2 must be different experts"
    assert (w0 >= w1).all()
    assert (w1 >= 0).all()
    np.testing.assert_allclose(as_np(w0 + w1), 1.0, rtol=0, atol=ATOL_W)


def assert_matches_oracle(outs, logits) -> None:
    w0, w1, idx0, idx1 = outs
    rw0, rw1, ridx0, ridx1 = oracles.top2_gating(logits)
    np.testing.assert_array_equal(idx0.numpy(), ridx0)
    np.testing.assert_array_equal(idx1.numpy(), ridx1)
    assert_close(w0, rw0, ATOL_W)
    assert_close(w1, rw1, ATOL_W)


GATING_DATA = [  # id, (M, E, shift, scale, dtype)
    pytest.param(33, 16, 0.0, 1.0, torch.float32, id="random-33x16"),
    pytest.param(24, 8, 0.0, 1.0, torch.float32, id="random-24x8"),
    pytest.param(16, 5, -8.0, 1.0, torch.float32, id="negative-e5"),
    pytest.param(16, 6, -8.0, 1.0, torch.float32, id="negative-e6"),
    pytest.param(16, 12, -8.0, 1.0, torch.float32, id="negative-e12"),
    pytest.param(16, 12, -1000.0, 3.0, torch.float32, id="very-negative-e12"),
    pytest.param(16, 2, 0.0, 2.0, torch.float32, id="two-experts"),
    pytest.param(16, 6, 0.0, 1.0, torch.float16, id="float16-e6"),
    pytest.param(16, 6, 0.0, 1.0, torch.bfloat16, id="bfloat16-e6"),
]


@pytest.mark.parametrize(("M", "E", "shift", "scale", "dtype"), GATING_DATA)
def test_gating_matches_oracle_and_topk(solution, randn, M, E, shift, scale, dtype):
    logits = randn(M, E, seed=M + E, shift=shift, scale=scale, dtype=dtype)
    probs = torch.softmax(logits.cpu().double(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values[:, :3]
    assert (ranked[:, :-1] - ranked[:, 1:] > 1e-6).all(), "the data must be free of near-ties"
    if shift < 0:
        assert (logits < 0).all()

    outs = gate(solution, logits)
    assert_gating_invariants(*outs, E=E)
    assert_matches_oracle(outs, logits)
    top_p, top_i = torch.topk(probs, 2, dim=-1)
    assert torch.equal(outs[2].long(), top_i[:, 0])
    assert torch.equal(outs[3].long(), top_i[:, 1])
    assert_close(outs[0], (top_p[:, 0] / top_p.sum(-1)).numpy(), ATOL_W)


@pytest.mark.parametrize("E", [2, 5, 8, 12])
def test_gating_all_zero_logits_pick_two_distinct_experts(solution, device, E):
    logits = torch.zeros(4, E, device=device)
    w0, w1, idx0, idx1 = gate(solution, logits)
    # Every expert ties: the lowest two indices win, and the weights are exactly one half.
    assert idx0.tolist() == [0] * 4
    assert idx1.tolist() == [1] * 4
    assert w0.tolist() == [0.5] * 4
    assert w1.tolist() == [0.5] * 4


@pytest.mark.parametrize("E", [5, 8], ids=["e5", "e8"])
def test_gating_shared_maximum_breaks_ties_by_lowest_index(solution, randn, E):
    pairs = [(0, 1), (1, E - 1), (E - 2, 0), (2, 3)]
    logits = randn(len(pairs), E, seed=E)
    for row, (a, b) in enumerate(pairs):
        logits[row, a] = logits[row, b] = logits[row].max() + 1.0
    w0, w1, idx0, idx1 = gate(solution, logits)
    assert idx0.tolist() == [min(p) for p in pairs]
    assert idx1.tolist() == [max(p) for p in pairs]
    assert w0.tolist() == [0.5] * len(pairs)
    assert w1.tolist() == [0.5] * len(pairs)
    assert_matches_oracle((w0, w1, idx0, idx1), logits)


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(_row_sliced, id="every-other-row"),
        pytest.param(_column_sliced, id="every-third-column"),
        pytest.param(_transposed, id="transposed"),
        pytest.param(_broadcast_rows, id="rows-stride-0"),
    ],
)
def test_gating_strided_logits(solution, randn, layout):
    logits = layout(randn(20, 8, seed=202))
    assert not logits.is_contiguous()
    outs = gate(solution, logits)
    assert_gating_invariants(*outs, E=8)
    assert_matches_oracle(outs, logits)


def test_gating_no_tokens_gives_empty_outputs(solution, device):
    w0, w1, idx0, idx1 = gate(solution, torch.zeros(0, 6, device=device))
    assert all(x.numel() == 0 for x in (w0, w1, idx0, idx1))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_kernels_run_on_a_second_gpu(solution, randn):
    # Tensors on cuda:1 while cuda:0 is the current device: the launch must follow the data.
    q, k, v = (x.to("cuda:1") for x in qkv(randn, 37, 53, 16, seed=21))
    for attention in (
        (solution("01").flash_attention, False),
        (solution("02").causal_flash_attention, True),
    ):
        out, want = run_attention(attention, q, k, v)
        assert_close(out, want, ATOL_OUT)
    logits = randn(16, 6, seed=22).to("cuda:1")
    outs = gate(solution, logits)
    assert_gating_invariants(*outs, E=6)
    assert_matches_oracle(outs, logits)
