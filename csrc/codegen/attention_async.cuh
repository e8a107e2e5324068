// Staging of key/value tiles for the tensor-core attention kernels (attention_mma.cuh,
// attention_tf32.cuh; sm_80+): cp.async copies of 16 bytes when a tile's rows are contiguous and
// aligned, element by element otherwise. Prepended to either template by codegen/attention.cpp.

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
