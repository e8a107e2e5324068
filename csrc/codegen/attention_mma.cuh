// Fused attention on tensor cores (f16/bf16, head sizes multiples of 16 up to 128): one block of
// 128 threads (four warps) per (batch, head, tile of 64 queries), 16 query rows per warp. Per tile
// of 32 keys: S = Q K^T with mma.sync m16n8k16 (f32 accumulation), scale, causal and mask in f32,
// an online softmax on the accumulator fragments (running max and sum per row, rescaling the
// output), then O += P V with P rounded to @MMA_TYPE@ (as flash kernels do). Q, K and V^T are
// staged in shared memory. A row that attends to no key ends with sum 0 and is written as 0.
#define LM_MQ 64
#define LM_MK 32

__device__ __forceinline__ unsigned LM_KERNEL_pack(float lo, float hi) {
  return (unsigned)@TO_IN@(lo) | ((unsigned)@TO_IN@(hi) << 16);
}

__device__ __forceinline__ void LM_KERNEL_mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                              unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.@MMA_TYPE@.@MMA_TYPE@.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // tensor cores of this shape need sm_80+ (luminal's CUDA targets: H100/H200, sm_90)
#endif
}

extern "C" __global__ void __launch_bounds__(128) LM_KERNEL(const LM_KERNEL_params p) {
  const lm_i64 lm_batch = @B@, lm_heads = @H@, lm_lq = @LQ@, lm_lk = @LK@, lm_kv_heads = @HK@;
  constexpr int LM_D = @D@, LM_DV = @DV@;
  constexpr int LM_DP = LM_D + 8, LM_KP = LM_MK + 8;  // padded rows against bank conflicts
  constexpr int LM_NO = LM_DV / 8;                    // output n-blocks of 8 columns per warp
  const lm_i64 lm_group = lm_heads / lm_kv_heads;
  const lm_i64 lm_q_tiles = (lm_lq + LM_MQ - 1) / LM_MQ;
  const lm_i64 lm_tiles = lm_batch * lm_heads * lm_q_tiles;
  const float lm_scale = (float)(@SCALE@);
  const float lm_neg_inf = -__int_as_float(0x7f800000);
  __shared__ __align__(16) unsigned short lm_qs[LM_MQ][LM_DP];
  __shared__ __align__(16) unsigned short lm_ks[LM_MK][LM_DP];
  __shared__ __align__(16) unsigned short lm_vt[LM_DV][LM_KP];  // V transposed: [value column][key]
  const int lm_warp = threadIdx.x >> 5, lm_lane = threadIdx.x & 31;
  const int lm_quad = lm_lane >> 2, lm_pair = (lm_lane & 3) * 2;  // mma fragment coordinates
  for (lm_i64 lm_tile = blockIdx.x; lm_tile < lm_tiles; lm_tile += gridDim.x) {
    const lm_i64 lm_qt = lm_tile % lm_q_tiles;
    const lm_i64 lm_bh = lm_tile / lm_q_tiles;
    const lm_i64 lm_h = lm_bh % lm_heads, lm_b = lm_bh / lm_heads;
    const lm_i64 lm_g = lm_h / lm_group;
    const lm_i64 lm_q0 = lm_qt * LM_MQ;
    const int lm_rows = (int)(lm_lq - lm_q0 < LM_MQ ? lm_lq - lm_q0 : LM_MQ);
    const unsigned short* const lm_q = p.in0 + lm_b * (@Q_S0@) + lm_h * (@Q_S1@);
    const unsigned short* const lm_k = p.in1 + lm_b * (@K_S0@) + lm_g * (@K_S1@);
    const unsigned short* const lm_v = p.in2 + lm_b * (@V_S0@) + lm_g * (@V_S1@);
    const lm_i64 lm_key_end = (@CAUSAL@ && lm_q0 + lm_rows < lm_lk) ? lm_q0 + lm_rows : lm_lk;
    __syncthreads();
    for (int e = threadIdx.x; e < LM_MQ * LM_D; e += 128) {
      const int r = e / LM_D, d = e % LM_D;
      lm_qs[r][d] = r < lm_rows ? lm_q[(lm_q0 + r) * (@Q_S2@) + d * (@Q_S3@)] : (unsigned short)0;
    }
    // This thread's rows of the warp's 16: lm_r0 (fragment rows quad) and lm_r0 + 8.
    const int lm_r0 = lm_warp * 16 + lm_quad;
    const lm_i64 lm_row_i[2] = {lm_q0 + lm_r0, lm_q0 + lm_r0 + 8};
    float lm_m[2] = {lm_neg_inf, lm_neg_inf}, lm_l[2] = {0.f, 0.f};
    float lm_o[LM_NO][4];
#pragma unroll
    for (int n = 0; n < LM_NO; ++n) lm_o[n][0] = lm_o[n][1] = lm_o[n][2] = lm_o[n][3] = 0.f;
    for (lm_i64 lm_k0 = 0; lm_k0 < lm_key_end; lm_k0 += LM_MK) {
      const int lm_keys = (int)(lm_key_end - lm_k0 < LM_MK ? lm_key_end - lm_k0 : LM_MK);
      __syncthreads();
      for (int e = threadIdx.x; e < LM_MK * LM_D; e += 128) {
        const int j = e / LM_D, d = e % LM_D;
        lm_ks[j][d] = j < lm_keys ? lm_k[(lm_k0 + j) * (@K_S2@) + d * (@K_S3@)] : (unsigned short)0;
      }
      for (int e = threadIdx.x; e < LM_MK * LM_DV; e += 128) {
        const int j = e / LM_DV, d = e % LM_DV;
        lm_vt[d][j] = j < lm_keys ? lm_v[(lm_k0 + j) * (@V_S2@) + d * (@V_S3@)] : (unsigned short)0;
      }
      __syncthreads();
      // S = Q K^T: 16 rows x 32 keys per warp, four n-blocks of 8 keys.
      float lm_s[4][4];
#pragma unroll
      for (int n = 0; n < 4; ++n) lm_s[n][0] = lm_s[n][1] = lm_s[n][2] = lm_s[n][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < LM_D; kk += 16) {
        const unsigned short* top = &lm_qs[lm_r0][kk + lm_pair];
        const unsigned short* bottom = top + 8 * LM_DP;
        const unsigned a0 = *(const unsigned*)top, a1 = *(const unsigned*)bottom;
        const unsigned a2 = *(const unsigned*)(top + 8), a3 = *(const unsigned*)(bottom + 8);
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          const unsigned short* column = &lm_ks[n * 8 + lm_quad][kk + lm_pair];
          LM_KERNEL_mma(lm_s[n], a0, a1, a2, a3, *(const unsigned*)column, *(const unsigned*)(column + 8));
        }
      }
      // Scale, causal and mask; then each row's max over the tile (the four threads of a quad).
      float lm_tile_max[2] = {lm_neg_inf, lm_neg_inf};
#pragma unroll
      for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int half = c >> 1;
          const int j = n * 8 + lm_pair + (c & 1);
          const lm_i64 lm_key = lm_k0 + j;
          const lm_i64 lm_i = lm_row_i[half];
          float s = lm_s[n][c] * lm_scale;
          if (j >= lm_keys || lm_i >= lm_lq || (@CAUSAL@ && lm_key > lm_i)) {
            s = lm_neg_inf;
          } else {
#if @HAS_MASK@
            const lm_i64 lm_mask_at = lm_b * (@M_S0@) + lm_h * (@M_S1@) + lm_i * (@M_S2@) + lm_key * (@M_S3@);
#if @MASK_BOOL@
            if (p.in3[lm_mask_at] == 0) s = lm_neg_inf;
#else
            s += (float)@FROM_MASK@(p.in3[lm_mask_at]);
#endif
#endif
          }
          lm_s[n][c] = s;
          lm_tile_max[half] = fmaxf(lm_tile_max[half], s);
        }
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        lm_tile_max[half] = fmaxf(lm_tile_max[half], __shfl_xor_sync(0xffffffffu, lm_tile_max[half], 1));
        lm_tile_max[half] = fmaxf(lm_tile_max[half], __shfl_xor_sync(0xffffffffu, lm_tile_max[half], 2));
      }
      float lm_correction[2], lm_base[2], lm_sum[2] = {0.f, 0.f};
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float lm_m_new = fmaxf(lm_m[half], lm_tile_max[half]);
        // A row that saw no key yet keeps m = -inf: its p are 0 and nothing is rescaled.
        const bool lm_none = lm_m_new == lm_neg_inf;
        lm_correction[half] = lm_none ? 1.f : expf(lm_m[half] - lm_m_new);  // 0 while m was -inf
        lm_base[half] = lm_none ? 0.f : lm_m_new;
        lm_m[half] = lm_m_new;
      }
#pragma unroll
      for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int half = c >> 1;
          const float pv = expf(lm_s[n][c] - lm_base[half]);  // exp(-inf) = 0 for a dropped key
          lm_s[n][c] = pv;
          lm_sum[half] += pv;
        }
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        lm_sum[half] += __shfl_xor_sync(0xffffffffu, lm_sum[half], 1);
        lm_sum[half] += __shfl_xor_sync(0xffffffffu, lm_sum[half], 2);
        lm_l[half] = lm_l[half] * lm_correction[half] + lm_sum[half];
      }
#pragma unroll
      for (int n = 0; n < LM_NO; ++n) {
        lm_o[n][0] *= lm_correction[0];
        lm_o[n][1] *= lm_correction[0];
        lm_o[n][2] *= lm_correction[1];
        lm_o[n][3] *= lm_correction[1];
      }
      // O += P V: the S accumulators of key blocks 2t and 2t + 1 are the A fragment of k-step t.
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const unsigned a0 = LM_KERNEL_pack(lm_s[2 * t][0], lm_s[2 * t][1]);
        const unsigned a1 = LM_KERNEL_pack(lm_s[2 * t][2], lm_s[2 * t][3]);
        const unsigned a2 = LM_KERNEL_pack(lm_s[2 * t + 1][0], lm_s[2 * t + 1][1]);
        const unsigned a3 = LM_KERNEL_pack(lm_s[2 * t + 1][2], lm_s[2 * t + 1][3]);
#pragma unroll
        for (int n = 0; n < LM_NO; ++n) {
          const unsigned short* column = &lm_vt[n * 8 + lm_quad][t * 16 + lm_pair];
          LM_KERNEL_mma(lm_o[n], a0, a1, a2, a3, *(const unsigned*)column, *(const unsigned*)(column + 8));
        }
      }
    }
    // Write the rows: a row that attends to no key (sum 0) is 0.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int lm_row = lm_r0 + half * 8;
      if (lm_row >= lm_rows) continue;
      const float lm_inverse = lm_l[half] > 0.f ? 1.f / lm_l[half] : 0.f;
      unsigned short* const lm_out = p.out + ((lm_bh * lm_lq) + lm_q0 + lm_row) * (lm_i64)LM_DV;
#pragma unroll
      for (int n = 0; n < LM_NO; ++n) {
        lm_out[n * 8 + lm_pair] = @TO_IN@(lm_o[n][half * 2] * lm_inverse);
        lm_out[n * 8 + lm_pair + 1] = @TO_IN@(lm_o[n][half * 2 + 1] * lm_inverse);
      }
    }
  }
}
#undef LM_MQ
#undef LM_MK
