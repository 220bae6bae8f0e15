def flash_attn_causal_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, M, N, D,
    stride_qm, stride_qd, stride_kn, stride_kd, stride_vn, stride_vd, stride_om, stride_od,
    scale, BLOCK_M, BLOCK_N, BLOCK_D,
):
    pass
