"""MoE top-2 gating, written as the chapter (21.3) writes it: one token per program, softmax,
max/argmax, the top-1 masked out by position, the two weights renormalized."""

import torch
import triton
import triton.language as tl


@triton.jit
def moe_top2_gating_kernel(
    logits_ptr,
    weight0_ptr,
    weight1_ptr,
    idx0_ptr,
    idx1_ptr,
    M,
    E,
    stride_m,
    BLOCK_E: tl.constexpr,
):
    token = tl.program_id(0)
    cols = tl.arange(0, BLOCK_E)
    mask = cols < E
    x = tl.load(logits_ptr + token * stride_m + cols, mask=mask, other=float("-inf"))

    x = x - tl.max(x, 0)
    num = tl.exp(x)
    probs = num / tl.sum(num, 0)

    top1_val = tl.max(probs, 0)
    top1_idx = tl.argmax(probs, 0)
    masked = tl.where(cols == top1_idx, float("-inf"), probs)
    top2_val = tl.max(masked, 0)
    top2_idx = tl.argmax(masked, 0)

    denom = top1_val + top2_val
    tl.store(weight0_ptr + token, top1_val / denom)
    tl.store(weight1_ptr + token, top2_val / denom)
    tl.store(idx0_ptr + token, top1_idx)
    tl.store(idx1_ptr + token, top2_idx)


def moe_top2_gating(logits):
    M, E = logits.shape
    w0 = torch.empty(M, device=logits.device, dtype=torch.float32)
    w1 = torch.empty(M, device=logits.device, dtype=torch.float32)
    idx0 = torch.empty(M, device=logits.device, dtype=torch.int32)
    idx1 = torch.empty(M, device=logits.device, dtype=torch.int32)
    moe_top2_gating_kernel[(M,)](
        logits, w0, w1, idx0, idx1, M, E, logits.stride(0), BLOCK_E=triton.next_power_of_2(E)
    )
    return w0, w1, idx0, idx1


if __name__ == "__main__":
    torch.manual_seed(0)
    logits = torch.randn(6, 8)
    w0, w1, idx0, idx1 = moe_top2_gating(logits)
    vals, idx = torch.topk(torch.softmax(logits, dim=-1), 2, dim=-1)
    print(
        "indices match topk:",
        torch.equal(idx0.long(), idx[:, 0]) and torch.equal(idx1.long(), idx[:, 1]),
    )
    print("weights close:", torch.allclose(w0, vals[:, 0] / vals.sum(-1), atol=1e-5))
    print("w0 + w1:", (w0 + w1).tolist())
