#include "passes/passes.h"

#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "ir/poly.h"
#include "ir/simplify.h"

namespace luminal::passes {

using ir::Expr;
using ir::ExprOp;
using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;

namespace {

ir::IndexRanges ranges_of(const Node& node) {
  ir::IndexRanges ranges{node.shape, {}};
  for (const Expr& extent : node.reduce_extents) ranges.reduce_extents.push_back(ir::is_shape_expr(extent) ? extent : nullptr);
  return ranges;
}

// Distinct load expressions of each input slot in a body.
std::vector<int> load_sites_per_slot(const Node& node) {
  std::vector<int> sites(node.inputs.size(), 0);
  std::unordered_set<const ir::ExprNode*> seen;
  auto count = [&](const Expr& root) {
    ir::visit(root, [&](const Expr& e) {
      if (e->op == ExprOp::Load && seen.insert(e.get()).second) ++sites[e->index];
    });
  };
  if (node.body) count(node.body);
  for (const Expr& extent : node.reduce_extents) count(extent);
  return sites;
}

bool is_cheap(const Node& producer, int max_recompute_ops) {
  return arithmetic_op_count(producer.body) <= max_recompute_ops;
}

// Rewrites `body` (in the producer's index space) into the consumer's space: loop variables
// become the consumer's load indices, producer input slots are remapped, and the consumer load's
// mask guards every load and bounds check inside.
Expr instantiate(const Expr& body, const std::vector<Expr>& index, const Expr& mask, const std::vector<int>& slot_map) {
  return ir::transform(body, [&](const Expr& e, const std::vector<Expr>& args) -> Expr {
    switch (e->op) {
      case ExprOp::LoopVar: return index.at(e->index);
      case ExprOp::Load: {
        std::vector<Expr> indices(args.begin(), args.begin() + e->load_rank());
        Expr combined = mask;
        if (e->masked) combined = combined ? ir::logical_and(combined, args.back()) : args.back();
        return ir::load(slot_map.at(e->index), e->dtype, std::move(indices), combined);
      }
      case ExprOp::CheckIndex: {
        if (!mask) return nullptr;
        Expr combined = e->masked ? ir::logical_and(mask, args[2]) : mask;
        return ir::check_index(args[0], args[1], combined);
      }
      default: return nullptr;
    }
  });
}

// Inlines producer input `slot` of `consumer`. Returns false when nothing was substituted.
void inline_slot(Graph& graph, Node& consumer, size_t slot) {
  const Node& producer = graph.node(consumer.inputs[slot]);
  std::vector<int> slot_map;
  for (NodeId input : producer.inputs) {
    auto it = std::find(consumer.inputs.begin(), consumer.inputs.end(), input);
    if (it == consumer.inputs.end()) {
      consumer.inputs.push_back(input);
      it = consumer.inputs.end() - 1;
    }
    slot_map.push_back(static_cast<int>(it - consumer.inputs.begin()));
  }
  auto substitute = [&](const Expr& root) {
    return ir::transform(root, [&](const Expr& e, const std::vector<Expr>& args) -> Expr {
      if (e->op != ExprOp::Load || e->index != static_cast<int>(slot)) return nullptr;
      std::vector<Expr> index(args.begin(), args.begin() + e->load_rank());
      return instantiate(producer.body, index, e->masked ? args.back() : nullptr, slot_map);
    });
  };
  consumer.body = substitute(consumer.body);
  for (Expr& extent : consumer.reduce_extents) extent = substitute(extent);
}

// Drops input slots that no load reads any more, renumbering the loads.
void compact_slots(Node& node) {
  const std::vector<int> sites = load_sites_per_slot(node);
  std::vector<int> remap(node.inputs.size(), -1);
  std::vector<NodeId> kept;
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    if (sites[k] == 0) continue;
    // Two slots reading the same node merge into one.
    auto it = std::find(kept.begin(), kept.end(), node.inputs[k]);
    if (it == kept.end()) {
      remap[k] = static_cast<int>(kept.size());
      kept.push_back(node.inputs[k]);
    } else {
      remap[k] = static_cast<int>(it - kept.begin());
    }
  }
  auto renumber = [&](const Expr& root) {
    return ir::transform(root, [&](const Expr& e, const std::vector<Expr>& args) -> Expr {
      if (e->op != ExprOp::Load || remap[e->index] == e->index) return nullptr;
      std::vector<Expr> indices(args.begin(), args.begin() + e->load_rank());
      return ir::load(remap[e->index], e->dtype, std::move(indices), e->masked ? args.back() : nullptr);
    });
  };
  node.body = renumber(node.body);
  for (Expr& extent : node.reduce_extents) extent = renumber(extent);
  node.inputs = std::move(kept);
}

}  // namespace

int arithmetic_op_count(const Expr& body) {
  int count = 0;
  ir::visit(body, [&](const Expr& e) {
    const bool free = e->op == ExprOp::Const || e->op == ExprOp::LoopVar || e->op == ExprOp::ReduceVar ||
                      e->op == ExprOp::Symbol || e->op == ExprOp::Load || e->op == ExprOp::Cast ||
                      e->op == ExprOp::CheckIndex || e->dtype == DType::I64 ||
                      (e->dtype == DType::Bool && !e->args.empty() && e->args[0]->dtype == DType::I64);
    if (!free) ++count;
  });
  return count;
}

void inline_pointwise(Graph& graph, const OptimizeOptions& options) {
  // Load sites per producer over the whole graph (outputs count as a use that needs the buffer).
  std::vector<int> uses(graph.size(), 0);
  for (const Node& node : graph.nodes()) {
    if (node.kind == NodeKind::MatMul) {
      for (NodeId input : node.inputs) uses[input] += 1000;  // needs the tensor itself
      continue;
    }
    const std::vector<int> sites = load_sites_per_slot(node);
    for (size_t k = 0; k < node.inputs.size(); ++k) uses[node.inputs[k]] += sites[k];
  }
  for (const ir::GraphOutput& out : graph.outputs) {
    if (out.kind == ir::GraphOutput::Kind::Tensor) uses[out.node] += 1000;
  }

  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
    Node& consumer = graph.node(id);
    if (consumer.kind != NodeKind::Pointwise && consumer.kind != NodeKind::Reduce) continue;
    bool changed = false;
    for (size_t slot = 0; slot < consumer.inputs.size(); ++slot) {
      const Node& producer = graph.node(consumer.inputs[slot]);
      if (producer.kind != NodeKind::Pointwise) continue;
      const bool single_use = uses[producer.id] == 1;
      if (!single_use && !is_cheap(producer, options.max_recompute_ops)) continue;
      const std::vector<NodeId> producer_inputs = producer.inputs;
      const int sites = load_sites_per_slot(consumer)[slot];
      inline_slot(graph, consumer, slot);
      uses[producer.id] -= sites;
      for (NodeId input : producer_inputs) uses[input] += sites;
      changed = true;
    }
    if (changed) {
      compact_slots(consumer);
      const ir::IndexRanges ranges = ranges_of(consumer);
      consumer.body = ir::simplify(consumer.body, ranges);
      for (Expr& extent : consumer.reduce_extents) extent = ir::simplify(extent, ir::IndexRanges{consumer.shape, {}});
    }
  }
}

Graph eliminate_dead_code(const Graph& graph) {
  std::vector<bool> live(graph.size(), false);
  for (NodeId id : graph.inputs) live[id] = true;
  for (const ir::GraphOutput& out : graph.outputs) {
    if (out.kind == ir::GraphOutput::Kind::Tensor) live[out.node] = true;
  }
  for (NodeId id = static_cast<NodeId>(graph.size()) - 1; id >= 0; --id) {
    if (!live[id]) continue;
    for (NodeId input : graph.node(id).inputs) live[input] = true;
  }
  Graph out;
  out.symbols = graph.symbols;
  out.shape_assertions = graph.shape_assertions;
  std::vector<NodeId> remap(graph.size(), -1);
  out.inputs.resize(graph.inputs.size(), -1);
  for (const Node& node : graph.nodes()) {
    if (!live[node.id]) continue;
    Node copy = node;
    for (NodeId& input : copy.inputs) input = remap[input];
    remap[node.id] = out.add(std::move(copy));
    if (node.kind == NodeKind::Input) out.inputs[node.input_position] = remap[node.id];
  }
  out.outputs = graph.outputs;
  for (ir::GraphOutput& o : out.outputs) {
    if (o.kind == ir::GraphOutput::Kind::Tensor) o.node = remap[o.node];
  }
  return out;
}

void materialize_outputs(Graph& graph) {
  std::unordered_set<NodeId> claimed;
  for (ir::GraphOutput& out : graph.outputs) {
    if (out.kind != ir::GraphOutput::Kind::Tensor) continue;
    const Node& node = graph.node(out.node);
    if (node.is_compute() && claimed.insert(node.id).second) continue;
    Node copy;
    copy.kind = NodeKind::Pointwise;
    copy.dtype = node.dtype;
    copy.shape = node.shape;
    copy.inputs = {node.id};
    std::vector<Expr> index;
    for (size_t d = 0; d < node.rank(); ++d) index.push_back(ir::loop_var(static_cast<int>(d)));
    copy.body = ir::load(0, node.dtype, std::move(index));
    copy.origin = str_cat("copy of output '", out.name, "'");
    out.node = graph.add(std::move(copy));
    claimed.insert(out.node);
  }
}

std::optional<AffineView> as_affine_view(const Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  if (node.kind != NodeKind::Pointwise || node.inputs.size() != 1 || !node.body) return std::nullopt;
  const Expr& body = node.body;
  if (body->op != ExprOp::Load || body->masked || body->index != 0) return std::nullopt;
  AffineView view;
  view.base = node.inputs[0];
  for (size_t d = 0; d < body->load_rank(); ++d) {
    const ir::Poly p = ir::poly_from_expr(body->args[d]);
    std::vector<Expr> coefficients(node.rank(), ir::int_const(0));
    ir::Poly offset;
    offset.constant = p.constant;
    for (const auto& [monomial, coefficient] : p.terms) {
      // Each term is coefficient * (loop var) * (symbols...), or symbols only (part of the offset).
      int loop_axis = -1;
      ir::Monomial rest;
      for (const Expr& atom : monomial) {
        if (atom->op == ExprOp::LoopVar && loop_axis < 0) {
          loop_axis = atom->index;
        } else if (atom->op == ExprOp::Symbol) {
          rest.push_back(atom);
        } else {
          return std::nullopt;  // not affine in the loop variables
        }
      }
      ir::Poly term;
      if (rest.empty()) {
        term.constant = coefficient;
      } else {
        term.terms.emplace(rest, coefficient);
      }
      if (loop_axis < 0) {
        offset.add(term);
      } else {
        coefficients[loop_axis] = ir::add(coefficients[loop_axis], ir::expr_from_poly(term));
      }
    }
    view.offset.push_back(ir::expr_from_poly(offset));
    view.coefficients.push_back(std::move(coefficients));
  }
  return view;
}

namespace {

// Matches where(i_axis < bound, then, else) (under an optional cast) with a shape-expression bound.
struct AxisSelect {
  int axis;
  Expr bound;
  Expr then_branch;
  Expr else_branch;
};

std::optional<AxisSelect> match_axis_select(const Expr& body) {
  if (body->op != ExprOp::Where) return std::nullopt;
  const Expr& cond = body->args[0];
  if (cond->op != ExprOp::Lt || cond->args[0]->op != ExprOp::LoopVar || !ir::is_shape_expr(cond->args[1])) {
    return std::nullopt;
  }
  return AxisSelect{cond->args[0]->index, cond->args[1], body->args[1], body->args[2]};
}

// Rewrites `body` for a piece starting at `begin` on `axis`: i_axis becomes (local i_axis + begin).
Expr shift_axis(const Expr& body, int axis, const Expr& begin) {
  return ir::transform(body, [&](const Expr& e, const std::vector<Expr>&) -> Expr {
    if (e->op == ExprOp::LoopVar && e->index == axis) return ir::add(e, begin);
    return nullptr;
  });
}

}  // namespace

std::vector<PointwisePiece> split_pointwise(const Node& node) {
  const PointwisePiece whole{-1, ir::int_const(0), ir::int_const(0), node.body};
  if (node.kind != NodeKind::Pointwise) return {whole};
  // Collect the boundaries of a where-chain on one axis: where(i<c1, A, where(i<c2, B, C)).
  std::vector<Expr> bounds;
  std::vector<Expr> branches;
  int axis = -1;
  Expr rest = node.body;
  while (auto select = match_axis_select(rest)) {
    if (axis >= 0 && select->axis != axis) break;
    axis = select->axis;
    bounds.push_back(select->bound);
    branches.push_back(select->then_branch);
    rest = select->else_branch;
  }
  if (axis < 0) return {whole};
  branches.push_back(rest);
  bounds.push_back(node.shape[axis]);
  std::vector<PointwisePiece> pieces;
  Expr begin = ir::int_const(0);
  for (size_t k = 0; k < branches.size(); ++k) {
    const Expr extent = ir::simplify(ir::max(ir::sub(bounds[k], begin), ir::int_const(0)), {});
    ir::Shape piece_shape = node.shape;
    piece_shape[axis] = extent;
    // Within the piece the earlier conditions are false and this one is true: simplify with the
    // piece's range, then substitute the whole body so any remaining selects resolve too.
    const Expr shifted = shift_axis(node.body, axis, begin);
    const Expr body = ir::simplify(shifted, ir::IndexRanges{piece_shape, {}});
    pieces.push_back(PointwisePiece{axis, begin, extent, body});
    begin = bounds[k];
  }
  return pieces;
}

Graph optimize(Graph graph, const OptimizeOptions& options) {
  graph.verify();
  if (options.inline_pointwise) inline_pointwise(graph, options);
  materialize_outputs(graph);
  Graph out = eliminate_dead_code(graph);
  out.verify();
  return out;
}

}  // namespace luminal::passes
