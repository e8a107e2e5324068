// cuDNN's terms for the steps of a plan it may compute: a convolution (cudnn_conv.h) or a fused
// attention (cudnn_attention.h), from the instance's buffers. What cuDNN cannot be given (operands
// without a fixed address, shapes or options its operation lacks) says why, and runs generated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"
#include "ir/graph.h"
#include "runtime/cuda/cudnn_call.h"
#include "runtime/cuda/instance.h"
#include "runtime/memory_plan.h"
#include "schedule/plan.h"

namespace luminal::runtime::gpu {

// What a step's cuDNN problem is read from.
struct CudnnStepContext {
  const ir::Graph& graph;
  const BufferPlan& buffers;          // placements
  const std::vector<Buffer>& memory;  // per node: address (arena nodes: offset until allocated), sizes, strides
  bool allow_tf32_convolution = false;
  const Config& settings;
};

// A step cuDNN may compute: the problem in words (for choice keys), whether the generated kernel
// is timed against cuDNN's engines, and how to plan it (at most `candidates` engines, or one).
struct CudnnCandidate {
  std::string problem;
  bool against_generated = true;
  std::function<std::unique_ptr<cuda::CudnnCall>(size_t candidates, std::optional<int64_t> only_engine)> make;
};

// The step's cuDNN candidate; nullopt with `why_not` set when cuDNN cannot be given it, with
// `why_not` empty when cuDNN computes no such step.
std::optional<CudnnCandidate> cudnn_candidate(const CudnnStepContext& context, const schedule::Step& step,
                                              std::string& why_not);

}  // namespace luminal::runtime::gpu
