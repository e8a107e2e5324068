// Fused attention for float32 on tensor cores, with float32 accuracy: every product is computed as
// three TF32 products (3xTF32: x = big + small with big = tf32(x), small = tf32(x - big); a*b ~
// a_small*b_big + a_big*b_small + a_big*b_big, accumulated in f32, the error of the dropped
// small*small term about 2^-22 relative), as torch's memory-efficient attention does for float32.
// So it honours TF32-off: no input is rounded to TF32 precision as a whole. Head sizes multiples of
// 8 up to 128. One block of 128 threads (four warps) per (batch, head, tile of 64 queries), 16 query
// rows per warp, Q kept in registers; key/value tiles (32 keys, 16 above head size 64) double-
// buffered in shared memory with cp.async (attention_common.cuh). Per tile: S = Q K^T with
// mma.sync m16n8k8, scale, causal and mask, an online softmax on the accumulator fragments, then
// O += P V, P's accumulator fragments used as the A operand with the keys permuted (key 2t is
// column t, key 2t + 1 column t + 4 of each 8-key step) and V's rows read in the same order. A row
// that attends to no key ends with sum 0 and is written as 0.
#define LM_MQ 64

__device__ __forceinline__ unsigned LM_KERNEL_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// x = big + small, both TF32.
__device__ __forceinline__ void LM_KERNEL_split(float x, unsigned& big, unsigned& small) {
  big = LM_KERNEL_tf32(x);
  small = LM_KERNEL_tf32(x - __uint_as_float(big));
}

__device__ __forceinline__ void LM_KERNEL_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // the executor refuses these kernels below sm_80 before launching them
#endif
}

// c += a * b in 3xTF32, the small products first.
__device__ __forceinline__ void LM_KERNEL_mma3(float (&c)[4], const unsigned (&a_big)[4], const unsigned (&a_small)[4],
                                               float b0, float b1) {
  unsigned b0_big, b0_small, b1_big, b1_small;
  LM_KERNEL_split(b0, b0_big, b0_small);
  LM_KERNEL_split(b1, b1_big, b1_small);
  LM_KERNEL_mma(c, a_small, b0_big, b1_big);
  LM_KERNEL_mma(c, a_big, b0_small, b1_small);
  LM_KERNEL_mma(c, a_big, b0_big, b1_big);
}

extern "C" __global__ void __launch_bounds__(128) LM_KERNEL(const LM_KERNEL_params p) {
  lm_kernel_entry();
  const lm_i64 lm_batch = @B@, lm_heads = @H@, lm_lq = @LQ@, lm_lk = @LK@, lm_kv_heads = @HK@;
  constexpr int LM_D = @D@, LM_DV = @DV@;
  constexpr int LM_MK = LM_D <= 64 && LM_DV <= 64 ? 32 : 16;  // keys per tile
  // Rows padded to 4 (mod 8) floats: the fragment reads below hit 32 different banks.
  constexpr int LM_KP = LM_D + 4, LM_VP = LM_DV + 4;
  constexpr int LM_NS = LM_MK / 8;                            // score n-blocks of 8 keys
  constexpr int LM_NO = LM_DV / 8;                            // output n-blocks of 8 columns
  constexpr int LM_KS = LM_D / 8;                             // k-steps of Q K^T
  const lm_i64 lm_group = lm_heads / lm_kv_heads;
  const lm_i64 lm_q_tiles = (lm_lq + LM_MQ - 1) / LM_MQ;
  const lm_i64 lm_tiles = lm_batch * lm_heads * lm_q_tiles;
  // Scores are kept in log2 units (s * scale * log2(e)), so that exp2 computes each exponential.
  const float lm_log2e = 1.4426950408889634f;
  const float lm_scale_log2 = (float)(@SCALE@) * lm_log2e;
  const float lm_neg_inf = -__int_as_float(0x7f800000);
  __shared__ __align__(16) float lm_ks[2][LM_MK][LM_KP];
  __shared__ __align__(16) float lm_vs[2][LM_MK][LM_VP];
  const int lm_warp = threadIdx.x >> 5, lm_lane = threadIdx.x & 31;
  // mma fragment coordinates: row (and B column) lm_quad, A column lm_col, C columns lm_pair, + 1.
  const int lm_quad = lm_lane >> 2, lm_col = lm_lane & 3, lm_pair = lm_col * 2;
  const lm_i64 lm_k_row = @K_S2@, lm_k_col = @K_S3@, lm_v_row = @V_S2@, lm_v_col = @V_S3@;
  for (lm_i64 lm_tile = blockIdx.x; lm_tile < lm_tiles; lm_tile += gridDim.x) {
    const lm_i64 lm_qt = lm_tile % lm_q_tiles;
    const lm_i64 lm_bh = lm_tile / lm_q_tiles;
    const lm_i64 lm_h = lm_bh % lm_heads, lm_b = lm_bh / lm_heads;
    const lm_i64 lm_g = lm_h / lm_group;
    const lm_i64 lm_q0 = lm_qt * LM_MQ;
    const int lm_rows = (int)(lm_lq - lm_q0 < LM_MQ ? lm_lq - lm_q0 : LM_MQ);
    const float* const lm_q = p.in0 + lm_b * (@Q_S0@) + lm_h * (@Q_S1@);
    const float* const lm_k = p.in1 + lm_b * (@K_S0@) + lm_g * (@K_S1@);
    const float* const lm_v = p.in2 + lm_b * (@V_S0@) + lm_g * (@V_S1@);
    const bool lm_k_vector = LM_KERNEL_rows_vectorizable(lm_k, lm_k_row, lm_k_col);
    const bool lm_v_vector = LM_KERNEL_rows_vectorizable(lm_v, lm_v_row, lm_v_col);
    const lm_i64 lm_key_end = (@CAUSAL@ && lm_q0 + lm_rows < lm_lk) ? lm_q0 + lm_rows : lm_lk;
    const lm_i64 lm_key_tiles = (lm_key_end + LM_MK - 1) / LM_MK;
    // This thread's rows of the warp's 16: lm_r0 (fragment rows quad) and lm_r0 + 8.
    const int lm_r0 = lm_warp * 16 + lm_quad;
    const lm_i64 lm_row_i[2] = {lm_q0 + lm_r0, lm_q0 + lm_r0 + 8};
    // Q's A fragments (f32, split when used), straight from global memory; zero past the last query.
    float lm_qa[LM_KS][4];
#pragma unroll
    for (int s = 0; s < LM_KS; ++s) {
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int row = lm_r0 + (f & 1) * 8, d = s * 8 + lm_col + (f >> 1) * 4;
        lm_qa[s][f] = row < lm_rows ? lm_q[(lm_q0 + row) * (@Q_S2@) + (lm_i64)d * (@Q_S3@)] : 0.f;
      }
    }
    float lm_m[2] = {lm_neg_inf, lm_neg_inf}, lm_l[2] = {0.f, 0.f};
    float lm_o[LM_NO][4];
#pragma unroll
    for (int n = 0; n < LM_NO; ++n) lm_o[n][0] = lm_o[n][1] = lm_o[n][2] = lm_o[n][3] = 0.f;
    const auto lm_stage_tile = [&](lm_i64 tile, int buffer) {
      const lm_i64 k0 = tile * LM_MK;
      const int keys = (int)(lm_key_end - k0 < LM_MK ? lm_key_end - k0 : LM_MK);
      LM_KERNEL_stage<float, LM_MK, LM_D, LM_KP>(lm_ks[buffer], lm_k + k0 * lm_k_row, lm_k_row, lm_k_col, keys, lm_k_vector);
      LM_KERNEL_stage<float, LM_MK, LM_DV, LM_VP>(lm_vs[buffer], lm_v + k0 * lm_v_row, lm_v_row, lm_v_col, keys, lm_v_vector);
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
      // S = Q K^T: 16 rows x LM_MK keys per warp.
      float lm_s[LM_NS][4];
#pragma unroll
      for (int n = 0; n < LM_NS; ++n) lm_s[n][0] = lm_s[n][1] = lm_s[n][2] = lm_s[n][3] = 0.f;
#pragma unroll
      for (int s = 0; s < LM_KS; ++s) {
        unsigned a_big[4], a_small[4];
#pragma unroll
        for (int f = 0; f < 4; ++f) LM_KERNEL_split(lm_qa[s][f], a_big[f], a_small[f]);
#pragma unroll
        for (int n = 0; n < LM_NS; ++n) {
          const float* key = &lm_ks[lm_buffer][n * 8 + lm_quad][s * 8 + lm_col];
          LM_KERNEL_mma3(lm_s[n], a_big, a_small, key[0], key[4]);
        }
      }
      LM_KERNEL_online_softmax<LM_NS, LM_NO>(p, lm_s, lm_m, lm_l, lm_o, lm_k0, lm_keys, lm_q0, lm_row_i, lm_b, lm_h,
                                             lm_pair, lm_scale_log2);
      // O += P V, one k-step per 8-key block n: the accumulator holds P[row][8n + 2t] and
      // P[row][8n + 2t + 1], used as A columns t and t + 4; V's rows are read in that order.
#pragma unroll
      for (int n = 0; n < LM_NS; ++n) {
        unsigned a_big[4], a_small[4];
        LM_KERNEL_split(lm_s[n][0], a_big[0], a_small[0]);
        LM_KERNEL_split(lm_s[n][2], a_big[1], a_small[1]);
        LM_KERNEL_split(lm_s[n][1], a_big[2], a_small[2]);
        LM_KERNEL_split(lm_s[n][3], a_big[3], a_small[3]);
        const float* even = &lm_vs[lm_buffer][n * 8 + lm_pair][lm_quad];
#pragma unroll
        for (int o = 0; o < LM_NO; ++o) LM_KERNEL_mma3(lm_o[o], a_big, a_small, even[o * 8], even[LM_VP + o * 8]);
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
      float* const lm_out = p.out + ((lm_bh * lm_lq) + lm_q0 + lm_row) * (lm_i64)LM_DV;
#pragma unroll
      for (int n = 0; n < LM_NO; ++n) {
        *(float2*)&lm_out[n * 8 + lm_pair] = make_float2(lm_o[n][half * 2] * lm_inverse, lm_o[n][half * 2 + 1] * lm_inverse);
      }
    }
  }
}
#undef LM_MQ
