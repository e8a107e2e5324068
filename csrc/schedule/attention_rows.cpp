// mark_early_attention_rows (schedule/plan.h): the rows a decode attention requests again after it
// waits for the kernel ahead of it, proven from the graph and the plan's order.
#include <algorithm>
#include <optional>

#include "passes/passes.h"
#include "schedule/plan.h"

namespace luminal::schedule {

using ir::Expr;
using ir::ExprOp;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;

namespace {

void add_terms(const Expr& e, std::vector<Expr>& terms) {
  if (e->op == ExprOp::Add) {
    for (const Expr& arg : e->args) add_terms(arg, terms);
    return;
  }
  terms.push_back(e);
}

// The elements of an i64 graph input of static shape with 1 to kMaxEarlyRows of them (a step
// counter, a decode step's cache positions: the kernel reads every one), else 0.
int small_index_input_size(const Node& node) {
  if (node.kind != NodeKind::Input || node.dtype != DType::I64) return 0;
  int64_t count = 1;
  for (const Expr& dim : node.shape) {
    const std::optional<int64_t> size = ir::as_int_const(dim);
    if (!size || *size < 0 || *size > kMaxEarlyRows) return 0;  // checked before the product grows
    count *= *size;
  }
  return count >= 1 && count <= kMaxEarlyRows ? static_cast<int>(count) : 0;
}

// The graph input among whose values is every coordinate along `axis` that `scatter` writes, or
// none: its target there is check_index of a sum of one load of such an input (any element) and
// loop variables whose extent in the domain is 1 (always 0). An out-of-range value writes nothing
// and fails the call.
KernelSchedule::Rows rows_written(const ir::Graph& g, const Node& scatter, size_t axis) {
  const KernelSchedule::Rows none;
  if (scatter.kind != NodeKind::Scatter || axis >= scatter.scatter_targets.size()) return none;
  const Expr& target = scatter.scatter_targets[axis];
  if (target->op != ExprOp::CheckIndex || target->masked) return none;
  std::vector<Expr> terms;
  add_terms(target->args.at(0), terms);
  KernelSchedule::Rows rows;
  for (const Expr& term : terms) {
    if (term->op == ExprOp::LoopVar) {
      const auto at = static_cast<size_t>(term->index);
      const std::optional<int64_t> extent =
          at < scatter.scatter_domain.size() ? ir::as_int_const(scatter.scatter_domain[at]) : std::nullopt;
      if (extent != 1) return none;
      continue;
    }
    if (term->op != ExprOp::Load || term->masked || rows.input >= 0) return none;
    const NodeId input = scatter.inputs.at(static_cast<size_t>(term->index));
    rows.count = small_index_input_size(g.node(input));
    if (rows.count == 0) return none;
    rows.input = input;
  }
  return rows;
}

// Whether the graph updates `input` in place: state the caller passes again on every call (a step
// counter), so its pointer stays the same. A fresh index tensor per call (a decode loop's
// cache_position) would cost a kernel-parameter update per attention and call, about the time the
// early loads save.
bool updated_by_the_graph(const ir::Graph& g, NodeId input) {
  const int position = g.node(input).input_position;
  return std::any_of(g.outputs.begin(), g.outputs.end(),
                     [&](const ir::GraphOutput& out) { return out.mutated_input == position; });
}

// Whether a step up to `last` (in plan order), other than node `besides`' step, may write
// `input`'s memory: a scatter onto it or onto a view of it, or a step whose node is an output that
// updates it.
bool written_up_to(const Plan& plan, size_t last, const ir::Graph& g, NodeId input,
                   std::optional<NodeId> besides = std::nullopt) {
  const int position = g.node(input).input_position;
  for (size_t s = 0; s <= last; ++s) {
    const Node& node = g.node(plan.steps[s].node);
    if (node.id == besides) continue;
    if (node.kind == NodeKind::Scatter && passes::affine_view_base(g, node.inputs.at(0)) == input) return true;
    for (const ir::GraphOutput& out : g.outputs) {
      if (out.kind == ir::GraphOutput::Kind::Tensor && out.node == node.id && out.mutated_input == position) {
        return true;
      }
    }
  }
  return false;
}

// Whether `scatter` writes onto a graph input's memory and no other step up to `last` writes that
// memory. Every kernel lets the next one launch before it waits (lm_kernel_entry), so any kernel
// ahead of the attention may still be running when its blocks read the cache: a row another write
// puts there would be read stale. (A scatter onto another scatter's result has that one as its base.)
bool sole_write_up_to(const Plan& plan, size_t last, const ir::Graph& g, const Node& scatter) {
  const Node& base = g.node(passes::affine_view_base(g, scatter.inputs.at(0)));
  return base.kind == NodeKind::Input && !written_up_to(plan, last, g, base.id, scatter.id);
}

}  // namespace

void mark_early_attention_rows(Plan& plan, const ir::Graph& g) {
  if (plan.is_row_kernel()) return;
  for (size_t a = 0; a < plan.steps.size(); ++a) {
    Step& step = plan.steps[a];
    const Node& node = g.node(step.node);
    if (node.kind != NodeKind::Attention || !step.schedule) continue;
    const Node& keys = g.node(node.inputs.at(1));
    const Node& values = g.node(node.inputs.at(2));
    const KernelSchedule::Rows key_rows = rows_written(g, keys, 2);
    const KernelSchedule::Rows value_rows = rows_written(g, values, 2);
    if (key_rows.input < 0 || value_rows.input < 0) continue;
    if (!sole_write_up_to(plan, a, g, keys) || !sole_write_up_to(plan, a, g, values)) continue;
    if (!updated_by_the_graph(g, key_rows.input) || !updated_by_the_graph(g, value_rows.input)) continue;
    if (written_up_to(plan, a, g, key_rows.input) || written_up_to(plan, a, g, value_rows.input)) continue;
    step.schedule->key_rows = key_rows;
    step.schedule->value_rows = value_rows;
  }
}

}  // namespace luminal::schedule
