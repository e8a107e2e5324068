#include "passes/passes.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "common/checked.h"
#include "common/error.h"
#include "ir/poly.h"
#include "ir/simplify.h"
#include "passes/inline_helpers.h"

namespace luminal::passes {

using ir::Expr;
using ir::ExprOp;
using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;

namespace detail {

ir::IndexRanges ranges_of(const Node& node) {
  ir::IndexRanges ranges{node.loop_shape(), {}};
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
  for (const Expr& target : node.scatter_targets) count(target);
  return sites;
}

// Load sites of each node over the whole graph. A matmul operand or a graph output needs the
// tensor itself: it counts as many uses, so that it is never inlined away.
std::vector<int> load_sites_per_node(const Graph& graph) {
  std::vector<int> uses(graph.size(), 0);
  for (const Node& node : graph.nodes()) {
    // A scatter's base is its output's memory: read whole, never inlined (its indices and values
    // are bodies, counted below).
    if (node.kind == NodeKind::Scatter) uses[node.inputs[0]] += 1000;
    if (node.reads_operands_whole()) {
      for (NodeId input : node.inputs) uses[input] += 1000;
      continue;
    }
    const std::vector<int> sites = load_sites_per_slot(node);
    for (size_t k = 0; k < node.inputs.size(); ++k) uses[node.inputs[k]] += sites[k];
  }
  for (const ir::GraphOutput& out : graph.outputs) {
    if (out.kind == ir::GraphOutput::Kind::Tensor) uses[out.node] += 1000;
  }
  return uses;
}

bool is_cheap(const Node& producer, int max_recompute_ops) {
  return arithmetic_op_count(producer.body) <= max_recompute_ops;
}

// Whether a graph input or constant is what tables are computed from: the model's state
// (parameters, buffers, constants) and integer tensors (positions, token ids, counters). A float
// activation the caller passes is not: a tiny one would otherwise be fused differently from the
// same graph at its real size.
bool is_table_source(const Node& node) {
  if (node.kind == NodeKind::Constant) return true;
  return node.kind == NodeKind::Input && (node.role != ir::InputRole::User || !is_floating(node.dtype));
}

// Whether the producer is a small table computed from table sources alone (a RoPE table's angles
// from the positions and the inverse frequencies): its element count is known and at most
// `max_elements`, each element a few operations on loaded values (no fold: a reader recomputing it
// would repeat the reduction). Values computed by other kernels stay kernels (a residual stream
// inlined into its readers would make each reader add up every layer's output).
bool is_small_table(const Graph& graph, const Node& producer, int64_t max_elements) {
  constexpr int kMaxTableOps = 16;
  for (const NodeId input : producer.inputs) {
    if (!is_table_source(graph.node(input))) return false;
  }
  if (ir::contains_op(producer.body, ExprOp::Fold) || arithmetic_op_count(producer.body) > kMaxTableOps) return false;
  int64_t count = 1;
  for (const Expr& extent : producer.shape) {
    const auto n = ir::as_int_const(extent);
    if (!n || *n < 0 || *n > max_elements) return false;  // also keeps the product below from overflowing
    count *= std::max<int64_t>(*n, 1);
    if (count > max_elements) return false;
  }
  return true;
}

// How many times the consumer evaluates each element it loads through `slot`: the product of the
// consumer's iteration axes (output axes and reduction axes) that no load of the slot indexes.
// Unknown (symbolic) extents count as unbounded.
int64_t recompute_factor(const Node& consumer, size_t slot) {
  const ir::Shape& space = consumer.loop_shape();
  std::vector<bool> loop_read(space.size(), false);
  std::vector<bool> reduce_read(consumer.reduce_extents.size(), false);
  ir::visit(consumer.body, [&](const Expr& e) {
    if (e->op != ExprOp::Load || e->index != static_cast<int>(slot)) return;
    for (size_t d = 0; d < e->load_rank(); ++d) {
      ir::visit(e->args[d], [&](const Expr& v) {
        if (v->op == ExprOp::LoopVar && static_cast<size_t>(v->index) < loop_read.size()) loop_read[v->index] = true;
        if (v->op == ExprOp::ReduceVar && static_cast<size_t>(v->index) < reduce_read.size()) {
          reduce_read[v->index] = true;
        }
      });
    }
  });
  int64_t factor = 1;
  auto account = [&](const Expr& extent) {
    const auto n = extent ? ir::as_int_const(extent) : std::nullopt;
    factor = n ? factor * std::max<int64_t>(*n, 1) : std::numeric_limits<int64_t>::max() / 4;
    factor = std::min(factor, std::numeric_limits<int64_t>::max() / 4);
  };
  for (size_t d = 0; d < loop_read.size(); ++d) {
    if (!loop_read[d]) account(space[d]);
  }
  for (size_t d = 0; d < reduce_read.size(); ++d) {
    if (!reduce_read[d]) account(ir::is_shape_expr(consumer.reduce_extents[d]) ? consumer.reduce_extents[d] : nullptr);
  }
  return factor;
}

// A reduce node's value as one expression over its loop variables: its body folded over its reduce
// variables r0..rn-1 and cast to its dtype (a no-op unless the body is wider). A half-precision
// body is folded in f32: a fold rounds to its dtype, and the node accumulates over all its
// variables before rounding once (nested half folds rounded each row's partial sum).
Expr folded_value(const Node& reduce) {
  const DType body_dtype = reduce.body->dtype;
  Expr value = is_floating(body_dtype) ? ir::cast(reduce.body, float_compute_dtype(body_dtype)) : reduce.body;
  for (size_t j = reduce.reduce_extents.size(); j-- > 0;) {
    value = ir::fold(reduce.reduce_op, static_cast<int>(j), reduce.reduce_extents[j], value);
  }
  return ir::cast(value, reduce.dtype);
}

// One more than the largest reduce variable a node's body or extents use or bind, and at least
// the number of the node's own reduce variables.
int first_unused_reduce_var(const Node& node) {
  int first = static_cast<int>(node.reduce_extents.size());
  if (node.body) first = std::max(first, ir::max_reduce_var(node.body) + 1);
  for (const Expr& extent : node.reduce_extents) first = std::max(first, ir::max_reduce_var(extent) + 1);
  return first;
}

// Whether `e` is +0 (false) wherever every load in it reads 0. A masked load reads 0 where its mask
// is false; an inlined producer keeps that only if its body maps zeros to +0 (0 / 0, exp(0),
// x + 1 and an iota do not; -x gives -0).
bool zero_where_loads_are_zero(const Expr& e) {
  switch (e->op) {
    case ExprOp::Load: return true;
    case ExprOp::Const:
      return is_floating(e->dtype) ? e->float_value == 0.0 && !std::signbit(e->float_value) : e->int_value == 0;
    case ExprOp::Cast:
    case ExprOp::Abs:
    case ExprOp::Relu: return zero_where_loads_are_zero(e->args[0]);
    case ExprOp::Add:
    case ExprOp::Sub:
    case ExprOp::Mul:
    case ExprOp::Max:
    case ExprOp::Min: return zero_where_loads_are_zero(e->args[0]) && zero_where_loads_are_zero(e->args[1]);
    case ExprOp::Where: return zero_where_loads_are_zero(e->args[1]) && zero_where_loads_are_zero(e->args[2]);
    case ExprOp::Fold: {  // a sum (or any) of zeros is zero also over an empty range; a max is not
      const auto op = static_cast<ir::ReduceOp>(e->int_value);
      return (op == ir::ReduceOp::Sum || op == ir::ReduceOp::Any) && zero_where_loads_are_zero(e->args[1]);
    }
    default: return false;
  }
}

// Rewrites `body` (in the producer's index space, no free reduce variables) into the consumer's
// space: loop variables become the consumer's load indices, producer input slots are remapped,
// and the consumer load's mask guards every load and bounds check inside, and selects 0 where it
// is false unless the body gives that by itself (zero_where_loads_are_zero). The body's fold
// variables are renumbered from `first_free_var` (and past every reduce variable of the index and
// mask): the indices may read the consumer's reduce variables (r0 of a sum over a gathered
// tensor), which a fold of the producer with the same id would otherwise capture.
Expr instantiate(const Expr& body, const std::vector<Expr>& index, const Expr& mask, const std::vector<int>& slot_map,
                 int first_free_var) {
  int first = first_free_var;
  for (const Expr& i : index) first = std::max(first, ir::max_reduce_var(i) + 1);
  if (mask) first = std::max(first, ir::max_reduce_var(mask) + 1);
  Expr value = ir::transform(ir::rebase_fold_vars(body, first), [&](const Expr& e, const std::vector<Expr>& args) -> Expr {
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
        return ir::check_like(*e, args[0], args[1], combined);
      }
      case ExprOp::Const:
      case ExprOp::ReduceVar:
      case ExprOp::Symbol:
      case ExprOp::Where:
      case ExprOp::Cast:
      case ExprOp::Fold:
        LUMINAL_SCALAR_OP_CASES return nullptr;
    }
    return nullptr;
  });
  if (!mask || zero_where_loads_are_zero(body)) return value;
  return ir::where(mask, value, ir::scalar_const(0, value->dtype));
}

// Inlines producer input `slot` of `consumer`: each load of that slot becomes the producer's body
// at the loaded index, and the producer's inputs join the consumer's (the slot itself stays until
// compact_slots drops it).
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
  const int first_free_var = first_unused_reduce_var(consumer);
  auto substitute = [&](const Expr& root) {
    return ir::transform(root, [&](const Expr& e, const std::vector<Expr>& args) -> Expr {
      if (e->op != ExprOp::Load || e->index != static_cast<int>(slot)) return nullptr;
      std::vector<Expr> index(args.begin(), args.begin() + e->load_rank());
      return instantiate(producer.body, index, e->masked ? args.back() : nullptr, slot_map, first_free_var);
    });
  };
  consumer.body = substitute(consumer.body);
  for (Expr& extent : consumer.reduce_extents) extent = substitute(extent);
  for (Expr& target : consumer.scatter_targets) target = substitute(target);
}

// Drops input slots that no load reads any more, renumbering the loads.
void compact_slots(Node& node) {
  const std::vector<int> sites = load_sites_per_slot(node);
  std::vector<int> remap(node.inputs.size(), -1);
  std::vector<NodeId> kept;
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const bool scatter_base = node.kind == NodeKind::Scatter && k == 0;  // no load reads it: it is the output
    if (sites[k] == 0 && !scatter_base) continue;
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
  for (Expr& target : node.scatter_targets) target = renumber(target);
  node.inputs = std::move(kept);
}

}  // namespace detail

using namespace detail;

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

namespace {

// Whether inlining `producer` into a scatter would make the scatter read its base, whose memory its
// output may be (an in-place update of an input): directly, or through a view of the base (a
// pointwise node reading it, which may be placed in the base's memory). Either read could see
// elements the scatter has already written.
bool reads_scatter_base(const Graph& graph, const Node& producer, NodeId base) {
  for (NodeId input : producer.inputs) {
    if (input == base) return true;
    const Node& read = graph.node(input);
    if (read.kind == NodeKind::Pointwise &&
        std::find(read.inputs.begin(), read.inputs.end(), base) != read.inputs.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace

void pointwise_unit_reductions(Graph& graph) {
  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
    Node& node = graph.node(id);
    if (node.kind != NodeKind::Reduce || node.convolution) continue;
    const bool unit = std::all_of(node.reduce_extents.begin(), node.reduce_extents.end(),
                                  [](const Expr& extent) { return extent->is_int_const(1); });
    if (!unit) continue;
    const Expr value = folded_value(node);  // folds over one element: the body at r = 0
    node.kind = NodeKind::Pointwise;
    node.reduce_extents.clear();
    node.body = ir::simplify(value, ranges_of(node));
  }
}

void inline_pointwise(Graph& graph, const OptimizeOptions& options) {
  std::vector<int> uses = load_sites_per_node(graph);

  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
    Node& consumer = graph.node(id);
    const bool scatter = consumer.kind == NodeKind::Scatter;
    if (consumer.kind != NodeKind::Pointwise && consumer.kind != NodeKind::Reduce && !scatter) continue;
    if (consumer.contraction != ir::Contraction::None) continue;  // its kernel reads its operands as they are
    if (consumer.convolution) continue;  // a library may compute it from its operands as they are
    bool changed = false;
    for (size_t slot = scatter ? 1 : 0; slot < consumer.inputs.size(); ++slot) {
      const Node& producer = graph.node(consumer.inputs[slot]);
      if (producer.kind != NodeKind::Pointwise || producer.contraction != ir::Contraction::None) continue;
      if (scatter && reads_scatter_base(graph, producer, consumer.inputs[0])) continue;
      if (arithmetic_op_count(producer.body) > options.max_fused_ops) continue;
      const bool single_use = uses[producer.id] == 1;
      const bool cheap = is_cheap(producer, options.max_recompute_ops);
      const int64_t factor = recompute_factor(consumer, slot);
      const bool small = factor <= 1 && is_small_table(graph, producer, options.max_table_elements);
      if (!cheap && !small && (!single_use || factor > options.max_recompute_factor)) continue;
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
      for (Expr& target : consumer.scatter_targets) target = ir::simplify(target, ranges);
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

Node permuted_read(DType dtype, ir::Shape shape, NodeId source_id, const std::vector<int>& index_vars,
                   std::string origin) {
  Node read;
  read.kind = NodeKind::Pointwise;
  read.dtype = dtype;
  read.shape = std::move(shape);
  read.inputs = {source_id};
  std::vector<Expr> index;
  for (int d : index_vars) index.push_back(ir::loop_var(d));
  read.body = ir::load(0, dtype, std::move(index));
  read.origin = std::move(origin);
  return read;
}

Node identity_copy(const Node& source, NodeId source_id, const std::string& why) {
  std::vector<int> in_order(source.rank());
  for (size_t d = 0; d < in_order.size(); ++d) in_order[d] = static_cast<int>(d);
  return permuted_read(source.dtype, source.shape, source_id, in_order, why);
}

void materialize_outputs(Graph& graph) {
  std::unordered_set<NodeId> claimed;
  for (ir::GraphOutput& out : graph.outputs) {
    if (out.kind != ir::GraphOutput::Kind::Tensor) continue;
    const Node& node = graph.node(out.node);
    if (node.is_compute() && claimed.insert(node.id).second) continue;
    out.node = graph.add(identity_copy(node, node.id, str_cat("copy of output '", out.name, "'")));
    claimed.insert(out.node);
  }
}

namespace {

// An index expression as offset + sum_j coefficients[j] * i_j with shape-expression offset and
// coefficients (one per loop variable of a rank-`rank` node); nullopt when it is not affine in the
// loop variables.
bool affine_terms(const Expr& index, size_t rank, Expr& offset_out, std::vector<Expr>& coefficients) {
  const ir::Poly p = ir::poly_from_expr(index);
  coefficients.assign(rank, ir::int_const(0));
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
        return false;  // not affine in the loop variables
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
  offset_out = ir::expr_from_poly(offset);
  return true;
}

// Nodes whose buffer is always row-major (the arena or an output): computed by a kernel or a
// library into memory of their own. Not inputs or constants (their strides are the caller's or
// the archive's), nor scatters (an executor may update the base's memory in place).
bool stored_row_major(const Node& node) {
  return node.kind == NodeKind::Pointwise || node.kind == NodeKind::Reduce || node.kind == NodeKind::MatMul ||
         node.kind == NodeKind::Attention;
}

}  // namespace

std::optional<AffineView> as_affine_view(const Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  if (node.kind != NodeKind::Pointwise || node.inputs.size() != 1 || !node.body) return std::nullopt;
  const Expr& body = node.body;
  if (body->op != ExprOp::Load || body->masked || body->index != 0) return std::nullopt;
  AffineView view;
  view.base = node.inputs[0];
  bool affine = true;
  for (size_t d = 0; d < body->load_rank() && affine; ++d) {
    Expr offset;
    std::vector<Expr> coefficients;
    affine = affine_terms(body->args[d], node.rank(), offset, coefficients);
    view.offset.push_back(std::move(offset));
    view.coefficients.push_back(std::move(coefficients));
  }
  if (affine) return view;
  // A reshape that merges dimensions indexes them by quotient and remainder (floordiv(i0, 16),
  // mod(i0, 16)): not affine per dimension, but affine in the flat offset of a row-major base,
  // where those cancel. The whole offset then goes to the base's innermost dimension (stride 1).
  const Node& base = graph.node(view.base);
  if (!stored_row_major(base) || base.rank() == 0) return std::nullopt;
  Expr flat = ir::int_const(0), stride = ir::int_const(1);
  for (size_t d = base.rank(); d-- > 0;) {
    flat = ir::add(flat, ir::mul(body->args[d], stride));
    stride = ir::mul(stride, base.shape[d]);
  }
  Expr offset;
  std::vector<Expr> coefficients;
  if (!affine_terms(ir::simplify(flat, ranges_of(node)), node.rank(), offset, coefficients)) return std::nullopt;
  view.offset.assign(base.rank(), ir::int_const(0));
  view.coefficients.assign(base.rank(), std::vector<Expr>(node.rank(), ir::int_const(0)));
  view.offset.back() = std::move(offset);
  view.coefficients.back() = std::move(coefficients);
  view.flattened = true;
  return view;
}

void require_row_major_base(const AffineView& view, const std::vector<int64_t>& base_sizes,
                            const std::vector<int64_t>& base_strides) {
  if (!view.flattened) return;
  int64_t expected = 1;
  for (size_t d = base_sizes.size(); d-- > 0;) {
    LUMINAL_CHECK(d < base_strides.size() && (base_sizes[d] == 1 || base_strides[d] == expected),
                  "internal error: a reshape view of node %", view.base, " reads it as row-major, but its strides are ",
                  int_list(base_strides), " for sizes ", int_list(base_sizes));
    expected *= base_sizes[d];
  }
}

ir::NodeId affine_view_base(const ir::Graph& graph, ir::NodeId node) {
  const auto view = as_affine_view(graph, node);
  return view ? view->base : node;
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

void lower_small_matmuls(Graph& graph, const OptimizeOptions& options) {
  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
    Node& node = graph.node(id);
    if (node.kind != NodeKind::MatMul || !is_floating(node.dtype) || node.epilogue != ir::MatMulEpilogue::None) continue;
    const bool half = node.dtype == DType::F16 || node.dtype == DType::BF16;
    const size_t rank = node.rank();
    const Node& a = graph.node(node.inputs[0]);
    const auto k = ir::as_int_const(a.shape[rank - 1]);
    const auto n = ir::as_int_const(node.shape[rank - 1]);
    const bool small_shape = (k && n && *k <= options.small_matmul_k && *n <= options.small_matmul_k_max_n) ||
                             (n && *n <= options.small_matmul_n);
    // (The row pipeline lowers every f32/f64 matmul; half-precision ones only when small.)
    const bool small = small_shape || (options.lower_all_matmuls && !half);
    if (!small) continue;
    // out[b, m, n] = sum over r < K of a[b, m, r] * b[b, r, n]
    std::vector<Expr> a_index, b_index;
    if (rank == 3) {
      a_index.push_back(ir::loop_var(0));
      b_index.push_back(ir::loop_var(0));
    }
    a_index.push_back(ir::loop_var(static_cast<int>(rank - 2)));
    a_index.push_back(ir::reduce_var(0));
    b_index.push_back(ir::reduce_var(0));
    b_index.push_back(ir::loop_var(static_cast<int>(rank - 1)));
    if (half) {
      // f16/bf16: products summed in f32 and rounded once, as cuBLAS accumulates: an inline fold
      // (a reduction node would round every product to the storage dtype).
      const Expr product = ir::mul(ir::cast(ir::load(0, node.dtype, a_index), DType::F32),
                                   ir::cast(ir::load(1, node.dtype, b_index), DType::F32));
      node.kind = NodeKind::Pointwise;
      node.body = ir::cast(ir::fold(ir::ReduceOp::Sum, 0, a.shape[rank - 1], product), node.dtype);
      continue;
    }
    node.kind = NodeKind::Reduce;
    node.reduce_op = ir::ReduceOp::Sum;
    node.reduce_extents = {a.shape[rank - 1]};
    node.body = ir::mul(ir::load(0, node.dtype, a_index), ir::load(1, node.dtype, b_index));
  }
}

namespace detail {

// The loop variables an expression reads (through nested loads too).
std::vector<bool> loop_vars_read(const Expr& e, size_t rank) {
  std::vector<bool> read(rank, false);
  ir::visit(e, [&](const Expr& n) {
    if (n->op == ExprOp::LoopVar && static_cast<size_t>(n->index) < rank) read[n->index] = true;
  });
  return read;
}

}  // namespace detail

void inline_reductions(Graph& graph, const OptimizeOptions& options) {
  std::vector<int> uses = load_sites_per_node(graph);
  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
    Node& consumer = graph.node(id);
    if (consumer.kind != NodeKind::Pointwise || consumer.contraction != ir::Contraction::None) continue;
    bool changed = false;
    for (size_t slot = 0; slot < consumer.inputs.size(); ++slot) {
      const Node& producer = graph.node(consumer.inputs[slot]);
      if (producer.kind != NodeKind::Reduce || uses[producer.id] != 1) continue;
      if (producer.convolution) continue;  // stays a node a library may compute
      if (ir::is_shape_expr(producer.reduce_extents[0])) {
        const auto length = ir::as_int_const(ir::simplify(ir::product(producer.reduce_extents), {}));
        if (!length || *length > options.max_inlined_reduction) continue;
      }
      // The one load of the reduction must use every non-unit axis of the consumer: otherwise
      // several consumer elements would recompute the same reduction.
      Expr site;
      ir::visit(consumer.body, [&](const Expr& e) {
        if (e->op == ExprOp::Load && e->index == static_cast<int>(slot)) site = e;
      });
      if (!site) continue;
      std::vector<Expr> index(site->args.begin(), site->args.begin() + site->load_rank());
      const std::vector<bool> read = loop_vars_read(site, consumer.rank());
      bool covers = true;
      for (size_t d = 0; d < consumer.rank(); ++d) covers = covers && (read[d] || consumer.shape[d]->is_int_const(1));
      if (!covers) continue;

      // The reduction's own variables r0..rn-1 become folds (its body's folds have larger ids);
      // instantiate() renumbers them all past the consumer's variables.
      const Expr value = folded_value(producer);
      const std::vector<NodeId> producer_inputs = producer.inputs;
      const int first_free_var = first_unused_reduce_var(consumer);
      std::vector<int> slot_map;
      for (NodeId input : producer_inputs) {
        auto it = std::find(consumer.inputs.begin(), consumer.inputs.end(), input);
        if (it == consumer.inputs.end()) {
          consumer.inputs.push_back(input);
          it = consumer.inputs.end() - 1;
        }
        slot_map.push_back(static_cast<int>(it - consumer.inputs.begin()));
      }
      consumer.body = ir::transform(consumer.body, [&](const Expr& e, const std::vector<Expr>& args) -> Expr {
        if (e->op != ExprOp::Load || e->index != static_cast<int>(slot)) return nullptr;
        std::vector<Expr> at(args.begin(), args.begin() + e->load_rank());
        return instantiate(value, at, e->masked ? args.back() : nullptr, slot_map, first_free_var);
      });
      uses[producer.id] = 0;
      for (NodeId input : producer_inputs) uses[input] += 1;
      changed = true;
    }
    if (changed) {
      compact_slots(consumer);
      consumer.body = ir::simplify(consumer.body, ranges_of(consumer));
    }
  }
}

namespace {

bool is_identity_load(const Expr& e, size_t rank) {
  if (e->op != ExprOp::Load || e->masked || e->load_rank() != rank) return false;
  for (size_t d = 0; d < rank; ++d) {
    if (e->args[d]->op != ExprOp::LoopVar || e->args[d]->index != static_cast<int>(d)) return false;
  }
  return true;
}

Expr strip_cast(const Expr& e) { return e->op == ExprOp::Cast ? e->args[0] : e; }

bool is_last_axis_load(const Expr& e, size_t rank) {
  return e->op == ExprOp::Load && !e->masked && e->load_rank() == 1 && e->args[0]->op == ExprOp::LoopVar &&
         e->args[0]->index == static_cast<int>(rank) - 1;
}

}  // namespace

namespace {

// Whether a matmul can take bias `b` into its epilogue for a node of `dtype`: a plain matmul
// nothing else reads, of the node's dtype, as the bias.
bool takes_bias(const Node& mm, const Node& b, DType dtype, const std::vector<int>& uses) {
  return mm.kind == NodeKind::MatMul && mm.epilogue == ir::MatMulEpilogue::None && uses[mm.id] == 1 &&
         mm.dtype == dtype && b.dtype == dtype;
}

// add(mm[I], bias[I.back()]) read through a view of the matmul's result (the heads of a Q, K or V
// projection: [B*T, H*D] read as [B, H, T, D]): the bias moves into the matmul's epilogue and the
// node becomes the view alone, which attention and matmuls read in place by strides.
bool fuse_bias_under_view(Graph& graph, Node& node, const std::vector<int>& uses) {
  const Expr& body = node.body;
  if (body->op != ExprOp::Add) return false;
  for (int side = 0; side < 2; ++side) {
    const Expr& product = body->args[side];
    const Expr& bias = body->args[1 - side];
    if (product->op != ExprOp::Load || product->masked || bias->op != ExprOp::Load || bias->masked) continue;
    if (bias->load_rank() != 1 || product->load_rank() == 0) continue;
    if (!ir::expr_equal(bias->args[0], product->args[product->load_rank() - 1])) continue;
    Node& mm = graph.node(node.inputs[product->index]);
    const Node& b = graph.node(node.inputs[bias->index]);
    if (!takes_bias(mm, b, node.dtype, uses) || b.rank() != 1 || b.id >= mm.id) continue;
    if (!ir::expr_equal(b.shape[0], mm.shape.back())) continue;
    mm.inputs.push_back(b.id);
    mm.epilogue = ir::MatMulEpilogue::Bias;
    std::vector<Expr> index(product->args.begin(), product->args.end());
    node.inputs = {mm.id};
    node.body = ir::load(0, node.dtype, std::move(index));
    return true;
  }
  return false;
}

}  // namespace

void fuse_matmul_epilogues(Graph& graph) {
  const std::vector<int> uses = graph.use_counts();
  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
    Node& node = graph.node(id);
    if (node.kind != NodeKind::Pointwise || node.inputs.size() != 2) continue;
    if (!is_identity_load(strip_cast(node.body), node.rank()) && fuse_bias_under_view(graph, node, uses)) continue;
    Expr body = node.body;
    ir::MatMulEpilogue epilogue = ir::MatMulEpilogue::Bias;
    if (body->op == ExprOp::Relu) epilogue = ir::MatMulEpilogue::BiasRelu;
    // cuBLASLt's GELU epilogue is the tanh approximation; exact GELU stays a pointwise kernel.
    // (f16/bf16 GELU is computed in f32: cast(gelu(cast(x, f32)), dtype).)
    const Expr gelu = strip_cast(body);
    if (gelu->op == ExprOp::GeluTanh && node.dtype != DType::F64) {
      epilogue = ir::MatMulEpilogue::BiasGeluTanh;
      body = strip_cast(gelu->args[0]);
      if (body->dtype != node.dtype) continue;
    } else if (epilogue == ir::MatMulEpilogue::BiasRelu) {
      body = body->args[0];
    }
    if (body->op != ExprOp::Add) continue;
    for (int side = 0; side < 2; ++side) {
      const Expr& product = body->args[side];
      const Expr& bias = body->args[1 - side];
      if (!is_identity_load(product, node.rank()) || !is_last_axis_load(bias, node.rank())) continue;
      const Node& mm = graph.node(node.inputs[product->index]);
      const Node& b = graph.node(node.inputs[bias->index]);
      if (!takes_bias(mm, b, node.dtype, uses) || !ir::expr_equal(b.shape[0], node.shape.back())) continue;
      // This node becomes the matmul; the plain one is left for dead-code elimination.
      const std::vector<NodeId> operands{mm.inputs[0], mm.inputs[1], b.id};
      node.kind = NodeKind::MatMul;
      node.inputs = operands;
      node.body = nullptr;
      node.epilogue = epilogue;
      break;
    }
  }
}

namespace {

// Nodes whose value is a pure function of their inputs and definition: two with the same
// definition and inputs hold the same tensor. (The IR has no random or effectful expressions.)
bool mergeable(const Node& node) {
  return (node.kind == NodeKind::Pointwise || node.kind == NodeKind::Reduce) &&
         node.contraction == ir::Contraction::None && !node.convolution && node.body;
}

bool same_exprs(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!ir::expr_equal(a[i], b[i])) return false;
  }
  return true;
}

bool same_definition(const Node& a, const Node& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.reduce_op == b.reduce_op && a.inputs == b.inputs &&
         same_exprs(a.shape, b.shape) && same_exprs(a.reduce_extents, b.reduce_extents) &&
         ir::expr_equal(a.body, b.body);
}

size_t definition_hash(const Node& node) {
  size_t h = std::hash<int>()(static_cast<int>(node.kind) * 1024 + static_cast<int>(node.dtype) * 16 +
                              static_cast<int>(node.reduce_op));
  const auto mix = [&h](size_t value) { h ^= value + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  mix(node.body->hash);
  for (const Expr& e : node.shape) mix(e->hash);
  for (const Expr& e : node.reduce_extents) mix(e->hash);
  for (NodeId input : node.inputs) mix(std::hash<NodeId>()(input));
  return h;
}

// A node that repeats each head of a [B, Hk, L, D] tensor `group` times ([B, Hk * group, L, D],
// head h = head floordiv(h, group) of the source): grouped-query attention's expanded keys or
// values. Returns (source, group), or nullopt.
std::optional<std::pair<NodeId, int64_t>> repeated_heads(const Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  if (node.kind != NodeKind::Pointwise || node.contraction != ir::Contraction::None || node.inputs.size() != 1 ||
      !node.body || node.body->op != ExprOp::Load || node.body->masked || node.rank() != 4) {
    return std::nullopt;
  }
  const Node& source = graph.node(node.inputs[0]);
  const Expr& head = node.body->args.size() == 4 ? node.body->args[1] : nullptr;
  if (source.rank() != 4 || source.dtype != node.dtype || !head || head->op != ExprOp::FloorDiv ||
      head->args[1]->op != ExprOp::Const || head->args[1]->int_value < 1) {
    return std::nullopt;
  }
  const int64_t group = head->args[1]->int_value;
  const Expr expected = ir::load(0, node.dtype,
                                 {ir::loop_var(0), ir::floordiv(ir::loop_var(1), ir::int_const(group)),
                                  ir::loop_var(2), ir::loop_var(3)});
  const bool same_other_dims = ir::expr_equal(node.shape[0], source.shape[0]) &&
                               ir::expr_equal(node.shape[2], source.shape[2]) &&
                               ir::expr_equal(node.shape[3], source.shape[3]);
  const Expr heads = ir::simplify(ir::mul(source.shape[1], ir::int_const(group)), {});
  if (!ir::expr_equal(node.body, expected) || !same_other_dims || !ir::expr_equal(heads, node.shape[1])) {
    return std::nullopt;
  }
  return std::make_pair(node.inputs[0], group);
}

}  // namespace

void read_grouped_heads_in_place(Graph& graph) {
  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
    Node& node = graph.node(id);
    if (node.kind != NodeKind::Attention) continue;
    const auto k = repeated_heads(graph, node.inputs[1]), v = repeated_heads(graph, node.inputs[2]);
    // Keys and values must keep one head count: both fold, by the same group.
    if (!k || !v || k->second != v->second || k->second < 2) continue;
    node.inputs[1] = k->first;
    node.inputs[2] = v->first;
  }
}

void eliminate_common_subexpressions(Graph& graph) {
  std::vector<NodeId> replacement(graph.size());
  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) replacement[id] = id;
  std::vector<bool> is_output(graph.size(), false);
  for (const ir::GraphOutput& out : graph.outputs) {
    if (out.kind == ir::GraphOutput::Kind::Tensor) is_output[out.node] = true;
  }
  std::unordered_multimap<size_t, NodeId> seen;
  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
    Node& node = graph.node(id);
    for (NodeId& input : node.inputs) input = replacement[input];
    if (!mergeable(node)) continue;
    const size_t hash = definition_hash(node);
    std::optional<NodeId> same;
    const auto [first, last] = seen.equal_range(hash);
    for (auto it = first; it != last && !same; ++it) {
      if (same_definition(graph.node(it->second), node)) same = it->second;
    }
    // A graph output keeps its own node (the caller's tensor); it can still stand in for later ones.
    if (same && !is_output[id]) {
      replacement[id] = *same;
    } else {
      seen.emplace(hash, id);
    }
  }
}

Graph optimize(Graph graph, const OptimizeOptions& options) {
  graph.verify();
  if (options.lower_small_matmuls || options.lower_all_matmuls) lower_small_matmuls(graph, options);
  if (options.inline_pointwise) {
    pointwise_unit_reductions(graph);
    inline_pointwise(graph, options);
  }
  // Inlining leaves the absorbed producers behind; use counts must not see them.
  graph = eliminate_dead_code(graph);
  if (options.fuse_matmul_epilogues) {
    fuse_matmul_epilogues(graph);
    graph = eliminate_dead_code(graph);
    // A bias moved into a matmul can leave a pure view of its result that several views read (the
    // q, k and v of a packed projection): inlined now, they read the matmul's result in place.
    if (options.inline_pointwise) {
      inline_pointwise(graph, options);
      graph = eliminate_dead_code(graph);
    }
  }
  if (options.inline_reductions) {
    inline_reductions(graph, options);
    graph = eliminate_dead_code(graph);
  }
  read_grouped_heads_in_place(graph);
  // After inlining, so that only nodes that stay kernels merge (an attention mask or a RoPE table
  // rebuilt in every layer): merging before would give a producer that each reader used to inline
  // several readers, and keep it as a kernel of its own.
  eliminate_common_subexpressions(graph);
  graph = eliminate_dead_code(graph);
  materialize_outputs(graph);
  Graph out = eliminate_dead_code(graph);
  // After materialize_outputs: the nodes the caller's outputs are written from are final (and stay).
  if (options.assign_layouts) out = assign_layouts(out);
  // Last: nothing may move a node behind them.
  out = defer_input_updates(out);
  out.verify();
  return out;
}

}  // namespace luminal::passes
