"""Top-2 gating (03): the chapter's MoE router, one token (row of logits) per program."""

from __future__ import annotations

import numpy as np

from kata import host
from kata.kinds.base import Interface, f64, poisoned

# fmt: off
PARAMS = (
    "logits_ptr", "weight0_ptr", "weight1_ptr", "idx0_ptr", "idx1_ptr", "M", "E", "stride_m",
    "BLOCK_E",
)
# fmt: on


def softmax(logits) -> np.ndarray:
    x = f64(logits)
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


class Gating(Interface):
    """03: logits (M, E); w0, w1 float32 and idx0, idx1 int32, each (M,); one row a program."""

    def _launch_helper(self):
        return host.launch_gating

    def launch(self, kernel, case, device):
        logits = self.inputs(case, device)["logits"]
        M = logits.shape[0]
        outs = {
            "w0": poisoned((M,), "float32", device),
            "w1": poisoned((M,), "float32", device),
            "idx0": poisoned((M,), "int32", device),
            "idx1": poisoned((M,), "int32", device),
        }
        self._launch_helper()(kernel, logits, out=tuple(outs.values()))
        return outs

    def expected(self, case):
        w0, w1, idx0, idx1 = top2_gating(case.inputs["logits"])
        return {"w0": w0, "w1": w1, "idx0": idx0, "idx1": idx1}

    def tolerance(self, key, dtype):
        if key == "prob":  # a chosen expert's probability against the k-th largest
            return (1e-6, 1e-5)
        return (1e-5, 1e-5)  # the weights (the chapter's atol)

    def exact(self, key):
        return key.startswith("idx")  # expert indices, whatever dtype a form gives them


INTERFACE = Gating(
    "gating",
    PARAMS,
    ("w0", "w1", "idx0", "idx1"),
    ("top2", "weights"),
    "top-2 gating: logits (M, E); w0, w1, idx0, idx1 (M,); one row per program",
)
