// Reference matrix multiplication for the CPU executor.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace luminal::runtime::cpu {

// A strided [batch, rows, cols] matrix operand (batch stride may be 0 for broadcast).
struct MatrixView {
  const void* data = nullptr;
  int64_t batch_stride = 0, row_stride = 0, col_stride = 0;  // elements
};

// out[b, m, n] = sum_k a[b, m, k] * b[b, k, n]; out is contiguous [batch, m, n].
// f16/bf16 accumulate in f32 (as torch does on the CPU); f32 accumulates in f32, f64 in f64.
void gemm(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixView& a, const MatrixView& b, void* out);

}  // namespace luminal::runtime::cpu
