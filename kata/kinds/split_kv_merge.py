"""The split-KV merge (08): the last step of split-KV decoding, which combines the partial
softmax sums of NUM_SPLITS key splits per query row into the row's output and log-sum-exp; its
oracles (the merge, and decoding attention over ragged caches), and the torch baseline."""

from __future__ import annotations

import sys

import numpy as np

from kata import host, runtime
from kata.kinds.base import Interface, f64, poisoned

# fmt: off
PARAMS = (
    "m_ptr", "l_ptr", "acc_ptr", "out_ptr", "lse_ptr", "NUM_SPLITS", "D",
    "stride_mb", "stride_ab", "stride_as", "stride_ob", "BLOCK_S", "BLOCK_D",
)
# fmt: on


def _attend(q, k, v) -> np.ndarray:
    """softmax(q k^T / sqrt(D)) v over every key, row by row, in float64: the same operations
    as 2-D attention's oracle without a mask (kept here, so that this kind stands on none)."""
    scores = q @ k.T / np.sqrt(q.shape[1])
    scores = scores - scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    return (p / p.sum(axis=1, keepdims=True)) @ v


def decode_attention(q, k, v, lengths, group: int = 1) -> np.ndarray:
    """One query row per output row against a KV cache with ragged lengths: row ``b`` of q
    (B, D) attends to the first ``lengths[b // group]`` keys of ``k[b // group]`` and
    ``v[b // group]`` (caches of shape (B // group, N, D)); ``group`` query rows share a cache,
    as the heads of one group do in grouped-query attention. (B, D) out."""
    q, k, v = f64(q), f64(k), f64(v)
    lengths = np.asarray(lengths, np.int64)
    out = np.empty(q.shape)
    for b in range(len(q)):
        s = b // group
        n = int(lengths[s])
        out[b] = _attend(q[b : b + 1], k[s, :n], v[s, :n])[0]
    return out


def decode_lse(q, k, lengths, group: int = 1) -> np.ndarray:
    """The natural log of each row's softmax denominator in ``decode_attention``: ln sum_n
    exp(s_n) over the row's scores s_n = q k_n / sqrt(D) (B,)."""
    q, k = f64(q), f64(k)
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
    m, l, acc = f64(m), f64(l), f64(acc)  # noqa: E741
    top = m.max(axis=1, keepdims=True)
    if not np.isfinite(top).all():
        raise ValueError("every row needs a split that is not empty (a finite maximum)")
    w = np.exp(m - top)  # exp(-inf) = 0: empty splits weigh nothing
    total = (w * l).sum(axis=1)
    out = (w[:, :, None] * acc).sum(axis=1) / total[:, None]
    return out, top[:, 0] + np.log(total)


class SplitKVMerge(Interface):
    """08: the merge of split-KV decoding. Inputs: the partials of NUM_SPLITS key splits per
    row (``case.params["NUM_SPLITS"]``), m and l (B, S) and acc (B, S, D), float32, computed by
    the grader (its ``inputs.split_partials``); outputs out (B, D) and lse (B,), float32. Layout
    ``"padded"``: a partial lies inside a wider buffer (NaN around it), so that its row stride
    (and acc's split stride) exceed its own width."""

    def launch(self, kernel, case, device):
        ins = self.inputs(case, device)
        B, _, D = ins["acc"].shape
        outs = {
            "out": poisoned((B, D), "float32", device),
            "lse": poisoned((B,), "float32", device),
        }
        host.launch_split_kv_merge(
            kernel, **ins, num_splits=case.params["NUM_SPLITS"], out=outs["out"], lse=outs["lse"]
        )
        return outs

    def expected(self, case):
        S = case.params["NUM_SPLITS"]
        m, l, acc = (case.inputs[n][:, :S] for n in ("m", "l", "acc"))  # noqa: E741
        out, lse = split_kv_merge(m, l, acc)
        return {"out": out, "lse": lse}

    def tolerance(self, key, dtype):
        # Float32 merges land near 1e-7 relative; lse reaches 200 on the hostile cases, where
        # one float32 ulp is 1.5e-5, hence the relative part.
        return (1e-5, 1e-5)

    # ``torch`` is kata/authoring/bench.py's argument: it goes when the bench rows move here.
    def baseline(self, torch, q, k, v):
        """torch SDPA, one query row per (batch, head) against the whole cache: q (B, H, D), k
        and v (B, H, N, D)."""
        sdpa = torch.nn.functional.scaled_dot_product_attention
        return sdpa(q[:, :, None, :], k, v)[:, :, 0, :]

    def timed(self, torch, kernel, shape: dict):
        """(decode call, torch call, label, baseline name) on one random problem of ``shape``:
        B sequences x H heads, each one query row against N cached keys of D dims, in
        ``dtype``. The decode is the whole of it, both kernels: the file's given partial kernel
        (``split_kv_partial_kernel``, from the module that defines ``kernel``) and ``kernel``
        as the merge, with ``shape["splits"]`` splits (default: the host's choice)."""
        inner = kernel
        while hasattr(inner, "fn"):
            inner = inner.fn
        partial = sys.modules[inner.__module__].split_kv_partial_kernel
        B, H, N, D = (shape[k] for k in ("B", "H", "N", "D"))
        dtype = getattr(torch, shape["dtype"])
        device = runtime.DEVICE  # a GPU; the bench's dry run tries it in the interpreter
        q = torch.randn(B, H, D, device=device, dtype=dtype)
        k, v = (torch.randn(B, H, N, D, device=device, dtype=dtype) for _ in "kv")
        lengths = torch.full((B * H,), N, dtype=torch.int32, device=device)
        flat = [x.reshape(B * H, *x.shape[2:]) for x in (q, k, v)]
        splits = shape.get("splits") or host.default_num_splits(B * H, N)

        def decode():  # the lengths are known (all N): no device sync to check them
            m, l, acc = host.launch_split_kv_partials(  # noqa: E741
                partial, *flat, lengths, splits, check_lengths=False
            )
            return host.launch_split_kv_merge(kernel, m, l, acc)

        label = f"B={B} H={H} N={N} D={D} {shape['dtype']} splits={splits}"
        return decode, lambda: self.baseline(torch, q, k, v), label, "torch SDPA"


INTERFACE = SplitKVMerge(
    "split-kv-merge",
    PARAMS,
    ("out", "lse"),
    ("output", "lse"),
    "split-KV merge: partials m, l (B, S), acc (B, S, D); out (B, D), lse (B,)",
)
