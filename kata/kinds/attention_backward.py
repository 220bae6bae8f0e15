"""Flash-attention backward (10): dQ, dK and dV of attention over (B, H, S, D) tensors from the
forward's saved output and log-sum-exp, in three kernels (delta, dK and dV, dQ); the launcher
that runs them, the float64 references (forward and backward), and the torch baseline.

The graded kernel is the dK, dV one; the launch takes the preprocess and dQ kernels from the
module that defines it, as 08's decode takes its partial kernel, because a backward is only
right when all three are."""

from __future__ import annotations

import contextlib
import math
import sys
import types

import numpy as np
import torch
import triton

from kata import runtime
from kata.kinds.base import Interface, f64, poisoned

# fmt: off
PARAMS = (
    "q_ptr", "k_ptr", "v_ptr", "do_ptr", "lse_ptr", "delta_ptr", "dk_ptr", "dv_ptr",
    "S", "D", "stride_bh", "stride_s", "scale", "CAUSAL", "BLOCK_M", "BLOCK_N", "BLOCK_D",
)
# fmt: on
# The given kernels the launch takes from the graded kernel's module, in launch order.
SIBLINGS = ("attn_bwd_preprocess_kernel", "attn_bwd_dq_kernel")
BASELINE = "torch SDPA backward"  # the baseline's name in timings (``timed``, the bench's rows)


# ---- the references: whole matrices, float64 ----------------------------------------------------


def _visible(S: int, causal: bool) -> np.ndarray:
    """(S, S) booleans: the (row, key) pairs the forward's softmax saw (top-left causal, as 02)."""
    return np.tril(np.ones((S, S), bool)) if causal else np.ones((S, S), bool)


def forward(q, k, v, causal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """O (B, H, S, D) and lse (B, H, S), the natural log of each row's softmax denominator, of
    softmax(q k^T / sqrt(D)) v in float64: what a forward pass saves for the backward."""
    q, k, v = f64(q), f64(k), f64(v)
    S, D = q.shape[-2:]
    scores = np.where(_visible(S, causal), q @ np.swapaxes(k, -1, -2) / np.sqrt(D), -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - top)
    total = e.sum(axis=-1, keepdims=True)
    return (e / total) @ v, (top + np.log(total))[..., 0]


def backward(q, k, v, do, causal: bool = False) -> dict[str, np.ndarray]:
    """dq, dk, dv of the loss sum(O * dO) in float64, in closed form: P the softmax, dV = P^T dO,
    dP = dO V^T, dS = P (dP - rowsum(P dP)) / sqrt(D), dQ = dS K, dK = dS^T Q. Nothing tiled and
    nothing read from the forward's saved values (tests/test_ex10_backward.py holds it equal to
    torch autograd)."""
    q, k, v, do = f64(q), f64(k), f64(v), f64(do)
    S, D = q.shape[-2:]
    scale = 1.0 / np.sqrt(D)
    scores = np.where(_visible(S, causal), scale * q @ np.swapaxes(k, -1, -2), -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True)) * scale
    return {"dq": ds @ k, "dk": np.swapaxes(ds, -1, -2) @ q, "dv": np.swapaxes(p, -1, -2) @ do}


# ---- the launcher ------------------------------------------------------------------------------


def check_inputs(q, k, v, o, do, lse) -> None:
    """Raise TypeError/ValueError naming the first problem with the six inputs."""
    named = {"q": q, "k": k, "v": v, "o": o, "do": do, "lse": lse}
    for name, x in named.items():
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError(f"{name} must be a floating-point torch.Tensor")
    if q.dim() != 4:
        raise ValueError(f"q must be (B, H, S, D), got shape {tuple(q.shape)}")
    for name in ("k", "v", "o", "do"):
        if named[name].shape != q.shape:
            raise ValueError(f"{name} must have q's shape {tuple(q.shape)}")
    if lse.shape != q.shape[:3]:
        raise ValueError(f"lse must be (B, H, S) = {tuple(q.shape[:3])}, got {tuple(lse.shape)}")
    if q.shape[3] == 0:
        raise ValueError("the head dimension D must be at least 1")
    if {x.device for x in named.values()} != {q.device} or q.device.type != runtime.DEVICE:
        raise ValueError(f"all six tensors must be on {runtime.describe()}")


def launch(
    preprocess, dkdv, dq_kernel, q, k, v, o, do, lse, *, causal=False, block_m=16, block_n=16,
    dq=None, dk=None, dv=None,
):  # fmt: skip
    """Check the inputs, then run the three kernels of exercise 10: ``preprocess`` writes delta,
    ``dkdv`` one program per (batch * head, key block), ``dq_kernel`` one per (batch * head,
    query block). Returns ``(dq, dk, dv)``, float32 and shaped like q (each may be given
    preallocated and contiguous; the grader's are poisoned).

    Any floating dtype; the kernels read contiguous copies and compute in fp32. Blocks are
    powers of two of at least 16, and the head dimension is padded to a power of two >= 16: a
    compiled ``tl.dot`` needs each dimension to be at least 16."""
    check_inputs(q, k, v, o, do, lse)
    for name, block in (("BLOCK_M", block_m), ("BLOCK_N", block_n)):
        if block < 16 or block & (block - 1):
            raise ValueError(f"{name} must be a power of two of at least 16, got {block}")
    q, k, v, o, do = (x.contiguous() for x in (q, k, v, o, do))
    lse = lse.to(torch.float32).contiguous()
    B, H, S, D = q.shape
    dq, dk, dv = (
        torch.zeros(q.shape, dtype=torch.float32, device=q.device) if g is None else g
        for g in (dq, dk, dv)
    )
    if B * H * S == 0:
        return dq, dk, dv
    BLOCK_D = max(16, triton.next_power_of_2(D))
    delta = torch.empty((B, H, S), dtype=torch.float32, device=q.device)
    strides = (q.stride(1), q.stride(2))  # one (batch, head) apart, one row apart
    scale = 1.0 / math.sqrt(D)
    rows, keys = triton.cdiv(S, block_m), triton.cdiv(S, block_n)
    preprocess[(B * H, rows)](o, do, delta, S, D, *strides, BLOCK_M=block_m, BLOCK_D=BLOCK_D)
    blocks = dict(CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=BLOCK_D)
    dkdv[(B * H, keys)](q, k, v, do, lse, delta, dk, dv, S, D, *strides, scale, **blocks)
    dq_kernel[(B * H, rows)](q, k, v, do, lse, delta, dq, S, D, *strides, scale, **blocks)
    return dq, dk, dv


class _Idle:
    """Stands in for a sibling kernel when ``kernel`` is no kernel (the grader's launch
    recorder, which compiles the graded kernel's launches only): launches nothing."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def siblings(kernel):
    """The preprocess and dQ kernels of the module that defines ``kernel`` (the dK, dV one),
    found through its wrappers: Triton's (``fn``) and the grader's pin of a configuration
    (``kernel``); the compile gate's stand-ins for them when ``kernel`` is its recorder."""
    if hasattr(kernel, "companion"):
        return tuple(kernel.companion(name) for name in SIBLINGS)
    inner = kernel
    while hasattr(inner, "fn") or hasattr(inner, "kernel"):
        inner = getattr(inner, "fn", None) or inner.kernel
    if not isinstance(inner, types.FunctionType):
        return _Idle(), _Idle()
    module = sys.modules[inner.__module__]
    missing = [n for n in SIBLINGS if not hasattr(module, n)]
    if missing:
        raise AttributeError(f"the file defines no {' and no '.join(missing)}: all three run")
    return tuple(getattr(module, n) for n in SIBLINGS)


class AttentionBackward(Interface):
    """10: q, k, v, do, and o and lse from a float64 forward rounded to fp32, (B, H, S, D) and
    (B, H, S), contiguous; outputs dq, dk, dv (B, H, S, D) float32. The case's ``block_m`` and
    ``block_n`` are the tiles of all three kernels, ``causal`` the mask."""

    def launch(self, kernel, case, device):
        ins = self.inputs(case, device)
        shape = tuple(ins["q"].shape)
        outs = {name: poisoned(shape, "float32", device) for name in self.outputs}
        preprocess, dq_kernel = siblings(kernel)
        launch(
            preprocess, kernel, dq_kernel, ins["q"], ins["k"], ins["v"], ins["o"], ins["do"],
            ins["lse"], causal=case.causal, block_m=case.block_m, block_n=case.block_n,
            dq=outs["dq"], dk=outs["dk"], dv=outs["dv"],
        )  # fmt: skip
        return outs

    def expected(self, case):
        ins = case.inputs
        return backward(ins["q"], ins["k"], ins["v"], ins["do"], case.causal)

    def tolerance(self, key, dtype):
        # fp32 kernels land near 1e-6 on these sizes; the large-score cases carry lse's fp32
        # rounding (4e-6 at 100) into every probability, well inside 1e-4.
        return (1e-4, 1e-4)

    def baseline(self, q, k, v, do, causal: bool = False):
        """torch SDPA's backward through autograd: dq, dk, dv of sum(O * dO)."""
        return sdpa_backward(q, k, v, do, causal)()

    def problem(self, kernel, shape: dict) -> dict:
        """One random problem of ``shape``: B x H heads of S rows, D dims, in ``dtype``, causal
        if ``shape["causal"]``. {"q", "k", "v", "do", "causal", "label", "ours"}: ``ours`` runs
        the backward from the forward's O and lse, both made here, outside any timing; torch's
        side is ``sdpa_backward`` on the same q, k, v and do."""
        preprocess, dq_kernel = siblings(kernel)
        B, H, S, D = (shape[k] for k in ("B", "H", "S", "D"))
        causal = bool(shape.get("causal", False))
        dtype = getattr(torch, shape["dtype"])
        device = runtime.DEVICE
        q, k, v, do = (torch.randn(B, H, S, D, device=device, dtype=dtype) for _ in range(4))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(D)
        if causal:
            future = torch.ones(S, S, dtype=torch.bool, device=device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)
        del scores  # (B, H, S, S) fp32: 4 GiB at the bench's S = 8192

        def ours():
            return launch(preprocess, kernel, dq_kernel, q, k, v, o, do, lse, causal=causal)

        label = f"B={B} H={H} S={S} D={D} {shape['dtype']}" + (" causal" if causal else "")
        return {"q": q, "k": k, "v": v, "do": do, "causal": causal, "label": label, "ours": ours}

    def timed(self, kernel, shape: dict):
        """(backward call, torch call, label, baseline name) on one random problem of
        ``shape`` (``problem``). Both sides start from the forward's O and lse (torch's autograd
        keeps its own forward state, so its forward runs once, outside the timing)."""
        p = self.problem(kernel, shape)
        theirs = sdpa_backward(p["q"], p["k"], p["v"], p["do"], p["causal"])
        return p["ours"], theirs, p["label"], BASELINE


def sdpa_backward(q, k, v, do, causal: bool = False, backend=None):
    """torch SDPA's backward through autograd, as a call that returns dq, dk, dv. The forward
    runs here, once, forced to ``backend`` (an ``SDPBackend``) when one is given: autograd's
    graph keeps the backward of the backend whose forward ran, so each call runs that backward
    alone. A backend this machine, shape or dtype lacks raises here (a RuntimeError)."""
    from torch.nn.attention import sdpa_kernel

    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    forced = sdpa_kernel(backend) if backend is not None else contextlib.nullcontext()
    with forced:
        out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
    return lambda: torch.autograd.grad(out, leaves, do, retain_graph=True)


INTERFACE = AttentionBackward(
    "attention-backward",
    PARAMS,
    ("dq", "dk", "dv"),
    ("dv", "dqdk"),
    "flash-attention backward: q, k, v, o, do (B, H, S, D), lse (B, H, S); dq, dk, dv",
)
