// Elementwise math: unary functions, arithmetic with tensors and Python scalars, comparisons,
// where, clamp. Result dtypes come from the export metadata; operands are promoted the way
// torch.result_type does.
#include <limits>
#include <optional>

#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

using ir::ExprOp;

// Unary ops computed in the output dtype (float ops on integer inputs promote, as in torch).
void translate_unary(Context& ctx, const pt2::Node& node, ExprOp op) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  const NodeId x = ctx.tensor(node, "self");
  ctx.set_output(node, b.elementwise({Operand::of(x)}, out, out,
                                     [op](const std::vector<Expr>& v) { return ir::unary(op, v[0]); }));
}

bool is_half(DType dtype) { return dtype == DType::F16 || dtype == DType::BF16; }

// Whether the node's tensors live on a CUDA device in eager (its first tensor among self and
// other decides: both share one device).
bool arithmetic_on_cuda(const Context& ctx, const pt2::Node& node) {
  for (const char* name : {"self", "other"}) {
    const pt2::Argument* arg = ctx.find_arg(node, name);
    if (arg != nullptr && arg->is_tensor()) return ctx.on_cuda(node, name);
  }
  return false;
}

// A number's float32 expression rounded to the half type `half` first (double -> float -> half,
// as c10's conversion of a Scalar to Half or BFloat16 goes).
Expr rounded_through(const Expr& number, DType half) { return ir::cast(ir::cast(number, half), DType::F32); }

// Binary arithmetic: compute in torch.result_type of the operands, store in the output dtype.
// Half-precision (f16/bf16) add, sub and mul compute as eager's kernels do: in float32, rounded
// once into the output. Their numbers (Python scalars, SymInts, alpha) enter as float32 on CUDA
// (opmath_gpu_kernel_with_scalars) and in CPU's mul (which keeps a scalar's original value); CPU's
// add and sub round them to the half type first (x + 0.1 adds half(0.1) on CPU, 0.1f on CUDA).
// Computing in the half type rounded every number to it: x * 1e5 in float16 overflowed to inf
// where eager's product fits, and (1 - mask) * -1e9 became 0 * -inf = NaN where eager has -0.
void translate_binary(Context& ctx, const pt2::Node& node, ExprOp op, bool reversed = false) {
  Builder& b = ctx.builder();
  Operand lhs = ctx.operand(node, "self");
  Operand rhs = ctx.operand(node, "other");
  if (reversed) std::swap(lhs, rhs);
  const DType out = ctx.out_dtype(node);
  // `alpha` scales the second operand of add/sub (first of rsub, i.e. `self`); an integer alpha
  // exactly (beyond 2^53 too).
  const pt2::Argument* alpha_arg = ctx.find_arg(node, "alpha");
  const std::optional<Operand> alpha =
      alpha_arg && !alpha_arg->is_none() ? std::optional<Operand>(ctx.operand(node, "alpha")) : std::nullopt;
  // With two tensors and no alpha the op rounds once either way: its expression stays as it was
  // (in the half type), which the pattern matchers of later stages read.
  const bool has_number = !lhs.tensor || !rhs.tensor || (alpha && !alpha->is_one());
  const bool half_arithmetic =
      has_number && is_half(out) && (op == ExprOp::Add || op == ExprOp::Sub || op == ExprOp::Mul);
  const DType compute = is_comparison_op(op) ? b.result_type({lhs, rhs}) : half_arithmetic ? DType::F32 : out;
  const bool numbers_in_half = half_arithmetic && op != ExprOp::Mul && !arithmetic_on_cuda(ctx, node);
  const bool scales = alpha && !alpha->is_one();
  if (alpha) b.check_storable(*alpha, compute, "alpha");  // eager converts alpha to the dtype, checked
  ctx.set_output(node, b.elementwise({lhs, rhs}, compute, out, [&](const std::vector<Expr>& v) {
    const auto number = [&](const Expr& value, bool is_number) {
      return numbers_in_half && is_number ? rounded_through(value, out) : value;
    };
    const Expr first = number(v[0], !lhs.tensor);
    Expr scaled = number(v[1], !rhs.tensor);
    if (scales) scaled = ir::mul(scaled, number(b.scalar_expr(*alpha, compute), true));
    return ir::binary(op, first, scaled);
  }));
}

// torch's c10::div_floor_floating: floor((a - fmod(a, b)) / b), corrected so that the quotient of
// an exact multiple is not off by one (1.0 // 0.1 is 9, not 10), zero keeps the sign of a / b, and
// division by zero gives a / b (inf or NaN).
Expr floor_divide_floating(const Expr& a, const Expr& b, DType dtype) {
  const Expr zero = ir::scalar_const(0, dtype), one = ir::scalar_const(1, dtype);
  const Expr mod = ir::binary(ExprOp::Fmod, a, b);
  Expr div = ir::binary(ExprOp::Div, ir::binary(ExprOp::Sub, a, mod), b);
  const Expr signs_differ = ir::binary(ExprOp::Ne, ir::binary(ExprOp::Lt, b, zero), ir::binary(ExprOp::Lt, mod, zero));
  div = ir::where(ir::logical_and(ir::binary(ExprOp::Ne, mod, zero), signs_differ), ir::binary(ExprOp::Sub, div, one),
                  div);
  Expr floored = ir::unary(ExprOp::Floor, div);
  const Expr above_half = ir::binary(ExprOp::Gt, ir::binary(ExprOp::Sub, div, floored), ir::scalar_const(0.5, dtype));
  floored = ir::where(above_half, ir::binary(ExprOp::Add, floored, one), floored);
  const Expr quotient = ir::binary(ExprOp::Div, a, b);
  floored = ir::where(ir::binary(ExprOp::Eq, div, zero), ir::binary(ExprOp::Copysign, zero, quotient), floored);
  return ir::where(ir::binary(ExprOp::Eq, b, zero), quotient, floored);
}

// a / b, or a times b's reciprocal (CUDA's division by a number), in `compute`.
Expr quotient_of(const Expr& a, const Expr& b, DType compute, bool by_reciprocal) {
  return by_reciprocal ? ir::mul(a, ir::binary(ExprOp::Div, ir::scalar_const(1, compute), b))
                       : ir::binary(ExprOp::Div, a, b);
}

// div(a, b, rounding_mode) of floating tensors, as torch's kernels compute half types: floor in
// float32, rounded once; trunc of two tensors truncates the quotient rounded to the half type
// (7 / -0.7 in float16 is -10, not -9: the quotient -9.997 rounds to -10 first), trunc by a
// Python scalar divides in float32 by the unrounded scalar on CPU, and multiplies by its float32
// reciprocal on CUDA (div_trunc_kernel_cuda: a quotient near an integer can truncate one lower).
NodeId floating_rounding_division(Builder& b, const Operand& lhs, const Operand& rhs, DType out, bool floor,
                                  bool cuda) {
  if (!floor) {
    const DType compute = rhs.tensor ? out : float_compute_dtype(out);
    const bool by_reciprocal = cuda && !rhs.tensor;
    return b.elementwise({lhs, rhs}, compute, out, [&](const std::vector<Expr>& v) {
      return ir::unary(ExprOp::Trunc, quotient_of(v[0], v[1], compute, by_reciprocal));
    });
  }
  const DType compute = float_compute_dtype(out);
  return b.elementwise({lhs, rhs}, compute, out,
                       [&](const std::vector<Expr>& v) { return floor_divide_floating(v[0], v[1], compute); });
}

void translate_div(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const Operand lhs = ctx.operand(node, "self");
  const Operand rhs = ctx.operand(node, "other");
  const DType out = ctx.out_dtype(node);
  const std::optional<std::string> mode = ctx.string_arg(node, "rounding_mode");
  if (!mode) {
    LUMINAL_CHECK(is_floating(out), "true division must produce a floating dtype, got ", dtype_name(out));
    // Eager divides half types in float32 by the number as given (x / 1e5 in float16 is no 0: the
    // number is not rounded to float16 first), rounded once; on CUDA, division by a number is a
    // product with its reciprocal, computed once in float32 (float64 for doubles:
    // div_true_kernel_cuda), which differs from the quotient in the last place.
    // Two tensors round once either way: their expression stays in the output dtype.
    const DType compute = lhs.tensor && rhs.tensor ? out : float_compute_dtype(out);
    const bool by_reciprocal = !rhs.tensor && arithmetic_on_cuda(ctx, node);
    ctx.set_output(node, b.elementwise({lhs, rhs}, compute, out, [&](const std::vector<Expr>& v) {
      return quotient_of(v[0], v[1], compute, by_reciprocal);
    }));
    return;
  }
  LUMINAL_CHECK(*mode == "floor" || *mode == "trunc", "unknown rounding_mode '", *mode, "'");
  if (is_floating(out)) {
    const bool cuda = lhs.tensor && ctx.on_cuda(node, "self");
    ctx.set_output(node, floating_rounding_division(b, lhs, rhs, out, *mode == "floor", cuda));
    return;
  }
  ctx.set_output(node, b.elementwise({lhs, rhs}, out, out, [&](const std::vector<Expr>& v) {
    if (*mode == "floor") return ir::binary(ExprOp::FloorDiv, v[0], v[1]);
    // trunc: floor for same signs, ceil otherwise; (a - a mod b) / b with C semantics.
    const Expr q = ir::binary(ExprOp::FloorDiv, v[0], v[1]);
    const Expr r = ir::binary(ExprOp::Mod, v[0], v[1]);
    const Expr zero = ir::scalar_const(0, out);
    const Expr signs_differ = ir::binary(ExprOp::Ne, ir::binary(ExprOp::Lt, v[0], zero), ir::binary(ExprOp::Lt, v[1], zero));
    const Expr adjust = ir::logical_and(signs_differ, ir::binary(ExprOp::Ne, r, zero));
    return ir::where(adjust, ir::binary(ExprOp::Add, q, ir::scalar_const(1, out)), q);
  }));
}

void translate_where(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId cond = ctx.tensor(node, "condition");
  LUMINAL_CHECK(b.dtype(cond) == DType::Bool, "where condition must be bool, got ", dtype_name(b.dtype(cond)));
  const DType out = ctx.out_dtype(node);
  ctx.set_output(node, b.elementwise({Operand::of(cond), ctx.operand(node, "self"), ctx.operand(node, "other")}, out,
                                     out, [](const std::vector<Expr>& v) {
                                       // The condition was cast to `out` by elementwise(); cast it back.
                                       return ir::where(ir::cast(v[0], DType::Bool), v[1], v[2]);
                                     }));
}

// clamp(self, min=None, max=None); NaN in self propagates (max/min are NaN-propagating).
void translate_clamp(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  std::vector<Operand> operands{Operand::of(ctx.tensor(node, "self"))};
  const bool has_min = ctx.find_arg(node, "min") && !ctx.find_arg(node, "min")->is_none();
  const bool has_max = ctx.find_arg(node, "max") && !ctx.find_arg(node, "max")->is_none();
  LUMINAL_CHECK(has_min || has_max, "clamp needs min or max");
  if (has_min) operands.push_back(ctx.operand(node, "min"));
  if (has_max) operands.push_back(ctx.operand(node, "max"));
  if (is_integral(out)) {
    // A bound outside the integer type's range: eager up to torch 2.14 converts it (uint8 wraps
    // -2 to 254, other types raise), later versions drop a bound on the harmless side and raise
    // on the other. The bound itself would wrap here, so such a clamp runs in eager.
    const IntRange range = int_range(out);
    for (size_t k = 1; k < operands.size(); ++k) {
      const Operand& bound = operands[k];
      if (bound.tensor || bound.symbolic) continue;
      LUMINAL_CHECK(bound.within(range), "clamp's bound ", bound.text(), " is outside the range of ", dtype_name(out),
                    " (eager converts, drops or refuses it depending on the torch version)");
    }
  }
  ctx.set_output(node, b.elementwise(operands, out, out, [&](const std::vector<Expr>& v) {
    Expr value = v[0];
    size_t next = 1;
    if (has_min) value = ir::max(value, v[next++]);
    if (has_max) value = ir::min(value, v[next]);
    return value;
  }));
}

void translate_logical_not(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  ctx.set_output(node, b.elementwise({Operand::of(x)}, b.dtype(x), out, [&](const std::vector<Expr>& v) {
    return ir::unary(ExprOp::Not, ir::cast(v[0], DType::Bool));
  }));
}

// gelu(x): exact (erf) or the tanh approximation; f16/bf16 computed in f32 and rounded once, as
// torch's kernels do.
void translate_gelu(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "gelu needs a floating-point tensor, got ", dtype_name(out));
  const std::string approximate = ctx.string_arg(node, "approximate").value_or("none");
  LUMINAL_CHECK(approximate == "none" || approximate == "tanh", "unknown gelu approximate='", approximate, "'");
  const DType compute = float_compute_dtype(out);
  ctx.set_output(node, b.elementwise({Operand::of(x)}, compute, out, [&](const std::vector<Expr>& v) {
    if (approximate == "tanh") return ir::unary(ExprOp::GeluTanh, v[0]);
    const Expr half = ir::scalar_const(0.5, compute);
    const Expr erf = ir::unary(ExprOp::Erf, ir::mul(v[0], ir::scalar_const(0.7071067811865476, compute)));
    return ir::mul(ir::mul(half, v[0]), ir::add(ir::scalar_const(1.0, compute), erf));
  }));
}

// isnan/isinf: a bool result computed in the input's dtype (false for integers).
void translate_float_class(Context& ctx, const pt2::Node& node, bool infinity) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType in = b.dtype(x);
  ctx.set_output(node, b.elementwise({Operand::of(x)}, in, DType::Bool, [&](const std::vector<Expr>& v) {
    if (!is_floating(in)) return ir::bool_const(false);
    if (!infinity) return ir::unary(ExprOp::IsNan, v[0]);
    return ir::binary(ExprOp::Eq, ir::unary(ExprOp::Abs, v[0]),
                      ir::scalar_const(std::numeric_limits<double>::infinity(), in));
  }));
}

// logical_and/or/xor: operands are truth values of any dtype.
void translate_logical(Context& ctx, const pt2::Node& node, ExprOp op) {
  Builder& b = ctx.builder();
  const Operand lhs = ctx.operand(node, "self");
  const Operand rhs = ctx.operand(node, "other");
  const DType compute = b.result_type({lhs, rhs});
  const DType out = ctx.out_dtype(node);
  ctx.set_output(node, b.elementwise({lhs, rhs}, compute, out, [&](const std::vector<Expr>& v) {
    const Expr zero = ir::scalar_const(0, compute);
    const Expr a = ir::binary(ExprOp::Ne, v[0], zero), c = ir::binary(ExprOp::Ne, v[1], zero);
    return op == ExprOp::Ne ? ir::binary(ExprOp::Ne, a, c) : ir::binary(op, a, c);
  }));
}

// x ** n for integer x and a constant exponent n >= 0, by repeated squaring (wrapping like eager).
Expr integer_power(const Expr& x, int64_t n, DType dtype) {
  Expr result = ir::scalar_const(1, dtype), base = x;
  for (; n > 0; n >>= 1) {
    if (n & 1) result = ir::mul(result, base);
    if (n > 1) base = ir::mul(base, base);
  }
  return result;
}

// x ** e for a floating x and a number e, as ATen's pow with a scalar exponent computes it
// (aten/src/ATen/native/cuda/PowKernel.cu, cpu/PowKernel.cpp): the exponents 0.5, -0.5 and -1 as
// sqrt, rsqrt and a reciprocal, 2, 3 and -2 as products (each rounded in the dtype, as ATen's
// scalar_t arithmetic), others by pow. They differ from pow at -inf and -0 (pow(-inf, 0.5) is inf,
// sqrt(-inf) NaN; pow(-0, 0.5) is 0, sqrt(-0) -0) and in rounding (CUDA's powf is not correctly
// rounded). x ** 2 becomes x * x in ir::binary itself.
Expr floating_power(const Expr& x, const Expr& exponent, std::optional<double> constant, DType dtype) {
  if (!constant) return ir::binary(ExprOp::Pow, x, exponent);
  const Expr one = ir::scalar_const(1.0, dtype);
  if (*constant == 0.5) return ir::unary(ExprOp::Sqrt, x);
  if (*constant == -0.5) return ir::unary(ExprOp::Rsqrt, x);
  if (*constant == -1.0) return ir::binary(ExprOp::Div, one, x);
  if (*constant == 3.0) return ir::mul(ir::mul(x, x), x);
  if (*constant == -2.0) return ir::binary(ExprOp::Div, one, ir::mul(x, x));
  return ir::binary(ExprOp::Pow, x, exponent);
}

void translate_pow(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const Operand base = ctx.operand(node, "self");
  const Operand exponent = ctx.operand(node, "exponent");
  const DType out = ctx.out_dtype(node);
  if (is_floating(out)) {
    // A number exponent of a tensor base: pow.Tensor_Scalar (a tensor exponent, or a number base, take pow).
    const std::optional<double> constant =
        base.tensor && !exponent.tensor && !exponent.symbolic ? std::optional<double>(exponent.scalar) : std::nullopt;
    ctx.set_output(node, b.elementwise({base, exponent}, out, out, [&](const std::vector<Expr>& v) {
      return floating_power(v[0], v[1], constant, out);
    }));
    return;
  }
  const bool constant_exponent = !exponent.tensor && !exponent.symbolic && exponent.scalar_dtype != DType::F32 &&
                                 exponent.scalar_dtype != DType::F64 && exponent.scalar >= 0 && exponent.scalar <= 64;
  LUMINAL_CHECK(constant_exponent && base.tensor, "pow of integer tensors is supported with a constant exponent in "
                "[0, 64]; this node has ", exponent.tensor ? "a tensor exponent" : "another exponent");
  const auto n = static_cast<int64_t>(exponent.scalar);
  ctx.set_output(node, b.elementwise({base}, out, out, [&](const std::vector<Expr>& v) {
    return integer_power(v[0], n, out);
  }));
}

// fmod: the remainder with the dividend's sign (C fmod); integers from the Python-style Mod.
void translate_fmod(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const Operand lhs = ctx.operand(node, "self");
  const Operand rhs = ctx.operand(node, "other");
  const DType out = ctx.out_dtype(node);
  ctx.set_output(node, b.elementwise({lhs, rhs}, out, out, [&](const std::vector<Expr>& v) {
    if (is_floating(out)) return ir::binary(ExprOp::Fmod, v[0], v[1]);
    const Expr r = ir::binary(ExprOp::Mod, v[0], v[1]);
    const Expr zero = ir::scalar_const(0, out);
    const Expr signs_differ = ir::binary(ExprOp::Ne, ir::binary(ExprOp::Lt, v[0], zero), ir::binary(ExprOp::Lt, v[1], zero));
    return ir::where(ir::logical_and(signs_differ, ir::binary(ExprOp::Ne, r, zero)), ir::binary(ExprOp::Sub, r, v[1]), r);
  }));
}

// leaky_relu(x, slope) = x > 0 ? x : x * slope
void translate_leaky_relu(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  const double slope = ctx.float_arg(node, "negative_slope", 0.01);
  // In float32 for the half types, the slope unrounded (eager's kernels: 0.01, not float16's 0.00999).
  const DType compute = is_floating(out) ? float_compute_dtype(out) : out;
  const Operand x = Operand::of(ctx.tensor(node, "self"));
  ctx.set_output(node, b.elementwise({x}, compute, out, [&](const std::vector<Expr>& v) {
    const Expr positive = ir::binary(ExprOp::Gt, v[0], ir::scalar_const(0, compute));
    return ir::where(positive, v[0], ir::mul(v[0], ir::scalar_const(slope, compute)));
  }));
}

// hardtanh(x, lo, hi) = clamp(x, lo, hi)
void translate_hardtanh(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  const double lo = ctx.float_arg(node, "min_val", -1.0), hi = ctx.float_arg(node, "max_val", 1.0);
  ctx.set_output(node, b.elementwise({Operand::of(ctx.tensor(node, "self"))}, out, out, [&](const std::vector<Expr>& v) {
    return ir::min(ir::max(v[0], ir::scalar_const(lo, out)), ir::scalar_const(hi, out));
  }));
}

// elu(x, alpha, scale, input_scale) = x > 0 ? scale * x : scale * alpha * expm1(x * input_scale)
void emit_elu(Context& ctx, const pt2::Node& node, double alpha, double scale, double input_scale) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "elu needs a floating-point tensor, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  const Operand x = Operand::of(ctx.tensor(node, "self"));
  ctx.set_output(node, b.elementwise({x}, compute, out, [&](const std::vector<Expr>& v) {
    const Expr positive = ir::binary(ExprOp::Gt, v[0], ir::scalar_const(0, compute));
    const Expr negative = ir::mul(ir::scalar_const(scale * alpha, compute),
                                  ir::unary(ExprOp::Expm1, ir::mul(v[0], ir::scalar_const(input_scale, compute))));
    return ir::where(positive, ir::mul(v[0], ir::scalar_const(scale, compute)), negative);
  }));
}

void translate_elu(Context& ctx, const pt2::Node& node) {
  emit_elu(ctx, node, ctx.float_arg(node, "alpha", 1.0), ctx.float_arg(node, "scale", 1.0),
           ctx.float_arg(node, "input_scale", 1.0));
}

// celu(x, alpha) = elu(x, alpha, scale=1, input_scale=1/alpha)
void translate_celu(Context& ctx, const pt2::Node& node) {
  const double alpha = ctx.float_arg(node, "alpha", 1.0);
  LUMINAL_CHECK(alpha != 0.0, "celu with alpha = 0 is undefined");
  emit_elu(ctx, node, alpha, 1.0, 1.0 / alpha);
}

template <ExprOp Op>
void unary(Context& ctx, const pt2::Node& node) {
  translate_unary(ctx, node, Op);
}

template <ExprOp Op, bool Reversed = false>
void binary(Context& ctx, const pt2::Node& node) {
  translate_binary(ctx, node, Op, Reversed);
}

}  // namespace

void register_elementwise_ops(Registry& registry) {
  const std::string aten = "torch.ops.aten.";
  registry.add(aten + "relu.default", unary<ExprOp::Relu>);
  registry.add(aten + "sigmoid.default", unary<ExprOp::Sigmoid>);
  registry.add(aten + "tanh.default", unary<ExprOp::Tanh>);
  registry.add(aten + "neg.default", unary<ExprOp::Neg>);
  registry.add(aten + "abs.default", unary<ExprOp::Abs>);
  registry.add(aten + "exp.default", unary<ExprOp::Exp>);
  registry.add(aten + "log.default", unary<ExprOp::Log>);
  registry.add(aten + "sqrt.default", unary<ExprOp::Sqrt>);
  registry.add(aten + "rsqrt.default", unary<ExprOp::Rsqrt>);
  registry.add(aten + "reciprocal.default", unary<ExprOp::Recip>);
  registry.add(aten + "sin.default", unary<ExprOp::Sin>);
  registry.add(aten + "cos.default", unary<ExprOp::Cos>);
  registry.add(aten + "erf.default", unary<ExprOp::Erf>);
  registry.add(aten + "tan.default", unary<ExprOp::Tan>);
  registry.add(aten + "asin.default", unary<ExprOp::Asin>);
  registry.add(aten + "acos.default", unary<ExprOp::Acos>);
  registry.add(aten + "atan.default", unary<ExprOp::Atan>);
  registry.add(aten + "sinh.default", unary<ExprOp::Sinh>);
  registry.add(aten + "cosh.default", unary<ExprOp::Cosh>);
  registry.add(aten + "asinh.default", unary<ExprOp::Asinh>);
  registry.add(aten + "acosh.default", unary<ExprOp::Acosh>);
  registry.add(aten + "atanh.default", unary<ExprOp::Atanh>);
  registry.add(aten + "expm1.default", unary<ExprOp::Expm1>);
  registry.add(aten + "log1p.default", unary<ExprOp::Log1p>);
  registry.add(aten + "log2.default", unary<ExprOp::Log2>);
  registry.add(aten + "log10.default", unary<ExprOp::Log10>);
  registry.add(aten + "exp2.default", unary<ExprOp::Exp2>);
  registry.add(aten + "sign.default", unary<ExprOp::Sign>);
  registry.add(aten + "round.default", unary<ExprOp::Round>);
  registry.add(aten + "bitwise_not.default", unary<ExprOp::BitNot>);
  registry.add(aten + "isnan.default", [](Context& ctx, const pt2::Node& node) { translate_float_class(ctx, node, false); });
  registry.add(aten + "isinf.default", [](Context& ctx, const pt2::Node& node) { translate_float_class(ctx, node, true); });
  registry.add(aten + "logical_and.default", [](Context& ctx, const pt2::Node& node) { translate_logical(ctx, node, ExprOp::And); });
  registry.add(aten + "logical_or.default", [](Context& ctx, const pt2::Node& node) { translate_logical(ctx, node, ExprOp::Or); });
  registry.add(aten + "logical_xor.default", [](Context& ctx, const pt2::Node& node) { translate_logical(ctx, node, ExprOp::Ne); });
  registry.add(aten + "pow.Tensor_Tensor", translate_pow);
  registry.add(aten + "pow.Tensor_Scalar", translate_pow);
  registry.add(aten + "pow.Scalar", translate_pow);
  registry.add(aten + "atan2.default", binary<ExprOp::Atan2>);
  registry.add(aten + "hypot.default", binary<ExprOp::Hypot>);
  registry.add(aten + "remainder.Scalar_Tensor", binary<ExprOp::Mod>);
  registry.add(aten + "floor_divide.default", [](Context& ctx, const pt2::Node& node) {
    const DType out = ctx.out_dtype(node);
    if (!is_floating(out)) return translate_binary(ctx, node, ExprOp::FloorDiv);
    ctx.set_output(node, floating_rounding_division(ctx.builder(), ctx.operand(node, "self"),
                                                    ctx.operand(node, "other"), out, /*floor=*/true, /*cuda=*/false));
  });
  registry.add(aten + "clamp_min.default", translate_clamp);
  registry.add(aten + "clamp_min.Tensor", translate_clamp);
  registry.add(aten + "clamp_max.Tensor", translate_clamp);
  registry.add(aten + "sgn.default", unary<ExprOp::Sign>);  // sign for real dtypes
  registry.add(aten + "clamp_max.default", translate_clamp);
  registry.add(aten + "leaky_relu.default", translate_leaky_relu);
  registry.add(aten + "hardtanh.default", translate_hardtanh);
  registry.add(aten + "elu.default", translate_elu);
  registry.add(aten + "celu.default", translate_celu);
  registry.add(aten + "gelu.default", translate_gelu);
  registry.add(aten + "floor.default", unary<ExprOp::Floor>);
  registry.add(aten + "ceil.default", unary<ExprOp::Ceil>);
  registry.add(aten + "trunc.default", unary<ExprOp::Trunc>);

  for (const char* overload : {".Tensor", ".Scalar"}) {
    registry.add(aten + "add" + overload, binary<ExprOp::Add>);
    registry.add(aten + "sub" + overload, binary<ExprOp::Sub>);
    registry.add(aten + "mul" + overload, binary<ExprOp::Mul>);
    registry.add(aten + "rsub" + overload, binary<ExprOp::Sub, true>);
    registry.add(aten + "div" + overload, translate_div);
    registry.add(aten + "eq" + overload, binary<ExprOp::Eq>);
    registry.add(aten + "ne" + overload, binary<ExprOp::Ne>);
    registry.add(aten + "lt" + overload, binary<ExprOp::Lt>);
    registry.add(aten + "le" + overload, binary<ExprOp::Le>);
    registry.add(aten + "gt" + overload, binary<ExprOp::Gt>);
    registry.add(aten + "ge" + overload, binary<ExprOp::Ge>);
    registry.add(aten + "remainder" + overload, binary<ExprOp::Mod>);
    registry.add(aten + "fmod" + overload, translate_fmod);
    registry.add(aten + "bitwise_and" + overload, binary<ExprOp::BitAnd>);
    registry.add(aten + "bitwise_or" + overload, binary<ExprOp::BitOr>);
    registry.add(aten + "bitwise_xor" + overload, binary<ExprOp::BitXor>);
  }
  registry.add(aten + "div.Tensor_mode", translate_div);
  registry.add(aten + "div.Scalar_mode", translate_div);
  registry.add(aten + "maximum.default", binary<ExprOp::Max>);
  registry.add(aten + "minimum.default", binary<ExprOp::Min>);
  registry.add(aten + "where.self", translate_where);
  registry.add(aten + "clamp.default", translate_clamp);
  registry.add(aten + "clamp.Tensor", translate_clamp);
  registry.add(aten + "logical_not.default", translate_logical_not);
}

}  // namespace luminal::frontend
