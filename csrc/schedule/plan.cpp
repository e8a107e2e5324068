#include "schedule/plan.h"

#include <algorithm>

#include "common/error.h"
#include "passes/passes.h"
#include "passes/stage_library_operands.h"

namespace luminal::schedule {

using ir::Node;
using ir::NodeId;
using ir::NodeKind;

namespace {

// A pointwise node that is no output, read only by matmuls and attention, and an affine view of
// its input: they read the base by strides, so the node is never materialized.
bool is_view_read_by_matmuls(const ir::Graph& graph, const Node& node, const std::vector<std::vector<NodeId>>& users,
                             const std::vector<bool>& is_output) {
  if (node.kind != NodeKind::Pointwise || is_output[node.id] || users[node.id].empty()) return false;
  const bool only_matmul_users = std::all_of(users[node.id].begin(), users[node.id].end(),
                                             [&](NodeId u) {
                                               const NodeKind kind = graph.node(u).kind;
                                               return kind == NodeKind::MatMul || kind == NodeKind::Attention;
                                             });
  return only_matmul_users && passes::as_affine_view(graph, node.id).has_value();
}

// Memory whose address the caller chooses on every call.
bool is_per_call_memory(const ir::Graph& graph, NodeId id, const std::vector<bool>& is_output) {
  const Node& node = graph.node(id);
  return (node.kind == NodeKind::Input && node.role == ir::InputRole::User) || is_output[id];
}

}  // namespace

Plan plan_steps(const ir::Graph& graph, bool stable_library_operands) {
  Plan plan;
  const auto users = graph.users();
  std::vector<bool> is_output(graph.size(), false);
  for (const ir::GraphOutput& o : graph.outputs) {
    if (o.kind == ir::GraphOutput::Kind::Tensor) is_output[o.node] = true;
  }
  for (const Node& node : graph.nodes()) {
    switch (node.kind) {
      case NodeKind::Input:
      case NodeKind::Constant: break;
      case NodeKind::MatMul: plan.steps.push_back(Step{StepKind::LibraryMatmul, node.id}); break;
      case NodeKind::Scatter: plan.steps.push_back(Step{StepKind::Scatter, node.id}); break;
      case NodeKind::Attention: plan.steps.push_back(Step{StepKind::Kernel, node.id}); break;
      case NodeKind::Pointwise:
      case NodeKind::Reduce:
        if (is_view_read_by_matmuls(graph, node, users, is_output) &&
            !(stable_library_operands && is_per_call_memory(graph, passes::affine_view_base(graph, node.id), is_output))) {
          plan.views.push_back(node.id);
        } else {
          plan.steps.push_back(Step{node.convolution ? StepKind::Convolution : StepKind::Kernel, node.id});
        }
        break;
    }
  }
  return plan;
}

Plan plan_row_kernel_steps(const ir::Graph& graph, ir::Expr rows) {
  LUMINAL_CHECK(rows != nullptr, "internal error: a row kernel without a batch extent");
  NodeId first_output = -1;
  for (const ir::GraphOutput& o : graph.outputs) {
    if (o.kind == ir::GraphOutput::Kind::Tensor && first_output < 0) first_output = o.node;
  }
  LUMINAL_CHECK(first_output >= 0, "internal error: a row kernel without tensor outputs");
  Plan plan;
  // The step is named after an output: its size tells whether there is any row to compute.
  plan.steps.push_back(Step(StepKind::RowKernel, first_output, choose_row_schedule()));
  plan.rows = std::move(rows);
  return plan;
}

std::vector<OperandInfo> kernel_operands(const ir::Graph& graph, const Node& node) {
  std::vector<OperandInfo> operands;
  for (NodeId input : node.inputs) {
    const Node& producer = graph.node(input);
    OperandInfo info;
    info.dtype = producer.dtype;
    info.shape = producer.shape;
    if (node.kind == NodeKind::Attention) {
      // Attention reads every operand by run-time strides: views (a transposed q/k/v, a broadcast
      // mask) are read in place.
      info.layout = Layout::Strided;
    } else if (producer.kind == NodeKind::Input) {
      info.layout = Layout::Strided;
    } else if (producer.kind == NodeKind::Constant) {
      info.layout = Layout::Fixed;
      info.fixed_strides = producer.constant->strides;
    }
    operands.push_back(std::move(info));
  }
  return operands;
}

void schedule_kernels(Plan& plan, const ir::Graph& graph) {
  for (Step& step : plan.steps) {
    const Node& node = graph.node(step.node);
    switch (step.kind) {
      case StepKind::LibraryMatmul:
      case StepKind::RowKernel: break;  // no node kernel; the row kernel is scheduled by its plan
      case StepKind::Scatter: {
        const std::vector<OperandInfo> operands = kernel_operands(graph, node);
        const Node copy = passes::identity_copy(graph.node(node.inputs[0]), node.inputs[0], node.origin);
        step.copy_schedule = choose_schedule(copy, {operands[0]});
        step.schedule = choose_schedule(node, operands);
        break;
      }
      case StepKind::Kernel:
      case StepKind::Convolution: step.schedule = choose_schedule(node, kernel_operands(graph, node)); break;
    }
  }
  mark_early_attention_rows(plan, graph);
}

}  // namespace luminal::schedule
