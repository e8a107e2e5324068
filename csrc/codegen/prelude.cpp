#include "codegen/cuda_codegen.h"

namespace luminal::embedded {
extern const char kScalarOpsHeader[];  // common/scalar_ops.h (cmake/embed_text.cmake)
}  // namespace luminal::embedded

namespace luminal::codegen {

const std::string& prelude() {
  // The scalar functions (common/scalar_ops.h, embedded at build time) come first: the device-only
  // part below uses their types and functions.
  static const std::string text = std::string("// luminal kernel prelude\n") + embedded::kScalarOpsHeader + R"(
// ---- device only ----
struct __align__(16) lm_vec16 { unsigned int x, y, z, w; };  // a 16-byte vector load
// 16-byte global -> shared copies, asynchronous on sm_80+ (cp.async; `valid` false writes zeros).
__device__ __forceinline__ void lm_copy16(void* shared, const void* global, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned long long address;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(address) : "l"(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((unsigned)address), "l"(global), "r"(valid ? 16 : 0));
#else
  lm_vec16 v = {0u, 0u, 0u, 0u};
  if (valid) v = *(const lm_vec16*)global;
  *(lm_vec16*)shared = v;
#endif
}
__device__ __forceinline__ void lm_copy16_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void lm_copy16_wait_all_but_last() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 1;\n" ::);
#endif
}
__device__ __forceinline__ void lm_copy16_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}

// Programmatic dependent launch (sm_90+). The CUDA graph links consecutive generated kernels with
// programmatic edges (runtime/cuda/instance.cpp), so a kernel's blocks may be resident before the
// kernel ahead of it has finished. Every kernel first lets its successor launch, then waits until
// its predecessors are complete and their writes visible (griddepcontrol.wait), and only then
// touches memory a predecessor may write. Launched any other way, both are no-ops.
// The successor launches once every block of this kernel has started (or ended), so its blocks
// take the places this kernel's blocks leave and request their first weights during its tail and
// during the small kernels between products, where they would otherwise wait for this kernel's
// wait to end. Kernels further ahead may therefore still be running when a kernel's blocks start;
// each completes only after its own wait, so once a kernel's wait returns, every kernel ahead of it
// is complete. Two kinds read before their wait what no kernel ahead can be writing: the GEMV its
// first weights (nothing in the graph writes them), and the decode attention its keys and values,
// requesting again after the wait the rows the schedule proved are the only ones written ahead of
// it (attention_decode.cuh). Node kernels request their small inputs into L2 before the wait
// (lm_prefetch_l2, below), which reads nothing into the kernel.
__device__ __forceinline__ void lm_wait_for_predecessors() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void lm_allow_successors() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// The first statement of every generated kernel.
__device__ __forceinline__ void lm_kernel_entry() {
  lm_allow_successors();
  lm_wait_for_predecessors();
}
// Requests the 128-byte lines of [p, p + bytes) into L2, spread over the grid's threads, unless
// there are more than max_bytes (large inputs stream with the kernel's own loads). Node
// kernels call it for their small inputs before lm_kernel_entry's wait, so that what an earlier
// step left in memory (a residual stream, a norm's weight, evicted by the products streamed since)
// is on its way while the kernel ahead finishes, instead of queueing after the wait behind the
// next product's early weights. It cannot read stale data: a prefetch returns nothing and fills no
// L1, and L2 is where every SM's stores go, so a line requested before the kernel ahead writes it
// holds that write when the loads after the wait read it.
__device__ __forceinline__ void lm_prefetch_l2(const void* p, lm_i64 bytes, lm_i64 max_bytes, unsigned int block,
                                               unsigned int grid) {
  if (bytes <= 0 || bytes > max_bytes) return;
  const unsigned long long first = (unsigned long long)p & ~127ull;
  const lm_i64 lines = (lm_i64)(((unsigned long long)p + (unsigned long long)bytes - first + 127ull) >> 7);
  for (lm_i64 line = (lm_i64)block * blockDim.x + threadIdx.x; line < lines; line += (lm_i64)grid * blockDim.x) {
#if defined(__CUDA_ARCH__)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(first + ((unsigned long long)line << 7)));
#endif
  }
}

__device__ __forceinline__ float lm_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short lm_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float lm_round_h(float f) { return lm_h2f(lm_f2h(f)); }
__device__ __forceinline__ float lm_round_bf(float f) { return lm_bf2f(lm_f2bf(f)); }

// error record: [code, value, bound, check label id or -1]; the first error wins.
__device__ __noinline__ void lm_report(lm_i64* error, lm_i64 code, lm_i64 value, lm_i64 bound, lm_i64 check) {
  if (atomicCAS((unsigned long long*)error, 0ull, (unsigned long long)code) == 0ull) {
    error[1] = value;
    error[2] = bound;
    error[3] = check;
  }
}
__device__ __forceinline__ lm_i64 lm_check(lm_i64 index, lm_i64 bound, bool live, lm_i64* error, bool& ok, lm_i64 check) {
  if (!live) return 0;
  if (index < 0 || index >= bound) { lm_report(error, 1, index, bound, check); ok = false; return 0; }
  return index;
}
// Integer division and modulo: the shared arithmetic; a zero divisor records error 2
// (DeviceError::DivisionByZero) with the dividend, and the host raises it after the launch.
__device__ __forceinline__ lm_i64 lm_floordiv(lm_i64 a, lm_i64 b, lm_i64* error) {
  return lm_floordiv_checked(a, b, [error](lm_i64 value) { lm_report(error, 2, value, 0, -1); });
}
__device__ __forceinline__ lm_i64 lm_mod(lm_i64 a, lm_i64 b, lm_i64* error) {
  return lm_mod_checked(a, b, [error](lm_i64 value) { lm_report(error, 2, value, 0, -1); });
}
// Scatter accumulation into 16- and 8-bit elements: a compare-and-swap loop on the aligned 32-bit
// word that holds the element (the other bytes are written back unchanged).
__device__ __forceinline__ void lm_atomic_update16(unsigned short* address, float value, bool bf16) {
  unsigned int* word = (unsigned int*)((lm_u64)address & ~(lm_u64)3);
  const unsigned int shift = ((lm_u64)address & 2) ? 16u : 0u;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned short current = (unsigned short)((assumed >> shift) & 0xffffu);
    const unsigned short next = bf16 ? lm_f2bf(lm_bf2f(current) + value) : lm_f2h(lm_h2f(current) + value);
    old = atomicCAS(word, assumed, (assumed & ~(0xffffu << shift)) | ((unsigned int)next << shift));
  } while (assumed != old);
}
__device__ __forceinline__ void lm_atomic_add_h(unsigned short* address, float value) { lm_atomic_update16(address, value, false); }
__device__ __forceinline__ void lm_atomic_add_bf(unsigned short* address, float value) { lm_atomic_update16(address, value, true); }
// (element + value) modulo 2^bits for an 8- or 16-bit integer element (bits: 8 or 16).
__device__ __forceinline__ void lm_atomic_add_narrow(void* address, unsigned int value, unsigned int bits) {
  unsigned int* word = (unsigned int*)((lm_u64)address & ~(lm_u64)3);
  const unsigned int shift = ((unsigned int)((lm_u64)address & 3)) * 8u;
  const unsigned int mask = ((1u << bits) - 1u) << shift;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned int next = (((assumed >> shift) + value) << shift) & mask;
    old = atomicCAS(word, assumed, (assumed & ~mask) | next);
  } while (assumed != old);
}
)";
  return text;
}

}  // namespace luminal::codegen
