// The generated GEMV / skinny GEMM (gemv.cuh): what cuBLASLt's matmuls with at most kGemvMaxRows
// rows are timed against (runtime/cuda/gemv.h runs it). Its configurations, their names in the
// choice cache ("generated gemv n1 k4 w1 u4"), and the module source per dtype and row count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace luminal::codegen {

constexpr int64_t kGemvMaxRows = 8;
// The most products one grouped launch runs (a layer's q, k, v: three).
constexpr int64_t kGemvMaxGroup = 4;

// One launch shape of the kernel: a warp computes `outputs_per_warp` outputs for every row,
// `split_k` warps share one output group's K, `warps_on_outputs` groups per block, `unroll` 16-byte
// weight vectors per output in flight per lane.
struct GemvConfig {
  int outputs_per_warp = 1;
  int split_k = 1;
  int warps_on_outputs = 4;
  int unroll = 4;

  int threads() const { return 32 * split_k * warps_on_outputs; }
  int outputs_per_block() const { return outputs_per_warp * warps_on_outputs; }
  // "n1 k4 w1 u4": how choices name it.
  std::string name() const;
  // The kernel's entry point in the module, and the grouped one's.
  std::string kernel_name() const;
  std::string group_kernel_name() const;
  // The paired entry point (a SwiGLU's gate and up products; pair_supported).
  std::string pair_kernel_name() const;
  bool operator==(const GemvConfig& other) const;
};

// The configurations that exist for `rows` rows (each lane finishes one value: rows x outputs per
// warp <= 32).
std::vector<GemvConfig> gemv_configs(int64_t rows);

// The configuration `name` names (GemvConfig::name()), if it is one of gemv_configs(rows).
std::optional<GemvConfig> parse_gemv_config(const std::string& name, int64_t rows);

// Whether `config` has a paired entry point for `rows` rows: its warps take twice the columns.
bool pair_supported(const GemvConfig& config, int64_t rows);

// Whether the kernel exists for this dtype and row count (f32, f16, bf16; 1..kGemvMaxRows rows).
bool gemv_supported(DType dtype, int64_t rows);

// The module with every configuration's entry points for `dtype` and `rows` (gemv_supported). The
// single product's take (a, b, bias, out, n, k, a batch/row/col strides, b batch/row/col strides,
// activation 0 none / 1 relu / 2 gelu tanh, vector 0/1, early_weights 0/1); the grouped one's take
// (a, k, a's row stride, early_weights, then per member of kGemvMaxGroup: b, out, n, b's column
// stride, blocks), for vector loads without epilogue; the paired one's (pair_supported) take (a,
// gate, up, out, n, k, a's row stride, the weights' column stride, early_weights) and store
// a SwiGLU's values (vector loads, one batch). Pointers and long longs.
std::string gemv_module_source(DType dtype, int64_t rows);

// Elements per 16-byte vector of `dtype`.
int64_t gemv_vector_width(DType dtype);

}  // namespace luminal::codegen
