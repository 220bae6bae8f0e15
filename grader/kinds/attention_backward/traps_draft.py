"""Exercise 10's classic wrong answers, replayed in float64, and the bound a right answer keeps.

Draft: nothing registers these yet. Each trap is a set of switches on ``replay``, which computes
dQ, dK, dV the way the kernels of ``solutions/10_flash_attention_backward.py`` do, tile visits
included, from the case's own inputs (q, k, v, o, dO and lse, as the kernel receives them).
With every switch at its default, ``replay`` is the right answer: the closed-form backward,
``tests/test_ex10_backward.py`` checks it against torch autograd.

The traps, and the TODO each belongs to:

- ``p-not-normalized-by-lse`` (recompute-p; the untouched skeleton): ``P = exp(S)``, the saved
  lse never subtracted, so every row of P sums to exp(lse) instead of 1.
- ``causal-mask-missing-in-backward`` (recompute-p): P left unmasked, so the pairs above the
  diagonal of every tile the causal walk visits count, in dV, dK and dQ alike. The walk itself
  still skips whole tiles, so the wrong answer depends on the block sizes.
- ``dv-from-unmasked-p`` (recompute-p): the mask moved from P to dS. dK and dQ come out right,
  dV sums the future pairs of the visited tiles.
- ``delta-missing`` (ds; the untouched skeleton): ``dS = P * dP * scale``, the softmax's
  Jacobian without its second term.
- ``scale-dropped`` (ds): ``dS = P * (dP - delta)``, dQ and dK too large by sqrt(D).
- ``scale-doubled`` (ds): ``dS = P * (dP - delta) * scale**2``, dQ and dK too small by sqrt(D).
  Both scale traps equal the right answer at D = 1 (scale 1): a check needs D >= 2.

The untouched skeleton computes two of them at once: ``SKELETON``.

What a student could write that is right on ordinary inputs and wrong at a boundary, and the
case that finds it (the first two of each TODO, and the exp / exp, are shown to hold by
``tests/test_ex10_backward.py::test_edge_slip_is_found_by_its_case``):

recompute-p
- ``p = tl.exp(qk * scale) / tl.exp(lse[:, None])``: exact in exact arithmetic; in fp32 both
  exponentials overflow once a scaled score passes about 88, and inf / inf is NaN. Case: q and
  k scaled so that scores sit near +100 (lse near 100 too).
- The mask applied by multiplication, ``tl.exp(qk * scale - lse[:, None]) * visible``: for a
  future pair whose score exceeds the row's lse by more than 88, exp gives inf and inf * 0 is
  NaN (``tl.where`` picks 0 and never multiplies). Case: causal, row 0's only key scoring 0
  and a later key scoring +100 against row 0.
- A softmax recomputed inside the tile (its own maximum and sum) instead of from the lse: right
  while a row's keys all fit one key tile (S <= BLOCK_N, non-causal), wrong from S = BLOCK_N + 1
  on. Case: S = 17 with 16-key tiles.
- A causal condition of its own with ``>`` for ``>=``: the diagonal pair is dropped, and row 0
  sees nothing. Case: causal, any S (S = 1 gives dV = 0 instead of dO).
- The bounds left out of the mask (only ``offs_m >= offs_n``) is harmless here, not a boundary
  bug: padded rows load q = dO = 0 and padded keys k = v = 0, so whatever P holds there is
  multiplied by zero in every sum, and padded outputs are never stored.

ds
- delta recomputed from the tile, ``tl.sum(p * dp, axis=1)``, instead of the loaded delta: the
  identity delta_i = sum_j P_ij dP_ij needs all of row i's keys, so it is right while they fit
  one key tile and wrong from S = BLOCK_N + 1 on (causal: from the second key tile). Case:
  S = 17 and S = 33.
- The scale rebuilt from the padded width, ``1 / tl.sqrt(BLOCK_D)``: right when D is a power
  of two of at least 16, wrong otherwise. Case: D = 24.
- The mask moved into dS by multiplication (``* visible`` after an unmasked P): the NaN of
  inf * 0 above. Case: as for recompute-p.
- At S = 1 every right dS is 0 (one key: P = 1 and dP = delta = dO . v), so dQ = dK = 0 exactly;
  ``delta-missing`` gives dO . v instead. Case: S = 1, a quick witness.
"""

from __future__ import annotations

import numpy as np

U32 = 2.0**-24  # unit roundoff of float32 (round to nearest)


def _f64(x) -> np.ndarray:
    return np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, np.float64)


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


TRAPS: dict[str, dict] = {
    "p-not-normalized-by-lse": {"todo": "recompute-p", "slip": {"normalize": False}},
    "causal-mask-missing-in-backward": {
        "todo": "recompute-p",
        "slip": {"mask_p": False, "mask_ds": False},
    },
    "dv-from-unmasked-p": {"todo": "recompute-p", "slip": {"mask_p": False, "mask_ds": True}},
    "delta-missing": {"todo": "ds", "slip": {"delta": False}},
    "scale-dropped": {"todo": "ds", "slip": {"scale_power": 0}},
    "scale-doubled": {"todo": "ds", "slip": {"scale_power": 2}},
}
# The untouched skeleton: P not normalized (recompute-p) and delta missing (ds), in both kernels.
SKELETON = ("p-not-normalized-by-lse", "delta-missing")


def trap_grads(names, q, k, v, o, do, lse, causal, block_m=16, block_n=16):
    """What a kernel with the named trap(s) outputs: dQ, dK, dV in float64."""
    names = (names,) if isinstance(names, str) else tuple(names)
    slip = {key: value for name in names for key, value in TRAPS[name]["slip"].items()}
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
