// Reference fused attention for the CPU executor (ir::NodeKind::Attention; the semantics are in
// ir/graph.h): plain loops, scores and the softmax in float (double for f64 inputs).
#pragma once

#include <cstdint>
#include <vector>

#include "common/dtype.h"

namespace luminal::runtime::cpu {

// A strided rank-4 operand (element strides; 0 for a broadcast dimension).
struct AttentionOperand {
  const void* data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> sizes;    // 4
  std::vector<int64_t> strides;  // 4
};

// out [B, H, Lq, Dv] (contiguous, q's dtype) = attention(q, k, v, mask). `mask` may be null; its
// size-1 dimensions broadcast.
void attention(const AttentionOperand& q, const AttentionOperand& k, const AttentionOperand& v,
               const AttentionOperand* mask, double scale, bool causal, void* out);

}  // namespace luminal::runtime::cpu
