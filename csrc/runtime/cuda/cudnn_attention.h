// Fused attention on cuDNN (cudnn_call.h): cuDNN's scaled-dot-product-attention forward operation
// (cuDNN 9.13 and later), O = softmax(scale * Q K^T) V, the flash kernels eager's SDPA runs on
// Hopper. Operands: {q, k, v}; output o. Only what that operation computes is given to it: no
// mask, not causal, f16/bf16; the caller runs the generated kernel for everything else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "runtime/cuda/cudnn_call.h"

namespace luminal::cuda {

// q [B, H, Lq, D], k [B, Hk, Lk, D], v [B, Hk, Lk, Dv] -> o [B, H, Lq, Dv], strides in elements;
// H a multiple of Hk (grouped-query attention). Accumulates in float32; P is rounded to `dtype`
// before P V, as flash kernels do.
struct AttentionProblem {
  DType dtype = DType::BF16;
  std::vector<int64_t> q_sizes, q_strides, k_sizes, k_strides, v_sizes, v_strides, o_sizes, o_strides;
  float scale = 1.0f;
  int alignment = 256;  // bytes every pointer is aligned to
};

// The problem in words, for messages and choice keys.
std::string describe(const AttentionProblem& problem);

// Why cuDNN's operation cannot take `problem` (its dtype, ranks, shapes, unit-stride head
// dimension), or nullopt when it may (cuDNN can still decline it at plan time).
std::optional<std::string> cudnn_attention_refusal(const AttentionProblem& problem);

class CudnnAttention : public CudnnCall {
 public:
  // As CudnnConvolution's: every acceptable engine (at most `max_candidates`), or `only_engine`.
  // Raises luminal::Error when cuDNN (or its version) is unavailable or no engine takes the problem.
  CudnnAttention(const AttentionProblem& problem, size_t max_candidates,
                 std::optional<int64_t> only_engine = std::nullopt);
};

}  // namespace luminal::cuda
