#include "runtime/cuda/cudnn_steps.h"

#include <algorithm>

#include "common/checked.h"
#include "common/error.h"
#include "passes/passes.h"
#include "runtime/cuda/cudnn_attention.h"
#include "runtime/cuda/cudnn_conv.h"

namespace luminal::runtime::gpu {

using ir::Node;
using ir::NodeId;
using schedule::StepKind;

namespace {

// Where an operand's memory is: a view read by strides lives in its base's.
Placement memory_placement(const CudnnStepContext& c, NodeId id) {
  const Placement where = c.buffers.placement[id];
  if (where != Placement::VirtualView) return where;
  return c.buffers.placement[passes::as_affine_view(c.graph, id)->base];
}

// Graph inputs and constants have their addresses now; arena memory will be 256-byte aligned, and
// its offsets (in `memory` until the arena is allocated) are known.
int planned_alignment(const CudnnStepContext& c, const std::vector<NodeId>& operands) {
  int alignment = static_cast<int>(kArenaAlignment);
  for (const NodeId id : operands) alignment = std::min(alignment, cuda::pointer_alignment(c.memory[id].ptr));
  return alignment;
}

// Sets the stride of every unit dimension to what a tensor packed in `order` (stored dim k is
// logical dim order[k]) has there; other strides stay.
void unit_strides_in_order(const std::vector<int64_t>& sizes, std::vector<int64_t>& strides,
                           const std::vector<int>& order) {
  int64_t packed = 1;
  for (size_t k = order.size(); k-- > 0;) {
    const int d = order[k];
    if (sizes[d] == 1) strides[d] = packed;
    packed *= std::max<int64_t>(sizes[d], 1);
  }
}

std::optional<cuda::ConvolutionProblem> convolution_problem(const CudnnStepContext& c, const Node& node,
                                                            std::string& why_not) {
  const ir::Convolution& conv = *node.convolution;
  const NodeId x = node.inputs[0], w = node.inputs[1];
  for (const NodeId id : {x, w, node.id}) {
    const Placement where = c.buffers.placement[id];
    if (where != Placement::Input && where != Placement::Constant && where != Placement::Arena) {
      why_not = str_cat("not for cuDNN: %", id, " is not in memory of a fixed address");
      return std::nullopt;
    }
  }
  const Buffer &bx = c.memory[x], &bw = c.memory[w], &by = c.memory[node.id];
  cuda::ConvolutionProblem p;
  // cuDNN takes the logical [N, C, spatial...] sizes with the strides of the stored order (a
  // channels-last x or output stored as [N, spatial..., C] by passes::assign_layouts).
  p.x_sizes = ir::logical_order(bx.sizes, conv.x_order), p.x_strides = ir::logical_order(bx.strides, conv.x_order);
  p.w_sizes = ir::logical_order(bw.sizes, conv.w_order), p.w_strides = ir::logical_order(bw.strides, conv.w_order);
  p.y_sizes = ir::logical_order(by.sizes, conv.y_order), p.y_strides = ir::logical_order(by.strides, conv.y_order);
  if (!conv.x_order.empty()) {
    // The stride of a unit dimension addresses nothing: give it the value a tensor packed in x's
    // order has, so that cuDNN sees a depthwise weight [K, 1, R, S] as packed channels-last too.
    unit_strides_in_order(p.x_sizes, p.x_strides, conv.x_order);
    unit_strides_in_order(p.w_sizes, p.w_strides, conv.x_order);
    unit_strides_in_order(p.y_sizes, p.y_strides, conv.x_order);
  }
  const int64_t groups = conv.groups;
  // Logical sizes: a channels-last weight copy is stored [K, R, S, C].
  if (p.x_sizes[1] != p.w_sizes[1] * groups || p.w_sizes[0] % groups != 0 || p.y_sizes[1] != p.w_sizes[0]) {
    why_not = str_cat("not for cuDNN: ", p.x_sizes[1], " input channels and ", p.y_sizes[1],
                      " output channels do not match a weight of ", int_list(p.w_sizes), " in ", groups, " groups");
    return std::nullopt;
  }
  p.dtype = c.graph.node(x).dtype;
  LUMINAL_CHECK(node.dtype == p.dtype, "internal error: the convolution %", node.id, " ", node.origin, " stores ",
                dtype_name(node.dtype), " from ", dtype_name(p.dtype), " operands");
  p.stride = conv.stride, p.padding = conv.padding, p.dilation = conv.dilation;
  if (conv.stride.size() == 1) {  // cuDNN's convolutions are 2-D or 3-D: a unit height above the width
    const auto add_height = [](std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {
      strides.insert(strides.begin() + 2, strides[2] * std::max<int64_t>(sizes[2], 1));
      sizes.insert(sizes.begin() + 2, 1);
    };
    add_height(p.x_sizes, p.x_strides), add_height(p.w_sizes, p.w_strides), add_height(p.y_sizes, p.y_strides);
    p.stride.insert(p.stride.begin(), 1), p.padding.insert(p.padding.begin(), 0);
    p.dilation.insert(p.dilation.begin(), 1);
  }
  p.alignment = static_cast<int>(kArenaAlignment);
  for (const NodeId id : {x, w}) {
    if (c.buffers.placement[id] != Placement::Arena) {
      p.alignment = std::min(p.alignment, cuda::pointer_alignment(c.memory[id].ptr));
    }
  }
  p.allow_tf32 = c.allow_tf32_convolution;
  return p;
}

// cuDNN's fused attention takes q, k, v in memory of a fixed address (the arena, constants, views
// of them) and writes the node's arena buffer; no mask, not causal (its operation has neither).
std::optional<cuda::AttentionProblem> attention_problem(const CudnnStepContext& c, const Node& node,
                                                        std::string& why_not) {
  if (node.inputs.size() != 3 || node.attention_causal) {
    why_not = str_cat("not for cuDNN: ", node.attention_causal ? "causal" : "masked",
                      " (cuDNN's fused attention operation takes neither)");
    return std::nullopt;
  }
  for (const NodeId id : {node.inputs[0], node.inputs[1], node.inputs[2], node.id}) {
    const Placement where = memory_placement(c, id);
    const bool fixed = where == Placement::Constant || where == Placement::Arena;
    if (!fixed || (id == node.id && c.buffers.placement[id] != Placement::Arena)) {
      why_not = str_cat("not for cuDNN: %", id, " is not in memory of a fixed address");
      return std::nullopt;
    }
  }
  cuda::AttentionProblem p;
  p.dtype = c.graph.node(node.inputs[0]).dtype;
  const Buffer &q = c.memory[node.inputs[0]], &k = c.memory[node.inputs[1]], &v = c.memory[node.inputs[2]];
  const Buffer& o = c.memory[node.id];
  p.q_sizes = q.sizes, p.q_strides = q.strides, p.k_sizes = k.sizes, p.k_strides = k.strides;
  p.v_sizes = v.sizes, p.v_strides = v.strides, p.o_sizes = o.sizes, p.o_strides = o.strides;
  p.scale = static_cast<float>(node.attention_scale);  // as the generated kernel and eager's kernels use it
  p.alignment = planned_alignment(c, {node.inputs[0], node.inputs[1], node.inputs[2], node.id});
  if (const std::optional<std::string> refusal = cuda::cudnn_attention_refusal(p)) {
    why_not = str_cat("not for cuDNN: ", *refusal);
    return std::nullopt;
  }
  return p;
}

}  // namespace

std::optional<CudnnCandidate> cudnn_candidate(const CudnnStepContext& c, const schedule::Step& step,
                                              std::string& why_not) {
  const Node& node = c.graph.node(step.node);
  if (step.kind == StepKind::Convolution) {
    if (c.settings.convolution == CudnnChoice::Generated) {
      why_not = "LUMINAL_CONVOLUTION=generated";
      return std::nullopt;
    }
    const std::optional<cuda::ConvolutionProblem> problem = convolution_problem(c, node, why_not);
    if (!problem) return std::nullopt;
    const char* tf32 = problem->allow_tf32 ? ", TF32 allowed" : "";
    return CudnnCandidate{str_cat("convolution | ", cuda::describe(*problem), tf32),
                          c.settings.convolution == CudnnChoice::Measured,
                          [p = *problem](size_t candidates, std::optional<int64_t> only_engine) {
                            return std::make_unique<cuda::CudnnConvolution>(p, candidates, only_engine);
                          }};
  }
  if (step.kind == StepKind::Kernel && node.kind == ir::NodeKind::Attention) {
    if (c.settings.attention == CudnnChoice::Generated) {
      why_not = "LUMINAL_ATTENTION=generated";
      return std::nullopt;
    }
    const std::optional<cuda::AttentionProblem> problem = attention_problem(c, node, why_not);
    if (!problem) return std::nullopt;
    return CudnnCandidate{str_cat("fused attention | ", cuda::describe(*problem)),
                          c.settings.attention == CudnnChoice::Measured,
                          [p = *problem](size_t candidates, std::optional<int64_t> only_engine) {
                            return std::make_unique<cuda::CudnnAttention>(p, candidates, only_engine);
                          }};
  }
  return std::nullopt;
}

}  // namespace luminal::runtime::gpu
