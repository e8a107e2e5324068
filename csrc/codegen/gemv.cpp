#include "codegen/gemv.h"

#include <sstream>

#include "codegen/cuda_codegen.h"
#include "common/error.h"

namespace luminal::embedded {
extern const char kGemvTemplate[];  // codegen/gemv.cuh (cmake/embed_text.cmake)
}  // namespace luminal::embedded

namespace luminal::codegen {

namespace {

// What is timed against cuBLASLt: a warp per output (4 per block), two or four outputs per warp
// (a's vectors reused from registers: more rows), and split K over 4 or 8 warps (few outputs,
// long K: enough warps in flight to cover the memory latency). The last three request a lane's
// whole share of K at once where K is 2048 (one warp per output) or 8192 (4 or 8 warps): one
// memory round trip per block instead of two.
constexpr GemvConfig kGemvConfigs[] = {
    {1, 1, 4, 4}, {2, 1, 4, 4}, {4, 1, 2, 2}, {1, 4, 1, 4}, {2, 4, 1, 2},
    {1, 8, 1, 2}, {1, 1, 4, 8}, {1, 4, 1, 8}, {1, 8, 1, 4},
};

}  // namespace

std::string GemvConfig::name() const {
  return str_cat("n", outputs_per_warp, " k", split_k, " w", warps_on_outputs, " u", unroll);
}

std::string GemvConfig::kernel_name() const {
  return str_cat("lm_gemv_n", outputs_per_warp, "_k", split_k, "_w", warps_on_outputs, "_u", unroll);
}

bool GemvConfig::operator==(const GemvConfig& other) const {
  return outputs_per_warp == other.outputs_per_warp && split_k == other.split_k &&
         warps_on_outputs == other.warps_on_outputs && unroll == other.unroll;
}

std::vector<GemvConfig> gemv_configs(int64_t rows) {
  std::vector<GemvConfig> configs;
  for (const GemvConfig& config : kGemvConfigs) {
    if (rows * config.outputs_per_warp <= 32) configs.push_back(config);
  }
  return configs;
}

std::optional<GemvConfig> parse_gemv_config(const std::string& name, int64_t rows) {
  for (const GemvConfig& config : gemv_configs(rows)) {
    if (config.name() == name) return config;
  }
  return std::nullopt;
}

bool gemv_supported(DType dtype, int64_t rows) {
  return (dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16) && rows >= 1 && rows <= kGemvMaxRows;
}

int64_t gemv_vector_width(DType dtype) { return 16 / static_cast<int64_t>(dtype_size(dtype)); }

std::string GemvConfig::group_kernel_name() const {
  return str_cat("lm_gemv_group_n", outputs_per_warp, "_k", split_k, "_w", warps_on_outputs, "_u", unroll);
}

namespace {

// One configuration's entry point for a single product.
void write_single_entry(std::ostringstream& out, const GemvConfig& c) {
  out << "extern \"C\" __global__ void __launch_bounds__(" << c.threads() << ") " << c.kernel_name()
      << "(const lm_gemv_t* a, const lm_gemv_t* b, const lm_gemv_t* bias, lm_gemv_t* out, lm_i64 n, lm_i64 k,\n"
      << "    lm_i64 a_batch, lm_i64 a_row, lm_i64 a_col, lm_i64 b_batch, lm_i64 b_row, lm_i64 b_col,\n"
      << "    lm_i64 activation, lm_i64 vector, lm_i64 early_weights) {\n"
      << "  lm_gemv<" << c.outputs_per_warp << ", " << c.split_k << ", " << c.warps_on_outputs << ", " << c.unroll
      << ">(a, b, nullptr, bias, out, n, k, a_batch, a_row, a_col, b_batch, b_row, b_col, activation, vector, "
      << "early_weights, blockIdx.x);\n}\n";
}

// One configuration's grouped entry point: kGemvMaxGroup members (b, out, n, b's column stride,
// blocks), vector loads, no epilogue, one batch; a member with 0 blocks is absent.
void write_group_entry(std::ostringstream& out, const GemvConfig& c) {
  out << "extern \"C\" __global__ void __launch_bounds__(" << c.threads() << ") " << c.group_kernel_name()
      << "(const lm_gemv_t* a, lm_i64 k, lm_i64 a_row, lm_i64 early_weights";
  for (int64_t i = 0; i < kGemvMaxGroup; ++i) {
    out << ",\n    const lm_gemv_t* b" << i << ", lm_gemv_t* out" << i << ", lm_i64 n" << i << ", lm_i64 b_col" << i
        << ", lm_i64 blocks" << i;
  }
  out << ") {\n  const lm_gemv_member members[" << kGemvMaxGroup << "] = {";
  for (int64_t i = 0; i < kGemvMaxGroup; ++i) {
    out << (i ? ", " : "") << "{b" << i << ", out" << i << ", n" << i << ", b_col" << i << ", blocks" << i << "}";
  }
  out << "};\n  lm_gemv_group<" << c.outputs_per_warp << ", " << c.split_k << ", " << c.warps_on_outputs << ", "
      << c.unroll << ">(a, k, a_row, early_weights, members);\n}\n";
}

// One configuration's paired entry point (a SwiGLU's gate and up products, gemv.cuh's PAIR): a
// warp takes the configuration's outputs of both, so that a block covers as many outputs as alone.
void write_pair_entry(std::ostringstream& out, const GemvConfig& c) {
  out << "extern \"C\" __global__ void __launch_bounds__(" << c.threads() << ") " << c.pair_kernel_name()
      << "(const lm_gemv_t* a, const lm_gemv_t* gate, const lm_gemv_t* up, lm_gemv_t* out, lm_i64 n, lm_i64 k,\n"
      << "    lm_i64 a_row, lm_i64 b_col, lm_i64 early_weights) {\n"
      << "  lm_gemv<" << 2 * c.outputs_per_warp << ", " << c.split_k << ", " << c.warps_on_outputs << ", " << c.unroll
      << ", true>(a, gate, up, nullptr, out, n, k, 0, a_row, 1, 0, 1, b_col, 0, 1, early_weights, blockIdx.x);\n}\n";
}

}  // namespace

bool pair_supported(const GemvConfig& config, int64_t rows) { return rows * 2 * config.outputs_per_warp <= 32; }

std::string GemvConfig::pair_kernel_name() const {
  return str_cat("lm_gemv_pair_n", outputs_per_warp, "_k", split_k, "_w", warps_on_outputs, "_u", unroll);
}

std::string gemv_module_source(DType dtype, int64_t rows) {
  LUMINAL_CHECK(gemv_supported(dtype, rows), "internal error: no generated GEMV for ", dtype_name(dtype), " with ",
                rows, " rows");
  std::ostringstream entries;
  for (const GemvConfig& c : gemv_configs(rows)) {
    write_single_entry(entries, c);
    write_group_entry(entries, c);
    if (pair_supported(c, rows)) write_pair_entry(entries, c);
  }
  const int dtype_code = dtype == DType::F32 ? 0 : dtype == DType::F16 ? 1 : 2;
  return str_cat(prelude(), "\n#define LM_GEMV_M ", rows, "\n#define LM_GEMV_DTYPE ", dtype_code, "\n",
                 embedded::kGemvTemplate, "\n// The entry points, alone and grouped, per configuration.\n",
                 entries.str());
}

}  // namespace luminal::codegen
