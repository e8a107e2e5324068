// Forward convolution on cuDNN (cudnn_call.h): one operation graph per problem, every engine
// cuDNN's heuristics offer that keeps the numerics luminal promises, timed on the device.
// Operands: {x, w}; output y.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "runtime/cuda/cudnn_call.h"

namespace luminal::cuda {

// y = conv(x, w), cross-correlation, in cuDNN's NCHW terms (1-D problems are given as 2-D with a
// unit height by the caller). Strides are in elements. x, w and y share `dtype`; the sum is
// computed in float32 (float64 for float64) and rounded once into y, as eager and the generated
// kernel do (ir::Convolution).
struct ConvolutionProblem {
  DType dtype = DType::F32;
  std::vector<int64_t> x_sizes, x_strides, w_sizes, w_strides, y_sizes, y_strides;
  std::vector<int64_t> stride, padding, dilation;  // per spatial dim
  bool allow_tf32 = false;                         // float32: may cuDNN use TF32 tensor cores
  int alignment = 256;                             // bytes every pointer is aligned to
};

// The problem in words, for messages: shapes, strides, dtypes, parameters.
std::string describe(const ConvolutionProblem& problem);

class CudnnConvolution : public CudnnCall {
 public:
  // Builds the operation graph and finalizes an execution plan for every acceptable engine (at most
  // `max_candidates`; with `only_engine`, for that engine alone: a choice measured before). Raises
  // luminal::Error when cuDNN is unavailable or no engine takes the problem.
  CudnnConvolution(const ConvolutionProblem& problem, size_t max_candidates,
                   std::optional<int64_t> only_engine = std::nullopt);
};

}  // namespace luminal::cuda
