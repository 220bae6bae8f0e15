import triton
import triton.language as tl


@triton.jit
def moe_top2_gating_kernel(
    logits_ptr, weight0_ptr, weight1_ptr, idx0_ptr, idx1_ptr, E, M, stride_m, BLOCK_E: tl.constexpr
):
    pass
