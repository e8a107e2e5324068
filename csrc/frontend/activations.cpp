// Activation functions that torch keeps as single kernels (silu, hardswish, mish, softplus, the
// shrink/threshold family, log-sigmoid, prelu; celu is with elu). Translated whole instead of decomposed: one
// node each, computed in f32 for f16/bf16 and rounded once, as torch's kernels do.
#include <algorithm>

#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

using ir::ExprOp;


// One floating-point input `self`, computed in the float compute dtype of the output.
template <typename Body>
void float_activation(Context& ctx, const pt2::Node& node, const char* name, Body body) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), name, " needs a floating-point tensor, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  const NodeId x = ctx.tensor(node, "self");
  ctx.set_output(node, b.elementwise({Operand::of(x)}, compute, out,
                                     [&](const std::vector<Expr>& v) { return body(v[0], compute); }));
}

Expr clamp(const Expr& x, double lo, double hi, DType dtype) {
  return ir::min(ir::max(x, ir::scalar_const(lo, dtype)), ir::scalar_const(hi, dtype));
}

void translate_silu(Context& ctx, const pt2::Node& node) {
  float_activation(ctx, node, "silu", [](const Expr& x, DType t) {
    return ir::binary(ExprOp::Div, x, ir::add(ir::scalar_const(1, t), ir::unary(ExprOp::Exp, ir::unary(ExprOp::Neg, x))));
  });
}

void translate_hardswish(Context& ctx, const pt2::Node& node) {
  float_activation(ctx, node, "hardswish", [](const Expr& x, DType t) {
    return ir::binary(ExprOp::Div, ir::mul(x, clamp(ir::add(x, ir::scalar_const(3, t)), 0, 6, t)), ir::scalar_const(6, t));
  });
}

void translate_hardsigmoid(Context& ctx, const pt2::Node& node) {
  float_activation(ctx, node, "hardsigmoid", [](const Expr& x, DType t) {
    return ir::binary(ExprOp::Div, clamp(ir::add(x, ir::scalar_const(3, t)), 0, 6, t), ir::scalar_const(6, t));
  });
}

void translate_mish(Context& ctx, const pt2::Node& node) {
  float_activation(ctx, node, "mish", [](const Expr& x, DType) {
    return ir::mul(x, ir::unary(ExprOp::Tanh, ir::unary(ExprOp::Log1p, ir::unary(ExprOp::Exp, x))));
  });
}

// softplus(x, beta, threshold) = x * beta > threshold ? x : log1p(exp(x * beta)) / beta
void translate_softplus(Context& ctx, const pt2::Node& node) {
  const double beta = ctx.float_arg(node, "beta", 1.0), threshold = ctx.float_arg(node, "threshold", 20.0);
  float_activation(ctx, node, "softplus", [&](const Expr& x, DType t) {
    const Expr scaled = ir::mul(x, ir::scalar_const(beta, t));
    const Expr soft = ir::binary(ExprOp::Div, ir::unary(ExprOp::Log1p, ir::unary(ExprOp::Exp, scaled)), ir::scalar_const(beta, t));
    return ir::where(ir::binary(ExprOp::Gt, scaled, ir::scalar_const(threshold, t)), x, soft);
  });
}

void translate_hardshrink(Context& ctx, const pt2::Node& node) {
  const double lambd = ctx.float_arg(node, "lambd", 0.5);
  float_activation(ctx, node, "hardshrink", [&](const Expr& x, DType t) {
    const Expr inside = ir::logical_and(ir::binary(ExprOp::Ge, x, ir::scalar_const(-lambd, t)),
                                        ir::binary(ExprOp::Le, x, ir::scalar_const(lambd, t)));
    return ir::where(inside, ir::scalar_const(0, t), x);
  });
}

void translate_softshrink(Context& ctx, const pt2::Node& node) {
  const double lambd = ctx.float_arg(node, "lambd", 0.5);
  float_activation(ctx, node, "softshrink", [&](const Expr& x, DType t) {
    const Expr above = ir::binary(ExprOp::Gt, x, ir::scalar_const(lambd, t));
    const Expr below = ir::binary(ExprOp::Lt, x, ir::scalar_const(-lambd, t));
    return ir::where(above, ir::sub(x, ir::scalar_const(lambd, t)),
                     ir::where(below, ir::add(x, ir::scalar_const(lambd, t)), ir::scalar_const(0, t)));
  });
}

// threshold(x, threshold, value) = x <= threshold ? value : x, on every real dtype.
void translate_threshold(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  const NodeId x = ctx.tensor(node, "self");
  const Operand limit = ctx.operand(node, "threshold"), value = ctx.operand(node, "value");
  b.check_storable(limit, out, "threshold's threshold");
  b.check_storable(value, out, "threshold's value");
  ctx.set_output(node, b.elementwise({Operand::of(x), limit, value}, out, out, [](const std::vector<Expr>& v) {
    return ir::where(ir::binary(ExprOp::Le, v[0], v[1]), v[2], v[0]);
  }));
}

// log_sigmoid_forward(x) -> (output, buffer). Output: min(x, 0) - log1p(exp(-|x|)), exact at
// +-inf; the buffer (exp(-max(-x, 0)) + exp(-x - max(-x, 0)) on CPU, empty on CUDA) only serves
// the backward.
void translate_log_sigmoid_forward(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "log_sigmoid needs a floating-point tensor, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  const NodeId x = ctx.tensor(node, "self");
  ctx.set_output(node, 0, b.elementwise({Operand::of(x)}, compute, out, [&](const std::vector<Expr>& v) {
    const Expr tail = ir::unary(ExprOp::Log1p, ir::unary(ExprOp::Exp, ir::unary(ExprOp::Neg, ir::unary(ExprOp::Abs, v[0]))));
    return ir::sub(ir::min(v[0], ir::scalar_const(0, compute)), tail);
  }));
  const auto z_of = [compute](const Expr& v) {
    const Expr m = ir::max(ir::unary(ExprOp::Neg, v), ir::scalar_const(0, compute));
    return ir::add(ir::unary(ExprOp::Exp, ir::unary(ExprOp::Neg, m)),
                   ir::unary(ExprOp::Exp, ir::sub(ir::unary(ExprOp::Neg, v), m)));
  };
  const Shape buffer_shape = ctx.out_shape(node, 1), x_shape = b.shape(x);
  const bool buffer_like_x = std::equal(buffer_shape.begin(), buffer_shape.end(), x_shape.begin(), x_shape.end(),
                                        [](const Expr& p, const Expr& q) { return ir::expr_equal(p, q); });
  if (buffer_like_x) {
    ctx.set_output(node, 1, b.elementwise({Operand::of(x)}, compute, ctx.out_dtype(node, 1),
                                          [&](const std::vector<Expr>& v) { return z_of(v[0]); }));
  } else {
    ctx.set_output(node, 1, b.full(buffer_shape, 0.0, ctx.out_dtype(node, 1)));
  }
}

// _prelu_kernel(x, weight) = x > 0 ? x : weight * x; weight broadcasts against x as given, or as
// one value per channel (dim 1) when it is a vector of the channel count.
void translate_prelu(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "prelu needs a floating-point tensor, got ", dtype_name(out));
  const NodeId x = ctx.tensor(node, "self");
  NodeId weight = ctx.tensor(node, "weight");
  const Shape weight_shape = b.shape(weight);
  if (weight_shape.size() == 1 && b.rank(x) >= 2 && !weight_shape[0]->is_int_const(1)) {
    weight = b.per_channel(weight, b.rank(x));
  }
  const DType compute = float_compute_dtype(out);
  ctx.set_output(node, b.elementwise({Operand::of(x), Operand::of(weight)}, compute, out, [&](const std::vector<Expr>& v) {
    return ir::where(ir::binary(ExprOp::Gt, v[0], ir::scalar_const(0, compute)), v[0], ir::mul(v[1], v[0]));
  }));
}

}  // namespace

void register_activation_ops(Registry& registry) {
  const std::string aten = "torch.ops.aten.";
  registry.add(aten + "silu.default", translate_silu);
  registry.add(aten + "hardswish.default", translate_hardswish);
  registry.add(aten + "hardsigmoid.default", translate_hardsigmoid);
  registry.add(aten + "mish.default", translate_mish);
  registry.add(aten + "softplus.default", translate_softplus);
  registry.add(aten + "hardshrink.default", translate_hardshrink);
  registry.add(aten + "softshrink.default", translate_softshrink);
  registry.add(aten + "threshold.default", translate_threshold);
  registry.add(aten + "log_sigmoid_forward.default", translate_log_sigmoid_forward);
  registry.add(aten + "_prelu_kernel.default", translate_prelu);
}

}  // namespace luminal::frontend
