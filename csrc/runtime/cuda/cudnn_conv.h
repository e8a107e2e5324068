// Forward convolution on cuDNN's backend (graph) API: one operation graph per problem, every
// engine cuDNN's heuristics offer that keeps the numerics luminal promises, timed on the device.
//
// cuDNN is optional: without its headers at build time, or its library at run time, constructing
// a CudnnConvolution raises luminal::Error saying why, and the caller runs the generated kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "runtime/cuda/api.h"

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

// The loaded cuDNN's version (cudnnGetVersion); raises when cuDNN is unavailable.
std::string cudnn_version();

class CudnnConvolution {
 public:
  // Builds the operation graph and finalizes an execution plan for every acceptable engine (at most
  // `max_candidates`; with `only_engine`, for that engine alone: a choice measured before). Raises
  // luminal::Error when cuDNN is unavailable or no engine takes the problem.
  CudnnConvolution(const ConvolutionProblem& problem, size_t max_candidates,
                   std::optional<int64_t> only_engine = std::nullopt);
  ~CudnnConvolution();
  CudnnConvolution(const CudnnConvolution&) = delete;
  CudnnConvolution& operator=(const CudnnConvolution&) = delete;

  // The largest workspace any candidate needs.
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Times every candidate (a warm-up, then 3 runs) on `stream` and keeps the fastest. Returns its
  // time per run in milliseconds; adds the host waits it cost to `syncs`.
  float select_fastest(const void* x, const void* w, void* y, void* workspace, CUstream stream, size_t& syncs);
  void run(const void* x, const void* w, void* y, void* workspace, CUstream stream) const;
  // "cuDNN engine 12" (the chosen candidate's global index).
  std::string chosen_name() const;
  int64_t chosen_engine() const;
  const ConvolutionProblem& problem() const { return problem_; }

  struct Plans;  // cuDNN's descriptors (defined where cuDNN's headers are)

 private:
  std::unique_ptr<Plans> plans_;
  ConvolutionProblem problem_;
  size_t workspace_bytes_ = 0;
};

}  // namespace luminal::cuda
