"""The chapter's MoE top-2 gating kernel (21.3), written here from the chapter's description:
one token per program, a softmax over its row, max/argmax, the top-1 masked out by position
(`tl.where(cols == top1_idx, ...)`), max/argmax again, and the two weights divided by their sum
`total`."""

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
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_E)
    mask = cols < E
    logits = tl.load(logits_ptr + row * stride_m + cols, mask=mask, other=float("-inf"))

    p = tl.exp(logits - tl.max(logits, 0))
    probs = p / tl.sum(p, 0)

    top1_val = tl.max(probs, 0)
    top1_idx = tl.argmax(probs, 0)
    probs_masked = tl.where(cols == top1_idx, float("-inf"), probs)
    top2_val = tl.max(probs_masked, 0)
    top2_idx = tl.argmax(probs_masked, 0)

    total = top1_val + top2_val
    tl.store(weight0_ptr + row, top1_val / total)
    tl.store(weight1_ptr + row, top2_val / total)
    tl.store(idx0_ptr + row, top1_idx)
    tl.store(idx1_ptr + row, top2_idx)


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
