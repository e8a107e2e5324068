// The generated GEMV on the GPU (skipped without one): every configuration against a double
// reference for each dtype, row counts 1, 2, 7, 8, odd and vector-sized K and N, bias with each
// activation, k-contiguous (nn.Linear's transposed weight) and plain weights, misaligned views,
// a non-contiguous a and a batch; then the measured choice through cuda::Matmul, and (printed)
// the configurations' and cuBLASLt's times on the decode shapes of a Llama-3.2-1B.
#include <gtest/gtest.h>

#ifdef LUMINAL_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/half.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/gemv.h"
#include "runtime/cuda/timing.h"

using namespace luminal;

namespace {

class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) { LUMINAL_CU(cuda::driver().cuMemAlloc(&address_, std::max<size_t>(bytes, 16))); }
  ~DeviceMemory() {
    try {
      cuda::driver().cuMemFree(address_);
    } catch (const Error&) {
    }
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  CUdeviceptr address() const { return address_; }

 private:
  CUdeviceptr address_ = 0;
};

uint16_t to_bits(DType dtype, float value) {
  return dtype == DType::BF16 ? float_to_bf16_bits(value) : float_to_half_bits(value);
}

float from_bits(DType dtype, uint16_t bits) {
  return dtype == DType::BF16 ? bf16_bits_to_float(bits) : half_bits_to_float(bits);
}

// Values of `dtype` in host memory, as bytes, and as the floats they hold.
struct HostValues {
  std::vector<unsigned char> bytes;
  std::vector<float> values;
};

HostValues random_values(DType dtype, size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  HostValues host;
  host.bytes.resize(count * dtype_size(dtype));
  host.values.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const float v = uniform(rng);
    if (dtype == DType::F32) {
      host.values[i] = v;
      std::memcpy(host.bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t bits = to_bits(dtype, v);
      host.values[i] = from_bits(dtype, bits);
      std::memcpy(host.bytes.data() + 2 * i, &bits, 2);
    }
  }
  return host;
}

float read_value(DType dtype, const std::vector<unsigned char>& bytes, size_t i) {
  if (dtype == DType::F32) {
    float v = 0;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  uint16_t bits = 0;
  std::memcpy(&bits, bytes.data() + 2 * i, 2);
  return from_bits(dtype, bits);
}

enum class WeightLayout { KContiguous, Plain };

struct Problem {
  DType dtype = DType::BF16;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  WeightLayout layout = WeightLayout::KContiguous;
  bool a_transposed = false;   // a read with row stride 1 (a column-major view)
  int64_t offset = 0;          // elements the operands start past their allocation (misalignment)
  int activation = -1;         // -1 no bias; 0 bias; 1 bias + relu; 2 bias + gelu tanh
};

std::string describe(const Problem& p) {
  return str_cat(dtype_name(p.dtype), " [", p.batch, ", ", p.m, ", ", p.k, "] @ [", p.k, ", ", p.n, "] ",
                 p.layout == WeightLayout::KContiguous ? "k-contiguous" : "plain", " weight",
                 p.a_transposed ? ", transposed a" : "", ", offset ", p.offset, ", epilogue ", p.activation);
}

double activate(double v, int activation) {
  if (activation == 1) return v < 0 ? 0 : v;
  if (activation == 2) return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  return v;
}

// The device operands of a problem, their layouts, and the double reference.
struct DeviceProblem {
  cuda::MatmulShape shape;
  cuda::MatrixOperand a, b;
  cuda::MatmulEpilogue epilogue;
  std::unique_ptr<DeviceMemory> a_memory, b_memory, bias_memory, out_memory;
  std::vector<double> expected, magnitude;  // per output: the value and sum |a b| + |bias|
  size_t out_count = 0;
};

DeviceProblem prepare(const Problem& p, std::mt19937& rng) {
  DeviceProblem s;
  s.shape.dtype = p.dtype;
  s.shape.batch = p.batch;
  s.shape.m = p.m;
  s.shape.n = p.n;
  s.shape.k = p.k;
  const size_t element = dtype_size(p.dtype);
  const int64_t a_count = p.batch * p.m * p.k, b_count = p.batch * p.k * p.n;
  const HostValues a = random_values(p.dtype, static_cast<size_t>(a_count + p.offset), rng);
  const HostValues b = random_values(p.dtype, static_cast<size_t>(b_count + p.offset), rng);
  const HostValues bias = random_values(p.dtype, static_cast<size_t>(p.n), rng);
  s.a_memory = std::make_unique<DeviceMemory>(a.bytes.size());
  s.b_memory = std::make_unique<DeviceMemory>(b.bytes.size());
  s.bias_memory = std::make_unique<DeviceMemory>(bias.bytes.size());
  s.out_count = static_cast<size_t>(p.batch * p.m * p.n);
  s.out_memory = std::make_unique<DeviceMemory>(s.out_count * element);
  const cuda::DriverApi& api = cuda::driver();
  LUMINAL_CU(api.cuMemcpyHtoD(s.a_memory->address(), a.bytes.data(), a.bytes.size()));
  LUMINAL_CU(api.cuMemcpyHtoD(s.b_memory->address(), b.bytes.data(), b.bytes.size()));
  LUMINAL_CU(api.cuMemcpyHtoD(s.bias_memory->address(), bias.bytes.data(), bias.bytes.size()));
  s.a.data = reinterpret_cast<const void*>(s.a_memory->address() + p.offset * element);
  s.a.batch_stride = p.m * p.k;
  s.a.row_stride = p.a_transposed ? 1 : p.k;
  s.a.col_stride = p.a_transposed ? p.m : 1;
  s.b.data = reinterpret_cast<const void*>(s.b_memory->address() + p.offset * element);
  s.b.batch_stride = p.k * p.n;
  s.b.row_stride = p.layout == WeightLayout::KContiguous ? 1 : p.n;
  s.b.col_stride = p.layout == WeightLayout::KContiguous ? p.k : 1;
  if (p.activation >= 0) {
    s.epilogue.bias = reinterpret_cast<const void*>(s.bias_memory->address());
    s.epilogue.relu = p.activation == 1;
    s.epilogue.gelu_tanh = p.activation == 2;
  }
  s.expected.resize(s.out_count);
  s.magnitude.resize(s.out_count);
  for (int64_t e = 0; e < p.batch; ++e) {
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0, size = 0;
        for (int64_t q = 0; q < p.k; ++q) {
          const double x = a.values[p.offset + e * s.a.batch_stride + i * s.a.row_stride + q * s.a.col_stride];
          const double w = b.values[p.offset + e * s.b.batch_stride + q * s.b.row_stride + j * s.b.col_stride];
          sum += x * w;
          size += std::fabs(x * w);
        }
        if (p.activation >= 0) {
          sum += bias.values[j];
          size += std::fabs(bias.values[j]);
        }
        const size_t at = static_cast<size_t>((e * p.m + i) * p.n + j);
        s.expected[at] = activate(sum, p.activation);
        s.magnitude[at] = size;
      }
    }
  }
  return s;
}

// Fills the output with NaN, runs `run`, and compares with the reference: f32 accumulation error
// plus one rounding to the output type.
template <typename Run>
void expect_matches(const Problem& p, DeviceProblem& s, const std::string& what, const Run& run) {
  const cuda::DriverApi& api = cuda::driver();
  const size_t element = dtype_size(p.dtype);
  LUMINAL_CU(api.cuMemsetD8Async(s.out_memory->address(), 0xff, s.out_count * element, nullptr));
  run(reinterpret_cast<void*>(s.out_memory->address()));
  std::vector<unsigned char> out(s.out_count * element);
  LUMINAL_CU(api.cuMemcpyDtoHAsync(out.data(), s.out_memory->address(), out.size(), nullptr));
  LUMINAL_CU(api.cuStreamSynchronize(nullptr));
  const double rounding = p.dtype == DType::F32 ? 0x1p-23 : p.dtype == DType::F16 ? 0x1p-10 : 0x1p-7;
  int failures = 0;
  for (size_t i = 0; i < s.out_count && failures < 5; ++i) {
    const double actual = read_value(p.dtype, out, i);
    const double tolerance = rounding * std::fabs(s.expected[i]) + 1e-5 * s.magnitude[i] + 1e-6;
    if (!(std::fabs(actual - s.expected[i]) <= tolerance)) {
      ADD_FAILURE() << describe(p) << ", " << what << ": output " << i << " is " << actual << ", expected "
                    << s.expected[i];
      ++failures;
    }
  }
}

bool device_present() {
  if (!cuda::device_available()) return false;
  cuda::use_primary_context(0);
  return true;
}

}  // namespace

TEST(GemvDevice, EveryConfigurationMatchesTheReference) {
  if (!device_present()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(1234);
  std::vector<Problem> problems;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t m : {1, 2, 7, 8}) {
      for (auto [k, n] : {std::pair<int64_t, int64_t>{64, 40}, {67, 37}, {256, 1}, {1, 9}, {520, 130}}) {
        problems.push_back({dtype, 1, m, n, k, WeightLayout::KContiguous, false, 0, -1});
        problems.push_back({dtype, 1, m, n, k, WeightLayout::Plain, false, 0, (int)(m % 3)});
      }
      problems.push_back({dtype, 1, m, 48, 128, WeightLayout::KContiguous, false, 1, 0});  // misaligned
      problems.push_back({dtype, 1, m, 48, 128, WeightLayout::KContiguous, true, 0, 2});   // transposed a
      problems.push_back({dtype, 3, m, 24, 96, WeightLayout::KContiguous, false, 0, 1});   // batch
    }
  }
  size_t vectorized = 0;
  for (const Problem& p : problems) {
    DeviceProblem s = prepare(p, rng);
    const cuda::GeneratedGemv gemv(s.shape, s.a, s.b, s.epilogue);
    vectorized += gemv.vectorized() ? 1 : 0;
    for (size_t c = 0; c < gemv.configs().size(); ++c) {
      expect_matches(p, s, gemv.configs()[c].name(), [&](void* out) { gemv.run(c, out, nullptr); });
    }
  }
  EXPECT_GT(vectorized, problems.size() / 4) << "the vector loop ran too rarely to be tested";
}

TEST(GemvDevice, MeasuredChoiceRunsTheWinner) {
  if (!device_present()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(99);
  const Problem p{DType::BF16, 1, 1, 1024, 2048, WeightLayout::KContiguous, false, 0, 0};
  DeviceProblem s = prepare(p, rng);
  cuda::Matmul matmul(s.shape, s.a, s.b, s.epilogue, true);
  ASSERT_TRUE(matmul.has_generated());
  DeviceMemory workspace(matmul.workspace_bytes());
  size_t syncs = 0;
  void* out = reinterpret_cast<void*>(s.out_memory->address());
  // Timed cold, as instances time them: the L2 flush writes twice the device's L2 cache.
  const size_t flush_bytes = 2 * cuda::l2_cache_bytes(0);
  DeviceMemory scratch(flush_bytes);
  const cuda::L2Flush flush(scratch.address(), flush_bytes);
  matmul.select_fastest(out, reinterpret_cast<void*>(workspace.address()), nullptr, syncs, &flush);
  const std::string winner = matmul.chosen_algorithm();
  expect_matches(p, s, winner, [&](void* o) { matmul.run(o, reinterpret_cast<void*>(workspace.address()), nullptr); });
  // The stored name chooses the same candidate in another instance.
  cuda::Matmul again(s.shape, s.a, s.b, s.epilogue, true);
  ASSERT_TRUE(again.choose_algorithm(winner)) << winner;
  EXPECT_EQ(again.chosen(), matmul.chosen());
  EXPECT_EQ(again.chosen_is_generated(), winner.rfind("generated gemv ", 0) == 0);
  EXPECT_FALSE(again.choose_algorithm("generated gemv n9 k1 w1 u1"));
}

// Times (printed) of every configuration and of cuBLASLt's fastest on the decode matmuls of a
// Llama-3.2-1B (bf16, nn.Linear weights read transposed), with 1 and 8 rows; checks each result.
TEST(GemvDevice, LlamaDecodeShapes) {
  if (!device_present()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(7);
  const std::pair<int64_t, int64_t> shapes[] = {{2048, 2048}, {2048, 512}, {2048, 8192}, {8192, 2048}, {2048, 128256}};
  for (int64_t m : {1, 8}) {
    for (auto [k, n] : shapes) {
      const Problem p{DType::BF16, 1, m, n, k, WeightLayout::KContiguous, false, 0, -1};
      DeviceProblem s = prepare(p, rng);
      void* out = reinterpret_cast<void*>(s.out_memory->address());
      size_t syncs = 0;
      cuda::Matmul library(s.shape, s.a, s.b, s.epilogue, false);
      DeviceMemory workspace(library.workspace_bytes());
      void* ws = reinterpret_cast<void*>(workspace.address());
      const float library_ms = library.select_fastest(out, ws, nullptr, syncs, nullptr);
      const float library_tuned = cuda::time_on_stream(nullptr, 50, syncs, [&] { library.run(out, ws, nullptr); });
      const double bytes = static_cast<double>(k * n * 2);
      std::string line = str_cat("[", m, ", ", k, "] x [", k, ", ", n, "]: cuBLASLt ", library_tuned * 1000, " us (",
                                 bytes / library_tuned / 1e9, " TB/s; select ", library_ms * 1000, ")");
      const cuda::GeneratedGemv gemv(s.shape, s.a, s.b, s.epilogue);
      ASSERT_TRUE(gemv.vectorized());
      float best = 1e30f;
      for (size_t c = 0; c < gemv.configs().size(); ++c) {
        expect_matches(p, s, gemv.configs()[c].name(), [&](void* o) { gemv.run(c, o, nullptr); });
        const float ms = cuda::time_on_stream(nullptr, 50, syncs, [&] { gemv.run(c, out, nullptr); });
        best = std::min(best, ms);
        line += str_cat("; ", gemv.configs()[c].name(), " ", ms * 1000, " us");
      }
      std::printf("%s; best generated %.2f TB/s\n", line.c_str(), bytes / best / 1e9);
    }
  }
}

#endif
