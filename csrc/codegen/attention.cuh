// Fused attention, one block of 128 threads (four warps) per (batch, head, tile of 16 queries);
// each warp owns four query rows. Key/value tiles of 32 keys are staged in shared memory (when
// they fit: @STAGE@), lane j scores key j of the tile, and every row keeps an online softmax:
// running max m, running sum l and the unnormalized output, rescaled by exp(m_old - m_new) when
// the max grows. Scores and sums are in @T@ (float, double for f64). A row that attends to no key
// (all masked) ends with l = 0 and is written as 0. Causal tiles past the diagonal are skipped.
// Filled in by codegen/attention.cpp: shapes, strides (elements, i64), types and the mask.
#define LM_QT 16
#define LM_KT 32
#define LM_ROWS_PER_WARP 4

__device__ __forceinline__ @T@ LM_KERNEL_in(const @IN_T@* __restrict__ base, lm_i64 offset) {
  return (@T@)@FROM_IN@(base[offset]);
}

extern "C" __global__ void __launch_bounds__(128) LM_KERNEL(const LM_KERNEL_params p) {
  lm_kernel_entry();
  const lm_i64 lm_batch = @B@, lm_heads = @H@, lm_lq = @LQ@, lm_lk = @LK@, lm_kv_heads = @HK@;
  constexpr int LM_D = @D@, LM_DV = @DV@, LM_ACC = (LM_DV + 31) / 32;
  const lm_i64 lm_group = lm_heads / lm_kv_heads;
  const lm_i64 lm_q_tiles = (lm_lq + LM_QT - 1) / LM_QT;
  const lm_i64 lm_tiles = lm_batch * lm_heads * lm_q_tiles;
  const @T@ lm_scale = (@T@)(@SCALE@);
  const @T@ lm_neg_inf = @NEG_INF@;
  const int lm_warp = threadIdx.x >> 5, lm_lane = threadIdx.x & 31;
#if @STAGE@
  __shared__ @T@ lm_qs[LM_QT][LM_D];
  __shared__ @T@ lm_ks[LM_KT][LM_D + 1];  // + 1: lanes read different keys of one column
  __shared__ @T@ lm_vs[LM_KT][LM_DV];
#endif
  for (lm_i64 lm_tile = blockIdx.x; lm_tile < lm_tiles; lm_tile += gridDim.x) {
    const lm_i64 lm_qt = lm_tile % lm_q_tiles;
    const lm_i64 lm_bh = lm_tile / lm_q_tiles;
    const lm_i64 lm_h = lm_bh % lm_heads, lm_b = lm_bh / lm_heads;
    const lm_i64 lm_g = lm_h / lm_group;  // grouped-query attention: the key/value head
    const lm_i64 lm_q0 = lm_qt * LM_QT;
    const int lm_rows = (int)(lm_lq - lm_q0 < LM_QT ? lm_lq - lm_q0 : LM_QT);
    const @IN_T@* const lm_q = p.in0 + lm_b * (@Q_S0@) + lm_h * (@Q_S1@);
    const @IN_T@* const lm_k = p.in1 + lm_b * (@K_S0@) + lm_g * (@K_S1@);
    const @IN_T@* const lm_v = p.in2 + lm_b * (@V_S0@) + lm_g * (@V_S1@);
    // Causal (top-left aligned): query i sees keys j <= i, so the tile needs keys < q0 + rows.
    const lm_i64 lm_key_end = (@CAUSAL@ && lm_q0 + lm_rows < lm_lk) ? lm_q0 + lm_rows : lm_lk;
#if @STAGE@
    __syncthreads();  // the previous tile's readers are done with the shared arrays
    for (int e = threadIdx.x; e < LM_QT * LM_D; e += 128) {
      const int r = e / LM_D, d = e % LM_D;
      lm_qs[r][d] = r < lm_rows ? LM_KERNEL_in(lm_q, (lm_q0 + r) * (@Q_S2@) + d * (@Q_S3@)) : (@T@)0;
    }
#define LM_Q(r, d) lm_qs[r][d]
#define LM_K(j, d) lm_ks[j][d]
#define LM_V(j, d) lm_vs[j][d]
#else
#define LM_Q(r, d) LM_KERNEL_in(lm_q, (lm_q0 + (r)) * (@Q_S2@) + (lm_i64)(d) * (@Q_S3@))
#define LM_K(j, d) LM_KERNEL_in(lm_k, (lm_k0 + (j)) * (@K_S2@) + (lm_i64)(d) * (@K_S3@))
#define LM_V(j, d) LM_KERNEL_in(lm_v, (lm_k0 + (j)) * (@V_S2@) + (lm_i64)(d) * (@V_S3@))
#endif
    @T@ lm_m[LM_ROWS_PER_WARP], lm_l[LM_ROWS_PER_WARP], lm_acc[LM_ROWS_PER_WARP][LM_ACC];
#pragma unroll
    for (int r = 0; r < LM_ROWS_PER_WARP; ++r) {
      lm_m[r] = lm_neg_inf;
      lm_l[r] = 0;
#pragma unroll
      for (int c = 0; c < LM_ACC; ++c) lm_acc[r][c] = 0;
    }
    for (lm_i64 lm_k0 = 0; lm_k0 < lm_key_end; lm_k0 += LM_KT) {
      const int lm_keys = (int)(lm_key_end - lm_k0 < LM_KT ? lm_key_end - lm_k0 : LM_KT);
#if @STAGE@
      __syncthreads();
      for (int e = threadIdx.x; e < LM_KT * LM_D; e += 128) {
        const int j = e / LM_D, d = e % LM_D;
        lm_ks[j][d] = j < lm_keys ? LM_KERNEL_in(lm_k, (lm_k0 + j) * (@K_S2@) + d * (@K_S3@)) : (@T@)0;
      }
      for (int e = threadIdx.x; e < LM_KT * LM_DV; e += 128) {
        const int j = e / LM_DV, d = e % LM_DV;
        lm_vs[j][d] = j < lm_keys ? LM_KERNEL_in(lm_v, (lm_k0 + j) * (@V_S2@) + d * (@V_S3@)) : (@T@)0;
      }
      __syncthreads();
#endif
#pragma unroll
      for (int r = 0; r < LM_ROWS_PER_WARP; ++r) {
        const int lm_row = lm_warp * LM_ROWS_PER_WARP + r;  // the same for the whole warp
        if (lm_row >= lm_rows) continue;
        const lm_i64 lm_i = lm_q0 + lm_row;
        const lm_i64 lm_key = lm_k0 + lm_lane;
        @T@ lm_s = lm_neg_inf;
        if (lm_lane < lm_keys && !(@CAUSAL@ && lm_key > lm_i)) {
          @T@ lm_dot = 0;
          for (int d = 0; d < LM_D; ++d) lm_dot += LM_Q(lm_row, d) * LM_K(lm_lane, d);
          lm_s = lm_dot * lm_scale;
#if @HAS_MASK@
          const lm_i64 lm_mask_at = lm_b * (@M_S0@) + lm_h * (@M_S1@) + lm_i * (@M_S2@) + lm_key * (@M_S3@);
#if @MASK_BOOL@
          if (p.in3[lm_mask_at] == 0) lm_s = lm_neg_inf;
#else
          lm_s += (@T@)@FROM_MASK@(p.in3[lm_mask_at]);
#endif
#endif
        }
        @T@ lm_tile_max = lm_s;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) lm_tile_max = fmax(lm_tile_max, __shfl_xor_sync(0xffffffffu, lm_tile_max, o));
        const @T@ lm_m_new = fmax(lm_m[r], lm_tile_max);
        if (lm_m_new == lm_neg_inf) continue;  // nothing seen yet: every key so far dropped
        const @T@ lm_correction = @EXP@(lm_m[r] - lm_m_new);  // 0 while m was -inf
        const @T@ lm_p = @EXP@(lm_s - lm_m_new);                // 0 for a dropped key
        @T@ lm_sum = lm_p;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) lm_sum += __shfl_xor_sync(0xffffffffu, lm_sum, o);
        lm_l[r] = lm_l[r] * lm_correction + lm_sum;
        lm_m[r] = lm_m_new;
#pragma unroll
        for (int c = 0; c < LM_ACC; ++c) lm_acc[r][c] *= lm_correction;
        for (int j = 0; j < lm_keys; ++j) {
          const @T@ lm_pj = __shfl_sync(0xffffffffu, lm_p, j);
#pragma unroll
          for (int c = 0; c < LM_ACC; ++c) {
            const int d = lm_lane + 32 * c;
            if (d < LM_DV) lm_acc[r][c] += lm_pj * LM_V(j, d);
          }
        }
      }
    }
#undef LM_Q
#undef LM_K
#undef LM_V
#pragma unroll
    for (int r = 0; r < LM_ROWS_PER_WARP; ++r) {
      const int lm_row = lm_warp * LM_ROWS_PER_WARP + r;
      if (lm_row >= lm_rows) continue;
      // A row that attends to no key is 0 (torch's fused kernels), never 0/0.
      const @T@ lm_inverse = lm_l[r] > 0 ? (@T@)1 / lm_l[r] : (@T@)0;
      @OUT_T@* const lm_out = p.out + ((lm_bh * lm_lq) + lm_q0 + lm_row) * (lm_i64)LM_DV;
#pragma unroll
      for (int c = 0; c < LM_ACC; ++c) {
        const int d = lm_lane + 32 * c;
        if (d < LM_DV) lm_out[d] = LM_KERNEL_store(lm_acc[r][c] * lm_inverse);
      }
    }
  }
}
#undef LM_QT
#undef LM_KT
#undef LM_ROWS_PER_WARP
