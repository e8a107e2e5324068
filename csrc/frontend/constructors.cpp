// Tensor constructors: arange, full/zeros/ones (and *_like), empty (zero-filled), scalar_tensor.
#include <cmath>

#include "common/error.h"
#include "frontend/translate.h"
#include "ir/simplify.h"

namespace luminal::frontend {

namespace {

// step = num / den exactly, den a power of two (every double is one; refused beyond 2^40).
std::pair<int64_t, int64_t> binary_fraction(double step) {
  int64_t den = 1;
  while (std::floor(step * static_cast<double>(den)) != step * static_cast<double>(den)) {
    LUMINAL_CHECK(den < (int64_t{1} << 40), "arange with symbolic bounds and step ", step, " is not supported");
    den *= 2;
  }
  const double num = step * static_cast<double>(den);
  LUMINAL_CHECK(std::fabs(num) < 9.0e15, "arange step ", step, " is too large");
  return {static_cast<int64_t>(num), den};
}

// Number of elements of arange(start, end, step) with integer (possibly symbolic) bounds:
// ceil((end - start) / step), at least 0, in exact integer arithmetic.
Expr symbolic_arange_length(const Expr& start, const Expr& end, double step) {
  auto [num, den] = binary_fraction(step);
  Expr distance = ir::mul(ir::sub(end, start), ir::int_const(den));  // (end - start) / step = distance / num
  if (num < 0) {
    distance = ir::sub(ir::int_const(0), distance);
    num = -num;
  }
  return ir::simplify(
      ir::max(ir::floordiv(ir::add(distance, ir::int_const(num - 1)), ir::int_const(num)), ir::int_const(0)), {});
}

// A bound of arange: a number, or a symbolic integer (a SymInt, or a SymFloat whose value is an
// integer expression of sizes, e.g. -2.0 * n); `symbolic` receives the latter.
Operand number_or_symbol(Context& ctx, const pt2::Node& node, std::string_view name, double fallback,
                         std::optional<Expr>* symbolic) {
  const pt2::Argument* arg = ctx.find_arg(node, name);
  if (!arg || arg->is_none()) return Operand::number(fallback, DType::I64);
  std::optional<Expr> e;
  if (arg->kind() == pt2::Argument::Kind::SymInt) e = ctx.symint_arg(node, name).value();
  if (arg->kind() == pt2::Argument::Kind::SymFloat) {
    const pt2::SymFloatArgument& value = arg->as_sym_float();
    if (!value.is_name()) return Operand::number(std::get<double>(value.value), DType::F64);
    const auto& floats = ctx.pt2_graph().sym_float_values;
    const auto it = floats.find(std::get<std::string>(value.value));
    LUMINAL_CHECK(it != floats.end(), "unknown symbolic float '", std::get<std::string>(value.value), "'");
    if (const auto* constant = std::get_if<double>(&it->second.value)) return Operand::number(*constant, DType::F64);
    e = sympy_to_expr(std::get<pt2::SymExpr>(it->second.value).expr_str);  // refuses non-integer values
  }
  if (!e) return ctx.operand(node, name);
  if (auto c = ir::as_int_const(*e)) return Operand::integer_number(*c);
  *symbolic = *e;
  return Operand::number(0, DType::I64);
}

// A constant bound as an integer expression (symbolic bounds need integer constant ones).
Expr integer_bound(const Operand& bound, const std::optional<Expr>& symbolic) {
  if (symbolic) return *symbolic;
  const double value = bound.number("arange's bound");
  LUMINAL_CHECK(value == std::floor(value) && std::fabs(value) < 9.0e15,
                "arange with a symbolic bound needs integer constant bounds, got ", value);
  return ir::int_const(static_cast<int64_t>(value));
}

void translate_arange(Context& ctx, const pt2::Node& node) {
  std::optional<Expr> symbolic_start, symbolic_end;
  const bool has_start = ctx.find_arg(node, "start") != nullptr;
  const Operand start =
      has_start ? number_or_symbol(ctx, node, "start", 0, &symbolic_start) : Operand::number(0, DType::I64);
  const Operand end = number_or_symbol(ctx, node, "end", 0, &symbolic_end);
  const double step = ctx.float_arg(node, "step", 1.0);
  LUMINAL_CHECK(step != 0.0, "arange step must be non-zero");
  LUMINAL_CHECK(!start.tensor && !end.tensor, "arange bounds must be numbers");
  // The range is computed from doubles below: exact for integers up to 2^53 only.
  constexpr double kExactInDouble = 9007199254740992.0;
  for (const double value : {symbolic_start ? 0.0 : start.scalar, symbolic_end ? 0.0 : end.scalar, step}) {
    LUMINAL_CHECK(std::fabs(value) <= kExactInDouble, "arange with a bound or step of magnitude ", value,
                  " beyond 2^53 (computed in doubles here, it would not be exact)");
  }
  Builder& b = ctx.builder();
  if (!symbolic_start && !symbolic_end) {
    const double count = std::ceil((end.number("arange's end") - start.number("arange's start")) / step);
    LUMINAL_CHECK(std::isfinite(count), "arange length is not finite");
    const Expr length = ir::int_const(std::max<int64_t>(0, static_cast<int64_t>(count)));
    ctx.set_output(node, b.arange(length, start.number("arange's start"), step, ctx.out_dtype(node)));
    return;
  }
  const Expr first = integer_bound(start, symbolic_start);
  const Expr length = symbolic_arange_length(first, integer_bound(end, symbolic_end), step);
  if (!symbolic_start) {
    ctx.set_output(node, b.arange(length, start.number("arange's start"), step, ctx.out_dtype(node)));
    return;
  }
  ctx.set_output(node, b.arange(length, first, step, ctx.out_dtype(node)));
}

void translate_full(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().full(ctx.out_shape(node), ctx.operand(node, "fill_value"), ctx.out_dtype(node)));
}

// zeros/ones/empty and their *_like variants: the shape comes from the export metadata. `empty`
// is filled with zeros so that no uninitialized memory can leak into results.
template <int Value>
void translate_constant_fill(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().full(ctx.out_shape(node), Value, ctx.out_dtype(node)));
}

// scalar_tensor(s): a 0-d tensor of a number, or of an integer known at run time (a SymInt).
void translate_scalar_tensor(Context& ctx, const pt2::Node& node) {
  const Operand value = ctx.operand(node, "s");
  const DType dtype = ctx.out_dtype(node);
  if (value.symbolic) {
    ctx.set_output(node, ctx.builder().pointwise(dtype, {}, {}, ir::cast(value.symbolic, dtype)));
    return;
  }
  ctx.set_output(node, ctx.builder().full({}, value, dtype));
}

}  // namespace

void register_constructor_ops(Registry& registry) {
  const std::string aten = "torch.ops.aten.";
  registry.add(aten + "arange.default", translate_arange);
  registry.add(aten + "arange.start", translate_arange);
  registry.add(aten + "arange.start_step", translate_arange);
  registry.add(aten + "full.default", translate_full);
  registry.add(aten + "full_like.default", translate_full);
  registry.add(aten + "new_full.default", translate_full);
  for (const char* name : {"zeros.default", "zeros_like.default", "new_zeros.default", "empty.memory_format",
                           "empty_like.default", "new_empty.default", "empty_permuted.default",
                           "empty_strided.default", "new_empty_strided.default"}) {
    registry.add(aten + name, translate_constant_fill<0>);
  }
  for (const char* name : {"ones.default", "ones_like.default", "new_ones.default"}) {
    registry.add(aten + name, translate_constant_fill<1>);
  }
  registry.add(aten + "scalar_tensor.default", translate_scalar_tensor);
}

}  // namespace luminal::frontend
