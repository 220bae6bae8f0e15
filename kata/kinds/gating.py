"""Top-2 gating (03): the chapter's MoE router, one token (row of logits) per program."""

from __future__ import annotations

import numpy as np
import torch
import triton

from kata.kinds.base import Interface, f64, poisoned
from kata.kinds.launch import _require_device, _require_tensor

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
        return launch_gating

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

# ---- host side: checks and launches (``kata.host`` gives them to the kernel files) ----------

# What kata.host gives the kernel files, by name.
HOST = (
    "check_gating_input",
    "launch_gating",
)


def check_gating_input(logits) -> None:
    """Raise TypeError/ValueError naming the first problem with logits (M tokens, E experts)."""
    _require_tensor("logits", logits)
    if logits.shape[1] < 2:
        raise ValueError(f"top-2 gating needs at least 2 experts, got E={logits.shape[1]}")
    _require_device(logits=logits)


def gating_buffers(logits, out):
    """Checked logits with unit-stride experts, and the four outputs (``out`` if given)."""
    check_gating_input(logits)
    if logits.stride(1) != 1:
        # The kernels walk experts with unit stride; only rows may be strided.
        logits = logits.contiguous()
    if out is not None:
        return logits, tuple(out)
    M = logits.shape[0]
    weights = [torch.empty(M, dtype=torch.float32, device=logits.device) for _ in range(2)]
    indices = [torch.empty(M, dtype=torch.int32, device=logits.device) for _ in range(2)]
    return logits, (*weights, *indices)


def launch_gating(kernel, logits, *, out=None):
    """Check the input, then run a gating ``kernel``; returns ``(w0, w1, idx0, idx1)``.

    ``out`` may be a preallocated tuple of the four outputs (the grader fills them with NaN / -1).
    """
    logits, (w0, w1, idx0, idx1) = gating_buffers(logits, out)
    M, E = logits.shape
    if M > 0:
        kernel[(M,)](
            logits,
            w0,
            w1,
            idx0,
            idx1,
            M,
            E,
            logits.stride(0),
            BLOCK_E=triton.next_power_of_2(E),
        )
    return w0, w1, idx0, idx1
