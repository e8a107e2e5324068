// The generated GEMV (codegen/gemv.h, runtime/cuda/gemv.h): its configurations and their names in
// the choice cache, LUMINAL_GEMV, when the vector loop may run, and that every module compiles with
// NVRTC (no GPU needed). Its results against eager are tested on the GPU (tests/test_gemv.py).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "codegen/gemv.h"
#include "common/config.h"
#include "common/error.h"
#include "config_helpers.h"
#ifdef LUMINAL_HAVE_CUDA
#include "nvrtc_helpers.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/gemv.h"
#include "runtime/cuda/standalone_kernel.h"
#endif

using namespace luminal;

using luminal::test::read;

TEST(Gemv, ConfigurationNamesRoundTrip) {
  for (int64_t rows = 1; rows <= codegen::kGemvMaxRows; ++rows) {
    const std::vector<codegen::GemvConfig> configs = codegen::gemv_configs(rows);
    ASSERT_GE(configs.size(), 4u) << rows;
    for (const codegen::GemvConfig& config : configs) {
      EXPECT_LE(rows * config.outputs_per_warp, 32);
      const std::optional<codegen::GemvConfig> parsed = codegen::parse_gemv_config(config.name(), rows);
      ASSERT_TRUE(parsed.has_value()) << config.name();
      EXPECT_TRUE(*parsed == config);
    }
  }
  EXPECT_EQ(codegen::gemv_configs(1).front().name(), "n1 k1 w4 u4");
  EXPECT_FALSE(codegen::parse_gemv_config("n3 k1 w4 u4", 1).has_value());
  EXPECT_FALSE(codegen::parse_gemv_config("", 1).has_value());
  EXPECT_FALSE(codegen::parse_gemv_config("n1 k1 w4 u4 ", 1).has_value());
}

TEST(Gemv, SupportedDtypesAndRows) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    EXPECT_TRUE(codegen::gemv_supported(dtype, 1));
    EXPECT_TRUE(codegen::gemv_supported(dtype, 8));
    EXPECT_FALSE(codegen::gemv_supported(dtype, 9));
    EXPECT_FALSE(codegen::gemv_supported(dtype, 0));
  }
  EXPECT_FALSE(codegen::gemv_supported(DType::F64, 1));
  EXPECT_FALSE(codegen::gemv_supported(DType::I64, 1));
  EXPECT_THROW(codegen::gemv_module_source(DType::F64, 1), Error);
  EXPECT_EQ(codegen::gemv_vector_width(DType::BF16), 8);
  EXPECT_EQ(codegen::gemv_vector_width(DType::F32), 4);
}

TEST(Gemv, EnvironmentSwitch) {
  EXPECT_EQ(read({}).gemv, GemvChoice::Measured);
  EXPECT_EQ(read({{"LUMINAL_GEMV", "auto"}}).gemv, GemvChoice::Measured);
  EXPECT_EQ(read({{"LUMINAL_GEMV", "cublaslt"}}).gemv, GemvChoice::Library);
  const Config by_rule = read({{"LUMINAL_GEMV", "generated"}});
  EXPECT_EQ(by_rule.gemv, GemvChoice::Generated);
  EXPECT_EQ(by_rule.gemv_config, "");
  const Config named = read({{"LUMINAL_GEMV", "generated:n1 k4 w1 u4"}});
  EXPECT_EQ(named.gemv, GemvChoice::Generated);
  EXPECT_EQ(named.gemv_config, "n1 k4 w1 u4");
}

TEST(Gemv, ModuleNamesEveryConfiguration) {
  const std::string source = codegen::gemv_module_source(DType::BF16, 2);
  EXPECT_NE(source.find("#define LM_GEMV_M 2\n#define LM_GEMV_DTYPE 2\n"), std::string::npos);
  EXPECT_NE(codegen::gemv_module_source(DType::F16, 7).find("#define LM_GEMV_M 7\n#define LM_GEMV_DTYPE 1\n"),
            std::string::npos);
  for (const codegen::GemvConfig& config : codegen::gemv_configs(2)) {
    EXPECT_NE(source.find(config.kernel_name() + "("), std::string::npos) << config.name();
    EXPECT_NE(source.find(config.group_kernel_name() + "("), std::string::npos) << config.name();
    EXPECT_EQ(source.find(config.pair_kernel_name() + "(") != std::string::npos, codegen::pair_supported(config, 2))
        << config.name();
  }
  const std::string eight = codegen::gemv_module_source(DType::BF16, 8);  // 8 rows x 2 x 4 outputs: no pair
  EXPECT_EQ(eight.find(codegen::GemvConfig{4, 1, 2, 2}.pair_kernel_name() + "("), std::string::npos);
  EXPECT_NE(eight.find(codegen::GemvConfig{2, 1, 4, 4}.pair_kernel_name() + "("), std::string::npos);
}

#ifdef LUMINAL_HAVE_CUDA

TEST(Gemv, VectorLoopOnlyForAlignedKContiguousOperands) {
  const auto at = [](uintptr_t address) { return reinterpret_cast<const void*>(address); };
  cuda::MatmulShape shape;
  shape.dtype = DType::BF16;
  shape.m = 2;
  shape.n = 24;
  shape.k = 64;
  // x [2, 64] row-major; the weight an nn.Linear [24, 64] read transposed (k contiguous).
  cuda::MatrixOperand a{at(256), 0, 64, 1}, b{at(512), 0, 1, 64};
  EXPECT_TRUE(cuda::gemv_vectorizable(shape, a, b));
  cuda::MatrixOperand misaligned = b;
  misaligned.data = at(514);
  EXPECT_FALSE(cuda::gemv_vectorizable(shape, a, misaligned));
  cuda::MatrixOperand odd_rows = a;
  odd_rows.row_stride = 66 + 1;  // rows 134 bytes apart
  EXPECT_FALSE(cuda::gemv_vectorizable(shape, odd_rows, b));
  cuda::MatrixOperand plain{at(512), 0, 24, 1};  // a [64, 24] weight: n contiguous
  EXPECT_FALSE(cuda::gemv_vectorizable(shape, a, plain));
  cuda::MatmulShape odd_k = shape;
  odd_k.k = 63;
  EXPECT_FALSE(cuda::gemv_vectorizable(odd_k, a, b));
  cuda::MatmulShape one_row = shape;
  one_row.m = 1;
  EXPECT_TRUE(cuda::gemv_vectorizable(one_row, odd_rows, b));  // a's row stride is never taken

  EXPECT_TRUE(cuda::generated_gemv_applies(shape));
  cuda::MatmulShape tall = shape;
  tall.m = 9;
  EXPECT_FALSE(cuda::generated_gemv_applies(tall));
  cuda::MatmulShape f64 = shape;
  f64.dtype = DType::F64;
  EXPECT_FALSE(cuda::generated_gemv_applies(f64));
}

// Which products may share a grouped launch: one a, vector loads, no epilogue, outputs apart.
TEST(Gemv, GroupedLaunchOnlyForProductsOfOneActivation) {
  const auto at = [](uintptr_t address) { return reinterpret_cast<void*>(address); };
  cuda::MatmulShape shape;
  shape.dtype = DType::BF16;
  shape.m = 1;
  shape.n = 24;
  shape.k = 64;
  const cuda::MatrixOperand x{at(256), 0, 64, 1}, w1{at(4096), 0, 1, 64}, w2{at(8192), 0, 1, 64};
  const cuda::GeneratedGemv q(shape, x, w1, {}), k(shape, x, w2, {});
  const cuda::GemvGroupMember first{&q, 0, at(1024)};
  EXPECT_TRUE(cuda::gemv_groupable({first}, {&k, 2, at(1024 + 48)}));       // right after q's 24 outputs
  EXPECT_FALSE(cuda::gemv_groupable({first}, {&k, 0, at(1024 + 46)}));      // over q's last output
  EXPECT_FALSE(cuda::gemv_groupable({first}, {&k, 0, at(256 + 126)}));      // over a's last element
  // Every member's output counts, not only the first's.
  const cuda::GemvGroupMember second{&k, 0, at(2048)};
  EXPECT_TRUE(cuda::gemv_groupable({first, second}, {&k, 0, at(2048 + 48)}));
  EXPECT_FALSE(cuda::gemv_groupable({first, second}, {&k, 0, at(2048 + 40)}));
  const cuda::GeneratedGemv other_a(shape, {at(512), 0, 64, 1}, w2, {});
  EXPECT_FALSE(cuda::gemv_groupable({first}, {&other_a, 0, at(2048)}));
  cuda::MatmulShape longer = shape;
  longer.k = 72;
  const cuda::GeneratedGemv other_k(longer, {at(256), 0, 72, 1}, {at(8192), 0, 1, 72}, {});
  EXPECT_FALSE(cuda::gemv_groupable({first}, {&other_k, 0, at(2048)}));
  cuda::MatmulEpilogue bias;
  bias.bias = at(12288);
  const cuda::GeneratedGemv biased(shape, x, w2, bias);
  EXPECT_FALSE(cuda::gemv_groupable({first}, {&biased, 0, at(2048)}));
  const cuda::GeneratedGemv strided(shape, x, {at(8194), 0, 1, 64}, {});  // misaligned: no vector loads
  EXPECT_FALSE(cuda::gemv_groupable({first}, {&strided, 0, at(2048)}));
}

// Under programmatic dependent launch the kernel ahead may still be writing a (the activations)
// while this kernel's blocks run, until their griddepcontrol.wait. A non-coherent load
// (ld.global.nc) tells the compiler the memory does not change while the kernel runs, so it may
// be scheduled anywhere, before the wait too: a read of the old activations. Only the weights,
// which nothing in the graph writes, are read that way (and past L1).
TEST(Gemv, OnlyTheWeightsAreReadAsUnchangingMemory) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (int64_t rows : {int64_t{1}, int64_t{8}}) {
      const std::string ptx = luminal::testing::compile_for_sm90(codegen::gemv_module_source(dtype, rows)).ptx;
      size_t weights = 0, others = 0;
      std::string first_other;
      for (size_t at = ptx.find("ld.global.nc"); at != std::string::npos; at = ptx.find("ld.global.nc", at + 1)) {
        const std::string line = ptx.substr(at, ptx.find('\n', at) - at);
        const bool weight = line.find("L1::no_allocate") != std::string::npos;
        if (!weight && others++ == 0) first_other = line;
        weights += weight;
      }
      EXPECT_GT(weights, 0u) << dtype_name(dtype) << " rows " << rows;
      EXPECT_EQ(others, 0u) << dtype_name(dtype) << " rows " << rows << ", the first: " << first_other;
      EXPECT_NE(ptx.find("griddepcontrol.wait"), std::string::npos);
    }
  }
}

// Every configuration's entry point, for each dtype and a few row counts, on sm_80 and sm_90.
TEST(Gemv, ModulesCompileWithNvrtc) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{8}}) {
      const std::string source = codegen::gemv_module_source(dtype, rows);
      for (const char* arch : {"sm_80", "sm_90"}) {
        for (const codegen::GemvConfig& config : codegen::gemv_configs(rows)) {
          try {
            EXPECT_GT(cuda::StandaloneKernel::check_compiles(source, config.kernel_name(), arch), 0u);
            EXPECT_GT(cuda::StandaloneKernel::check_compiles(source, config.group_kernel_name(), arch), 0u);
            if (codegen::pair_supported(config, rows)) {
              EXPECT_GT(cuda::StandaloneKernel::check_compiles(source, config.pair_kernel_name(), arch), 0u);
            }
          } catch (const Error& error) {
            ADD_FAILURE() << dtype_name(dtype) << " rows " << rows << " " << arch << ": " << error.what();
            return;
          }
        }
      }
    }
  }
}

#endif
