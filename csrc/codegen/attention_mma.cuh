// Fused attention on tensor cores (f16/bf16, head sizes multiples of 16 up to 128): one block of
// 128 threads (four warps) per (batch, head, tile of 64 queries), 16 query rows per warp. Each
// warp keeps its Q fragments in registers. Key/value tiles (64 keys; 32 above head size 64, to fit
// 48 KB of shared memory) are double-buffered in shared memory: the next tile is copied with
// cp.async (16-byte chunks, when the rows are contiguous and aligned; element by element
// otherwise) while the current one is computed. Per tile: S = Q K^T with mma.sync m16n8k16 (f32
// accumulation), scale, causal and mask in f32, an online softmax on the accumulator fragments
// (running max and sum per row, rescaling the output), then O += P V with P rounded to
// @MMA_TYPE@ (as flash kernels do) and V's fragments read transposed by ldmatrix. A row that
// attends to no key ends with sum 0 and is written as 0.
#define LM_MQ 64

__device__ __forceinline__ unsigned LM_KERNEL_pack(float lo, float hi) {
  return (unsigned)@TO_IN@(lo) | ((unsigned)@TO_IN@(hi) << 16);
}

__device__ __forceinline__ void LM_KERNEL_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.@MMA_TYPE@.@MMA_TYPE@.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // tensor cores of this shape need sm_80+ (the executor refuses older GPUs first)
#endif
}

// Four 8x8 b16 matrices: lanes 8i..8i+7 give the row addresses of matrix i; a lane receives row
// lane / 4, columns 2 (lane % 4) and + 1 of each, the B fragment of an m16n8k16 "col" operand.
__device__ __forceinline__ void LM_KERNEL_ldmatrix(unsigned (&r)[4], const unsigned short* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = (unsigned)__cvta_generic_to_shared(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#else
  __trap();
#endif
}

// Four 8x8 b16 matrices read transposed: lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void LM_KERNEL_ldmatrix_trans(unsigned (&r)[4], const unsigned short* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = (unsigned)__cvta_generic_to_shared(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#else
  __trap();
#endif
}

// Head sizes up to 64 without a mask: four blocks per SM, so at most 128 registers a thread
// (ptxas -v, sm_90: 127-128, no spills; a mask's addressing spilled 16 bytes there, so masked
// kernels get three blocks). Larger heads keep twice the fragments and get two blocks.
#define LM_MIN_BLOCKS ((@D@ <= 64 && @DV@ <= 64) ? (@HAS_MASK@ ? 3 : 4) : 2)
extern "C" __global__ void __launch_bounds__(128, LM_MIN_BLOCKS) LM_KERNEL(const LM_KERNEL_params p) {
  lm_kernel_entry();
  const lm_i64 lm_batch = @B@, lm_heads = @H@, lm_lq = @LQ@, lm_lk = @LK@, lm_kv_heads = @HK@;
  constexpr int LM_D = @D@, LM_DV = @DV@;
  constexpr int LM_MK = LM_D <= 64 && LM_DV <= 64 ? 64 : 32;  // keys per tile
  constexpr int LM_KP = LM_D + 8, LM_VP = LM_DV + 8;          // padded rows against bank conflicts
  constexpr int LM_NS = LM_MK / 8;                            // score n-blocks of 8 keys
  constexpr int LM_NO = LM_DV / 8;                            // output n-blocks of 8 columns
  constexpr int LM_KS = LM_D / 16;                            // k-steps of Q K^T
  static_assert(LM_NS % 2 == 0 && LM_NO % 2 == 0, "K and V fragments are read two 8-blocks at a time");
  const lm_i64 lm_group = lm_heads / lm_kv_heads;
  const lm_i64 lm_q_tiles = (lm_lq + LM_MQ - 1) / LM_MQ;
  const lm_i64 lm_tiles = lm_batch * lm_heads * lm_q_tiles;
  // Scores are kept in log2 units (s * scale * log2(e)), so that exp2 computes each exponential.
  const float lm_log2e = 1.4426950408889634f;
  const float lm_scale_log2 = (float)(@SCALE@) * lm_log2e;
  const float lm_neg_inf = -__int_as_float(0x7f800000);
  __shared__ __align__(16) unsigned short lm_ks[2][LM_MK][LM_KP];
  __shared__ __align__(16) unsigned short lm_vs[2][LM_MK][LM_VP];
  const int lm_warp = threadIdx.x >> 5, lm_lane = threadIdx.x & 31;
  const int lm_quad = lm_lane >> 2, lm_pair = (lm_lane & 3) * 2;  // mma fragment coordinates
  const lm_i64 lm_k_row = @K_S2@, lm_k_col = @K_S3@, lm_v_row = @V_S2@, lm_v_col = @V_S3@;
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
    const bool lm_k_vector = LM_KERNEL_rows_vectorizable(lm_k, lm_k_row, lm_k_col);
    const bool lm_v_vector = LM_KERNEL_rows_vectorizable(lm_v, lm_v_row, lm_v_col);
    const lm_i64 lm_key_end = (@CAUSAL@ && lm_q0 + lm_rows < lm_lk) ? lm_q0 + lm_rows : lm_lk;
    const lm_i64 lm_key_tiles = (lm_key_end + LM_MK - 1) / LM_MK;
    // This thread's rows of the warp's 16: lm_r0 (fragment rows quad) and lm_r0 + 8.
    const int lm_r0 = lm_warp * 16 + lm_quad;
    const lm_i64 lm_row_i[2] = {lm_q0 + lm_r0, lm_q0 + lm_r0 + 8};
    // A warp whose 16 rows are all past the last query only helps stage tiles (the last query
    // tile of a short sequence: 197 = 3 x 64 + 5 leaves three of four warps idle).
    const bool lm_warp_live = lm_warp * 16 < lm_rows;
    // Q's A fragments, straight from global memory (zero past the last query).
    unsigned lm_qa[LM_KS][4];
#pragma unroll
    for (int s = 0; s < LM_KS; ++s) {
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int row = lm_r0 + (f & 1) * 8, d = s * 16 + lm_pair + (f >> 1) * 8;
        unsigned pair = 0;
        if (row < lm_rows) {
          const unsigned short* at = lm_q + (lm_q0 + row) * (@Q_S2@) + (lm_i64)d * (@Q_S3@);
          pair = (unsigned)at[0] | ((unsigned)at[@Q_S3@] << 16);
        }
        lm_qa[s][f] = pair;
      }
    }
    float lm_m[2] = {lm_neg_inf, lm_neg_inf}, lm_l[2] = {0.f, 0.f};
    float lm_o[LM_NO][4];
#pragma unroll
    for (int n = 0; n < LM_NO; ++n) lm_o[n][0] = lm_o[n][1] = lm_o[n][2] = lm_o[n][3] = 0.f;
    const auto lm_stage_tile = [&](lm_i64 tile, int buffer) {
      const lm_i64 k0 = tile * LM_MK;
      const int keys = (int)(lm_key_end - k0 < LM_MK ? lm_key_end - k0 : LM_MK);
      LM_KERNEL_stage<unsigned short, LM_MK, LM_D, LM_KP>(lm_ks[buffer], lm_k + k0 * lm_k_row, lm_k_row, lm_k_col, keys, lm_k_vector);
      LM_KERNEL_stage<unsigned short, LM_MK, LM_DV, LM_VP>(lm_vs[buffer], lm_v + k0 * lm_v_row, lm_v_row, lm_v_col, keys, lm_v_vector);
      LM_KERNEL_commit();
    };
    __syncthreads();  // the previous query tile's readers are done with both buffers
    if (lm_key_tiles > 0) lm_stage_tile(0, 0);
    for (lm_i64 lm_kt = 0; lm_kt < lm_key_tiles; ++lm_kt) {
      const int lm_buffer = (int)(lm_kt & 1);
      if (lm_kt + 1 < lm_key_tiles) {
        lm_stage_tile(lm_kt + 1, lm_buffer ^ 1);  // its buffer's readers finished last iteration
        LM_KERNEL_wait<1>();
      } else {
        LM_KERNEL_wait<0>();
      }
      __syncthreads();
      const lm_i64 lm_k0 = lm_kt * LM_MK;
      const int lm_keys = (int)(lm_key_end - lm_k0 < LM_MK ? lm_key_end - lm_k0 : LM_MK);
      if (lm_warp_live) {  // (a warp whose rows are all past the last query only stages tiles)
        // S = Q K^T: 16 rows x LM_MK keys per warp. Key blocks past the tile's last key are skipped
        // (they stay 0 and the softmax drops them); K's B fragments for key blocks n and n + 1 come
        // from one ldmatrix.x4 (matrices: keys of n at d and d + 8, keys of n + 1 at d and d + 8).
        float lm_s[LM_NS][4];
#pragma unroll
        for (int n = 0; n < LM_NS; ++n) lm_s[n][0] = lm_s[n][1] = lm_s[n][2] = lm_s[n][3] = 0.f;
        // ldmatrix.x4: lanes 8i..8i+7 address the rows of matrix i.
        const int lm_matrix = lm_lane >> 3, lm_matrix_row = lm_lane & 7;
#pragma unroll
        for (int s = 0; s < LM_KS; ++s) {
#pragma unroll
          for (int n = 0; n < LM_NS; n += 2) {
            if (n * 8 >= lm_keys) continue;
            unsigned b[4];
            const int key = (n + (lm_matrix >> 1)) * 8 + lm_matrix_row;
            LM_KERNEL_ldmatrix(b, &lm_ks[lm_buffer][key][s * 16 + (lm_matrix & 1) * 8]);
            LM_KERNEL_mma(lm_s[n], lm_qa[s], b[0], b[1]);
            LM_KERNEL_mma(lm_s[n + 1], lm_qa[s], b[2], b[3]);
          }
        }
        LM_KERNEL_online_softmax<LM_NS, LM_NO>(p, lm_s, lm_m, lm_l, lm_o, lm_k0, lm_keys, lm_q0, lm_row_i, lm_b,
                                               lm_h, lm_pair, lm_scale_log2);
        // O += P V: the S accumulators of key blocks 2t and 2t + 1 are the A fragment of k-step t;
        // V's B fragments (keys 16t.., columns 8n.. and 8(n+1)..) come from one ldmatrix.x4.trans.
#pragma unroll
        for (int t = 0; t < LM_MK / 16; ++t) {
          if (t * 16 >= lm_keys) continue;  // its probabilities are all 0
          const unsigned a[4] = {LM_KERNEL_pack(lm_s[2 * t][0], lm_s[2 * t][1]),
                                 LM_KERNEL_pack(lm_s[2 * t][2], lm_s[2 * t][3]),
                                 LM_KERNEL_pack(lm_s[2 * t + 1][0], lm_s[2 * t + 1][1]),
                                 LM_KERNEL_pack(lm_s[2 * t + 1][2], lm_s[2 * t + 1][3])};
#pragma unroll
          for (int n = 0; n < LM_NO; n += 2) {
            unsigned b[4];
            const int value = t * 16 + (lm_matrix & 1) * 8 + lm_matrix_row;
            LM_KERNEL_ldmatrix_trans(b, &lm_vs[lm_buffer][value][(n + (lm_matrix >> 1)) * 8]);
            LM_KERNEL_mma(lm_o[n], a, b[0], b[1]);
            LM_KERNEL_mma(lm_o[n + 1], a, b[2], b[3]);
          }
        }
      }
      __syncthreads();  // every warp is done with this buffer before it is refilled
    }
    // Write the rows: a row that attends to no key (sum 0) is 0. Each thread summed its own keys
    // of a row; the quad's four partial sums make the row's.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      lm_l[half] += __shfl_xor_sync(0xffffffffu, lm_l[half], 1);
      lm_l[half] += __shfl_xor_sync(0xffffffffu, lm_l[half], 2);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int lm_row = lm_r0 + half * 8;
      if (lm_row >= lm_rows) continue;
      const float lm_inverse = lm_l[half] > 0.f ? 1.f / lm_l[half] : 0.f;
      unsigned short* const lm_out = p.out + ((lm_bh * lm_lq) + lm_q0 + lm_row) * (lm_i64)LM_DV;
#pragma unroll
      for (int n = 0; n < LM_NO; ++n) {
        *(unsigned*)&lm_out[n * 8 + lm_pair] =
            LM_KERNEL_pack(lm_o[n][half * 2] * lm_inverse, lm_o[n][half * 2 + 1] * lm_inverse);
      }
    }
  }
}
#undef LM_MQ
#undef LM_MIN_BLOCKS
