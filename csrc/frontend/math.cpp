// Pointwise math beyond the basics: special functions (erfc, erfinv, lgamma, i0, xlogy, entr,
// sinc, logit), sign-bit ops, NaN-ignoring fmax/fmin, log-add-exp, lerp, addcmul/addcdiv,
// nan_to_num, heaviside, shifts, masked_fill. Formulas follow torch's CPU kernels so that the
// edge cases (zeros, infinities, NaN) agree.
#include <cmath>
#include <limits>

#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

using ir::ExprOp;

constexpr double kPi = 3.14159265358979323846;
constexpr double kInf = std::numeric_limits<double>::infinity();

Expr is_nan(const Expr& x) { return ir::unary(ExprOp::IsNan, x); }

// Operands named `names`, computed in the float compute dtype of the (floating) output.
template <typename Body>
void float_op(Context& ctx, const pt2::Node& node, const std::vector<const char*>& names, const char* what, Body body) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), what, " produces a floating-point result here, got ", dtype_name(out));
  std::vector<Operand> operands;
  for (const char* name : names) operands.push_back(ctx.operand(node, name));
  const DType compute = float_compute_dtype(out);
  ctx.set_output(node, b.elementwise(operands, compute, out,
                                     [&](const std::vector<Expr>& v) { return body(v, compute); }));
}

template <ExprOp Op>
void float_unary(Context& ctx, const pt2::Node& node) {
  float_op(ctx, node, {"self"}, ir::expr_op_name(Op), [](const std::vector<Expr>& v, DType) { return ir::unary(Op, v[0]); });
}

// signbit: the sign bit, also of -0.0 and NaN (copysign reads it); integers: x < 0.
void translate_signbit(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType in = b.dtype(x);
  ctx.set_output(node, b.elementwise({Operand::of(x)}, in, DType::Bool, [&](const std::vector<Expr>& v) {
    if (in == DType::Bool || in == DType::U8) return ir::bool_const(false);
    if (!is_floating(in)) return ir::lt(v[0], ir::scalar_const(0, in));
    const DType t = float_compute_dtype(in);
    return ir::lt(ir::binary(ExprOp::Copysign, ir::scalar_const(1, t), ir::cast(v[0], t)), ir::scalar_const(0, t));
  }));
}

// fmax/fmin: like maximum/minimum but a NaN operand yields the other one.
void translate_fmax_fmin(Context& ctx, const pt2::Node& node, bool is_max) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  ctx.set_output(node, b.elementwise({ctx.operand(node, "self"), ctx.operand(node, "other")}, out, out,
                                     [&](const std::vector<Expr>& v) {
                                       const Expr both = is_max ? ir::max(v[0], v[1]) : ir::min(v[0], v[1]);
                                       if (!is_floating(out)) return both;
                                       return ir::where(is_nan(v[0]), v[1], ir::where(is_nan(v[1]), v[0], both));
                                     }));
}

// round(x, decimals): torch scales by 10^|decimals| in the tensor's dtype, rounds half to even.
void translate_round_decimals(Context& ctx, const pt2::Node& node) {
  const int64_t decimals = ctx.int_arg(node, "decimals", 0);
  float_op(ctx, node, {"self"}, "round", [&](const std::vector<Expr>& v, DType t) {
    const DType out = ctx.out_dtype(node);
    // The power of ten as the tensor's dtype holds it (f16/bf16 round it), then computed in t.
    const Expr scale = ir::cast(ir::scalar_const(std::pow(10.0, static_cast<double>(std::llabs(decimals))), out), t);
    if (decimals < 0) return ir::mul(ir::unary(ExprOp::Round, ir::binary(ExprOp::Div, v[0], scale)), scale);
    return ir::binary(ExprOp::Div, ir::unary(ExprOp::Round, ir::mul(v[0], scale)), scale);
  });
}

// Shifts of integer tensors by tensors or numbers (either side may be the number).
void translate_shift(Context& ctx, const pt2::Node& node, ExprOp op) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(!is_floating(out) && out != DType::Bool, "shifts need integer tensors, got ", dtype_name(out));
  ctx.set_output(node, b.elementwise({ctx.operand(node, "self"), ctx.operand(node, "other")}, out, out,
                                     [op](const std::vector<Expr>& v) { return ir::binary(op, v[0], v[1]); }));
}

// logit(x, eps): log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given.
void translate_logit(Context& ctx, const pt2::Node& node) {
  const pt2::Argument* eps_arg = ctx.find_arg(node, "eps");
  const bool has_eps = eps_arg && !eps_arg->is_none();
  const double eps = has_eps ? ctx.float_arg(node, "eps") : 0.0;
  float_op(ctx, node, {"self"}, "logit", [&](const std::vector<Expr>& v, DType t) {
    Expr x = v[0];
    if (has_eps) x = ir::min(ir::max(x, ir::scalar_const(eps, t)), ir::scalar_const(1.0 - eps, t));
    return ir::unary(ExprOp::Log, ir::binary(ExprOp::Div, x, ir::sub(ir::scalar_const(1, t), x)));
  });
}

// xlogy(x, y) = NaN if y is NaN, 0 if x == 0, else x * log(y); xlog1py the same with log1p.
void translate_xlogy(Context& ctx, const pt2::Node& node, ExprOp log_op) {
  float_op(ctx, node, {"self", "other"}, "xlogy", [&](const std::vector<Expr>& v, DType t) {
    const Expr product = ir::mul(v[0], ir::unary(log_op, v[1]));
    return ir::where(is_nan(v[1]), v[1], ir::where(ir::eq(v[0], ir::scalar_const(0, t)), ir::scalar_const(0, t), product));
  });
}

// entr(x) = -x log x for x > 0, 0 at 0, -inf below, NaN for NaN.
void translate_entr(Context& ctx, const pt2::Node& node) {
  float_op(ctx, node, {"self"}, "entr", [](const std::vector<Expr>& v, DType t) {
    const Expr x = v[0];
    const Expr positive = ir::unary(ExprOp::Neg, ir::mul(x, ir::unary(ExprOp::Log, x)));
    return ir::where(is_nan(x), x,
                     ir::where(ir::binary(ExprOp::Gt, x, ir::scalar_const(0, t)), positive,
                               ir::where(ir::eq(x, ir::scalar_const(0, t)), ir::scalar_const(0, t), ir::scalar_const(-kInf, t))));
  });
}

// sinc(x) = sin(pi x) / (pi x), 1 at 0.
void translate_sinc(Context& ctx, const pt2::Node& node) {
  float_op(ctx, node, {"self"}, "sinc", [](const std::vector<Expr>& v, DType t) {
    const Expr scaled = ir::mul(v[0], ir::scalar_const(kPi, t));
    return ir::where(ir::eq(v[0], ir::scalar_const(0, t)), ir::scalar_const(1, t),
                     ir::binary(ExprOp::Div, ir::unary(ExprOp::Sin, scaled), scaled));
  });
}

void translate_scale(Context& ctx, const pt2::Node& node, double factor, const char* what) {
  float_op(ctx, node, {"self"}, what, [factor](const std::vector<Expr>& v, DType t) {
    return ir::mul(v[0], ir::scalar_const(factor, t));
  });
}

// logaddexp(a, b) = max + log1p(exp(-|a - b|)) (base 2: exp2 and a division by ln 2); equal
// infinities return themselves instead of NaN.
void translate_logaddexp(Context& ctx, const pt2::Node& node, bool base2) {
  float_op(ctx, node, {"self", "other"}, "logaddexp", [&](const std::vector<Expr>& v, DType t) {
    const Expr a = v[0], c = v[1];
    const Expr m = ir::max(a, c);
    const Expr gap = ir::unary(ExprOp::Neg, ir::unary(ExprOp::Abs, ir::sub(a, c)));
    const Expr tail = base2 ? ir::binary(ExprOp::Div, ir::unary(ExprOp::Log1p, ir::unary(ExprOp::Exp2, gap)),
                                         ir::scalar_const(std::log(2.0), t))
                            : ir::unary(ExprOp::Log1p, ir::unary(ExprOp::Exp, gap));
    const Expr same_infinity = ir::logical_and(ir::eq(ir::unary(ExprOp::Abs, a), ir::scalar_const(kInf, t)), ir::eq(a, c));
    return ir::where(same_infinity, a, ir::add(m, tail));
  });
}

// lerp(start, end, weight): torch's two-sided form, exact at both ends.
void translate_lerp(Context& ctx, const pt2::Node& node) {
  float_op(ctx, node, {"self", "end", "weight"}, "lerp", [](const std::vector<Expr>& v, DType t) {
    const Expr diff = ir::sub(v[1], v[0]);
    const Expr low = ir::add(v[0], ir::mul(v[2], diff));
    const Expr high = ir::sub(v[1], ir::mul(diff, ir::sub(ir::scalar_const(1, t), v[2])));
    return ir::where(ir::lt(ir::unary(ExprOp::Abs, v[2]), ir::scalar_const(0.5, t)), low, high);
  });
}

// addcmul(self, t1, t2, value) = self + value * t1 * t2; addcdiv divides (floats only). The
// products associate as eager's kernels do, which differ by device: CPU computes (value * t1) * t2
// and (value * t1) / t2, CUDA value * (t1 * t2) and value * (t1 / t2).
void translate_addc(Context& ctx, const pt2::Node& node, bool divide) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(!divide || is_floating(out), "addcdiv of integer tensors is not supported (torch refuses it too)");
  const pt2::Argument* value_arg = ctx.find_arg(node, "value");
  const Operand value = value_arg && !value_arg->is_none() ? ctx.operand(node, "value") : Operand::number(1.0, DType::I64);
  b.check_storable(value, out, divide ? "addcdiv's value" : "addcmul's value");
  const DType compute = is_floating(out) ? float_compute_dtype(out) : out;
  const bool cuda = ctx.on_cuda(node, "self");
  ctx.set_output(node, b.elementwise({ctx.operand(node, "self"), ctx.operand(node, "tensor1"),
                                      ctx.operand(node, "tensor2"), value},
                                     compute, out, [&](const std::vector<Expr>& v) {
                                       const ExprOp op = divide ? ExprOp::Div : ExprOp::Mul;
                                       const Expr term = cuda ? ir::mul(v[3], ir::binary(op, v[1], v[2]))
                                                              : ir::binary(op, ir::mul(v[3], v[1]), v[2]);
                                       return ir::add(v[0], term);
                                     }));
}

// nan_to_num(x, nan=0, posinf=dtype max, neginf=dtype lowest); integers pass through.
void translate_nan_to_num(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  const NodeId x = ctx.tensor(node, "self");
  if (!is_floating(out)) {
    ctx.set_output(node, b.copy(x));
    return;
  }
  const auto value_or = [&](const char* name, double fallback) {
    const pt2::Argument* arg = ctx.find_arg(node, name);
    return arg && !arg->is_none() ? ctx.float_arg(node, name) : fallback;
  };
  // The largest finite value of the dtype (torch's default replacements for +-inf).
  const double largest = out == DType::F64   ? std::numeric_limits<double>::max()
                         : out == DType::F16 ? 65504.0
                         : out == DType::BF16 ? 3.3895313892515355e38
                                              : static_cast<double>(std::numeric_limits<float>::max());
  const double nan = value_or("nan", 0.0), posinf = value_or("posinf", largest), neginf = value_or("neginf", -largest);
  ctx.set_output(node, b.elementwise({Operand::of(x)}, out, out, [&](const std::vector<Expr>& v) {
    const Expr y = v[0];
    return ir::where(is_nan(y), ir::scalar_const(nan, out),
                     ir::where(ir::eq(y, ir::scalar_const(kInf, out)), ir::scalar_const(posinf, out),
                               ir::where(ir::eq(y, ir::scalar_const(-kInf, out)), ir::scalar_const(neginf, out), y)));
  }));
}

// heaviside(x, values) = values where x == 0, else x > 0 (NaN gives 0, as in torch).
void translate_heaviside(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  ctx.set_output(node, b.elementwise({ctx.operand(node, "self"), ctx.operand(node, "values")}, out, out,
                                     [&](const std::vector<Expr>& v) {
                                       const Expr zero = ir::scalar_const(0, out);
                                       const Expr step = ir::cast(ir::binary(ExprOp::Gt, v[0], zero), out);
                                       return ir::where(ir::eq(v[0], zero), v[1], step);
                                     }));
}

void translate_is_infinity(Context& ctx, const pt2::Node& node, double infinity) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType in = b.dtype(x);
  ctx.set_output(node, b.elementwise({Operand::of(x)}, in, DType::Bool, [&](const std::vector<Expr>& v) {
    if (!is_floating(in)) return ir::bool_const(false);
    return ir::eq(v[0], ir::scalar_const(infinity, in));
  }));
}

// masked_fill(self, mask, value): value (a number or a 0-d tensor) where mask, in self's dtype.
void translate_masked_fill(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId mask = ctx.tensor(node, "mask");
  LUMINAL_CHECK(b.dtype(mask) == DType::Bool, "masked_fill needs a bool mask, got ", dtype_name(b.dtype(mask)));
  const NodeId self = ctx.tensor(node, "self");
  const Operand value = ctx.operand(node, "value");
  if (value.tensor) {
    LUMINAL_CHECK(b.rank(*value.tensor) == 0, "masked_fill needs a 0-dimensional value tensor, got rank ",
                  b.rank(*value.tensor));
  }
  const DType out = ctx.out_dtype(node);
  b.check_storable(value, out, "masked_fill's value");
  const NodeId filled = b.elementwise({Operand::of(mask), value, Operand::of(self)}, out, out, [](const std::vector<Expr>& v) {
    return ir::where(ir::cast(v[0], DType::Bool), v[1], v[2]);
  });
  // The mask broadcasts to self, never self to the mask.
  LUMINAL_CHECK(b.rank(filled) == b.rank(self), "masked_fill: the mask of rank ", b.rank(mask),
                " does not broadcast to self of rank ", b.rank(self));
  ctx.set_output(node, filled);
}

// fill.Tensor(self, value): self's shape and dtype filled with a 0-d tensor's value (self's
// elements are never read).
void translate_fill_tensor(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId value = ctx.tensor(node, "value");
  LUMINAL_CHECK(b.rank(value) == 0, "fill needs a 0-dimensional value tensor, got rank ", b.rank(value));
  const Shape shape = b.shape(ctx.tensor(node, "self"));
  const DType out = ctx.out_dtype(node);
  ctx.set_output(node, b.pointwise(out, shape, {value}, ir::cast(b.broadcast_load(0, value, shape), out)));
}

void translate_zero(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  ctx.set_output(node, b.full(b.shape(self), 0.0, b.dtype(self)));
}

}  // namespace

void register_math_ops(Registry& registry) {
  const std::string aten = "torch.ops.aten.";
  registry.add(aten + "erfc.default", float_unary<ExprOp::Erfc>);
  registry.add(aten + "erfinv.default", float_unary<ExprOp::Erfinv>);
  registry.add(aten + "lgamma.default", float_unary<ExprOp::Lgamma>);
  registry.add(aten + "i0.default", float_unary<ExprOp::I0>);
  registry.add(aten + "signbit.default", translate_signbit);
  for (const char* overload : {".Tensor", ".Scalar"}) {
    registry.add(aten + "copysign" + overload, [](Context& ctx, const pt2::Node& node) {
      float_op(ctx, node, {"self", "other"}, "copysign", [](const std::vector<Expr>& v, DType) {
        return ir::binary(ExprOp::Copysign, v[0], v[1]);
      });
    });
  }
  registry.add(aten + "fmax.default", [](Context& ctx, const pt2::Node& node) { translate_fmax_fmin(ctx, node, true); });
  registry.add(aten + "fmin.default", [](Context& ctx, const pt2::Node& node) { translate_fmax_fmin(ctx, node, false); });
  registry.add(aten + "round.decimals", translate_round_decimals);
  for (const char* overload : {".Tensor", ".Tensor_Scalar", ".Scalar_Tensor"}) {
    registry.add(aten + "bitwise_left_shift" + overload,
                 [](Context& ctx, const pt2::Node& node) { translate_shift(ctx, node, ExprOp::Shl); });
    registry.add(aten + "bitwise_right_shift" + overload,
                 [](Context& ctx, const pt2::Node& node) { translate_shift(ctx, node, ExprOp::Shr); });
  }
  for (const char* overload : {".Tensor", ".Scalar"}) {
    registry.add(aten + "__lshift__" + overload,
                 [](Context& ctx, const pt2::Node& node) { translate_shift(ctx, node, ExprOp::Shl); });
    registry.add(aten + "__rshift__" + overload,
                 [](Context& ctx, const pt2::Node& node) { translate_shift(ctx, node, ExprOp::Shr); });
  }
  registry.add(aten + "logit.default", translate_logit);
  for (const char* overload : {".Tensor", ".Scalar_Self", ".Scalar_Other"}) {
    registry.add(aten + "xlogy" + overload, [](Context& ctx, const pt2::Node& node) { translate_xlogy(ctx, node, ExprOp::Log); });
  }
  for (const char* overload : {".default", ".self_scalar", ".other_scalar"}) {
    registry.add(aten + "special_xlog1py" + overload,
                 [](Context& ctx, const pt2::Node& node) { translate_xlogy(ctx, node, ExprOp::Log1p); });
  }
  registry.add(aten + "special_entr.default", translate_entr);
  registry.add(aten + "sinc.default", translate_sinc);
  registry.add(aten + "deg2rad.default",
               [](Context& ctx, const pt2::Node& node) { translate_scale(ctx, node, kPi / 180.0, "deg2rad"); });
  registry.add(aten + "rad2deg.default",
               [](Context& ctx, const pt2::Node& node) { translate_scale(ctx, node, 180.0 / kPi, "rad2deg"); });
  registry.add(aten + "logaddexp.default", [](Context& ctx, const pt2::Node& node) { translate_logaddexp(ctx, node, false); });
  registry.add(aten + "logaddexp2.default", [](Context& ctx, const pt2::Node& node) { translate_logaddexp(ctx, node, true); });
  registry.add(aten + "lerp.Scalar", translate_lerp);
  registry.add(aten + "lerp.Tensor", translate_lerp);
  registry.add(aten + "addcmul.default", [](Context& ctx, const pt2::Node& node) { translate_addc(ctx, node, false); });
  registry.add(aten + "addcdiv.default", [](Context& ctx, const pt2::Node& node) { translate_addc(ctx, node, true); });
  registry.add(aten + "frac.default", [](Context& ctx, const pt2::Node& node) {
    float_op(ctx, node, {"self"}, "frac",
             [](const std::vector<Expr>& v, DType) { return ir::sub(v[0], ir::unary(ExprOp::Trunc, v[0])); });
  });
  registry.add(aten + "nan_to_num.default", translate_nan_to_num);
  registry.add(aten + "heaviside.default", translate_heaviside);
  registry.add(aten + "isposinf.default", [](Context& ctx, const pt2::Node& node) { translate_is_infinity(ctx, node, kInf); });
  registry.add(aten + "isneginf.default", [](Context& ctx, const pt2::Node& node) { translate_is_infinity(ctx, node, -kInf); });
  registry.add(aten + "masked_fill.Scalar", translate_masked_fill);
  registry.add(aten + "masked_fill.Tensor", translate_masked_fill);
  registry.add(aten + "fill.Tensor", translate_fill_tensor);
  registry.add(aten + "zero.default", translate_zero);
}

}  // namespace luminal::frontend
