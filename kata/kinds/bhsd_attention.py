"""(B, H, S, D) attention (04, performance track): flash attention in float16 / bfloat16,
causal or not, autotuned, and the torch SDPA baseline it is timed against."""

from __future__ import annotations

import numpy as np
import torch

from kata import host, runtime
from kata.examples import header, verdict
from kata.kinds.attention import attention
from kata.kinds.base import Interface, poisoned

# fmt: off
PARAMS = (
    "q_ptr", "k_ptr", "v_ptr", "out_ptr", "stride_qb", "stride_qh", "stride_qs", "stride_kb",
    "stride_kh", "stride_ks", "stride_vb", "stride_vh", "stride_vs", "stride_ob", "stride_oh",
    "stride_os", "H", "S", "sm_scale", "HEAD_DIM", "CAUSAL", "BLOCK_M", "BLOCK_N", "TMA",
)
# fmt: on


class BHSDAttention(Interface):
    """04: q, k, v (B, H, S, D) in float16 / bfloat16; out like q; causal per case."""

    def launch(self, kernel, case, device):
        ins = self.inputs(case, device)
        out = poisoned(tuple(ins["q"].shape), case.dtype or "float32", device)
        host.launch_fast_attention(
            kernel, ins["q"], ins["k"], ins["v"], causal=case.causal, out=out
        )
        return {"out": out}

    def expected(self, case):
        q, k, v = (case.inputs[n] for n in "qkv")
        B, H = q.shape[:2]
        out = np.empty(q.shape)
        for b in range(B):
            for h in range(H):
                out[b, h] = attention(q[b, h], k[b, h], v[b, h], causal=case.causal)
        return {"out": out}

    def tolerance(self, key, dtype):
        return (1e-2, 1e-2)  # P is rounded to 16 bits before P @ V, and out is 16-bit

    # ``torch`` is kata/authoring/bench.py's argument: it goes when the bench rows move here.
    def baseline(self, torch, q, k, v, causal):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def timed(self, torch, kernel, shape: dict):
        """(kernel call, torch call, label, baseline name) on one random bf16 problem of
        ``shape``: B, H, S, D and causal."""
        B, H, S, D, causal = (shape[k] for k in ("B", "H", "S", "D", "causal"))
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
        out = torch.empty_like(q)
        label = f"B={B} H={H} S={S} D={D} bf16" + (" causal" if causal else "")
        return (
            lambda: host.launch_fast_attention(kernel, q, k, v, causal=causal, out=out),
            lambda: self.baseline(torch, q, k, v, causal),
            label,
            "torch SDPA",
        )


INTERFACE = BHSDAttention(
    "bhsd-attention",
    PARAMS,
    ("out",),
    ("output",),
    "(B, H, S, D) attention in float16 / bfloat16, causal or not",
    separation=10.0,  # 100 x its 1e-2 would ask for differences of 1
    autotuned=True,
)


# ---- the worked example, run by 04's (and 07's) file --------------------------------------------


def fast_attention_example(fast_attention) -> int:
    """Exercise 04: small (B, H, S, D) fp16 inputs, causal and not, against float64."""
    header("04 fast attention: B=1, H=2, S=256, D=64, float16, seed 0")
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 256, 64).half() for _ in range(3))
    ok = True
    for causal in (False, True):
        out = fast_attention(*(x.to(runtime.DEVICE) for x in (q, k, v)), causal=causal).cpu()
        want = np.stack([attention(q[0, h], k[0, h], v[0, h], causal=causal) for h in range(2)])
        label = "causal" if causal else "non-causal"
        ok &= verdict(f"{label} kernel vs float64 oracle", out[0].float(), want, 1e-2)
    return 0 if ok else 1
