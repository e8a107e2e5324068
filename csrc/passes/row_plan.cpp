#include "passes/row_plan.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "common/error.h"
#include "ir/simplify.h"
#include "passes/passes.h"

namespace luminal::passes {

using ir::Expr;
using ir::ExprOp;
using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;

namespace {

// A fold's cost when its extent varies per row (an embedding bag): a typical bag length.
constexpr int64_t kAssumedRaggedLength = 4;

std::string describe(const Node& node) { return str_cat("%", node.id, " ", node.origin, " ", ir::node_signature(node)); }

// Evaluation cost of one element: operations, with fold bodies counted once per iteration and
// only the dearer side of a `where` (the generated code evaluates one side).
int64_t element_cost(const Expr& root) {
  std::unordered_map<const ir::ExprNode*, int64_t> memo;
  std::function<int64_t(const Expr&)> cost = [&](const Expr& e) -> int64_t {
    if (auto it = memo.find(e.get()); it != memo.end()) return 0;  // shared: computed once
    int64_t total = 1;
    if (e->op == ExprOp::Fold) {
      const auto length = ir::as_int_const(e->args[0]);
      total += cost(e->args[0]) + (length ? *length : kAssumedRaggedLength) * cost(e->args[1]);
    } else if (e->op == ExprOp::Where) {
      total += cost(e->args[0]) + std::max(cost(e->args[1]), cost(e->args[2]));
    } else {
      for (const Expr& arg : e->args) total += cost(arg);
    }
    memo.emplace(e.get(), total);
    return total;
  };
  return cost(root);
}

// The first load of a computed tensor that does not read the consumer's own row, if any.
Expr non_row_load(const Graph& graph, const Node& node) {
  Expr found;
  ir::visit(node.body, [&](const Expr& e) {
    if (found || e->op != ExprOp::Load) return;
    if (!graph.node(node.inputs[e->index]).is_compute()) return;
    const bool own_row = e->load_rank() >= 1 && e->args[0]->op == ExprOp::LoopVar && e->args[0]->index == 0;
    if (!own_row) found = e;
  });
  return found;
}

// The constant's element at `index` when every index is a constant inside its shape.
Expr constant_at(const ir::ConstantData& c, DType dtype, const std::vector<Expr>& index, size_t rank) {
  if (rank != c.sizes.size() || dtype != c.dtype) return nullptr;
  int64_t offset = c.storage_offset;
  for (size_t d = 0; d < rank; ++d) {
    const auto i = ir::as_int_const(index[d]);
    if (!i || *i < 0 || *i >= c.sizes[d]) return nullptr;
    offset += *i * c.strides[d];
  }
  const size_t bytes = dtype_size(dtype);
  if (offset < 0 || static_cast<size_t>(offset + 1) * bytes > c.bytes->size()) return nullptr;
  const char* at = c.bytes->data() + static_cast<size_t>(offset) * bytes;
  auto read = [at](auto value) {
    std::memcpy(&value, at, sizeof value);
    return value;
  };
  switch (dtype) {
    case DType::F32: return ir::float_const(read(float{}), dtype);
    case DType::F64: return ir::float_const(read(double{}), dtype);
    case DType::I64: return ir::int_const(read(int64_t{}), dtype);
    case DType::I32: return ir::int_const(read(int32_t{}), dtype);
    case DType::I16: return ir::int_const(read(int16_t{}), dtype);
    case DType::I8: return ir::int_const(read(int8_t{}), dtype);
    case DType::U8: return ir::int_const(read(uint8_t{}), dtype);
    case DType::Bool: return ir::bool_const(read(uint8_t{}) != 0);
    default: return nullptr;  // f16/bf16 stay loads
  }
}

// Simplifies, replacing loads of constants at constant positions by their values, until nothing
// changes (a folded index can make an outer load constant too).
Expr fold_constant_loads(const Graph& graph, const Node& node, Expr body, const ir::IndexRanges& ranges) {
  constexpr int kMaxRounds = 8;
  for (int round = 0; round < kMaxRounds; ++round) {
    body = ir::simplify(body, ranges);
    bool changed = false;
    body = ir::transform(body, [&](const Expr& e, const std::vector<Expr>& args) -> Expr {
      if (e->op != ExprOp::Load) return nullptr;
      const Node& producer = graph.node(node.inputs[e->index]);
      if (producer.kind != NodeKind::Constant) return nullptr;
      Expr value = constant_at(*producer.constant, e->dtype, args, e->load_rank());
      if (!value) return nullptr;
      if (e->masked) {
        const auto mask = ir::as_int_const(args.back());
        if (!mask) return nullptr;
        if (*mask == 0) value = ir::scalar_const(0, e->dtype);
      }
      changed = true;
      return value;
    });
    if (!changed) return body;
  }
  return ir::simplify(body, ranges);
}

RowPlan decline(std::string reason) {
  RowPlan plan;
  plan.reason = std::move(reason);
  return plan;
}

}  // namespace

std::vector<Expr> specialize_row_elements(const Graph& graph, const Node& node) {
  std::vector<int64_t> dims;
  for (size_t d = 1; d < node.rank(); ++d) {
    const auto extent = ir::as_int_const(node.shape[d]);
    LUMINAL_CHECK(extent, "internal error: row dimension ", d, " of ", describe(node), " is not constant");
    dims.push_back(*extent);
  }
  int64_t elements = 1;
  for (const int64_t extent : dims) elements *= extent;
  const ir::IndexRanges ranges{node.shape, {}};
  std::vector<Expr> bodies;
  bodies.reserve(static_cast<size_t>(elements));
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t j = 0; j < elements; ++j) {
    int64_t rest = j;
    for (size_t d = dims.size(); d-- > 0;) {
      index[d] = rest % dims[d];
      rest /= dims[d];
    }
    const Expr body = ir::transform(node.body, [&](const Expr& e, const std::vector<Expr>&) -> Expr {
      if (e->op != ExprOp::LoopVar || e->index == 0) return nullptr;
      return ir::int_const(index.at(static_cast<size_t>(e->index - 1)));
    });
    bodies.push_back(fold_constant_loads(graph, node, body, ranges));
  }
  return bodies;
}

Node reduce_as_pointwise(const Node& reduce) {
  LUMINAL_CHECK(reduce.kind == NodeKind::Reduce, "internal error: ", describe(reduce), " is not a reduction");
  // The body's free reduce variables 0..n-1 become the fold variables (nested folds the body
  // already has use larger ids).
  Expr value = reduce.body;
  for (size_t j = reduce.reduce_extents.size(); j-- > 0;) {
    value = ir::fold(reduce.reduce_op, static_cast<int>(j), reduce.reduce_extents[j], value);
  }
  Node out = reduce;
  out.kind = NodeKind::Pointwise;
  // A convolution's body is wider than its node (summed in f32, rounded once when stored); a
  // pointwise body has the node's dtype, so the fold is rounded by a cast (a no-op otherwise).
  out.body = ir::cast(value, reduce.dtype);
  out.reduce_extents.clear();
  out.convolution = nullptr;  // a fold in the row kernel, no longer a node a library computes
  return out;
}

RowPlan plan_row_kernel(const Graph& translated, const RowLimits& limits) {
  OptimizeOptions options;
  options.lower_all_matmuls = true;
  options.fuse_matmul_epilogues = false;
  options.max_recompute_factor = 1;  // a row is computed once, then read from registers
  options.assign_layouts = false;     // rows are the logical leading dimension
  Graph graph;
  try {
    graph = optimize(translated, options);
  } catch (const Error& error) {
    return decline(str_cat("the row pipeline failed: ", error.what()));
  }
  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
    if (graph.node(id).kind == NodeKind::Reduce) graph.node(id) = reduce_as_pointwise(graph.node(id));
  }

  // The batch extent: the leading dimension of the first tensor output.
  Expr rows;
  for (const ir::GraphOutput& out : graph.outputs) {
    if (out.kind != ir::GraphOutput::Kind::Tensor) continue;
    const Node& node = graph.node(out.node);
    if (!node.is_compute()) return decline(str_cat("output ", describe(node), " is not computed by the graph"));
    if (node.rank() == 0) return decline(str_cat("output ", describe(node), " has no batch dimension"));
    if (!rows) rows = node.shape[0];
  }
  if (!rows) return decline("the graph has no tensor outputs");

  RowPlan plan;
  int64_t total_elements = 0, heaviest_work = -1;
  std::string heaviest;
  size_t computed = 0;
  for (const Node& node : graph.nodes()) {
    if (!node.is_compute()) continue;
    ++computed;
    if (node.contraction != ir::Contraction::None) {
      return decline(str_cat(describe(node), " is a grouped matmul, which runs as its own tiled kernel"));
    }
    if (node.kind == NodeKind::Attention) {
      return decline(str_cat(describe(node), " is attention, which runs as its own kernel"));
    }
    if (node.kind == NodeKind::Scatter) {
      return decline(str_cat(describe(node), " is a scatter, which runs as its own kernel"));
    }
    if (node.kind == NodeKind::MatMul) {
      return decline(str_cat(describe(node), " is a ", dtype_name(node.dtype),
                             " matmul, which the row kernel does not compute (only float32/float64 ones)"));
    }
    if (node.rank() == 0 || !ir::expr_equal(node.shape[0], rows)) {
      return decline(str_cat(describe(node), " does not have the batch dimension ", ir::to_string(rows),
                             " as its leading dimension"));
    }
    int64_t row_elements = 1;
    for (size_t d = 1; d < node.rank(); ++d) {
      const auto extent = ir::as_int_const(node.shape[d]);
      if (!extent) return decline(str_cat(describe(node), ": row dimension ", d, " is not a compile-time constant"));
      row_elements *= *extent;
    }
    if (row_elements == 0) {  // a row of nothing would be a zero-length register array
      return decline(str_cat(describe(node), " has rows without elements"));
    }
    if (row_elements > limits.max_row_elements) {
      return decline(str_cat(describe(node), " has ", row_elements, " elements per row; the register-resident row "
                             "kernel takes at most ", limits.max_row_elements));
    }
    if (const Expr load = non_row_load(graph, node)) {
      return decline(str_cat(describe(node), " reads %", node.inputs[load->index], " at ", ir::to_string(load),
                             ", not at its own row i0"));
    }
    total_elements += row_elements;
    int64_t work = 0;
    for (const Expr& element : specialize_row_elements(graph, node)) work += element_cost(element);
    plan.work += work;
    if (work > heaviest_work) {
      heaviest_work = work;
      heaviest = describe(node);
    }
  }
  if (computed == 0) return decline("the graph computes nothing");
  if (total_elements > limits.max_total_elements) {
    return decline(str_cat("intermediate rows hold ", total_elements, " elements; the row kernel keeps at most ",
                           limits.max_total_elements, " in registers"));
  }
  if (plan.work > limits.max_work) {
    return decline(str_cat("a row costs about ", plan.work, " operations (", heaviest, ": ", heaviest_work,
                           "); the one-thread-per-row kernel takes at most ", limits.max_work));
  }
  plan.accepted = true;
  plan.reason = str_cat(computed, " computed nodes, ", total_elements, " values per row, about ", plan.work,
                        " operations per row");
  plan.rows = rows;
  plan.graph = std::move(graph);
  return plan;
}

}  // namespace luminal::passes
