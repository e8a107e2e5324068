// The generated GEMV / skinny GEMM (codegen/gemv.cpp): out[b] = act(a[b] @ b[b] + bias) for a few
// rows of a (M <= 8), in f32 with one rounding to the output type.
//
// Decode steps of language models multiply one or a few rows by large weight matrices: the time is
// the weights' bytes over the memory bandwidth. A warp computes NPW consecutive outputs n for all M
// rows: each lane streams 16-byte vectors of the NPW weight columns (b's k-contiguous columns: the
// transposed view of an nn.Linear weight), U vectors per output in flight, past L1 (they are read
// once), and multiplies them with the matching 16-byte vectors of a's rows (small, re-read by
// every warp: kept in L1). WK warps split K (interleaved chunks, summed through shared memory in a
// fixed order: deterministic), WN warps of a block take further outputs. `vector` (checked by the
// host: both operands k-contiguous, 16-byte aligned rows, K a multiple of the vector width) selects
// the vector loop; otherwise every element is read by its strides (any layout, slower).
//
// A paired launch (PAIR) multiplies a by two weight matrices of one shape, a SwiGLU's gate (b) and
// up (b2) projections: each warp's NPW columns are NPW / 2 outputs of both, and the epilogue stores
// round(round(silu(round(g))) * round(u)) per output, the values the pointwise kernel after the two
// products would store from theirs (runtime/cuda/instance.cpp then records neither that kernel nor
// the products' own outputs).
//
// A grouped launch runs several products that multiply the same a (a layer's q, k and v
// projections, or its gate and up projections): one kernel instead of one per weight, its blocks
// walking the members' outputs one member after another (`block`: the block's index within its
// member). The members' weights are read exactly as they would be alone.
//
// codegen/gemv.cpp defines LM_GEMV_M (rows) and LM_GEMV_DTYPE (0: f32, 1: f16, 2: bf16) before this
// text and appends the entry points (one per configuration: alone, grouped and paired).
// tests/cpp/test_gemv_emulated.cpp runs the same text on the host
// (LM_GEMV_HOST_TEST: the streaming load becomes a copy) with threads standing in for lanes.
#if LM_GEMV_DTYPE == 0
typedef float lm_gemv_t;
__device__ __forceinline__ float lm_gemv_to_float(lm_gemv_t v) { return v; }
__device__ __forceinline__ lm_gemv_t lm_gemv_from_float(float v) { return v; }
#elif LM_GEMV_DTYPE == 1
typedef unsigned short lm_gemv_t;
__device__ __forceinline__ float lm_gemv_to_float(lm_gemv_t v) { return lm_h2f(v); }
__device__ __forceinline__ lm_gemv_t lm_gemv_from_float(float v) { return lm_f2h(v); }
#else
typedef unsigned short lm_gemv_t;
__device__ __forceinline__ float lm_gemv_to_float(lm_gemv_t v) { return lm_bf2f(v); }
__device__ __forceinline__ lm_gemv_t lm_gemv_from_float(float v) { return lm_f2bf(v); }
#endif

constexpr int kGemvVector = 16 / (int)sizeof(lm_gemv_t);  // elements per 16-byte load

// A value stored in the dtype and read back (f32: itself).
__device__ __forceinline__ float lm_gemv_round(float v) { return lm_gemv_to_float(lm_gemv_from_float(v)); }

// A SwiGLU's value from its stored gate and up values: silu(g) = g / (1 + exp(-g)) in f32, stored,
// times u, stored (codegen's kernel for mul(dtype(silu(f32(g))), u) computes exactly these steps).
__device__ __forceinline__ float lm_gemv_glu(float g, float u) {
  const float silu = g / (1.0f + expf(-g));
  return lm_gemv_round(lm_gemv_round(silu) * u);
}

// A weight vector: read once, so not kept in L1 (where a's rows stay).
__device__ __forceinline__ lm_vec16 lm_gemv_stream(const lm_gemv_t* p) {
  lm_vec16 v;
#ifdef LM_GEMV_HOST_TEST
  memcpy(&v, p, sizeof v);
#else
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
#endif
  return v;
}

// The 16 bytes as kGemvVector floats.
__device__ __forceinline__ void lm_gemv_unpack(const lm_vec16& v, float* f) {
  const unsigned int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#if LM_GEMV_DTYPE == 0
    f[i] = __uint_as_float(words[i]);
#elif LM_GEMV_DTYPE == 1
    f[2 * i] = lm_h2f((unsigned short)(words[i] & 0xffffu));
    f[2 * i + 1] = lm_h2f((unsigned short)(words[i] >> 16));
#else
    f[2 * i] = __uint_as_float(words[i] << 16);
    f[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
#endif
  }
}

// The U steps' weight vectors of NPW columns from chunk c0 on (zeros past the last chunk).
template <int NPW, int WK, int U>
__device__ __forceinline__ void lm_gemv_load_weights(lm_vec16 (&w)[U][NPW], const lm_gemv_t* const (&column)[NPW],
                                                     lm_i64 c0, lm_i64 chunks) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const lm_i64 c = c0 + (lm_i64)u * 32 * WK;
#pragma unroll
    for (int j = 0; j < NPW; ++j) {
      if (c < chunks) {
        w[u][j] = lm_gemv_stream(column[j] + c * kGemvVector);
      } else {
        w[u][j].x = w[u][j].y = w[u][j].z = w[u][j].w = 0u;
      }
    }
  }
}

// `a` is not __restrict__: the compiler would read it with non-coherent loads (ld.global.nc), which
// promise memory that does not change while the kernel runs and may be scheduled before the wait
// for the kernel ahead, which writes a (tests/cpp/test_gemv.cpp checks the PTX).
template <int NPW, int WK, int WN, int U, bool PAIR = false>
__device__ __forceinline__ void lm_gemv(const lm_gemv_t* a, const lm_gemv_t* __restrict__ b,
                                        const lm_gemv_t* __restrict__ b2,
                                        const lm_gemv_t* __restrict__ bias, lm_gemv_t* __restrict__ out, lm_i64 n,
                                        lm_i64 k, lm_i64 a_batch, lm_i64 a_row, lm_i64 a_col, lm_i64 b_batch,
                                        lm_i64 b_row, lm_i64 b_col, lm_i64 activation, lm_i64 vector,
                                        lm_i64 early_weights, lm_i64 block) {
  constexpr int M = LM_GEMV_M;
  static_assert(M * NPW <= 32, "one lane per output value in the epilogue");
  static_assert(!PAIR || NPW % 2 == 0, "a paired warp's columns are outputs of both matrices");
  constexpr int OUTS = PAIR ? NPW / 2 : NPW;  // outputs per warp
  const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
  const int wn = warp % WN, wk = warp / WN;
  const lm_i64 batch = blockIdx.y;
  a += batch * a_batch;
  b += batch * b_batch;
  out += batch * (lm_i64)M * n;
  const lm_i64 first = (block * WN + wn) * OUTS;
  // Outputs past n read the last column (valid memory) and are not written. Paired: column j is
  // output first + j % OUTS of b (j < OUTS) or of b2.
  const lm_gemv_t* column[NPW];
#pragma unroll
  for (int j = 0; j < NPW; ++j) {
    const lm_i64 output = first + j % OUTS;
    column[j] = (PAIR && j >= OUTS ? b2 : b) + (output < n ? output : n - 1) * b_col;
  }
  float acc[M][NPW];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int j = 0; j < NPW; ++j) acc[m][j] = 0.0f;
  }
  const lm_i64 chunks = vector ? k / kGemvVector : 0;
  const lm_i64 first_chunk = (lm_i64)wk * 32 + lane;
  lm_vec16 w[U][NPW];
  // The first step's weights are requested before the wait for the kernel ahead when nothing in
  // the graph writes them (`early_weights`, decided by the host): their latency overlaps its tail.
  if (vector && early_weights) lm_gemv_load_weights<NPW, WK, U>(w, column, first_chunk, chunks);
  lm_kernel_entry();
  if (vector) {
    for (lm_i64 c0 = first_chunk; c0 < chunks; c0 += 32LL * WK * U) {
      // Every step's weight vectors are requested before any is used (and, with few rows, a's too):
      // the loads of a step overlap instead of each waiting for the one before.
      constexpr int XU = M <= 2 ? U : 1;  // steps whose a vectors are loaded here
      lm_vec16 x_early[XU][M];
      if (!early_weights || c0 != first_chunk) lm_gemv_load_weights<NPW, WK, U>(w, column, c0, chunks);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const lm_i64 c = c0 + (lm_i64)u * 32 * WK;
        if (M <= 2 && c < chunks) {
#pragma unroll
          for (int m = 0; m < M; ++m) x_early[u % XU][m] = *(const lm_vec16*)(a + m * a_row + c * kGemvVector);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const lm_i64 c = c0 + (lm_i64)u * 32 * WK;
        if (c >= chunks) break;
        float wf[NPW][kGemvVector];
#pragma unroll
        for (int j = 0; j < NPW; ++j) lm_gemv_unpack(w[u][j], wf[j]);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float xf[kGemvVector];
          lm_gemv_unpack(M <= 2 ? x_early[u % XU][m] : *(const lm_vec16*)(a + m * a_row + c * kGemvVector), xf);
#pragma unroll
          for (int j = 0; j < NPW; ++j) {
#pragma unroll
            for (int e = 0; e < kGemvVector; ++e) acc[m][j] = fmaf(xf[e], wf[j][e], acc[m][j]);
          }
        }
      }
    }
  } else {
    for (lm_i64 i0 = (lm_i64)wk * 32 + lane; i0 < k; i0 += 32LL * WK * U) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const lm_i64 i = i0 + (lm_i64)u * 32 * WK;
        if (i >= k) break;
        float wv[NPW];
#pragma unroll
        for (int j = 0; j < NPW; ++j) wv[j] = lm_gemv_to_float(column[j][i * b_row]);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          const float x = lm_gemv_to_float(a[m * a_row + i * a_col]);
#pragma unroll
          for (int j = 0; j < NPW; ++j) acc[m][j] = fmaf(x, wv[j], acc[m][j]);
        }
      }
    }
  }
  // Every lane ends with the warp's sums.
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int j = 0; j < NPW; ++j) {
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) acc[m][j] += __shfl_xor_sync(0xffffffffu, acc[m][j], offset);
    }
  }
  // Lane l finishes value l (row l / NPW, output l % NPW).
  float total = 0.0f;
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int j = 0; j < NPW; ++j) {
      if (m * NPW + j == lane) total = acc[m][j];
    }
  }
  if (WK > 1) {
    __shared__ float partial[WK][WN][M * NPW];
    if (lane < M * NPW) partial[wk][wn][lane] = total;
    __syncthreads();
    if (wk != 0) return;
    if (lane < M * NPW) {
      total = partial[0][wn][lane];
#pragma unroll
      for (int w = 1; w < WK; ++w) total += partial[w][wn][lane];
    }
  }
  // Paired: the lane of b's value gets the lane's of b2 for the same row and output (every lane of
  // the warp takes part).
  const float paired = PAIR ? __shfl_down_sync(0xffffffffu, total, OUTS) : 0.0f;
  if (lane >= M * NPW || lane % NPW >= OUTS) return;
  const int m = lane / NPW;
  const lm_i64 output = first + lane % NPW;
  if (output >= n) return;
  if (PAIR) {
    out[m * n + output] = lm_gemv_from_float(lm_gemv_glu(lm_gemv_round(total), lm_gemv_round(paired)));
    return;
  }
  if (bias) {
    // cuBLASLt's epilogue: bias and activation in f32, one rounding.
    total += lm_gemv_to_float(bias[output]);
    if (activation == 1) total = total < 0.0f ? 0.0f : total;  // NaN stays NaN
    if (activation == 2) total = lm_gelu_tanh<float>(total);
  }
  out[m * n + output] = lm_gemv_from_float(total);
}

// One member of a grouped launch: its weights, output, output count, weights' column stride and
// blocks (0: absent).
struct lm_gemv_member {
  const lm_gemv_t* b;
  lm_gemv_t* out;
  lm_i64 n, b_col, blocks;
};

// A grouped launch (vector loads, no epilogue, one batch): block x of the grid is block x of the
// first member, then of the second past the first's blocks, and so on.
template <int NPW, int WK, int WN, int U, int G>
__device__ __forceinline__ void lm_gemv_group(const lm_gemv_t* a, lm_i64 k, lm_i64 a_row,
                                              lm_i64 early_weights, const lm_gemv_member (&members)[G]) {
  lm_i64 block = blockIdx.x;
#pragma unroll
  for (int i = 0; i < G; ++i) {
    if (block < members[i].blocks) {
      lm_gemv<NPW, WK, WN, U>(a, members[i].b, nullptr, nullptr, members[i].out, members[i].n, k, 0, a_row, 1, 0,
                              1, members[i].b_col, 0, 1, early_weights, block);
      return;
    }
    block -= members[i].blocks;
  }
}
