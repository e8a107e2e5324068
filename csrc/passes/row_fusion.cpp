// Row fusion for the CUDA engine's node kernels (passes::fuse_row_broadcasts, rendered with a warp
// per row: schedule::Mapping::WarpPerRow).
#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_set>

#include "passes/inline_helpers.h"
#include "passes/passes.h"

namespace luminal::passes {

using ir::Expr;
using ir::ExprOp;
using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;
using namespace detail;

namespace {

// Whether every load of `slot` in `consumer` reads the producer once per row: its index (and
// mask) varies with no reduce variable and not with the innermost loop variable, and it does vary
// with every other axis longer than 1 (so that no row recomputes another row's value).
bool read_once_per_row(const Node& consumer, size_t slot) {
  const size_t last = consumer.rank() - 1;
  bool sites = false, per_row = true;
  ir::visit(consumer.body, [&](const Expr& e) {
    if (e->op != ExprOp::Load || e->index != static_cast<int>(slot)) return;
    sites = true;
    const std::vector<bool> read = loop_vars_read(e, consumer.rank());
    per_row = per_row && !read[last] && ir::free_reduce_vars(e).empty();
    for (size_t d = 0; d < last; ++d) per_row = per_row && (read[d] || consumer.shape[d]->is_int_const(1));
  });
  return sites && per_row;
}

bool can_fuse_into_row(const Graph& graph, const Node& consumer, size_t slot, const OptimizeOptions& options) {
  const Node& producer = graph.node(consumer.inputs[slot]);
  return producer.kind == NodeKind::Pointwise && producer.contraction == ir::Contraction::None &&
         ir::contains_op(producer.body, ExprOp::Fold) &&
         arithmetic_op_count(producer.body) <= options.max_fused_ops && read_once_per_row(consumer, slot);
}

constexpr int kMaxRowRounds = 8;     // producers of producers (a variance reads the mean): a few levels
constexpr int kRowRecomputeOps = 8;  // arithmetic a fused row may repeat per read of a producer
// A producer that others read too is recomputed in a fused row only when it has at most this many
// elements (static): small enough that a launch's latency, not its memory traffic, is its cost.
constexpr int64_t kSharedRecomputeElements = int64_t{1} << 16;

// Whether a producer other nodes read too may also be recomputed in a fused row: no folds, and few
// elements. Then the row no longer waits for the producer's kernel (a residual sum that the next
// residual sum also reads): the two are independent, and may share a launch
// (runtime/cuda/program.h, KernelGroup), at the price of reading the producer's inputs twice.
bool recomputable_for_row(const Node& producer) {
  if (ir::contains_op(producer.body, ExprOp::Fold)) return false;
  int64_t elements = 1;
  for (const Expr& dim : producer.shape) {
    const std::optional<int64_t> extent = ir::as_int_const(dim);
    if (!extent || *extent > kSharedRecomputeElements) return false;
    elements *= *extent;
    if (elements > kSharedRecomputeElements) return false;
  }
  return true;
}

// A fused row: a pointwise node with folds, none of which reads the innermost loop variable (so
// the kernel computes each of them once per row: schedule::Mapping::WarpPerRow).
bool is_fused_row(const Node& node) {
  if (node.kind != NodeKind::Pointwise || node.rank() == 0 || node.shape.back()->is_int_const(1)) return false;
  const int innermost = static_cast<int>(node.rank()) - 1;
  bool folds = false, per_row = true;
  ir::visit(node.body, [&](const Expr& e) {
    if (e->op != ExprOp::Fold) return;
    folds = true;
    per_row = per_row && !ir::reads_loop_var(e, innermost);
  });
  return folds && per_row;
}

// In a fused row, whether every load of `slot` reads a new element at each evaluation: its index
// varies with the innermost loop variable (an element of the row) or with a fold's variable (a
// step of a fold, which the kernel computes once per row).
bool read_once_per_evaluation(const Node& consumer, size_t slot) {
  const int innermost = static_cast<int>(consumer.rank()) - 1;
  bool ok = true;
  ir::visit(consumer.body, [&](const Expr& e) {
    if (e->op != ExprOp::Load || e->index != static_cast<int>(slot)) return;
    ok = ok && (!ir::free_reduce_vars(e).empty() || ir::reads_loop_var(e, innermost));
  });
  return ok;
}

// A producer with folds inlined into a fused row must not make the row repeat them: its own folds
// are computed once per row of the producer (it is a fused row itself), and every read maps the
// producer's row to the consumer's row (its outer indices vary with no fold's variable and not
// along the consumer's row).
bool folds_stay_per_row(const Node& consumer, size_t slot, const Node& producer) {
  if (!is_fused_row(producer)) return false;
  const int innermost = static_cast<int>(consumer.rank()) - 1;
  bool ok = true;
  ir::visit(consumer.body, [&](const Expr& e) {
    if (e->op != ExprOp::Load || e->index != static_cast<int>(slot)) return;
    for (size_t d = 0; d + 1 < e->load_rank(); ++d) {
      const Expr& index = e->args[d];
      ok = ok && ir::free_reduce_vars(index).empty() && !ir::reads_loop_var(index, innermost);
    }
  });
  return ok;
}

// Inlines into `consumer` every producer with folds that it reads once per row (rounds: a
// variance's body reads the mean). Returns whether anything was inlined.
bool inline_row_folds(Graph& graph, Node& consumer, const OptimizeOptions& options) {
  bool fused = false;
  for (int round = 0; round < kMaxRowRounds; ++round) {
    bool changed = false;
    for (size_t slot = 0; slot < consumer.inputs.size(); ++slot) {
      if (!can_fuse_into_row(graph, consumer, slot, options)) continue;
      inline_slot(graph, consumer, slot);
      changed = true;
    }
    if (!changed) break;
    fused = true;
    compact_slots(consumer);
    consumer.body = ir::simplify(ir::canonical_fold_vars(consumer.body, 0), ranges_of(consumer));
  }
  return fused;
}

// Arithmetic operations outside folds: what each read of an inlined producer recomputes (its
// folds stay row-invariant, computed once per row).
int ops_outside_folds(const Expr& body) {
  int inside = 0;
  std::unordered_set<const ir::ExprNode*> seen;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (!seen.insert(e.get()).second) return;
    if (e->op == ExprOp::Fold) {
      inside += arithmetic_op_count(e);
      return;
    }
    for (const Expr& arg : e->args) walk(arg);
  };
  walk(body);
  return std::max(0, arithmetic_op_count(body) - inside);
}

// Inlines, into the fused row `consumer`, each producer it alone reads that is cheap outside its
// folds (or that others read too, when recomputable_for_row), where each read takes a new element
// per evaluation and the row stays fused (every fold still computed once per row). Returns whether
// anything was inlined.
// Shared producers only where `share` says so, and only among the row's reads before this call
// (never the producers of an inlined one: a chain of residual sums would pile up in the row).
bool inline_cheap_producers(Graph& graph, Node& consumer, const std::vector<int>& uses, bool share) {
  bool changed = false;
  const size_t reads_before = consumer.inputs.size();
  for (size_t slot = 0; slot < consumer.inputs.size(); ++slot) {
    const Node& producer = graph.node(consumer.inputs[slot]);
    if (producer.kind != NodeKind::Pointwise || producer.contraction != ir::Contraction::None) continue;
    if (ops_outside_folds(producer.body) > kRowRecomputeOps) continue;
    if (uses[producer.id] != 1 && !(share && slot < reads_before && recomputable_for_row(producer))) continue;
    if (!read_once_per_evaluation(consumer, slot)) continue;
    if (ir::contains_op(producer.body, ExprOp::Fold) && !folds_stay_per_row(consumer, slot, producer)) continue;
    const Node before = consumer;
    inline_slot(graph, consumer, slot);
    if (!is_fused_row(consumer)) {
      consumer = before;
      continue;
    }
    changed = true;
  }
  if (changed) {
    compact_slots(consumer);
    consumer.body = ir::simplify(ir::canonical_fold_vars(consumer.body, 0), ranges_of(consumer));
  }
  return changed;
}

}  // namespace

Graph fuse_row_broadcasts(Graph graph, const OptimizeOptions& options) {
  bool fused = false;
  for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
    Node& consumer = graph.node(id);
    if (consumer.kind != NodeKind::Pointwise || consumer.contraction != ir::Contraction::None) continue;
    if (consumer.rank() == 0 || consumer.shape.back()->is_int_const(1)) continue;
    fused = inline_row_folds(graph, consumer, options) || fused;
  }
  if (!fused) return graph;
  // A cheap producer read by nothing but a fused row (a residual sum feeding a LayerNorm, the
  // centred values a variance and the output both read) is recomputed at each of its reads
  // there: the row stays in L1, and a kernel and a round trip through memory go away. The
  // producers folded in above are dead now: use counts are taken without them.
  graph = eliminate_dead_code(graph);
  for (int round = 0; round < kMaxRowRounds; ++round) {
    const std::vector<int> uses = graph.use_counts();
    bool changed = false;
    for (NodeId id = 0; id < static_cast<NodeId>(graph.size()); ++id) {
      if (is_fused_row(graph.node(id))) {
        changed = inline_cheap_producers(graph, graph.node(id), uses, /*share=*/round == 0) || changed;
      }
    }
    if (!changed) break;
    graph = eliminate_dead_code(graph);
  }
  Graph out = eliminate_dead_code(graph);
  out.verify();
  return out;
}

}  // namespace luminal::passes
