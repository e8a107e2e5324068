// Inputs updated element by element (a static KV cache's step counter: `counter + 1` written back
// into the counter): computed straight into the input's memory, last.
//
// Without this, such an update is computed into a fresh tensor that the caller copies back after
// every call (one allocation and one copy per counter: 16 of each per decode step of a 16-layer
// model). Writing it into the input while later nodes still read the old value would be wrong, so
// the node moves behind every other node: it has no readers of its own, and all reads of the old
// value then come first, in whatever kernels later stages fuse them into.
#include <algorithm>
#include <unordered_set>

#include "passes/passes.h"

namespace luminal::passes {

using ir::Expr;
using ir::ExprOp;
using ir::Graph;
using ir::GraphOutput;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;

namespace {

// Whether every load of input slot `slot` in `body` reads element [i0, i1, ...] of a node of
// rank `rank`: the element the node is about to write, never another.
bool loads_only_own_element(const Expr& body, int slot, size_t rank) {
  bool own = true;
  ir::visit(body, [&](const Expr& e) {
    if (e->op != ExprOp::Load || e->index != slot) return;
    if (e->masked || e->load_rank() != rank) {
      own = false;
      return;
    }
    for (size_t d = 0; d < rank; ++d) {
      own = own && e->args[d]->op == ExprOp::LoopVar && e->args[d]->index == static_cast<int>(d);
    }
  });
  return own;
}

bool same_shape(const ir::Shape& a, const ir::Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d) {
    if (!ir::expr_equal(a[d], b[d])) return false;
  }
  return true;
}

// The graph input nodes some output updates.
std::unordered_set<NodeId> updated_inputs(const Graph& graph) {
  std::unordered_set<NodeId> bases;
  for (const GraphOutput& out : graph.outputs) {
    if (out.kind == GraphOutput::Kind::Tensor && out.mutated_input >= 0) bases.insert(graph.inputs[out.mutated_input]);
  }
  return bases;
}

}  // namespace

namespace {

// Whether output `output` is an elementwise update of its input (see passes.h), given the graph's
// use counts and updated inputs.
bool is_elementwise_update(const Graph& graph, size_t output, const std::vector<int>& uses,
                           const std::unordered_set<NodeId>& bases, const std::vector<int>& outputs_of_node) {
  const GraphOutput& out = graph.outputs[output];
  if (out.kind != GraphOutput::Kind::Tensor || out.mutated_input < 0) return false;
  const Node& node = graph.node(out.node);
  const NodeId base = graph.inputs.at(out.mutated_input);
  const Node& input = graph.node(base);
  if (node.kind != NodeKind::Pointwise || node.contraction != ir::Contraction::None || node.convolution ||
      !node.body || node.dtype != input.dtype || !same_shape(node.shape, input.shape)) {
    return false;
  }
  // Its one use is this output (use counts include outputs): no node reads the new value.
  if (uses[node.id] != 1 || outputs_of_node[node.id] != 1) return false;
  // It reads its own input only at the element it writes, and no input that another output updates
  // (which may already hold its new value when this node runs).
  bool reads_base = false;
  for (size_t slot = 0; slot < node.inputs.size(); ++slot) {
    const NodeId read = node.inputs[slot];
    if (read == base) {
      reads_base = true;
      if (!loads_only_own_element(node.body, static_cast<int>(slot), node.rank())) return false;
    } else if (bases.count(read)) {
      return false;
    }
  }
  return reads_base;
}

}  // namespace

std::vector<bool> elementwise_input_updates(const Graph& graph) {
  const std::vector<int> uses = graph.use_counts();
  const std::unordered_set<NodeId> bases = updated_inputs(graph);
  std::vector<int> outputs_of_node(graph.size(), 0);
  for (const GraphOutput& out : graph.outputs) {
    if (out.kind == GraphOutput::Kind::Tensor) ++outputs_of_node[out.node];
  }
  std::vector<bool> updates(graph.outputs.size(), false);
  for (size_t k = 0; k < graph.outputs.size(); ++k) {
    updates[k] = is_elementwise_update(graph, k, uses, bases, outputs_of_node);
  }
  return updates;
}

Graph defer_input_updates(const Graph& graph) {
  const std::vector<bool> updates = elementwise_input_updates(graph);
  std::vector<bool> deferred(graph.size(), false);
  bool any = false;
  for (size_t k = 0; k < graph.outputs.size(); ++k) {
    if (!updates[k]) continue;
    deferred[graph.outputs[k].node] = true;
    any = true;
  }
  if (!any) return graph;
  Graph out;
  out.symbols = graph.symbols;
  out.shape_assertions = graph.shape_assertions;
  out.inputs.resize(graph.inputs.size(), -1);
  std::vector<NodeId> remap(graph.size(), -1);
  const auto copy = [&](const Node& node) {
    Node moved = node;
    for (NodeId& input : moved.inputs) input = remap[input];
    remap[node.id] = out.add(std::move(moved));
    if (node.kind == NodeKind::Input) out.inputs[node.input_position] = remap[node.id];
  };
  for (const Node& node : graph.nodes()) {
    if (!deferred[node.id]) copy(node);
  }
  // Nothing reads them (elementwise_input_updates), so they may follow everything.
  for (const Node& node : graph.nodes()) {
    if (deferred[node.id]) copy(node);
  }
  out.outputs = graph.outputs;
  for (GraphOutput& o : out.outputs) {
    if (o.kind == GraphOutput::Kind::Tensor) o.node = remap[o.node];
  }
  return out;
}

std::vector<bool> input_updates_written_last(const Graph& graph) {
  std::vector<bool> last = elementwise_input_updates(graph);
  std::vector<bool> is_update(graph.size(), false);
  NodeId first_update = static_cast<NodeId>(graph.size());
  for (size_t k = 0; k < graph.outputs.size(); ++k) {
    if (!last[k]) continue;
    is_update[graph.outputs[k].node] = true;
    first_update = std::min(first_update, graph.outputs[k].node);
  }
  // Past the first update every compute node must be one (no update reads an input another one
  // writes: elementwise_input_updates), else none is written in place.
  for (NodeId id = first_update; id < static_cast<NodeId>(graph.size()); ++id) {
    if (graph.node(id).is_compute() && !is_update[id]) return std::vector<bool>(graph.outputs.size(), false);
  }
  return last;
}

}  // namespace luminal::passes
