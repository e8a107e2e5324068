// Fused attention for a few queries (decode steps): one block of 128 threads per (batch, head,
// query). The tile kernels (attention.cuh, attention_mma.cuh) spend a block on 16 or 64 query rows
// and walk the keys one tile at a time: with one query per head, a decode step ran 32 blocks that
// mostly computed padding. Here the keys of a chunk are spread over the block's four warps, and
// every read of a key or value row is coalesced (lanes over the head):
//   1. scores: warp w scores keys w * 8 .. w * 8 + 7, then 32 further, ... of the chunk, eight keys
//      in flight (lanes multiply q, held in registers, with their part of each key row; shuffles
//      add the parts); lane u masks and stores key u's score in shared memory;
//   2. the chunk's max and its exp-sum, reduced over the block, update the running max m and sum l
//      (online softmax: the running output is rescaled by exp(m_old - m_new) when the max grows);
//   3. values: warp w adds p_j * v_j for keys w * 8 .. w * 8 + 7, then 32 further, ... of the chunk
//      (four at a time for wide heads), lanes over the value head, the rows read before the adds.
// At the end the four warps' partial outputs are added in a fixed order (deterministic) and
// divided by l; a query that attends to no key (all masked) is written as 0, as the tile kernels do.
// Semantics (causal top-left aligned, bool/float masks read by strides, broadcast dimensions with
// stride 0, grouped-query heads h / (H / Hk)) are those of attention.cuh.
// Filled in by codegen/attention.cpp: shapes, strides (elements, i64), types and the mask.
#define LM_CHUNK @DECODE_CHUNK@
#define LM_THREADS @THREADS@
#define LM_WARPS (LM_THREADS / 32)

__device__ __forceinline__ @T@ LM_KERNEL_in(const @IN_T@* __restrict__ base, lm_i64 offset) {
  return (@T@)@FROM_IN@(base[offset]);
}

// The block's max (op 0) or sum (op 1) of `value`, through `slots` (one per warp). Ends with every
// thread holding the result; the caller keeps `slots` untouched until the block has synchronized.
__device__ __forceinline__ @T@ LM_KERNEL_block_reduce(@T@ value, @T@* slots, int op) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const @T@ other = __shfl_xor_sync(0xffffffffu, value, o);
    value = op == 0 ? fmax(value, other) : value + other;
  }
  if (lane == 0) slots[warp] = value;
  __syncthreads();
  @T@ result = slots[0];
#pragma unroll
  for (int w = 1; w < LM_WARPS; ++w) result = op == 0 ? fmax(result, slots[w]) : result + slots[w];
  return result;
}

extern "C" __global__ void __launch_bounds__(LM_THREADS) LM_KERNEL(const LM_KERNEL_params p) {
  lm_kernel_entry();
  const lm_i64 lm_batch = @B@, lm_heads = @H@, lm_lq = @LQ@, lm_lk = @LK@, lm_kv_heads = @HK@;
  constexpr int LM_D = @D@, LM_DV = @DV@, LM_ACC = (LM_DV + 31) / 32;
  const lm_i64 lm_group = lm_heads / lm_kv_heads;
  const lm_i64 lm_rows = lm_batch * lm_heads * lm_lq;
  const @T@ lm_scale = (@T@)(@SCALE@);
  const @T@ lm_neg_inf = @NEG_INF@;
  // Keys scored and value rows read per warp before their results are used: memory latency, not
  // bandwidth, bounds a decode step's attention (a few blocks, each reading its head's cache).
  constexpr int LM_QD = (LM_D + 31) / 32, LM_KEYS_IN_FLIGHT = 8;
  constexpr int LM_VALUES_IN_FLIGHT = LM_ACC * sizeof(@T@) <= 8 ? 8 : 4;
  const int lm_warp = threadIdx.x >> 5, lm_lane = threadIdx.x & 31;
  __shared__ @T@ lm_p[LM_CHUNK];
  __shared__ @T@ lm_max_slots[LM_WARPS], lm_sum_slots[LM_WARPS];
  __shared__ @T@ lm_partial[LM_WARPS][LM_DV];
  for (lm_i64 lm_row = blockIdx.x; lm_row < lm_rows; lm_row += gridDim.x) {
    const lm_i64 lm_i = lm_row % lm_lq, lm_bh = lm_row / lm_lq;
    const lm_i64 lm_h = lm_bh % lm_heads, lm_b = lm_bh / lm_heads;
    const lm_i64 lm_g = lm_h / lm_group;  // grouped-query attention: the key/value head
    const @IN_T@* const lm_q = p.in0 + lm_b * (@Q_S0@) + lm_h * (@Q_S1@) + lm_i * (@Q_S2@);
    const @IN_T@* const lm_k = p.in1 + lm_b * (@K_S0@) + lm_g * (@K_S1@);
    const @IN_T@* const lm_v = p.in2 + lm_b * (@V_S0@) + lm_g * (@V_S1@);
    // Causal (top-left aligned): query i sees keys j <= i.
    const lm_i64 lm_key_end = (@CAUSAL@ && lm_i + 1 < lm_lk) ? lm_i + 1 : lm_lk;
    @T@ lm_qr[LM_QD];  // this lane's part of q: elements lane, lane + 32, ...
#pragma unroll
    for (int c = 0; c < LM_QD; ++c) {
      const int d = lm_lane + 32 * c;
      lm_qr[c] = d < LM_D ? LM_KERNEL_in(lm_q, (lm_i64)d * (@Q_S3@)) : (@T@)0;
    }
    __syncthreads();  // the previous row's readers are done with the shared arrays
    @T@ lm_m = lm_neg_inf, lm_l = 0, lm_acc[LM_ACC];
#pragma unroll
    for (int c = 0; c < LM_ACC; ++c) lm_acc[c] = 0;
    for (lm_i64 lm_k0 = 0; lm_k0 < lm_key_end; lm_k0 += LM_CHUNK) {
      const int lm_keys = (int)(lm_key_end - lm_k0 < LM_CHUNK ? lm_key_end - lm_k0 : LM_CHUNK);
      __syncthreads();  // the previous chunk's readers are done with lm_p and the slots
      @T@ lm_chunk_max = lm_neg_inf;
      for (int j0 = lm_warp * LM_KEYS_IN_FLIGHT; j0 < lm_keys; j0 += LM_WARPS * LM_KEYS_IN_FLIGHT) {
        // Lane u < LM_KEYS_IN_FLIGHT finishes key j0 + u: its mask is read first, with the keys.
        const int j = j0 + lm_lane;
        const bool lm_finishes = lm_lane < LM_KEYS_IN_FLIGHT && j < lm_keys;
        @T@ lm_bias = 0;     // a float mask's value
        bool lm_drop = false;  // a bool mask's false: the key is dropped whatever its score
#if @HAS_MASK@
        if (lm_finishes) {
          const lm_i64 lm_mask_at = lm_b * (@M_S0@) + lm_h * (@M_S1@) + lm_i * (@M_S2@) + (lm_k0 + j) * (@M_S3@);
#if @MASK_BOOL@
          lm_drop = p.in3[lm_mask_at] == 0;
#else
          lm_bias = (@T@)@FROM_MASK@(p.in3[lm_mask_at]);
#endif
        }
#endif
        @T@ lm_dot[LM_KEYS_IN_FLIGHT];
#pragma unroll
        for (int u = 0; u < LM_KEYS_IN_FLIGHT; ++u) {
          lm_dot[u] = 0;
          if (j0 + u >= lm_keys) continue;  // the same for the whole warp
          const @IN_T@* const lm_key_row = lm_k + (lm_k0 + j0 + u) * (@K_S2@);
#pragma unroll
          for (int c = 0; c < LM_QD; ++c) {
            const int d = lm_lane + 32 * c;
            if (d < LM_D) lm_dot[u] += lm_qr[c] * LM_KERNEL_in(lm_key_row, (lm_i64)d * (@K_S3@));
          }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
          for (int u = 0; u < LM_KEYS_IN_FLIGHT; ++u) lm_dot[u] += __shfl_xor_sync(0xffffffffu, lm_dot[u], o);
        }
        @T@ lm_mine = lm_dot[0];  // (every lane holds every sum: pick this lane's statically)
#pragma unroll
        for (int u = 1; u < LM_KEYS_IN_FLIGHT; ++u) lm_mine = lm_lane == u ? lm_dot[u] : lm_mine;
        if (lm_finishes) {
          const @T@ lm_s = lm_drop ? lm_neg_inf : lm_mine * lm_scale + lm_bias;
          lm_p[j] = lm_s;
          lm_chunk_max = fmax(lm_chunk_max, lm_s);
        }
      }
      const @T@ lm_m_new = fmax(lm_m, LM_KERNEL_block_reduce(lm_chunk_max, lm_max_slots, 0));
      if (lm_m_new == lm_neg_inf) continue;  // the same for the whole block: every key so far dropped
      const @T@ lm_correction = @EXP@(lm_m - lm_m_new);  // 0 while m was -inf
      @T@ lm_chunk_sum = 0;
      for (int j = threadIdx.x; j < lm_keys; j += LM_THREADS) {
        const @T@ lm_pj = @EXP@(lm_p[j] - lm_m_new);  // 0 for a dropped key
        lm_p[j] = lm_pj;
        lm_chunk_sum += lm_pj;
      }
      // (the reduction's __syncthreads also publishes every thread's lm_p)
      lm_l = lm_l * lm_correction + LM_KERNEL_block_reduce(lm_chunk_sum, lm_sum_slots, 1);
      lm_m = lm_m_new;
#pragma unroll
      for (int c = 0; c < LM_ACC; ++c) lm_acc[c] *= lm_correction;
      // LM_VALUES_IN_FLIGHT value rows per warp are read before any is used.
      for (int j0 = lm_warp * LM_VALUES_IN_FLIGHT; j0 < lm_keys; j0 += LM_WARPS * LM_VALUES_IN_FLIGHT) {
        @T@ lm_values[LM_VALUES_IN_FLIGHT][LM_ACC];
#pragma unroll
        for (int u = 0; u < LM_VALUES_IN_FLIGHT; ++u) {
          const @IN_T@* const lm_value_row = lm_v + (lm_k0 + j0 + u) * (@V_S2@);
#pragma unroll
          for (int c = 0; c < LM_ACC; ++c) {
            const int d = lm_lane + 32 * c;
            lm_values[u][c] = j0 + u < lm_keys && d < LM_DV ? LM_KERNEL_in(lm_value_row, (lm_i64)d * (@V_S3@)) : (@T@)0;
          }
        }
#pragma unroll
        for (int u = 0; u < LM_VALUES_IN_FLIGHT; ++u) {
          const @T@ lm_pj = j0 + u < lm_keys ? lm_p[j0 + u] : (@T@)0;
#pragma unroll
          for (int c = 0; c < LM_ACC; ++c) lm_acc[c] += lm_pj * lm_values[u][c];
        }
      }
    }
#pragma unroll
    for (int c = 0; c < LM_ACC; ++c) {
      const int d = lm_lane + 32 * c;
      if (d < LM_DV) lm_partial[lm_warp][d] = lm_acc[c];
    }
    __syncthreads();
    // A row that attends to no key is 0 (torch's fused kernels), never 0/0.
    const @T@ lm_inverse = lm_l > 0 ? (@T@)1 / lm_l : (@T@)0;
    @OUT_T@* const lm_out = p.out + lm_row * (lm_i64)LM_DV;
    for (int d = threadIdx.x; d < LM_DV; d += LM_THREADS) {
      @T@ lm_sum = lm_partial[0][d];
#pragma unroll
      for (int w = 1; w < LM_WARPS; ++w) lm_sum += lm_partial[w][d];
      lm_out[d] = LM_KERNEL_store(lm_sum * lm_inverse);
    }
  }
}
#undef LM_CHUNK
#undef LM_THREADS
#undef LM_WARPS
