// The generated GEMV's kernel text (codegen/gemv.cuh) run on the host, one thread per CUDA thread
// (fibers; warp shuffles and __syncthreads through a barrier of the block), against a double reference:
// every configuration, f32/f16/bf16, 1, 2, 7 and 8 rows, the vector loop and the strided loop
// (k-contiguous and plain weights, odd K and N, K of 0 and 1, misaligned operands, a transposed
// a), a batch, bias with each activation. Catches indexing, split-K and epilogue mistakes without
// a GPU; the kernel's speed and its compiled form are tested on the device (test_gemv_device.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <ucontext.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "codegen/gemv.h"
#include "common/half.h"
#include "common/scalar_ops.h"

namespace {

using luminal::scalar::lm_bf2f;
using luminal::scalar::lm_f2bf;
using luminal::scalar::lm_gelu_tanh;
using lm_i64 = long long;

// ---- host stand-ins for what the kernel text uses from CUDA and the prelude ----
struct ThreadIndex {
  unsigned x = 0, y = 0, z = 0;
};
thread_local ThreadIndex threadIdx, blockIdx;

// The threads of one emulated block are fibers on this thread (ucontext), run in turn: each runs
// until it waits at a barrier, and a round ends when every one has (deterministic, and far cheaper
// than a system thread per CUDA thread). The kernel's barriers are uniform across the block.
class EmulatedBlock {
 public:
  static constexpr size_t kStackBytes = 256 * 1024;

  // Runs body(t) for t in [0, threads) as the block's threads.
  void run(int threads, const std::function<void(int)>& body) {
    body_ = &body;
    fibers_.resize(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      Fiber& fiber = fibers_[static_cast<size_t>(t)];
      fiber.stack.resize(kStackBytes);
      fiber.done = false;
      getcontext(&fiber.context);
      fiber.context.uc_stack.ss_sp = fiber.stack.data();
      fiber.context.uc_stack.ss_size = fiber.stack.size();
      fiber.context.uc_link = &scheduler_;
      makecontext(&fiber.context, reinterpret_cast<void (*)()>(&EmulatedBlock::entry), 1, t);
    }
    for (bool running = true; running;) {
      running = false;
      for (int t = 0; t < threads; ++t) {
        if (fibers_[static_cast<size_t>(t)].done) continue;
        running = true;
        current_ = t;
        threadIdx.x = static_cast<unsigned>(t);
        swapcontext(&scheduler_, &fibers_[static_cast<size_t>(t)].context);
      }
    }
  }

  // The current thread waits until every thread of the block has arrived.
  static void wait() { swapcontext(&fibers_[static_cast<size_t>(current_)].context, &scheduler_); }

 private:
  struct Fiber {
    ucontext_t context{};
    std::vector<char> stack;
    bool done = false;
  };

  static void entry(int t) {
    (*body_)(t);
    fibers_[static_cast<size_t>(t)].done = true;  // then back to the scheduler (uc_link)
  }

  static inline std::vector<Fiber> fibers_;
  static inline ucontext_t scheduler_{};
  static inline int current_ = 0;
  static inline const std::function<void(int)>* body_ = nullptr;
};

float shuffle_slots[1024];

void __syncthreads() { EmulatedBlock::wait(); }

// Every thread of the block shuffles the same number of times (the kernel's reductions are
// uniform), so a block-wide exchange stands in for the warp's.
float __shfl_xor_sync(unsigned, float value, int offset) {
  const unsigned t = threadIdx.x;
  shuffle_slots[t] = value;
  EmulatedBlock::wait();
  const float other = shuffle_slots[(t & ~31u) | ((t & 31u) ^ static_cast<unsigned>(offset))];
  EmulatedBlock::wait();
  return other;
}

float __shfl_down_sync(unsigned, float value, int delta) {
  const unsigned t = threadIdx.x;
  shuffle_slots[t] = value;
  EmulatedBlock::wait();
  const unsigned lane = t & 31u, from = lane + static_cast<unsigned>(delta);
  const float other = from < 32 ? shuffle_slots[(t & ~31u) | from] : value;
  EmulatedBlock::wait();
  return other;
}

float __uint_as_float(unsigned bits) {
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

struct lm_vec16 {
  unsigned int x, y, z, w;
};
// Programmatic dependent launch has nothing to wait for here.
void lm_kernel_entry() {}
float lm_h2f(unsigned short h) { return luminal::half_bits_to_float(h); }
unsigned short lm_f2h(float f) { return luminal::float_to_half_bits(f); }

#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define LM_GEMV_HOST_TEST 1

// One instance of the kernel text per (dtype, rows), each in its namespace, with an adapter.
#define LM_GEMV_ADAPTER                                                                                        \
  struct Kernel {                                                                                              \
    using T = lm_gemv_t;                                                                                       \
    static constexpr int rows = LM_GEMV_M;                                                                     \
    static constexpr int dtype = LM_GEMV_DTYPE;                                                                \
    static float to_float(T v) { return lm_gemv_to_float(v); }                                                 \
    static T from_float(float v) { return lm_gemv_from_float(v); }                                             \
    template <int NPW, int WK, int WN, int U>                                                                  \
    static void thread(const T* a, const T* b, const T* bias, T* out, lm_i64 n, lm_i64 k, const lm_i64* s,     \
                       lm_i64 activation, lm_i64 vector, lm_i64 early_weights) {                               \
      lm_gemv<NPW, WK, WN, U>(a, b, nullptr, bias, out, n, k, s[0], s[1], s[2], s[3], s[4], s[5], activation, \
                              vector, early_weights, blockIdx.x);                                              \
    }                                                                                                          \
    template <int NPW, int WK, int WN, int U>                                                                  \
    static void pair_thread(const T* a, const T* gate, const T* up, T* out, lm_i64 n, lm_i64 k, lm_i64 a_row,  \
                            lm_i64 b_col, lm_i64 early_weights) {                                              \
      lm_gemv<2 * NPW, WK, WN, U, true>(a, gate, up, nullptr, out, n, k, 0, a_row, 1, 0, 1, b_col, 0, 1,      \
                                        early_weights, blockIdx.x);                                            \
    }                                                                                                          \
  };

namespace f32_rows1 {
#define LM_GEMV_M 1
#define LM_GEMV_DTYPE 0
#include "codegen/gemv.cuh"
LM_GEMV_ADAPTER
#undef LM_GEMV_M
#undef LM_GEMV_DTYPE
}  // namespace f32_rows1

namespace f32_rows8 {
#define LM_GEMV_M 8
#define LM_GEMV_DTYPE 0
#include "codegen/gemv.cuh"
LM_GEMV_ADAPTER
#undef LM_GEMV_M
#undef LM_GEMV_DTYPE
}  // namespace f32_rows8

namespace f16_rows7 {
#define LM_GEMV_M 7
#define LM_GEMV_DTYPE 1
#include "codegen/gemv.cuh"
LM_GEMV_ADAPTER
#undef LM_GEMV_M
#undef LM_GEMV_DTYPE
}  // namespace f16_rows7

namespace bf16_rows2 {
#define LM_GEMV_M 2
#define LM_GEMV_DTYPE 2
#include "codegen/gemv.cuh"
LM_GEMV_ADAPTER
#undef LM_GEMV_M
#undef LM_GEMV_DTYPE
}  // namespace bf16_rows2

namespace bf16_rows8 {
#define LM_GEMV_M 8
#define LM_GEMV_DTYPE 2
#include "codegen/gemv.cuh"
LM_GEMV_ADAPTER
#undef LM_GEMV_M
#undef LM_GEMV_DTYPE
}  // namespace bf16_rows8

#undef __device__
#undef __forceinline__
#undef __restrict__
#undef __shared__

struct Problem {
  int64_t batch = 1, n = 1, k = 1;
  bool plain = false;        // b stored [K, N] (n contiguous) instead of k-contiguous columns
  bool transposed_a = false;  // a read with row stride 1
  int64_t offset = 0;         // elements both operands start past a 16-byte boundary
  int activation = -1;        // -1 no bias; 0 bias; 1 bias + relu; 2 bias + gelu tanh
};

// The host's decision (runtime/cuda/gemv.cpp: gemv_vectorizable), restated for host pointers.
template <typename T>
bool vectorizable(const T* a, const T* b, int rows, const Problem& p, const lm_i64* s) {
  const auto aligned = [](const void* x) { return (reinterpret_cast<uintptr_t>(x) & 15u) == 0; };
  const auto keeps = [](lm_i64 stride, int64_t extent) { return extent <= 1 || (stride * sizeof(T)) % 16 == 0; };
  return p.k % (16 / static_cast<int64_t>(sizeof(T))) == 0 && s[2] == 1 && s[4] == 1 && aligned(a) && aligned(b) &&
         keeps(s[1], rows) && keeps(s[5], p.n) && keeps(s[0], p.batch) && keeps(s[3], p.batch);
}

// Runs configuration <NPW, WK, WN, U> of `K` on `p` (every block in turn, a thread per CUDA
// thread) and compares with a double reference. Returns how many tests used the vector loop.
template <typename K, int NPW, int WK, int WN, int U>
int check_configuration(const Problem& p, std::mt19937& rng) {
  using T = typename K::T;
  constexpr int M = K::rows;
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<T> a_store(static_cast<size_t>(p.batch * M * p.k + p.offset + 16));
  std::vector<T> b_store(static_cast<size_t>(p.batch * p.k * p.n + p.offset + 16));
  // The output with a guard band after it: a write past the end fails the test, not the heap.
  constexpr size_t kGuard = 64;
  std::vector<T> bias(static_cast<size_t>(p.n)), out(static_cast<size_t>(p.batch * M * p.n) + kGuard);
  for (T& v : a_store) v = K::from_float(uniform(rng));
  for (T& v : b_store) v = K::from_float(uniform(rng));
  for (T& v : bias) v = K::from_float(uniform(rng));
  for (T& v : out) v = K::from_float(NAN);
  const T* a = a_store.data() + p.offset;  // (vectors hold 16-byte aligned storage)
  const T* b = b_store.data() + p.offset;
  const lm_i64 s[6] = {M * p.k, p.transposed_a ? 1 : p.k, p.transposed_a ? M : 1,
                       p.k * p.n, p.plain ? p.n : 1, p.plain ? 1 : p.k};
  const bool vector = vectorizable(a, b, M, p, s);
  // The first weights loaded before the entry point's wait, or in the loop: both orders, by problem.
  const bool early_weights = p.n % 2 == 1;
  const int threads = 32 * WK * WN;
  const int64_t blocks = (p.n + NPW * WN - 1) / (NPW * WN);
  const T* bias_pointer = p.activation >= 0 ? bias.data() : nullptr;
  const lm_i64 activation = p.activation < 0 ? 0 : p.activation;
  EmulatedBlock block;
  for (int64_t y = 0; y < p.batch; ++y) {
    for (int64_t x = 0; x < blocks; ++x) {
      block.run(threads, [&](int t) {
        blockIdx.x = static_cast<unsigned>(x);
        blockIdx.y = static_cast<unsigned>(y);
        K::template thread<NPW, WK, WN, U>(a, b, bias_pointer, out.data(), p.n, p.k, s, activation, vector,
                                            early_weights);
      });
    }
  }
  for (size_t g = out.size() - kGuard; g < out.size(); ++g) {
    EXPECT_TRUE(std::isnan(K::to_float(out[g]))) << "written past the output (element " << g << ")";
  }
  const double rounding = K::dtype == 0 ? 0x1p-23 : K::dtype == 1 ? 0x1p-10 : 0x1p-7;
  int failures = 0;
  for (int64_t e = 0; e < p.batch; ++e) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < p.n && failures < 3; ++j) {
        double sum = 0, size = 0;
        for (int64_t q = 0; q < p.k; ++q) {
          const double product = static_cast<double>(K::to_float(a[e * s[0] + i * s[1] + q * s[2]])) *
                                 K::to_float(b[e * s[3] + q * s[4] + j * s[5]]);
          sum += product;
          size += std::fabs(product);
        }
        if (p.activation >= 0) {
          sum += K::to_float(bias[j]);
          size += std::fabs(K::to_float(bias[j]));
        }
        if (p.activation == 1) sum = sum < 0 ? 0 : sum;
        if (p.activation == 2) {
          sum = 0.5 * sum * (1 + std::tanh(0.7978845608028654 * (sum + 0.044715 * sum * sum * sum)));
        }
        const double actual = K::to_float(out[static_cast<size_t>((e * M + i) * p.n + j)]);
        const double tolerance = rounding * std::fabs(sum) + 1e-5 * size + 1e-6;
        if (!(std::fabs(actual - sum) <= tolerance)) {
          ADD_FAILURE() << "dtype " << K::dtype << ", " << M << " rows, configuration n" << NPW << " k" << WK << " w"
                        << WN << " u" << U << ", batch " << p.batch << " n " << p.n << " k " << p.k
                        << (p.plain ? " plain" : "") << (p.transposed_a ? " transposed a" : "") << " offset "
                        << p.offset << " activation " << p.activation << (vector ? " (vector loop)" : "")
                        << ": out[" << e << ", " << i << ", " << j << "] = " << actual << ", expected " << sum;
          ++failures;
        }
      }
    }
  }
  return vector ? 1 : 0;
}

template <typename K, int NPW, int WK, int WN, int U>
int check_problems(std::mt19937& rng) {
  const Problem problems[] = {
      {1, 9, 64, false, false, 0, -1}, {1, 5, 67, false, false, 0, 0},  {1, 9, 64, true, false, 0, 1},
      {1, 3, 1, false, false, 0, 2},   {1, 2, 0, false, false, 0, 0},   {1, 3, 520, false, false, 0, -1},
      {1, 6, 128, false, false, 1, 1}, {1, 6, 128, false, true, 0, 2},  {2, 5, 96, false, false, 0, 2},
  };
  int vectorized = 0;
  for (const Problem& p : problems) vectorized += check_configuration<K, NPW, WK, WN, U>(p, rng);
  return vectorized;
}

// The paired launch of configuration <NPW, WK, WN, U> (a SwiGLU's gate and up products, vector
// loads): out = round(round(silu(round(a @ gate))) * round(a @ up)) against a double reference of
// the products (a product's last bit may round either way: the tolerance allows for it).
template <typename K, int NPW, int WK, int WN, int U>
void run_pair(int64_t n, int64_t k, std::mt19937& rng) {
  using T = typename K::T;
  constexpr int M = K::rows;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<T> a(static_cast<size_t>(M * k)), gate(static_cast<size_t>(n * k)), up(gate.size());
  std::vector<T> out(static_cast<size_t>(M * n) + 64);
  for (T& v : a) v = K::from_float(uniform(rng));
  for (T& v : gate) v = K::from_float(uniform(rng));
  for (T& v : up) v = K::from_float(uniform(rng));
  for (T& v : out) v = K::from_float(NAN);
  const int threads = 32 * WK * WN;
  const int64_t blocks = (n + NPW * WN - 1) / (NPW * WN);
  EmulatedBlock block;
  for (int64_t x = 0; x < blocks; ++x) {
    block.run(threads, [&](int) {
      blockIdx.x = static_cast<unsigned>(x);
      blockIdx.y = 0;
      K::template pair_thread<NPW, WK, WN, U>(a.data(), gate.data(), up.data(), out.data(), n, k, k, k, n % 2);
    });
  }
  for (size_t g = static_cast<size_t>(M * n); g < out.size(); ++g) EXPECT_TRUE(std::isnan(K::to_float(out[g])));
  const double rounding = K::dtype == 0 ? 0x1p-23 : K::dtype == 1 ? 0x1p-10 : 0x1p-7;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double g = 0, u = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double x = K::to_float(a[static_cast<size_t>(i * k + q)]);
        g += x * K::to_float(gate[static_cast<size_t>(j * k + q)]);
        u += x * K::to_float(up[static_cast<size_t>(j * k + q)]);
      }
      const float gs = K::to_float(K::from_float(static_cast<float>(g)));
      const float us = K::to_float(K::from_float(static_cast<float>(u)));
      const float silu = K::to_float(K::from_float(gs / (1.0f + std::exp(-gs))));
      const double expected = K::to_float(K::from_float(silu * us));
      const double actual = K::to_float(out[static_cast<size_t>(i * n + j)]);
      const double tolerance = 4 * rounding * (std::fabs(u) * (std::fabs(g) + 1) + std::fabs(expected)) + 1e-5;
      EXPECT_NEAR(actual, expected, tolerance) << "paired n" << NPW << " k" << WK << " w" << WN << " u" << U << ", "
                                               << M << " rows, out[" << i << ", " << j << "]";
    }
  }
}

template <typename K, int NPW, int WK, int WN, int U>
void check_pair(int64_t n, int64_t k, std::mt19937& rng) {
  if constexpr (K::rows * 2 * NPW <= 32) run_pair<K, NPW, WK, WN, U>(n, k, rng);  // codegen::pair_supported
}

template <typename K>
void check_pairs() {
  std::mt19937 rng(K::rows * 10 + K::dtype + 1);
  for (const int64_t n : {9, 4}) {
    check_pair<K, 1, 1, 4, 4>(n, 64, rng);
    check_pair<K, 2, 1, 4, 4>(n, 128, rng);
    check_pair<K, 4, 1, 2, 2>(n, 64, rng);
    check_pair<K, 1, 4, 1, 4>(n, 256, rng);
    check_pair<K, 2, 4, 1, 2>(n, 64, rng);
    check_pair<K, 1, 8, 1, 2>(n, 512, rng);
    check_pair<K, 1, 1, 4, 8>(n, 512, rng);
    check_pair<K, 1, 4, 1, 8>(n, 1024, rng);
    check_pair<K, 1, 8, 1, 4>(n, 1024, rng);
  }
}

// Every configuration of codegen/gemv.cpp (the test checks the two lists agree).
template <typename K>
void check_every_configuration() {
  std::vector<std::string> emulated = {"n1 k1 w4 u4", "n2 k1 w4 u4", "n4 k1 w2 u2", "n1 k4 w1 u4", "n2 k4 w1 u2",
                                       "n1 k8 w1 u2", "n1 k1 w4 u8", "n1 k4 w1 u8", "n1 k8 w1 u4"};
  std::vector<std::string> generated;
  for (const luminal::codegen::GemvConfig& config : luminal::codegen::gemv_configs(K::rows)) {
    generated.push_back(config.name());
  }
  ASSERT_EQ(generated, emulated) << "update the emulated configurations";
  std::mt19937 rng(K::rows * 10 + K::dtype);
  int vectorized = check_problems<K, 1, 1, 4, 4>(rng);
  vectorized += check_problems<K, 2, 1, 4, 4>(rng);
  vectorized += check_problems<K, 4, 1, 2, 2>(rng);
  vectorized += check_problems<K, 1, 4, 1, 4>(rng);
  vectorized += check_problems<K, 2, 4, 1, 2>(rng);
  vectorized += check_problems<K, 1, 8, 1, 2>(rng);
  vectorized += check_problems<K, 1, 1, 4, 8>(rng);
  vectorized += check_problems<K, 1, 4, 1, 8>(rng);
  vectorized += check_problems<K, 1, 8, 1, 4>(rng);
  EXPECT_GE(vectorized, 9 * 4) << "the vector loop ran too rarely to be tested";
}

}  // namespace

TEST(GemvEmulated, F32OneRow) { check_every_configuration<f32_rows1::Kernel>(); }
TEST(GemvEmulated, F32EightRows) { check_every_configuration<f32_rows8::Kernel>(); }
TEST(GemvEmulated, F16SevenRows) { check_every_configuration<f16_rows7::Kernel>(); }
TEST(GemvEmulated, Bf16TwoRows) { check_every_configuration<bf16_rows2::Kernel>(); }
TEST(GemvEmulated, Bf16EightRows) { check_every_configuration<bf16_rows8::Kernel>(); }
TEST(GemvEmulated, PairedSwiGluProducts) {
  check_pairs<f16_rows7::Kernel>();
  check_pairs<bf16_rows2::Kernel>();
  check_pairs<bf16_rows8::Kernel>();
}
