#include "passes/stage_library_operands.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "passes/passes.h"

namespace luminal::passes {

using ir::Expr;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;

namespace {

// A view that repeats rows or columns of its base (expand of a [1, k] parameter: stride 0 in a
// matrix dim) has no leading dimension cuBLASLt can take, whatever the base's strides.
bool broadcasts_a_matrix_dim(const ir::Graph& g, NodeId operand) {
  const auto view = as_affine_view(g, operand);
  if (!view) return false;
  const auto& shape = g.node(operand).shape;
  for (size_t j = shape.size() >= 2 ? shape.size() - 2 : 0; j < shape.size(); ++j) {
    if (shape[j]->is_int_const(1)) continue;
    const bool repeated = std::all_of(view->coefficients.begin(), view->coefficients.end(),
                                      [&](const std::vector<Expr>& row) { return row[j]->is_int_const(0); });
    if (repeated) return true;
  }
  return false;
}

// Nodes a library may compute (captured into the CUDA graph with fixed addresses): matmuls and
// convolutions.
bool is_library_node(const Node& node) { return node.kind == NodeKind::MatMul || node.convolution != nullptr; }

}  // namespace

StagedGraph stage_library_operands(const ir::Graph& in) {
  StagedGraph staged;
  size_t& copies = staged.copies;
  ir::Graph& out = staged.graph;
  out.symbols = in.symbols;
  out.shape_assertions = in.shape_assertions;
  out.inputs.resize(in.inputs.size());
  std::vector<NodeId> remap(in.size(), -1);
  std::vector<bool> is_output(in.size(), false);
  for (const ir::GraphOutput& o : in.outputs) {
    if (o.kind == ir::GraphOutput::Kind::Tensor) is_output[o.node] = true;
  }
  std::vector<NodeId> output_copy(in.size(), -1);
  std::vector<bool> written_by_caller;  // per node of `out`: its memory is a graph output's
  for (const Node& node : in.nodes()) {
    Node copy = node;
    for (NodeId& input : copy.inputs) input = remap[input];
    if (is_library_node(node)) {
      for (NodeId& operand : copy.inputs) {
        const NodeId base_id = affine_view_base(out, operand);
        const Node& base = out.node(base_id);
        if ((base.kind == NodeKind::Input && base.role == ir::InputRole::User) || written_by_caller[base_id] ||
            broadcasts_a_matrix_dim(out, operand)) {
          const Node& source = out.node(operand);
          operand = out.add(identity_copy(source, operand, str_cat("stage library operand of ", node.origin)));
          written_by_caller.push_back(false);
          ++copies;
        }
      }
    }
    remap[node.id] = out.add(std::move(copy));
    // A library call's output is redirected to the arena below; any other output is the caller's memory.
    written_by_caller.push_back(is_output[node.id] && !is_library_node(node));
    if (node.kind == NodeKind::Input) out.inputs[node.input_position] = remap[node.id];
    if (is_library_node(node) && is_output[node.id]) {
      output_copy[node.id] = out.add(identity_copy(out.node(remap[node.id]), remap[node.id],
                                                   str_cat("copy out library output of ", node.origin)));
      written_by_caller.push_back(true);
      ++copies;
    }
  }
  out.outputs = in.outputs;
  for (ir::GraphOutput& o : out.outputs) {
    if (o.kind != ir::GraphOutput::Kind::Tensor) continue;
    o.node = output_copy[o.node] >= 0 ? output_copy[o.node] : remap[o.node];
  }
  out.verify();
  return staged;
}

}  // namespace luminal::passes
