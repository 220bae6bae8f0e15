"""Red team: no Triton kernel at all. An object that looks like one (it has ``fn`` and
``__getitem__``) computes attention with torch in Python when it is "launched"."""

import math

import torch


class _LooksLikeAKernel:
    fn = None

    def __getitem__(self, grid):
        def launch(q, k, v, out, M, N, D, *strides_and_scale, **blocks):
            scores = q.float() @ k.float().T / math.sqrt(D)
            out.copy_(torch.softmax(scores, dim=-1) @ v.float())

        return launch


flash_attn_kernel = _LooksLikeAKernel()


def flash_attention(q, k, v, BLOCK_M=16, BLOCK_N=16):
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    flash_attn_kernel[(1,)](q, k, v, out, q.shape[0], k.shape[0], q.shape[1])
    return out
