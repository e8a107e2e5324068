// Tensor constructors: arange, full/zeros/ones (and *_like), empty (zero-filled), scalar_tensor.
#include <cmath>

#include "common/error.h"
#include "frontend/translate.h"
#include "ir/simplify.h"

namespace luminal::frontend {

namespace {

// Number of elements of arange(start, end, step): ceil((end - start) / step), at least 0.
Expr arange_length(const Operand& start, const Operand& end, double step, const std::optional<Expr>& symbolic_end) {
  if (symbolic_end) {
    const double first = start.number("arange's start");
    LUMINAL_CHECK(step == std::floor(step) && first == std::floor(first),
                  "arange with a symbolic end needs integer start and step");
    const auto s = static_cast<int64_t>(first), st = static_cast<int64_t>(step);
    LUMINAL_CHECK(st > 0, "arange with a symbolic end needs a positive step");
    return ir::simplify(
        ir::max(ir::floordiv(ir::add(ir::sub(*symbolic_end, ir::int_const(s)), ir::int_const(st - 1)), ir::int_const(st)),
                ir::int_const(0)),
        {});
  }
  const double count = std::ceil((end.number("arange's end") - start.number("arange's start")) / step);
  LUMINAL_CHECK(std::isfinite(count), "arange length is not finite");
  return ir::int_const(std::max<int64_t>(0, static_cast<int64_t>(count)));
}

Operand number_or_symbol(Context& ctx, const pt2::Node& node, std::string_view name, double fallback,
                         std::optional<Expr>* symbolic) {
  const pt2::Argument* arg = ctx.find_arg(node, name);
  if (!arg || arg->is_none()) return Operand::number(fallback, DType::I64);
  if (arg->kind() == pt2::Argument::Kind::SymInt) {
    const Expr e = ctx.symint_arg(node, name).value();
    if (auto c = ir::as_int_const(e)) return Operand::number(static_cast<double>(*c), DType::I64);
    LUMINAL_CHECK(symbolic != nullptr, "argument '", name, "' cannot be symbolic");
    *symbolic = e;
    return Operand::number(0, DType::I64);
  }
  return ctx.operand(node, name);
}

void translate_arange(Context& ctx, const pt2::Node& node) {
  std::optional<Expr> symbolic_end;
  const bool has_start = ctx.find_arg(node, "start") != nullptr;
  const Operand start = has_start ? number_or_symbol(ctx, node, "start", 0, nullptr) : Operand::number(0, DType::I64);
  const Operand end = number_or_symbol(ctx, node, "end", 0, &symbolic_end);
  const double step = ctx.float_arg(node, "step", 1.0);
  LUMINAL_CHECK(step != 0.0, "arange step must be non-zero");
  LUMINAL_CHECK(!start.tensor && !end.tensor, "arange bounds must be numbers");
  const Expr length = arange_length(start, end, step, symbolic_end);
  ctx.set_output(node, ctx.builder().arange(length, start.number("arange's start"), step, ctx.out_dtype(node)));
}

double fill_value(Context& ctx, const pt2::Node& node) {
  return ctx.operand(node, "fill_value").number("fill_value");
}

void translate_full(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().full(ctx.out_shape(node), fill_value(ctx, node), ctx.out_dtype(node)));
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
  ctx.set_output(node, ctx.builder().full({}, value.number("scalar_tensor's value"), dtype));
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
