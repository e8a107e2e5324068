// What the tensor-core attention kernels (attention_mma.cuh, attention_tf32.cuh; sm_80+) share:
// staging of key/value tiles (cp.async copies of 16 bytes when a tile's rows are contiguous and
// aligned, element by element otherwise) and the online softmax of a tile's score fragments.
// Prepended to either template by codegen/attention.cpp.

__device__ __forceinline__ void LM_KERNEL_copy16(void* shared, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = (unsigned)__cvta_generic_to_shared(shared);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
#else
  __trap();  // the executor refuses these kernels below sm_80 before launching them
#endif
}

__device__ __forceinline__ void LM_KERNEL_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most N committed groups of this thread are still in flight.
template <int N>
__device__ __forceinline__ void LM_KERNEL_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Whether rows of T at `base` (row_stride, col_stride in elements) can be copied 16 bytes at a time.
template <typename T>
__device__ __forceinline__ bool LM_KERNEL_rows_vectorizable(const T* base, lm_i64 row_stride, lm_i64 col_stride) {
  constexpr int kPerChunk = 16 / sizeof(T);
  return col_stride == 1 && row_stride % kPerChunk == 0 && ((unsigned long long)base & 15ull) == 0;
}

// Rows [0, ROWS) x columns [0, COLS) of a tile into shared memory (row pitch PITCH elements, a
// multiple of 16 bytes); rows at and past `valid` are zero (a padded key must not bring NaN into
// P V). `vector`: 16-byte copies (LM_KERNEL_rows_vectorizable, checked by the caller).
template <typename T, int ROWS, int COLS, int PITCH>
__device__ __forceinline__ void LM_KERNEL_stage(T (*tile)[PITCH], const T* base, lm_i64 row_stride,
                                                lm_i64 col_stride, int valid, bool vector) {
  constexpr int kPerChunk = 16 / sizeof(T);
  static_assert(COLS % kPerChunk == 0 && (PITCH * sizeof(T)) % 16 == 0, "tiles are copied in 16-byte chunks");
  if (vector) {
    constexpr int kChunks = COLS / kPerChunk;
    for (int c = threadIdx.x; c < ROWS * kChunks; c += 128) {
      const int r = c / kChunks, d = (c % kChunks) * kPerChunk;
      if (r < valid) {
        LM_KERNEL_copy16(&tile[r][d], base + r * row_stride + d);
      } else {
        *(uint4*)&tile[r][d] = make_uint4(0u, 0u, 0u, 0u);
      }
    }
    return;
  }
  for (int e = threadIdx.x; e < ROWS * COLS; e += 128) {
    const int r = e / COLS, d = e % COLS;
    tile[r][d] = r < valid ? base[r * row_stride + d * col_stride] : (T)0;
  }
}

// One key tile's online softmax on a warp's score fragments (16 query rows x 8 NS keys in the mma
// accumulator layout: element c of block n is row lm_quad + 8 (c >> 1), key 8n + pair + (c & 1)).
// Scales into log2 units (exp2 below), drops keys past `keys`, above the diagonal (causal) or
// masked, updates each row's running max m and sum l, rescales the output accumulators o, and
// leaves the tile's unnormalized probabilities in s; l is this thread's part of each row's sum.
// Tiles inside the bounds, below the diagonal and without a mask take the short path.
template <int NS, int NO>
__device__ __forceinline__ void LM_KERNEL_online_softmax(const LM_KERNEL_params& p, float (&s)[NS][4], float (&m)[2],
                                                         float (&l)[2], float (&o)[NO][4], lm_i64 k0, int keys,
                                                         lm_i64 q0, const lm_i64 (&row_i)[2], lm_i64 b, lm_i64 h,
                                                         int pair, float scale_log2) {
  const float kLog2e = 1.4426950408889634f;
  const float neg_inf = -__int_as_float(0x7f800000);
  const lm_i64 lm_lq = @LQ@;
  // Each row's max over the tile: the four threads of a quad share a row.
  float tile_max[2] = {neg_inf, neg_inf};
  const bool edge = keys < NS * 8 || (@CAUSAL@ && k0 + NS * 8 - 1 > q0);
  if (@HAS_MASK@ || edge) {
#pragma unroll
    for (int n = 0; n < NS; ++n) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int half = c >> 1;
        const int j = n * 8 + pair + (c & 1);
        const lm_i64 key = k0 + j;
        const lm_i64 i = row_i[half];
        float score = s[n][c] * scale_log2;
        if (j >= keys || (@CAUSAL@ && key > i)) {
          score = neg_inf;
        } else if (@HAS_MASK@ && i < lm_lq) {
#if @HAS_MASK@
          const lm_i64 mask_at = b * (@M_S0@) + h * (@M_S1@) + i * (@M_S2@) + key * (@M_S3@);
#if @MASK_BOOL@
          if (p.in3[mask_at] == 0) score = neg_inf;
#else
          score += (float)@FROM_MASK@(p.in3[mask_at]) * kLog2e;
#endif
#endif
        }
        s[n][c] = score;
        tile_max[half] = fmaxf(tile_max[half], score);
      }
    }
  } else {
#pragma unroll
    for (int n = 0; n < NS; ++n) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[n][c] *= scale_log2;
        tile_max[c >> 1] = fmaxf(tile_max[c >> 1], s[n][c]);
      }
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 1));
    tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(0xffffffffu, tile_max[half], 2));
  }
  float correction[2], base[2], sum[2] = {0.f, 0.f};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float m_new = fmaxf(m[half], tile_max[half]);
    // A row that saw no key yet keeps m = -inf: its p are 0 and nothing is rescaled.
    const bool none = m_new == neg_inf;
    correction[half] = none ? 1.f : exp2f(m[half] - m_new);  // 0 while m was -inf
    base[half] = none ? 0.f : m_new;
    m[half] = m_new;
  }
#pragma unroll
  for (int n = 0; n < NS; ++n) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int half = c >> 1;
      const float pv = exp2f(s[n][c] - base[half]);  // 2^-inf = 0 for a dropped key
      s[n][c] = pv;
      sum[half] += pv;
    }
  }
  // l stays this thread's share of the row sum (its keys only): the quad's four threads apply
  // the same corrections, so the kernels add the shares once, after the last tile.
#pragma unroll
  for (int half = 0; half < 2; ++half) l[half] = l[half] * correction[half] + sum[half];
#pragma unroll
  for (int n = 0; n < NO; ++n) {
    o[n][0] *= correction[0];
    o[n][1] *= correction[0];
    o[n][2] *= correction[1];
    o[n][3] *= correction[1];
  }
}
