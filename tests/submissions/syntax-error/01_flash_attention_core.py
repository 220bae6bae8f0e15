import triton
import triton.language as tl


def flash_attention(q, k, v, BLOCK_M=16, BLOCK_N=16:
    return None
