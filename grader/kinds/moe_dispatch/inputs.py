"""09's inputs: top-K routings, uniform or with one hot expert."""

from __future__ import annotations

import numpy as np

from grader.kinds.base import rng


def routing(seed, M, E, K=2, hot=None, share=0.5, first=False, empty=()):
    """Top-K expert ids ``idx`` (M, K), int32, K distinct experts per token, drawn uniformly from
    the experts not in ``empty``. With ``hot``: a ``share`` of the tokens route to expert ``hot``, at a random one of their K choices (at choice 0 with
    ``first``), and the other tokens never do: one expert takes that share of all the tokens."""
    r = rng(seed)
    allowed = np.array([e for e in range(E) if e not in set(empty)])
    chosen = set(r.permutation(M)[: round(share * M)].tolist()) if hot is not None else set()
    idx = np.empty((M, K), np.int64)
    for t in range(M):
        others = allowed[allowed != hot] if hot is not None else allowed
        if t in chosen:
            pick = [hot, *r.choice(others, K - 1, replace=False)]
            if not first:
                pick = list(r.permutation(pick))
        else:
            pick = r.choice(others, K, replace=False)
        idx[t] = pick
    return {"idx": idx.astype(np.int32)}
