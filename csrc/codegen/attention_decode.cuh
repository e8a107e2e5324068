// Fused attention for a few queries (decode steps): one block of 128 threads per (batch, head,
// query). The tile kernels (attention.cuh, attention_mma.cuh) spend a block on 16 or 64 query rows
// and walk the keys one tile at a time: with one query per head, a decode step ran 32 blocks that
// mostly computed padding. Memory latency, not bandwidth, bounds this kernel (a few blocks, each
// reading its head's cache), so both paths below keep many loads in flight.
//
// The vector path (LM_VECTOR: codegen found that a key row and a value row are whole 16-byte
// vectors, LM_KEY_LANES and LM_VALUE_LANES of them, each a power of two up to 32; taken when the
// run-time addresses and strides allow 16-byte loads): the keys are walked in chunks of
// LM_VECTOR_KEYS, and for each chunk
//   1. every thread requests its LM_KEY_LOADS key vectors, its LM_VALUE_LOADS value vectors and
//      its keys' mask elements before using any (one memory round trip per chunk): consecutive
//      threads read consecutive 16 bytes of a row, so a warp reads whole rows;
//   2. each thread multiplies its piece of a key row with the same piece of q (held in registers);
//      shuffles over the row's LM_KEY_LANES threads add the pieces, and the row's first thread masks
//      the score and stores it in shared memory;
//   3. the chunk's max and exp-sum, reduced over the block, update the running max m and sum l
//      (online softmax: the running output is rescaled by exp(m_old - m_new) when the max grows);
//   4. each thread adds p_j * v_j for its value vectors into its LM_E output elements.
// At the end the threads that hold the same output elements add their sums: shuffles within a
// warp, then the warps in a fixed order through shared memory (deterministic).
//
// The scalar path (any head size, any strides): the keys of a chunk of LM_CHUNK are spread over
// the block's four warps, every read of a key or value row coalesced (lanes over the head):
//   1. scores: warp w scores keys w * 8 .. w * 8 + 7, then 32 further, ... of the chunk, eight keys
//      in flight (lanes multiply q, held in registers, with their part of each key row; shuffles
//      add the parts); lane u masks and stores key u's score in shared memory;
//   2. the chunk's max and its exp-sum update m and l as above;
//   3. values: warp w adds p_j * v_j for keys w * 8 .. w * 8 + 7, then 32 further, ... of the chunk
//      (four at a time for wide heads), lanes over the value head, the rows read before the adds;
// and the four warps' partial outputs are added in a fixed order at the end.
//
// Split keys (LM_SPLIT > 1, the vector path on sm_90+): a cluster of LM_SPLIT blocks shares a row,
// block c taking the c-th slice of its keys, so a decode step's 32 rows load their caches with 8x the
// SMs (one SM's loads in flight bound a block: a 256-key bf16 cache was ~6 us for one block). Each
// block ends by storing its slice's max, sum and unnormalized output into the shared memory of the
// cluster's first block (distributed shared memory: stores need no round trip, where that block
// reading the others' took one per value and a second cluster barrier); after one cluster barrier
// the first block stores the row: sum_c out_c * exp(m_c - m) / sum_c l_c * exp(m_c - m),
// m = max_c m_c, in the fixed order of c (deterministic). Each row begins with a relaxed arrive at
// a cluster barrier whose wait comes before the first remote store: every block of the cluster has
// started, and the first block has read the previous row's slices. Elsewhere (sm_80, the scalar
// path) a row's first block does the whole row and the others have nothing to do.
//
// Early keys (LM_EARLY_ROWS, the vector path): a decode step's kernel ahead of this one writes the
// step's new key and value rows into the caches this kernel reads (RoPE and the cache writes). The
// schedule proved (schedule::mark_early_attention_rows) that those writes go to rows named by the
// values of small i64 graph inputs (p.key_rows, p.value_rows: the caches' step counters) that
// nothing up to this kernel writes, and that no other kernel ahead of this one writes the caches
// (any of them may still be running when this kernel's blocks start: prelude's lm_kernel_entry).
// Each block therefore requests its first chunk of keys and values, and those row numbers, before
// it waits (griddepcontrol.wait), and after the wait requests again, from L2 (its L1 may hold the
// lines from before), only the vectors of those rows. The cache's loads then overlap the kernels
// ahead; q and the mask, which they may write, are read after the wait.
//
// Both divide by l at the end; a query that attends to no key (all masked) is written as 0, as the
// tile kernels do. Semantics (causal top-left aligned, bool/float masks read by strides, broadcast
// dimensions with stride 0, grouped-query heads h / (H / Hk)) are those of attention.cuh.
// Filled in by codegen/attention.cpp: shapes, strides (elements, i64), types and the mask.
#define LM_CHUNK @DECODE_CHUNK@
#define LM_THREADS @THREADS@
#define LM_WARPS (LM_THREADS / 32)
#define LM_D @D@
#define LM_DV @DV@
#define LM_VECTOR @DECODE_VECTOR@
#define LM_SCORES @DECODE_SCORES@  // scores staged in shared memory: the larger of the two chunks
#define LM_SPLIT @DECODE_SPLIT@    // blocks per row (a power of two up to 8)
#define LM_EARLY_ROWS (@EARLY_ROWS@ && LM_VECTOR)  // keys requested before the wait (see the top)
#define LM_KEY_ROWS @KEY_ROWS@      // elements of p.key_rows and p.value_rows (with LM_EARLY_ROWS)
#define LM_VALUE_ROWS @VALUE_ROWS@
#if LM_SPLIT > 1 && LM_VECTOR && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define LM_CLUSTERED 1
#else
#define LM_CLUSTERED 0
#endif

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

// Whether the block has waited for the kernels ahead of it (lm_kernel_entry) and, with LM_EARLY_ROWS,
// the rows they may still be writing, read before the wait (nothing up to this kernel writes them).
struct LM_KERNEL_entry {
  bool waited;
#if LM_EARLY_ROWS
  lm_i64 key_rows[LM_KEY_ROWS], value_rows[LM_VALUE_ROWS];
#endif
};

// What one row (batch, head, query) needs: its indices, operands and the keys it sees.
struct LM_KERNEL_row {
  lm_i64 b, h, i;
  const @IN_T@* q;
  const @IN_T@* k;
  const @IN_T@* v;
  lm_i64 key_end;
};

__device__ __forceinline__ LM_KERNEL_row LM_KERNEL_locate(const LM_KERNEL_params& p, lm_i64 row) {
  const lm_i64 lm_heads = @H@, lm_lq = @LQ@, lm_lk = @LK@, lm_kv_heads = @HK@;
  const lm_i64 lm_group = lm_heads / lm_kv_heads;
  LM_KERNEL_row r;
  r.i = row % lm_lq;
  const lm_i64 lm_bh = row / lm_lq;
  r.h = lm_bh % lm_heads;
  r.b = lm_bh / lm_heads;
  const lm_i64 lm_g = r.h / lm_group;  // grouped-query attention: the key/value head
  r.q = p.in0 + r.b * (@Q_S0@) + r.h * (@Q_S1@) + r.i * (@Q_S2@);
  r.k = p.in1 + r.b * (@K_S0@) + lm_g * (@K_S1@);
  r.v = p.in2 + r.b * (@V_S0@) + lm_g * (@V_S1@);
  // Causal (top-left aligned): query i sees keys j <= i.
  r.key_end = (@CAUSAL@ && r.i + 1 < lm_lk) ? r.i + 1 : lm_lk;
  return r;
}

// The block's shared arrays, used by one path at a time.
struct LM_KERNEL_shared {
  @T@ p[LM_SCORES];
  @T@ max_slots[LM_WARPS], sum_slots[LM_WARPS];
  @T@ partial[LM_WARPS][LM_DV];
#if LM_CLUSTERED
  // In the cluster's first block: each block's slice of the row (its unnormalized output, max, sum).
  @T@ parts_out[LM_SPLIT][LM_DV];
  @T@ parts_m[LM_SPLIT], parts_l[LM_SPLIT];
#endif
};

// A chunk's online-softmax step, after its scores are in s.p[0, keys) and this thread's largest is
// `chunk_max`: the scores become exp(score - m_new), the running max m and sum l are updated, and
// `correction` rescales the running output (0 while m was -inf). Returns false, changing nothing,
// when every key so far was dropped (the same for the whole block). The max's reduction publishes
// the scores, the sum's the probabilities.
__device__ __forceinline__ bool LM_KERNEL_softmax_chunk(LM_KERNEL_shared& s, int keys, @T@ chunk_max, @T@& m,
                                                        @T@& l, @T@& correction) {
  const @T@ m_new = fmax(m, LM_KERNEL_block_reduce(chunk_max, s.max_slots, 0));
  if (m_new == @NEG_INF@) return false;
  correction = @EXP@(m - m_new);
  @T@ sum = 0;
  for (int j = threadIdx.x; j < keys; j += LM_THREADS) {
    const @T@ pj = @EXP@(s.p[j] - m_new);  // 0 for a dropped key
    s.p[j] = pj;
    sum += pj;
  }
  l = l * correction + LM_KERNEL_block_reduce(sum, s.sum_slots, 1);
  m = m_new;
  return true;
}

// The row's output: the warps' partial sums added in a fixed order, divided by l.
__device__ __forceinline__ void LM_KERNEL_finish(const LM_KERNEL_params& p, lm_i64 row, LM_KERNEL_shared& s, @T@ l) {
  // A row that attends to no key is 0 (torch's fused kernels), never 0/0.
  const @T@ lm_inverse = l > 0 ? (@T@)1 / l : (@T@)0;
  @OUT_T@* const lm_out = p.out + row * (lm_i64)LM_DV;
  for (int d = threadIdx.x; d < LM_DV; d += LM_THREADS) {
    @T@ lm_sum = s.partial[0][d];
#pragma unroll
    for (int w = 1; w < LM_WARPS; ++w) lm_sum += s.partial[w][d];
    lm_out[d] = LM_KERNEL_store(lm_sum * lm_inverse);
  }
}

__device__ __forceinline__ void LM_KERNEL_scalar_row(const LM_KERNEL_params& p, lm_i64 lm_row, LM_KERNEL_shared& s) {
  constexpr int LM_ACC = (LM_DV + 31) / 32;
  const @T@ lm_scale = (@T@)(@SCALE@);
  const @T@ lm_neg_inf = @NEG_INF@;
  // Keys scored and value rows read per warp before their results are used.
  constexpr int LM_QD = (LM_D + 31) / 32, LM_KEYS_IN_FLIGHT = 8;
  constexpr int LM_VALUES_IN_FLIGHT = LM_ACC * sizeof(@T@) <= 8 ? 8 : 4;
  const int lm_warp = threadIdx.x >> 5, lm_lane = threadIdx.x & 31;
  const LM_KERNEL_row r = LM_KERNEL_locate(p, lm_row);
  const lm_i64 lm_b = r.b, lm_h = r.h, lm_i = r.i, lm_key_end = r.key_end;
  const @IN_T@* const lm_k = r.k;
  const @IN_T@* const lm_v = r.v;
  @T@ lm_qr[LM_QD];  // this lane's part of q: elements lane, lane + 32, ...
#pragma unroll
  for (int c = 0; c < LM_QD; ++c) {
    const int d = lm_lane + 32 * c;
    lm_qr[c] = d < LM_D ? LM_KERNEL_in(r.q, (lm_i64)d * (@Q_S3@)) : (@T@)0;
  }
  __syncthreads();  // the previous row's readers are done with the shared arrays
  @T@ lm_m = lm_neg_inf, lm_l = 0, lm_acc[LM_ACC];
#pragma unroll
  for (int c = 0; c < LM_ACC; ++c) lm_acc[c] = 0;
  for (lm_i64 lm_k0 = 0; lm_k0 < lm_key_end; lm_k0 += LM_CHUNK) {
    const int lm_keys = (int)(lm_key_end - lm_k0 < LM_CHUNK ? lm_key_end - lm_k0 : LM_CHUNK);
    __syncthreads();  // the previous chunk's readers are done with s.p and the slots
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
        s.p[j] = lm_s;
        lm_chunk_max = fmax(lm_chunk_max, lm_s);
      }
    }
    @T@ lm_correction;
    if (!LM_KERNEL_softmax_chunk(s, lm_keys, lm_chunk_max, lm_m, lm_l, lm_correction)) continue;
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
        const @T@ lm_pj = j0 + u < lm_keys ? s.p[j0 + u] : (@T@)0;
#pragma unroll
        for (int c = 0; c < LM_ACC; ++c) lm_acc[c] += lm_pj * lm_values[u][c];
      }
    }
  }
#pragma unroll
  for (int c = 0; c < LM_ACC; ++c) {
    const int d = lm_lane + 32 * c;
    if (d < LM_DV) s.partial[lm_warp][d] = lm_acc[c];
  }
  __syncthreads();
  LM_KERNEL_finish(p, lm_row, s, lm_l);
}

#if LM_VECTOR
#define LM_E (16 / (int)sizeof(@IN_T@))  // elements per 16-byte vector
#define LM_KEY_LANES (LM_D / LM_E)       // threads that read one key row
#define LM_VALUE_LANES (LM_DV / LM_E)    // threads that read one value row
#define LM_KEY_LOADS @DECODE_KEY_LOADS@  // key vectors each thread requests per chunk
#define LM_VECTOR_KEYS (LM_KEY_LOADS * LM_THREADS / LM_KEY_LANES)  // keys per chunk
#define LM_VALUE_LOADS (LM_VECTOR_KEYS * LM_VALUE_LANES / LM_THREADS)

// Whether this call's key and value rows can be read 16 bytes at a time: aligned bases, rows and
// heads, contiguous along the head. (Codegen checked what is static; this is the rest.)
__device__ __forceinline__ bool LM_KERNEL_vectorizable(const LM_KERNEL_params& p) {
  const bool aligned = (((unsigned long long)p.in1 | (unsigned long long)p.in2) & 15ull) == 0;
  const bool keys = (@K_S3@) == 1 && (@K_S0@) % LM_E == 0 && (@K_S1@) % LM_E == 0 && (@K_S2@) % LM_E == 0;
  const bool values = (@V_S3@) == 1 && (@V_S0@) % LM_E == 0 && (@V_S1@) % LM_E == 0 && (@V_S2@) % LM_E == 0;
  return aligned && keys && values;
}

#if LM_EARLY_ROWS
// A 16-byte load from L2, the point of coherence: this block's L1 may hold the line as it was before
// the wait.
__device__ __forceinline__ lm_vec16 LM_KERNEL_load_from_l2(const @IN_T@* at) {
  lm_vec16 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(at)
               : "memory");
  return v;
}

template <int N>
__device__ __forceinline__ bool LM_KERNEL_is_row(const lm_i64 (&rows)[N], lm_i64 key) {
  bool found = false;
#pragma unroll
  for (int m = 0; m < N; ++m) found = found || rows[m] == key;
  return found;
}
#endif

__device__ __forceinline__ void LM_KERNEL_unpack(const lm_vec16& v, @T@ (&f)[LM_E]) {
  const @IN_T@* const e = reinterpret_cast<const @IN_T@*>(&v);
#pragma unroll
  for (int x = 0; x < LM_E; ++x) f[x] = LM_KERNEL_in(e, x);
}

#if LM_CLUSTERED
__device__ __forceinline__ unsigned int LM_KERNEL_cluster_rank() {
  unsigned int rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

// Every thread of the cluster's blocks arrives, then waits for all: shared-memory writes before it
// (local or remote) are visible to the cluster after it.
__device__ __forceinline__ void LM_KERNEL_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The two halves of a cluster barrier that orders nothing: arrive early, wait when it matters.
__device__ __forceinline__ void LM_KERNEL_cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void LM_KERNEL_cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

// Stores `value` at `local` (an address in this block's shared memory) in the cluster's first block.
__device__ __forceinline__ void LM_KERNEL_store_in_first(@T@* local, @T@ value) {
  const unsigned int address = (unsigned int)__cvta_generic_to_shared(local);
  unsigned int remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(remote) : "r"(address));
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(value) : "memory");
}

// The row from its LM_SPLIT slices (see the top): each block stores its slice in the first block,
// which adds them in the order of the blocks and stores the row. The caller arrived at the cluster
// barrier this begins by waiting for (LM_KERNEL_cluster_arrive_relaxed at the row's start).
__device__ __forceinline__ void LM_KERNEL_combine_parts(const LM_KERNEL_params& p, lm_i64 row, LM_KERNEL_shared& s,
                                                        @T@ m, @T@ l) {
  const unsigned int lm_rank = LM_KERNEL_cluster_rank();
  LM_KERNEL_cluster_wait();  // every block has started; the first has read the previous row's slices
  for (int d = threadIdx.x; d < LM_DV; d += LM_THREADS) {
    @T@ lm_sum = s.partial[0][d];
#pragma unroll
    for (int w = 1; w < LM_WARPS; ++w) lm_sum += s.partial[w][d];
    LM_KERNEL_store_in_first(&s.parts_out[lm_rank][d], lm_sum);
  }
  if (threadIdx.x == 0) {
    LM_KERNEL_store_in_first(&s.parts_m[lm_rank], m);
    LM_KERNEL_store_in_first(&s.parts_l[lm_rank], l);
  }
  LM_KERNEL_cluster_sync();  // every slice is in the first block
  if (lm_rank != 0) return;
  @T@ lm_scale[LM_SPLIT], lm_max = @NEG_INF@, lm_total = 0;
#pragma unroll
  for (int c = 0; c < LM_SPLIT; ++c) lm_max = fmax(lm_max, s.parts_m[c]);
#pragma unroll
  for (int c = 0; c < LM_SPLIT; ++c) {
    // A slice that saw no key (max -inf) adds nothing, also when no slice saw one.
    lm_scale[c] = s.parts_m[c] == @NEG_INF@ ? (@T@)0 : @EXP@(s.parts_m[c] - lm_max);
    lm_total += s.parts_l[c] * lm_scale[c];
  }
  const @T@ lm_inverse = lm_total > 0 ? (@T@)1 / lm_total : (@T@)0;  // no key at all: 0, as LM_KERNEL_finish
  @OUT_T@* const lm_out = p.out + row * (lm_i64)LM_DV;
  for (int d = threadIdx.x; d < LM_DV; d += LM_THREADS) {
    @T@ lm_sum = 0;
#pragma unroll
    for (int c = 0; c < LM_SPLIT; ++c) lm_sum += s.parts_out[c][d] * lm_scale[c];
    lm_out[d] = LM_KERNEL_store(lm_sum * lm_inverse);
  }
}
#endif

__device__ __forceinline__ void LM_KERNEL_vector_row(const LM_KERNEL_params& p, lm_i64 lm_row, LM_KERNEL_shared& s,
                                                     int lm_part, int lm_parts, LM_KERNEL_entry& lm_entry) {
  static_assert(LM_KEY_LANES * LM_E == LM_D && 32 % LM_KEY_LANES == 0, "key rows of whole vectors, lanes dividing a warp");
  static_assert(LM_VALUE_LANES * LM_E == LM_DV && 32 % LM_VALUE_LANES == 0, "value rows likewise");
  static_assert(LM_VALUE_LOADS * LM_THREADS == LM_VECTOR_KEYS * LM_VALUE_LANES && LM_VECTOR_KEYS <= LM_SCORES,
                "a chunk's values are whole loads per thread; its scores fit the shared array");
  const @T@ lm_scale = (@T@)(@SCALE@);
  const @T@ lm_neg_inf = @NEG_INF@;
  const int lm_t = threadIdx.x, lm_warp = lm_t >> 5, lm_lane = lm_t & 31;
  // This thread's 16-byte piece of each key row (and of each value row) it reads: the same piece
  // of every row, so it holds the matching piece of q, and adds into the same output elements.
  const int lm_key_piece = lm_t % LM_KEY_LANES, lm_value_piece = lm_t % LM_VALUE_LANES;
#if LM_CLUSTERED
  if (lm_parts > 1) LM_KERNEL_cluster_arrive_relaxed();  // waited for in LM_KERNEL_combine_parts
#endif
  const LM_KERNEL_row r = LM_KERNEL_locate(p, lm_row);
  @T@ lm_qr[LM_E];  // read with the first chunk, after the wait
  @T@ lm_m = lm_neg_inf, lm_l = 0, lm_acc[LM_E];
#pragma unroll
  for (int x = 0; x < LM_E; ++x) lm_acc[x] = 0;
  // This block's slice of the keys: [lm_begin, lm_end).
  const lm_i64 lm_per_part = (r.key_end + lm_parts - 1) / lm_parts;
  const lm_i64 lm_begin = lm_part * lm_per_part;
  const lm_i64 lm_end = lm_begin + lm_per_part < r.key_end ? lm_begin + lm_per_part : r.key_end;
  for (lm_i64 lm_k0 = lm_begin; lm_k0 < lm_end; lm_k0 += LM_VECTOR_KEYS) {
    const int lm_keys = (int)(lm_end - lm_k0 < LM_VECTOR_KEYS ? lm_end - lm_k0 : LM_VECTOR_KEYS);
    // 1. Every key, value and mask element of the chunk is requested before any is used. Key load
    // u of thread t is key u * (LM_THREADS / LM_KEY_LANES) + t / LM_KEY_LANES; values likewise.
    lm_vec16 lm_key_vectors[LM_KEY_LOADS], lm_value_vectors[LM_VALUE_LOADS];
#pragma unroll
    for (int u = 0; u < LM_KEY_LOADS; ++u) {
      const int j = u * (LM_THREADS / LM_KEY_LANES) + lm_t / LM_KEY_LANES;
      lm_key_vectors[u] = lm_vec16{0u, 0u, 0u, 0u};
      if (j < lm_keys) lm_key_vectors[u] = *(const lm_vec16*)(r.k + (lm_k0 + j) * (@K_S2@) + lm_key_piece * LM_E);
    }
#pragma unroll
    for (int u = 0; u < LM_VALUE_LOADS; ++u) {
      const int j = u * (LM_THREADS / LM_VALUE_LANES) + lm_t / LM_VALUE_LANES;
      lm_value_vectors[u] = lm_vec16{0u, 0u, 0u, 0u};  // a key past the chunk adds 0 * 0, never NaN
      if (j < lm_keys) lm_value_vectors[u] = *(const lm_vec16*)(r.v + (lm_k0 + j) * (@V_S2@) + lm_value_piece * LM_E);
    }
#if LM_EARLY_ROWS
    if (!lm_entry.waited) {  // the loads above were requested before the wait (see the top)
      lm_kernel_entry();
      lm_entry.waited = true;
#pragma unroll
      for (int u = 0; u < LM_KEY_LOADS; ++u) {
        const int j = u * (LM_THREADS / LM_KEY_LANES) + lm_t / LM_KEY_LANES;
        if (j < lm_keys && LM_KERNEL_is_row(lm_entry.key_rows, lm_k0 + j)) {
          lm_key_vectors[u] = LM_KERNEL_load_from_l2(r.k + (lm_k0 + j) * (@K_S2@) + lm_key_piece * LM_E);
        }
      }
#pragma unroll
      for (int u = 0; u < LM_VALUE_LOADS; ++u) {
        const int j = u * (LM_THREADS / LM_VALUE_LANES) + lm_t / LM_VALUE_LANES;
        if (j < lm_keys && LM_KERNEL_is_row(lm_entry.value_rows, lm_k0 + j)) {
          lm_value_vectors[u] = LM_KERNEL_load_from_l2(r.v + (lm_k0 + j) * (@V_S2@) + lm_value_piece * LM_E);
        }
      }
    }
#endif
    if (lm_k0 == lm_begin) {
#pragma unroll
      for (int x = 0; x < LM_E; ++x) lm_qr[x] = LM_KERNEL_in(r.q, (lm_i64)(lm_key_piece * LM_E + x) * (@Q_S3@));
    }
    @T@ lm_bias[LM_KEY_LOADS];     // a float mask's value
    bool lm_drop[LM_KEY_LOADS];    // a bool mask's false: the key is dropped whatever its score
#pragma unroll
    for (int u = 0; u < LM_KEY_LOADS; ++u) {
      lm_bias[u] = 0;
      lm_drop[u] = false;
#if @HAS_MASK@
      const int j = u * (LM_THREADS / LM_KEY_LANES) + lm_t / LM_KEY_LANES;
      if (lm_key_piece == 0 && j < lm_keys) {
        const lm_i64 lm_mask_at = r.b * (@M_S0@) + r.h * (@M_S1@) + r.i * (@M_S2@) + (lm_k0 + j) * (@M_S3@);
#if @MASK_BOOL@
        lm_drop[u] = p.in3[lm_mask_at] == 0;
#else
        lm_bias[u] = (@T@)@FROM_MASK@(p.in3[lm_mask_at]);
#endif
      }
#endif
    }
    __syncthreads();  // the previous chunk's (and row's) readers are done with the shared arrays
    // 2. Scores: the row's first thread stores its key's.
    @T@ lm_chunk_max = lm_neg_inf;
#pragma unroll
    for (int u = 0; u < LM_KEY_LOADS; ++u) {
      @T@ lm_key[LM_E];
      LM_KERNEL_unpack(lm_key_vectors[u], lm_key);
      @T@ lm_dot = 0;
#pragma unroll
      for (int x = 0; x < LM_E; ++x) lm_dot += lm_qr[x] * lm_key[x];
#pragma unroll
      for (int o = LM_KEY_LANES / 2; o > 0; o >>= 1) lm_dot += __shfl_xor_sync(0xffffffffu, lm_dot, o);
      const int j = u * (LM_THREADS / LM_KEY_LANES) + lm_t / LM_KEY_LANES;
      if (lm_key_piece == 0 && j < lm_keys) {
        const @T@ lm_s = lm_drop[u] ? lm_neg_inf : lm_dot * lm_scale + lm_bias[u];
        s.p[j] = lm_s;
        lm_chunk_max = fmax(lm_chunk_max, lm_s);
      }
    }
    // 3. The online softmax (the max's reduction also publishes the scores).
    @T@ lm_correction;
    if (!LM_KERNEL_softmax_chunk(s, lm_keys, lm_chunk_max, lm_m, lm_l, lm_correction)) continue;
    // 4. Values.
#pragma unroll
    for (int x = 0; x < LM_E; ++x) lm_acc[x] *= lm_correction;
#pragma unroll
    for (int u = 0; u < LM_VALUE_LOADS; ++u) {
      const int j = u * (LM_THREADS / LM_VALUE_LANES) + lm_t / LM_VALUE_LANES;
      const @T@ lm_pj = j < lm_keys ? s.p[j] : (@T@)0;
      @T@ lm_value[LM_E];
      LM_KERNEL_unpack(lm_value_vectors[u], lm_value);
#pragma unroll
      for (int x = 0; x < LM_E; ++x) lm_acc[x] += lm_pj * lm_value[x];
    }
  }
#if LM_EARLY_ROWS
  if (!lm_entry.waited) {  // a slice without keys: the stores below come after the wait
    lm_kernel_entry();
    lm_entry.waited = true;
  }
#endif
  // The threads of a warp that hold the same output elements (lanes LM_VALUE_LANES apart) add
  // their sums; the warp's first LM_VALUE_LANES lanes store them for LM_KERNEL_finish.
#pragma unroll
  for (int o = 16; o >= LM_VALUE_LANES; o >>= 1) {
#pragma unroll
    for (int x = 0; x < LM_E; ++x) lm_acc[x] += __shfl_xor_sync(0xffffffffu, lm_acc[x], o);
  }
  if (lm_lane < LM_VALUE_LANES) {
#pragma unroll
    for (int x = 0; x < LM_E; ++x) s.partial[lm_warp][lm_value_piece * LM_E + x] = lm_acc[x];
  }
  __syncthreads();
#if LM_CLUSTERED
  if (lm_parts > 1) {
    LM_KERNEL_combine_parts(p, lm_row, s, lm_m, lm_l);
    return;
  }
#endif
  LM_KERNEL_finish(p, lm_row, s, lm_l);
}
#undef LM_E
#undef LM_KEY_LANES
#undef LM_VALUE_LANES
#undef LM_KEY_LOADS
#undef LM_VECTOR_KEYS
#undef LM_VALUE_LOADS
#endif

#if LM_CLUSTERED
#define LM_CLUSTER_DIMS __cluster_dims__(LM_SPLIT, 1, 1)
#else
#define LM_CLUSTER_DIMS
#endif

// LM_SPLIT consecutive blocks per row (the grid is a multiple of LM_SPLIT).
extern "C" __global__ void __launch_bounds__(LM_THREADS) LM_CLUSTER_DIMS LM_KERNEL(const LM_KERNEL_params p) {
  const lm_i64 lm_rows = (lm_i64)(@B@) * (@H@) * (@LQ@);
  __shared__ LM_KERNEL_shared lm_shared;
  const int lm_part = (int)(blockIdx.x % LM_SPLIT);
  LM_KERNEL_entry lm_entry;
  lm_entry.waited = true;
#if LM_VECTOR
  const bool lm_vector = LM_KERNEL_vectorizable(p);  // the same for every block (parameters only)
#if LM_EARLY_ROWS
  if (lm_vector) {  // the vector path waits after requesting its first keys
    lm_entry.waited = false;
#pragma unroll
    for (int m = 0; m < LM_KEY_ROWS; ++m) lm_entry.key_rows[m] = p.key_rows[m];
#pragma unroll
    for (int m = 0; m < LM_VALUE_ROWS; ++m) lm_entry.value_rows[m] = p.value_rows[m];
  }
#endif
#endif
  if (lm_entry.waited) lm_kernel_entry();
  for (lm_i64 lm_row = blockIdx.x / LM_SPLIT; lm_row < lm_rows; lm_row += gridDim.x / LM_SPLIT) {
#if LM_VECTOR
    if (lm_vector) {
      if (LM_CLUSTERED) {
        LM_KERNEL_vector_row(p, lm_row, lm_shared, lm_part, LM_SPLIT, lm_entry);
      } else if (lm_part == 0) {
        LM_KERNEL_vector_row(p, lm_row, lm_shared, 0, 1, lm_entry);
      }
      continue;
    }
#endif
    if (lm_part == 0) LM_KERNEL_scalar_row(p, lm_row, lm_shared);
  }
  if (!lm_entry.waited) lm_kernel_entry();  // a block without a row
}
#undef LM_CHUNK
#undef LM_THREADS
#undef LM_WARPS
#undef LM_D
#undef LM_DV
#undef LM_VECTOR
#undef LM_SCORES
#undef LM_SPLIT
#undef LM_EARLY_ROWS
#undef LM_KEY_ROWS
#undef LM_VALUE_ROWS
#undef LM_CLUSTERED
#undef LM_CLUSTER_DIMS
