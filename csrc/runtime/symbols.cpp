#include "runtime/symbols.h"

#include <limits>
#include <string_view>

#include "common/checked.h"
#include "common/error.h"
#include "common/scalar_ops.h"
#include "ir/scalar_eval.h"

namespace luminal::runtime {

using ir::Expr;
using ir::ExprOp;

namespace {

constexpr std::string_view kShapeExpression = "shape expression";

std::string expected_shape(const ir::Node& node) { return ir::shape_to_string(node.shape); }

[[noreturn]] void cannot_evaluate(const Expr& e) { fail("cannot evaluate shape expression ", ir::to_string(e)); }

// An i64 binary op of a shape expression through the op table. Symbol values come from call-time
// sizes (and integer arguments): sums and products of them can overflow, and a wrapped size would
// become a too-small allocation, so those raise instead of wrapping.
int64_t evaluate_binary(const Expr& e, int64_t a, int64_t b) {
  if (e->op == ExprOp::Add) return checked_add(a, b, kShapeExpression);
  if (e->op == ExprOp::Sub) return checked_sub(a, b, kShapeExpression);
  if (e->op == ExprOp::Mul) return checked_mul(a, b, kShapeExpression);
  if (e->op == ExprOp::FloorDiv) {
    LUMINAL_CHECK(!(a == std::numeric_limits<int64_t>::min() && b == -1), "integer overflow in a shape expression: ",
                  a, " // -1");
    return scalar::lm_floordiv_checked(a, b, [](int64_t) { fail("division by zero in a shape expression"); });
  }
  if (e->op == ExprOp::Mod) {
    return scalar::lm_mod_checked(a, b, [](int64_t) { fail("modulo by zero in a shape expression"); });
  }
  // Every other binary op follows the table (no overflow to guard).
  if (e->dtype != DType::I64 || (ir::op_info(e->op).classes & ir::op_class::DividesInt)) cannot_evaluate(e);
  return ir::eval_int(e->op, a, b, ir::IntLane{});
}

}  // namespace

int64_t evaluate(const Expr& e, const SymbolValues& symbols) {
  switch (e->op) {
    case ExprOp::Const: return e->int_value;
    case ExprOp::Symbol: {
      const auto it = symbols.find(e->symbol);
      LUMINAL_CHECK(it != symbols.end(), "shape symbol '", e->symbol, "' has no value (it is not the size of any input dimension)");
      return it->second;
    }
    LUMINAL_BINARY_OP_CASES return evaluate_binary(e, evaluate(e->args[0], symbols), evaluate(e->args[1], symbols));
    LUMINAL_NON_SHAPE_OP_CASES break;  // not shape arithmetic
  }
  cannot_evaluate(e);
}

std::vector<int64_t> evaluate(const ir::Shape& shape, const SymbolValues& symbols) {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const Expr& dim : shape) out.push_back(evaluate(dim, symbols));
  return out;
}

SymbolValues bind_inputs(const ir::Graph& graph, const std::vector<TensorView>& inputs) {
  LUMINAL_CHECK(inputs.size() == graph.inputs.size(), "expected ", graph.inputs.size(), " tensor inputs, got ",
                inputs.size());
  SymbolValues symbols;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const ir::Node& node = graph.node(graph.inputs[k]);
    const TensorView& view = inputs[k];
    LUMINAL_CHECK(view.dtype == node.dtype, "input #", k, " '", node.name, "' must be ", dtype_name(node.dtype),
                  expected_shape(node), ", got ", describe(view));
    LUMINAL_CHECK(view.complex_pairs == node.complex_pairs, "input #", k, " '", node.name, "' must be ",
                  node.complex_pairs ? "a complex tensor, as the pairs " : "", dtype_name(node.dtype),
                  expected_shape(node), ", got ", describe(view));
    LUMINAL_CHECK(view.sizes.size() == node.rank() && view.strides.size() == node.rank(), "input #", k, " '",
                  node.name, "' must have rank ", node.rank(), " ", expected_shape(node), ", got ", describe(view));
    for (size_t d = 0; d < node.rank(); ++d) {
      const Expr& dim = node.shape[d];
      if (dim->op != ExprOp::Symbol) continue;
      const auto [it, inserted] = symbols.emplace(dim->symbol, view.sizes[d]);
      LUMINAL_CHECK(inserted || it->second == view.sizes[d], "input #", k, " '", node.name, "' dimension ", d,
                    " is ", view.sizes[d], " but symbol ", dim->symbol, " was bound to ", it->second,
                    " by an earlier input");
    }
  }
  for (const auto& [name, info] : graph.symbols) {
    const auto it = symbols.find(name);
    if (it == symbols.end()) continue;  // not derivable from inputs; only an error if used
    LUMINAL_CHECK(it->second >= info.min && (!info.max || it->second <= *info.max), "shape symbol ", name, " = ",
                  it->second, " is outside the range [", info.min, ", ", info.max ? std::to_string(*info.max) : "inf",
                  "] this graph was compiled for");
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const ir::Node& node = graph.node(graph.inputs[k]);
    const std::vector<int64_t> expected = evaluate(node.shape, symbols);
    LUMINAL_CHECK(expected == inputs[k].sizes, "input #", k, " '", node.name, "' must have shape ",
                  expected_shape(node), ", got ", describe(inputs[k]));
    for (size_t d = 0; d < node.rank(); ++d) {
      LUMINAL_CHECK(inputs[k].sizes[d] <= 1 || inputs[k].strides[d] >= 0, "input #", k, " '", node.name,
                    "' has a negative stride, which is not supported");
    }
  }
  for (const ir::ShapeAssertion& assertion : graph.shape_assertions) {
    const int64_t lhs = evaluate(assertion.lhs, symbols), rhs = evaluate(assertion.rhs, symbols);
    LUMINAL_CHECK(lhs == rhs, assertion.what, ": ", ir::to_string(assertion.lhs), " = ", lhs, " but ",
                  ir::to_string(assertion.rhs), " = ", rhs);
  }
  return symbols;
}

}  // namespace luminal::runtime
