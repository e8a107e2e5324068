// What luminal's cuDNN operations (convolution, fused attention) share: one operation graph on
// cuDNN's backend (graph) API, an execution plan for every engine cuDNN's heuristics offer that
// keeps the numerics luminal promises, timing them on the device, and running the chosen one.
//
// cuDNN is optional: without its headers at build time, or its library at run time, constructing
// an operation raises luminal::Error saying why, and the caller runs the generated kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/api.h"

namespace luminal::cuda {

// The loaded cuDNN's version (cudnnGetVersion); raises when cuDNN is unavailable.
std::string cudnn_version();

class CudnnCall {
 public:
  virtual ~CudnnCall();
  CudnnCall(const CudnnCall&) = delete;
  CudnnCall& operator=(const CudnnCall&) = delete;

  // The largest workspace any candidate needs.
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Times every candidate (a warm-up, then 3 runs) on `stream` and keeps the fastest. Returns its
  // time per run in milliseconds; adds the host waits it cost to `syncs`. `operands`: the device
  // pointers of the node's inputs, in the node's order; `out`: its output.
  float select_fastest(const std::vector<const void*>& operands, void* out, void* workspace, CUstream stream,
                       size_t& syncs);
  void run(const std::vector<const void*>& operands, void* out, void* workspace, CUstream stream) const;
  // "cuDNN engine 12" (the chosen candidate's global index).
  std::string chosen_name() const;
  int64_t chosen_engine() const;
  // The bytes every pointer must be aligned to (what the plans were made for).
  int alignment() const { return alignment_; }
  // The problem in words (shapes, strides, dtypes, parameters), for messages and choice keys.
  const std::string& description() const { return description_; }

  struct Plans;  // cuDNN's descriptors (defined where cuDNN's headers are: cudnn_backend.h)

 protected:
  CudnnCall(std::string description, int alignment);
  std::unique_ptr<Plans> plans_;
  size_t workspace_bytes_ = 0;

 private:
  std::string description_;
  int alignment_ = 256;
};

}  // namespace luminal::cuda
