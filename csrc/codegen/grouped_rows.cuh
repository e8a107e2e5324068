// acc += as[rows of this warp] x bs[columns of this warp]^T over one 32-deep k step.
__device__ __forceinline__ void LM_KERNEL_tile_product(const @SMEM_T@ (*as)[40], const @SMEM_T@ (*bs)[40],
                                                       float (&acc)[2][4][4], int wm, int wn, int quad, int pair) {
#if @USE_MMA@ && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  #pragma unroll
  for (int kk = 0; kk < 32; kk += 16) {
    unsigned fa[2][4], fb[4][2];
    #pragma unroll
    for (int i = 0; i < 2; ++i) {
      const unsigned short* top = &as[wm + i * 16 + quad][kk + pair];
      const unsigned short* bottom = top + 8 * 40;
      fa[i][0] = *(const unsigned*)top;
      fa[i][1] = *(const unsigned*)bottom;
      fa[i][2] = *(const unsigned*)(top + 8);
      fa[i][3] = *(const unsigned*)(bottom + 8);
    }
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned short* column = &bs[wn + j * 8 + quad][kk + pair];
      fb[j][0] = *(const unsigned*)column;
      fb[j][1] = *(const unsigned*)(column + 8);
    }
    #pragma unroll
    for (int i = 0; i < 2; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.@MMA_TYPE@.@MMA_TYPE@.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
            : "r"(fa[i][0]), "r"(fa[i][1]), "r"(fa[i][2]), "r"(fa[i][3]), "r"(fb[j][0]), "r"(fb[j][1]));
  }
#else
  // The same fragment ownership as the mma path, one FMA at a time.
  for (int kk = 0; kk < 32; ++kk) {
    #pragma unroll
    for (int i = 0; i < 2; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j)
        #pragma unroll
        for (int c = 0; c < 4; ++c)
          acc[i][j][c] += @FROM_SMEM@(as[wm + i * 16 + quad + (c >> 1) * 8][kk]) * @FROM_SMEM@(bs[wn + j * 8 + pair + (c & 1)][kk]);
  }
#endif
}

extern "C" __global__ void __launch_bounds__(128) LM_KERNEL(const LM_KERNEL_params p) {
  lm_kernel_entry();
  const lm_i64 lm_m = @M@, lm_n = @N@, lm_k = @K@, lm_groups = @G@;
  const lm_i64 lm_a_row_stride = @A_ROW_STRIDE@, lm_b_group_stride = @B_GROUP_STRIDE@, lm_b_col_stride = @B_COL_STRIDE@;
  const bool lm_b_k_contiguous = @B_K_STRIDE@ == 1;
  // Whole 16-byte vectors: k-contiguous, every row/column start and the end of k vector-aligned.
  constexpr int LM_VEC = 16 / sizeof(@SMEM_T@);
  const bool lm_a_vectors = @A_K_STRIDE@ == 1 && lm_a_row_stride % LM_VEC == 0 && lm_k % LM_VEC == 0 &&
                            ((unsigned long long)p.in0 & 15ull) == 0;
  const bool lm_b_vectors = lm_b_k_contiguous && lm_b_col_stride % LM_VEC == 0 && lm_b_group_stride % LM_VEC == 0 &&
                            lm_k % LM_VEC == 0 && ((unsigned long long)p.in1 & 15ull) == 0;
  // Two stages: [row or column][k], 8 elements of padding per row against bank conflicts.
  __shared__ __align__(16) @SMEM_T@ lm_as[2][64][40];
  __shared__ __align__(16) @SMEM_T@ lm_bs[2][64][40];
  const int lm_tid = threadIdx.x, lm_warp = lm_tid >> 5, lm_lane = lm_tid & 31;
  const int lm_quad = lm_lane >> 2, lm_pair = (lm_lane & 3) * 2;  // mma fragment coordinates
  const int lm_wm = (lm_warp >> 1) * 32, lm_wn = (lm_warp & 1) * 32;
  const lm_i64 lm_col_tiles = (lm_n + 63) / 64;
  const lm_i64 lm_tiles = ((lm_m + 63) / 64 + lm_groups + 1) * lm_col_tiles;
  for (lm_i64 lm_tile = blockIdx.x; lm_tile < lm_tiles; lm_tile += gridDim.x) {
    const lm_i64 lm_col0 = (lm_tile % lm_col_tiles) * 64;
    // Row tile number `slot` of the concatenation of every group's row tiles (group lm_groups:
    // the rows past the last end).
    lm_i64 lm_slot = lm_tile / lm_col_tiles, lm_start = 0, lm_row0 = 0, lm_row1 = 0, lm_group = -1;
    for (lm_i64 g = 0; g <= lm_groups; ++g) {
      lm_i64 lm_end = lm_m;
      if (g < lm_groups) {
        lm_end = LM_KERNEL_end(p, g);
        if (lm_end < lm_start || lm_end > lm_m) {
          lm_report(p.error, 1, lm_end - lm_start, lm_m - lm_start + 1, -1);
          lm_end = lm_end < lm_start ? lm_start : lm_m;
        }
      }
      const lm_i64 lm_count = (lm_end - lm_start + 63) / 64;
      if (lm_slot < lm_count) {
        lm_group = g;
        lm_row0 = lm_start + lm_slot * 64;
        lm_row1 = min(lm_row0 + 64, lm_end);
        break;
      }
      lm_slot -= lm_count;
      lm_start = lm_end;
    }
    if (lm_group < 0) continue;  // the same for the whole block: no thread waits at a barrier alone
    float lm_acc[2][4][4];
    #pragma unroll
    for (int i = 0; i < 2; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j)
        #pragma unroll
        for (int c = 0; c < 4; ++c) lm_acc[i][j][c] = 0.0f;
    if (lm_group < lm_groups && lm_k > 0 && lm_a_vectors && lm_b_vectors) {
      // Pipelined: the next k step's tiles are in flight (cp.async) while this one multiplies.
      const auto issue = [&](int stage, lm_i64 k0) {
        for (int e = lm_tid; e < 64 * 32 / LM_VEC; e += 128) {
          const int r = e / (32 / LM_VEC), kk = (e % (32 / LM_VEC)) * LM_VEC;
          const lm_i64 row = lm_row0 + r, col = lm_col0 + r, k = k0 + kk;
          const bool a_ok = row < lm_row1 && k < lm_k, b_ok = col < lm_n && k < lm_k;
          lm_copy16(&lm_as[stage][r][kk], a_ok ? p.in0 + row * lm_a_row_stride + k : p.in0, a_ok);
          lm_copy16(&lm_bs[stage][r][kk], b_ok ? p.in1 + lm_group * lm_b_group_stride + col * lm_b_col_stride + k : p.in1, b_ok);
        }
        lm_copy16_commit();
      };
      issue(0, 0);
      int stage = 0;
      for (lm_i64 lm_k0 = 0; lm_k0 < lm_k; lm_k0 += 32) {
        if (lm_k0 + 32 < lm_k) {
          issue(stage ^ 1, lm_k0 + 32);
          lm_copy16_wait_all_but_last();
        } else {
          lm_copy16_wait_all();
        }
        __syncthreads();
        LM_KERNEL_tile_product(lm_as[stage], lm_bs[stage], lm_acc, lm_wm, lm_wn, lm_quad, lm_pair);
        __syncthreads();
        stage ^= 1;
      }
    } else {
      for (lm_i64 lm_k0 = 0; lm_group < lm_groups && lm_k0 < lm_k; lm_k0 += 32) {
        if (lm_a_vectors) {
          for (int e = lm_tid; e < 64 * 32 / LM_VEC; e += 128) {
            const int r = e / (32 / LM_VEC), kk = (e % (32 / LM_VEC)) * LM_VEC;
            const lm_i64 row = lm_row0 + r, k = lm_k0 + kk;
            lm_vec16 v = {0u, 0u, 0u, 0u};
            if (row < lm_row1 && k < lm_k) v = *(const lm_vec16*)(p.in0 + row * lm_a_row_stride + k);
            *(lm_vec16*)&lm_as[0][r][kk] = v;
          }
        } else {
          for (int e = lm_tid; e < 64 * 32; e += 128) {
            const int r = e >> 5, kk = e & 31;
            const lm_i64 row = lm_row0 + r, k = lm_k0 + kk;
            lm_as[0][r][kk] = @TO_SMEM@((row < lm_row1 && k < lm_k) ? LM_KERNEL_a(p, row, k) : 0.0f);
          }
        }
        for (int e = lm_tid; e < 64 * 32; e += 128) {
          // Neighbouring threads read neighbouring elements: along k when b is k-contiguous, else along n.
          const int c = lm_b_k_contiguous ? e >> 5 : e & 63, kk = lm_b_k_contiguous ? e & 31 : e >> 6;
          const lm_i64 col = lm_col0 + c, k = lm_k0 + kk;
          lm_bs[0][c][kk] = @TO_SMEM@((col < lm_n && k < lm_k) ? LM_KERNEL_b(p, lm_group, k, col) : 0.0f);
        }
        __syncthreads();
        LM_KERNEL_tile_product(lm_as[0], lm_bs[0], lm_acc, lm_wm, lm_wn, lm_quad, lm_pair);
        __syncthreads();
      }
    }
    #pragma unroll
    for (int i = 0; i < 2; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j)
        #pragma unroll
        for (int c = 0; c < 4; ++c) {
          const lm_i64 row = lm_row0 + lm_wm + i * 16 + lm_quad + (c >> 1) * 8;
          const lm_i64 col = lm_col0 + lm_wn + j * 8 + lm_pair + (c & 1);
          if (row < lm_row1 && col < lm_n) p.out[row * lm_n + col] = LM_KERNEL_store(lm_acc[i][j][c]);
        }
  }
}
