"""10's traps: the classic slips of the flash-attention backward, replayed in float64 the way
the kernels of exercise 10 compute dQ, dK and dV, tile visits included, from the case's own
inputs (q, k, v, O, dO and lse as the kernels receive them). With every switch of ``replay`` at
its default it is the right answer (tests/test_ex10_backward.py holds it to the kind's oracle).

dV depends on P alone (TODO recompute-p, in the dK, dV kernel), dQ and dK on P and dS (TODO ds):
so the checks of recompute-p judge dV and those of ds judge dQ and dK, and the untouched
skeleton, which has both slips, is named for each (``delta-missing``'s second form).
"""

from __future__ import annotations

import numpy as np

from grader.model import Case, Output, Trap

U32 = 2.0**-24  # unit roundoff of float32 (round to nearest)


def _f64(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def visits(S: int, causal: bool, block_m: int, block_n: int) -> tuple[np.ndarray, np.ndarray]:
    """The (row, key) pairs each kernel's tiles cover: (dK/dV kernel, dQ kernel), (S, S) each.

    Non-causal, both walk every tile. Causal, key block nb starts its walk at query row
    ``(nb * BLOCK_N) // BLOCK_M * BLOCK_M``, and query block mb stops at key tile starts below
    ``min(S, (mb + 1) * BLOCK_M)``; the two sets differ when BLOCK_M != BLOCK_N.
    """
    rows, keys = np.arange(S)[:, None], np.arange(S)[None, :]
    if not causal:
        full = np.ones((S, S), bool)
        return full, full
    lo = (keys // block_n * block_n) // block_m * block_m
    hi = np.minimum(S, (rows // block_m + 1) * block_m)
    return rows >= lo, keys // block_n * block_n < hi


def _visible(S: int, causal: bool) -> np.ndarray:
    return np.tril(np.ones((S, S), bool)) if causal else np.ones((S, S), bool)


def probabilities(q, k, lse, causal: bool) -> np.ndarray:
    """P = exp(q k^T * scale - lse) in float64, 0 where a pair is not visible."""
    q, k, lse = (_f64(x) for x in (q, k, lse))
    S, D = q.shape[-2:]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(D)
    return np.where(_visible(S, causal), np.exp(scores - lse[..., None]), 0.0)


def replay(
    q,
    k,
    v,
    o,
    do,
    lse,
    causal: bool,
    block_m: int = 16,
    block_n: int = 16,
    *,
    normalize: bool = True,
    delta: bool = True,
    scale_power: int = 1,
    mask_p: bool = True,
    mask_ds: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dQ, dK, dV in float64, (B, H, S, D) each, with at most a few slips switched on.

    ``normalize=False``: P = exp(S), the lse left out. ``delta=False``: dS without delta.
    ``scale_power``: the power of the scale in dS (1 right, 0 dropped, 2 doubled).
    ``mask_p=False``: P unmasked inside the visited tiles; then ``mask_ds`` says whether dS
    is masked instead (the mask moved) or not at all (the mask missing).
    """
    q, k, v, o, do, lse = (_f64(x) for x in (q, k, v, o, do, lse))
    S, D = q.shape[-2:]
    scale = 1.0 / np.sqrt(D)
    scores = scale * q @ np.swapaxes(k, -1, -2)
    visible = _visible(S, causal)
    p_all = np.exp(scores - lse[..., None]) if normalize else np.exp(scores)
    dp = do @ np.swapaxes(v, -1, -2)
    row_delta = (do * o).sum(-1)[..., None] if delta else 0.0

    def tile_math(visited: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.where(visible if mask_p else visited, p_all, 0.0)
        ds = p * (dp - row_delta) * scale**scale_power
        if not mask_p and mask_ds:
            ds = np.where(visible, ds, 0.0)
        return p, ds

    kv_tiles, q_tiles = visits(S, causal, block_m, block_n)
    p, ds = tile_math(kv_tiles)
    dv = np.swapaxes(p, -1, -2) @ do
    dk = np.swapaxes(ds, -1, -2) @ q
    _, ds = tile_math(q_tiles)
    dq = ds @ k
    return dq, dk, dv


def _replay(case: Case, **slip) -> Output:
    ins = case.inputs
    dq, dk, dv = replay(
        *(ins[n] for n in ("q", "k", "v", "o", "do", "lse")),
        case.causal,
        case.block_m,
        case.block_n,
        **slip,
    )
    return {"dq": dq, "dk": dk, "dv": dv}


def _not_normalized(case: Case, _got: Output) -> list[Output]:
    return [{"dv": _replay(case, normalize=False)["dv"]}]


def _mask_missing(case: Case, _got: Output) -> list[Output]:
    return [_replay(case, mask_p=False, mask_ds=False)]


def _mask_moved(case: Case, _got: Output) -> list[Output]:
    return [_replay(case, mask_p=False, mask_ds=True)]


def _grads(out: Output) -> Output:
    return {"dq": out["dq"], "dk": out["dk"]}


def _delta_missing(case: Case, _got: Output) -> list[Output]:
    """Alone, and with P not normalized too (the untouched skeleton)."""
    return [_grads(_replay(case, delta=False)), _grads(_replay(case, delta=False, normalize=False))]


def _scale(power: int):
    def forms(case: Case, _got: Output) -> list[Output]:
        return [_grads(_replay(case, scale_power=power))]

    return forms


P_NOT_NORMALIZED_BY_LSE = Trap(
    id="p-not-normalized-by-lse",
    todo="recompute-p",
    summary="P was recomputed as exp(S), the saved lse left out",
    message="P was recomputed as exp(S), without the forward's saved log-sum-exp: every row of "
    "P sums to exp(lse) instead of 1, so dV (and everything built on P) is too large by that "
    "factor, row by row. Subtract the row's lse inside the exponential: TODO(recompute-p).",
    hint="P = exp(S - lse), per row (TODO recompute-p)",
    why=(
        "The backward needs the forward's probabilities, `P_ij = exp(S_ij) / sum_k exp(S_ik)`, "
        "and the forward kept only the log of each row's denominator, `lse_i`. With it no "
        "running maximum and no sum over the tile are needed: `P_ij = exp(S_ij - lse_i)`, one "
        "exponential that cannot overflow, since `lse_i` is at least every visible score of "
        "its row. Leaving it out gives `exp(S_ij)`, each row scaled by `exp(lse_i)`; dV sums "
        "those rows, so it is wrong from the first tile. The untouched skeleton does this."
    ),
    forms=_not_normalized,
    invariant="Each row of the recomputed P sums to 1 over its visible keys.",
)
CAUSAL_MASK_MISSING_IN_BACKWARD = Trap(
    id="causal-mask-missing-in-backward",
    todo="recompute-p",
    summary="the causal mask was left out of the recomputed P",
    message="The recomputed P was not masked: in every tile the causal walk visits, the "
    "pairs above the diagonal (a row and a later key) count, though the forward never saw "
    "them. dV, dK and dQ are all wrong near the diagonal. Keep P exactly 0 where a pair is not "
    "visible, with tl.where on the given mask: TODO(recompute-p).",
    hint="P = 0 past the diagonal (TODO recompute-p)",
    why=(
        "The walk skips whole tiles that hold only future keys, so a causal backward looks "
        "almost masked without the mask: what is left is the tiles that straddle the "
        "diagonal, where a row meets keys after its own. The forward gave those pairs "
        "probability 0, and so must the backward; otherwise they add to dV through `P^T dO` "
        "and to dK and dQ through dS. Which pairs count depends on the tile sizes (the two "
        "kernels walk different tiles when `BLOCK_M != BLOCK_N`), one reason the grader "
        "launches several. Use `tl.where(visible, ..., 0.0)` rather than multiplying by the "
        "mask: for a future pair `exp` may give inf, and `inf * 0` is NaN."
    ),
    forms=_mask_missing,
    invariant="Pairs the forward did not see have P = 0 and dS = 0.",
)
DV_FROM_UNMASKED_P = Trap(
    id="dv-from-unmasked-p",
    todo="recompute-p",
    summary="the causal mask was moved from P to dS",
    message="dV was built from an unmasked P: the mask went into dS instead, so dK and dQ come "
    "out right while dV sums the future pairs of the tiles on the diagonal. P itself must be "
    "masked, since dV = P^T dO reads it directly: TODO(recompute-p).",
    hint="mask P itself, not only dS (TODO recompute-p)",
    why=(
        "P is used twice: in `dV = P^T dO`, and in `dS = P * (dP - delta)`. Masking dS covers "
        "the second use only. A causal backward that passes on dQ and dK and fails on dV alone "
        "has usually masked too late."
    ),
    forms=_mask_moved,
    invariant="dV = P^T dO with the same masked P as the forward's.",
)
DELTA_MISSING = Trap(
    id="delta-missing",
    todo="ds",
    summary="dS = P * dP, the softmax's gradient without delta",
    message="dS was computed as P * dP (times the scale): half of the softmax's gradient. Each "
    "P_ij depends on every score of row i, through the denominator, which adds -P_ij delta_i "
    "with delta_i = sum_k P_ik dP_ik, the value the first kernel computed and this tile "
    "loaded. Each row of dS must sum to 0: TODO(ds).",
    hint="dS = P * (dP - delta), delta one value per row (TODO ds)",
    why=(
        "The softmax's Jacobian is `diag(P_i) - P_i P_i^T` for row i, so the gradient with "
        "respect to the scores is `P_ij (dP_ij - delta_i)` with `delta_i = sum_k P_ik dP_ik`. "
        "The second term is what the denominator contributes: raising one score lowers every "
        "other probability of its row. It also makes each row of dS sum to 0, a check worth "
        "running on any answer. FlashAttention-2 computes `delta_i` as `dO_i . O_i` (equal, "
        "since `O_i = sum_k P_ik V_k`) in a kernel of its own, because a tile sees only some "
        "of a row's keys and `tl.sum(p * dp, axis=1)` over one tile is right only when the "
        "row's keys fit in it. The untouched skeleton leaves delta out."
    ),
    forms=_delta_missing,
    invariant="Each row of dS sums to 0.",
)
SCALE_DROPPED = Trap(
    id="scale-dropped",
    todo="ds",
    summary="dS left without the softmax scale",
    message="dS was left without the scale 1/sqrt(D): the softmax saw q k^T * scale, so the "
    "gradient with respect to q k^T carries that factor once, and dQ and dK come out sqrt(D) "
    "times too large. TODO(ds).",
    hint="multiply dS by the scale once (TODO ds)",
    why=(
        "The scores are `S = scale * q k^T`, and the given code multiplies dS by q or k with "
        "no scale of its own: by the chain rule the factor enters once, in dS. Without it dQ "
        "and dK are `sqrt(D)` times too large; at `D = 1` the scale is 1 and nothing shows, "
        "so the grader's cases have `D >= 16`."
    ),
    forms=_scale(0),
    invariant="dQ and dK carry the scale exactly once.",
)
SCALE_DOUBLED = Trap(
    id="scale-doubled",
    todo="ds",
    summary="the softmax scale applied twice in dQ and dK",
    message="The scale 1/sqrt(D) was applied twice (once in dS and once more), so dQ and dK "
    "come out sqrt(D) times too small. The given code adds no scale of its own after dS: "
    "TODO(ds).",
    hint="the scale enters dS once (TODO ds)",
    why=(
        "The forward's scores were scaled once, so the backward's gradient with respect to "
        "`q k^T` is scaled once. A second factor, in dS and again on dQ or dK (or `scale * "
        "scale` in dS), shrinks both by `sqrt(D)`."
    ),
    forms=_scale(2),
    invariant="dQ and dK carry the scale exactly once.",
)

TRAPS = (
    P_NOT_NORMALIZED_BY_LSE,
    CAUSAL_MASK_MISSING_IN_BACKWARD,
    DV_FROM_UNMASKED_P,
    DELTA_MISSING,
    SCALE_DROPPED,
    SCALE_DOUBLED,
)
# Each trap's switches on ``replay``.
SLIPS: dict[str, dict] = {
    "p-not-normalized-by-lse": {"normalize": False},
    "causal-mask-missing-in-backward": {"mask_p": False, "mask_ds": False},
    "dv-from-unmasked-p": {"mask_p": False, "mask_ds": True},
    "delta-missing": {"delta": False},
    "scale-dropped": {"scale_power": 0},
    "scale-doubled": {"scale_power": 2},
}
# The untouched skeleton: P not normalized (recompute-p) and delta missing (ds), in both kernels.
SKELETON = ("p-not-normalized-by-lse", "delta-missing")


def trap_grads(names, q, k, v, o, do, lse, causal, block_m=16, block_n=16):
    """What a kernel with the named trap(s) outputs: dQ, dK, dV in float64."""
    names = (names,) if isinstance(names, str) else tuple(names)
    slip = {key: value for name in names for key, value in SLIPS[name].items()}
    return replay(q, k, v, o, do, lse, causal, block_m, block_n, **slip)


def error_bound(
    q, k, v, o, do, lse, causal, o_unit: float = U32
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A first-order worst-case bound on |kernel - exact| for dQ, dK, dV, element by element,
    for the kernels' fp32 arithmetic on these (fp32) inputs against the float64 backward of
    the same q, k, v, dO.

    Each dot product of n terms in fp32 errs by at most gamma_n * sum |a_i b_i|, gamma_n =
    n u / (1 - n u) (Higham, Accuracy and Stability of Numerical Algorithms, 3.1), whatever
    the order of the additions; each other operation by u of its result. The errors carried
    into P through exp become relative ones: exp(x + e) = exp(x) (1 + e + ...). lse reaches the
    kernel rounded to fp32 (u of its size), o to its own type (``o_unit``: 2**-11 for float16). exp itself is taken to err by 4 u (the GPU's
    exp is exp2 of x * log2(e), a few ulps); 2 u more for the scale and the subtraction.
    """
    exact_p = probabilities(q, k, lse, causal)
    q, k, v, o, do, lse = (np.abs(_f64(x)) for x in (q, k, v, o, do, lse))
    S, D = q.shape[-2:]
    scale = 1.0 / np.sqrt(D)

    def gamma(n: int) -> float:
        return n * U32 / (1 - n * U32)

    abs_scores = scale * q @ np.swapaxes(k, -1, -2)  # bounds |s| too
    # The argument x = s - lse: the dot's error, lse's rounding, the scale and the subtraction.
    err_x = gamma(D + 1) * abs_scores + U32 * lse[..., None] + U32 * (abs_scores + lse[..., None])
    p = exact_p
    err_p = p * (err_x + 4 * U32)
    abs_dp = do @ np.swapaxes(v, -1, -2)
    abs_delta = (do * o).sum(-1)[..., None]
    err_t = gamma(D) * (abs_dp + abs_delta) + o_unit * abs_delta + U32 * (abs_dp + abs_delta)
    abs_t = abs_dp + abs_delta
    abs_ds = scale * p * abs_t
    err_ds = scale * (err_p * abs_t + p * err_t) + 2 * U32 * abs_ds

    def tr(x):
        return np.swapaxes(x, -1, -2)

    err_dv = tr(err_p) @ do + gamma(S) * tr(p) @ do
    err_dk = tr(err_ds) @ q + gamma(S) * tr(abs_ds) @ q
    err_dq = err_ds @ k + gamma(S) * abs_ds @ k
    return err_dq, err_dk, err_dv
