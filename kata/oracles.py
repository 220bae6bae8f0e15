"""Float64 references for the chapter's three kernels, in NumPy.

They hold the whole (M, N) score matrix, which is exactly what flash attention avoids; at the
small sizes used for checking that costs nothing and leaves no room for a shared mistake.
"""

from __future__ import annotations

import numpy as np


def _f64(x) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def causal_mask(M: int, N: int, window: int | None = None) -> np.ndarray:
    """(M, N) booleans: query row i sees keys 0..i (top-left alignment, like torch SDPA), or
    with a ``window`` only the last ``window`` of them, keys i - window + 1 .. i."""
    rows, cols = np.arange(M)[:, None], np.arange(N)[None, :]
    visible = rows >= cols
    if window is not None:
        visible &= rows - cols < window
    return visible


def attention(q, k, v, causal: bool = False, window: int | None = None) -> np.ndarray:
    """softmax(q k^T / sqrt(D)) v, optionally with the top-left causal mask (and a sliding
    ``window``, which implies causal)."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    scores = q @ k.T / np.sqrt(q.shape[1])
    if causal or window is not None:
        scores = np.where(causal_mask(len(q), len(k), window), scores, -np.inf)
    scores = scores - scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    return (p / p.sum(axis=1, keepdims=True)) @ v


def softmax(logits) -> np.ndarray:
    x = _f64(logits)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def top2_gating(logits):
    """``(w0, w1, idx0, idx1)``: the two most probable experts, lowest index first on ties,
    and their probabilities renormalized to sum to one."""
    probs = softmax(logits)
    order = np.argsort(-probs, axis=1, kind="stable")  # stable: equal probs keep index order
    idx0, idx1 = order[:, 0], order[:, 1]
    rows = np.arange(len(probs))
    p0, p1 = probs[rows, idx0], probs[rows, idx1]
    return p0 / (p0 + p1), p1 / (p0 + p1), idx0, idx1


# ---- split-KV decoding (exercise 08) ----------------------------------------------------------


def decode_attention(q, k, v, lengths, group: int = 1) -> np.ndarray:
    """One query row per output row against a KV cache with ragged lengths: row ``b`` of q
    (B, D) attends to the first ``lengths[b // group]`` keys of ``k[b // group]`` and
    ``v[b // group]`` (caches of shape (B // group, N, D)); ``group`` query rows share a cache,
    as the heads of one group do in grouped-query attention. (B, D) out."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    lengths = np.asarray(lengths, np.int64)
    out = np.empty(q.shape)
    for b in range(len(q)):
        s = b // group
        n = int(lengths[s])
        out[b] = attention(q[b : b + 1], k[s, :n], v[s, :n])[0]
    return out


def decode_lse(q, k, lengths, group: int = 1) -> np.ndarray:
    """The natural log of each row's softmax denominator in ``decode_attention``: ln sum_n
    exp(s_n) over the row's scores s_n = q k_n / sqrt(D) (B,)."""
    q, k = _f64(q), _f64(k)
    lse = np.empty(len(q))
    for b in range(len(q)):
        s = k[b // group, : int(lengths[b // group])] @ q[b] / np.sqrt(q.shape[1])
        lse[b] = s.max() + np.log(np.exp(s - s.max()).sum())
    return lse


def split_kv_merge(m, l, acc) -> tuple[np.ndarray, np.ndarray]:  # noqa: E741
    """``(out, lse)`` from the partials of NUM_SPLITS key splits per row: their maxima m
    (B, S), denominators l (B, S) and unnormalized sums acc (B, S, D), each measured against
    its own split's maximum; an empty split has m = -inf, l = 0, acc = 0. Every row needs one
    split that is not empty. out = sum_j w_j acc_j / L and lse = m + ln L, where m = max_j m_j,
    w_j = exp(m_j - m) and L = sum_j w_j l_j: the softmax over every key of the row, and the
    natural log of its denominator sum_n exp(s_n)."""
    m, l, acc = _f64(m), _f64(l), _f64(acc)  # noqa: E741
    top = m.max(axis=1, keepdims=True)
    if not np.isfinite(top).all():
        raise ValueError("every row needs a split that is not empty (a finite maximum)")
    w = np.exp(m - top)  # exp(-inf) = 0: empty splits weigh nothing
    total = (w * l).sum(axis=1)
    out = (w[:, :, None] * acc).sum(axis=1) / total[:, None]
    return out, top[:, 0] + np.log(total)


def moe_dispatch(idx, E: int, capacity: int) -> dict[str, np.ndarray]:
    """The grouped layout of the (token, expert) pairs of top-K routing ``idx`` (M, K), pairs
    taken in (token, k) order: ``counts`` (E,), the pairs each expert keeps, at most
    ``capacity``; ``offsets`` (E,), the row where each expert's pairs begin, an exclusive prefix
    sum of the counts; ``slot`` (M, K), each pair's row, -1 for a pair its expert dropped;
    ``token_of_slot`` (total kept,), the token that fills each row. An expert keeps its first
    ``capacity`` pairs in token order; a stable sort by expert keeps that order within each."""
    flat = np.asarray(idx, np.int64).reshape(-1)
    K = np.shape(idx)[1] if np.ndim(idx) == 2 else 1
    routed = np.bincount(flat, minlength=E)
    order = np.argsort(flat, kind="stable")  # grouped by expert, token order inside a group
    first = np.cumsum(routed) - routed  # where each expert's group starts in ``order``
    rank = np.empty(flat.size, np.int64)
    rank[order] = np.arange(flat.size) - first[flat[order]]
    counts = np.minimum(routed, capacity)
    offsets = np.cumsum(counts) - counts
    keep = rank < capacity
    slot = np.where(keep, offsets[flat] + rank, -1)
    token_of_slot = np.empty(int(counts.sum()), np.int64)
    token_of_slot[slot[keep]] = np.flatnonzero(keep) // K
    return {
        "counts": counts,
        "offsets": offsets,
        "slot": slot.reshape(np.shape(idx)),
        "token_of_slot": token_of_slot,
    }


def dropped_pairs(idx, E: int, capacity: int, first_choices_first: bool = False) -> list:
    """The (token, choice) pairs that full experts drop. The kata's rule ranks the pairs in
    (token, choice) order (DeepSpeed's ``drop_policy="position"``); ``first_choices_first``
    ranks every token's first choice before any second choice, as GShard's top-2 gating does
    (fairscale ``top2gate``, DeepSpeed ``top2gating``). That is only another flattening of
    ``idx``: its transpose, in (choice, token) order."""
    idx = np.asarray(idx)
    if first_choices_first:
        slot = moe_dispatch(idx.T, E, capacity)["slot"].T
    else:
        slot = moe_dispatch(idx, E, capacity)["slot"]
    return [(int(t), int(k)) for t, k in np.argwhere(slot < 0)]
