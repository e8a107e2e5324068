// Reductions over dimension lists (sum, mean, amax, amin, prod, any, all, var, argmax, argmin),
// softmax and log_softmax, and the normalizations built on them (layer norm, inference batch norm).
#include <cmath>
#include <functional>
#include <limits>

#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

// Integer and bool sums accumulate in int64 (as torch does); floats in their own dtype (the
// executors accumulate in wider precision internally).
std::vector<int64_t> reduce_dims_arg(Context& ctx, const pt2::Node& node) {
  if (!ctx.find_arg(node, "dim") || ctx.find_arg(node, "dim")->is_none()) return {};
  return ctx.ints_arg(node, "dim");
}

void translate_sum(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  const NodeId reduced = b.reduce_dims(b.cast(x, out), reduce_dims_arg(ctx, node), ctx.bool_arg(node, "keepdim", false),
                                       ir::ReduceOp::Sum, out);
  ctx.set_output(node, reduced);
}

void translate_mean(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "mean needs a floating dtype, got ", dtype_name(out));
  std::vector<int64_t> dims = reduce_dims_arg(ctx, node);
  const bool keepdim = ctx.bool_arg(node, "keepdim", false);
  const size_t rank = b.rank(x);
  Expr count = ir::int_const(1);
  if (dims.empty()) {
    for (size_t d = 0; d < rank; ++d) dims.push_back(static_cast<int64_t>(d));
  }
  for (int64_t d : dims) {
    if (rank > 0) count = ir::mul(count, b.shape(x)[b.normalize_dim(d, rank)]);
  }
  // A half-precision mean is summed and divided in f32 and rounded once, as ATen does: the sum of
  // a half row can overflow where the mean does not (a global pool over values near 30,000).
  const DType compute = float_compute_dtype(out);
  const NodeId total = b.reduce_dims(b.cast(x, compute), dims, keepdim, ir::ReduceOp::Sum, compute);
  const ir::Node& t = b.node(total);
  const Expr divided =
      ir::binary(ir::ExprOp::Div, ir::load(0, compute, Builder::loop_vars(t.rank())), ir::cast(count, compute));
  ctx.set_output(node, b.pointwise(out, t.shape, {total}, ir::cast(divided, out)));
}

template <ir::ReduceOp Op>
void translate_extreme(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  std::vector<int64_t> dims = reduce_dims_arg(ctx, node);
  for (int64_t d : dims) {
    if (b.rank(x) > 0) {
      const Expr size = b.shape(x)[b.normalize_dim(d, b.rank(x))];
      LUMINAL_CHECK(!size->is_int_const(0), "amax/amin of an empty dimension has no identity");
    }
  }
  ctx.set_output(node, b.reduce_dims(x, dims, ctx.bool_arg(node, "keepdim", false), Op, b.dtype(x)));
}

// A `dim` argument that may be one int, a list, or None (all dimensions).
std::vector<int64_t> dim_or_dims(Context& ctx, const pt2::Node& node, std::string_view name = "dim") {
  const pt2::Argument* arg = ctx.find_arg(node, name);
  if (!arg || arg->is_none()) return {};
  if (arg->kind() == pt2::Argument::Kind::Int) return {arg->as_int()};
  return arg->as_ints();
}

std::vector<int64_t> all_dims_if_empty(std::vector<int64_t> dims, size_t rank) {
  if (dims.empty()) {
    for (size_t d = 0; d < rank; ++d) dims.push_back(static_cast<int64_t>(d));
  }
  return dims;
}

// The number of elements a reduction over `dims` combines (a shape expression).
Expr reduced_count(Builder& b, NodeId x, const std::vector<int64_t>& dims) {
  Expr count = ir::int_const(1);
  for (int64_t d : dims) {
    if (b.rank(x) > 0) count = ir::mul(count, b.shape(x)[b.normalize_dim(d, b.rank(x))]);
  }
  return count;
}


void translate_prod(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  ctx.set_output(node, b.reduce_dims(b.cast(x, out), dim_or_dims(ctx, node), ctx.bool_arg(node, "keepdim", false),
                                     ir::ReduceOp::Prod, out));
}

template <ir::ReduceOp Op>
void translate_any_all(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType in = b.dtype(x);
  const NodeId truth = b.elementwise({Operand::of(x)}, in, DType::Bool, [&](const std::vector<Expr>& v) {
    return ir::binary(ir::ExprOp::Ne, v[0], ir::scalar_const(0, in));
  });
  const NodeId reduced = b.reduce_dims(truth, dim_or_dims(ctx, node), ctx.bool_arg(node, "keepdim", false), Op, DType::Bool);
  ctx.set_output(node, b.cast(reduced, ctx.out_dtype(node)));  // uint8 inputs give uint8, as in torch
}

// Mean over `dims` with keepdim, in `compute`.
NodeId keepdim_mean(Builder& b, NodeId xc, const std::vector<int64_t>& dims, DType compute) {
  const Expr count = reduced_count(b, xc, dims);
  const NodeId total = b.reduce_dims(xc, dims, true, ir::ReduceOp::Sum, compute);
  return b.elementwise({Operand::of(total)}, compute, compute, [&](const std::vector<Expr>& v) {
    return ir::binary(ir::ExprOp::Div, v[0], ir::cast(count, compute));
  });
}

// Sum of squared deviations from the keepdim mean.
NodeId squared_deviations(Builder& b, NodeId xc, NodeId mean, const std::vector<int64_t>& dims, bool keepdim,
                          DType compute) {
  const NodeId squares = b.elementwise({Operand::of(xc), Operand::of(mean)}, compute, compute,
                                       [](const std::vector<Expr>& v) {
                                         const Expr d = ir::binary(ir::ExprOp::Sub, v[0], v[1]);
                                         return ir::mul(d, d);
                                       });
  return b.reduce_dims(squares, dims, keepdim, ir::ReduceOp::Sum, compute);
}

// The variance arguments shared by var/std/var_mean/std_mean (.correction, .dim and .default).
struct Variance {
  NodeId var;   // in `compute`, keepdim as requested
  NodeId mean;  // in `compute`, always keepdim
  DType compute;
};

// Two passes (mean, then squared deviations), as torch does, for accuracy.
Variance variance(Context& ctx, const pt2::Node& node, DType out) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  LUMINAL_CHECK(is_floating(out), "var/std needs a floating dtype, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  const std::vector<int64_t> dims = all_dims_if_empty(dim_or_dims(ctx, node), b.rank(x));
  double correction = 1.0;
  if (const pt2::Argument* c = ctx.find_arg(node, "correction"); c && !c->is_none()) {
    correction = ctx.float_arg(node, "correction");
  } else if (ctx.find_arg(node, "unbiased")) {
    correction = ctx.bool_arg(node, "unbiased") ? 1.0 : 0.0;
  }
  const NodeId xc = b.cast(x, compute);
  const NodeId mean = keepdim_mean(b, xc, dims, compute);
  const NodeId total = squared_deviations(b, xc, mean, dims, ctx.bool_arg(node, "keepdim", false), compute);
  const Expr count = reduced_count(b, x, dims);
  const NodeId var = b.elementwise({Operand::of(total)}, compute, compute, [&](const std::vector<Expr>& v) {
    const Expr divisor = ir::binary(ir::ExprOp::Sub, ir::cast(count, compute), ir::scalar_const(correction, compute));
    return ir::binary(ir::ExprOp::Div, v[0], ir::max(divisor, ir::scalar_const(0, compute)));
  });
  return {var, mean, compute};
}

NodeId sqrt_cast(Builder& b, NodeId x, DType out) {
  return b.elementwise({Operand::of(x)}, b.dtype(x), out,
                       [](const std::vector<Expr>& v) { return ir::unary(ir::ExprOp::Sqrt, v[0]); });
}

// var / std (.correction, .dim, .default)
void translate_var(Context& ctx, const pt2::Node& node, bool is_std) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  const Variance v = variance(ctx, node, out);
  ctx.set_output(node, is_std ? sqrt_cast(b, v.var, out) : b.cast(v.var, out));
}

// var_mean / std_mean -> (var or std, mean); the mean loses the reduced dims unless keepdim.
void translate_var_mean(Context& ctx, const pt2::Node& node, bool is_std) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node, 0);
  const Variance v = variance(ctx, node, out);
  ctx.set_output(node, 0, is_std ? sqrt_cast(b, v.var, out) : b.cast(v.var, out));
  ctx.set_output(node, 1, b.cast(b.reshape(v.mean, ctx.out_shape(node, 1)), ctx.out_dtype(node, 1)));
}

// _softmax / _log_softmax over one dim, computed in f32 (f64 for f64) with the max subtracted.
void translate_softmax(Context& ctx, const pt2::Node& node, bool log) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "softmax needs a floating dtype, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  const std::vector<int64_t> dim{ctx.int_arg(node, "dim")};
  const NodeId xc = b.cast(x, compute);
  const NodeId max = b.reduce_dims(xc, dim, true, ir::ReduceOp::Max, compute);
  const NodeId shifted = b.elementwise({Operand::of(xc), Operand::of(max)}, compute, compute,
                                       [](const std::vector<Expr>& v) { return ir::binary(ir::ExprOp::Sub, v[0], v[1]); });
  const NodeId exps = b.elementwise({Operand::of(shifted)}, compute, compute,
                                    [](const std::vector<Expr>& v) { return ir::unary(ir::ExprOp::Exp, v[0]); });
  const NodeId total = b.reduce_dims(exps, dim, true, ir::ReduceOp::Sum, compute);
  if (log) {
    ctx.set_output(node, b.elementwise({Operand::of(shifted), Operand::of(total)}, compute, out, [](const std::vector<Expr>& v) {
      return ir::binary(ir::ExprOp::Sub, v[0], ir::unary(ir::ExprOp::Log, v[1]));
    }));
    return;
  }
  ctx.set_output(node, b.elementwise({Operand::of(exps), Operand::of(total)}, compute, out, [](const std::vector<Expr>& v) {
    return ir::binary(ir::ExprOp::Div, v[0], v[1]);
  }));
}

// The index of the first extreme value along d (NaN counts as the maximum and the minimum, as in
// torch), given the keepdim extreme.
NodeId first_index_of(Builder& b, NodeId x, NodeId extreme, int64_t d, bool keepdim) {
  const size_t rank = b.rank(x);
  const DType in = b.dtype(x);
  std::vector<Expr> at = Builder::loop_vars(rank), at_extreme = at;
  at_extreme[d] = ir::int_const(0);
  const Expr value = ir::load(0, in, at), best = ir::load(1, in, at_extreme);
  Expr match = ir::binary(ir::ExprOp::Eq, value, best);
  if (is_floating(in)) {
    match = ir::binary(ir::ExprOp::Or, match,
                       ir::logical_and(ir::unary(ir::ExprOp::IsNan, best), ir::unary(ir::ExprOp::IsNan, value)));
  }
  const Expr candidate = ir::where(match, at[d], ir::int_const(std::numeric_limits<int64_t>::max()));
  const NodeId candidates = b.pointwise(DType::I64, b.shape(x), {x, extreme}, candidate);
  return b.reduce_dims(candidates, {d}, keepdim, ir::ReduceOp::Min, DType::I64);
}

// argmax/argmin; dim=None flattens.
void translate_arg_extreme(Context& ctx, const pt2::Node& node, bool is_max) {
  Builder& b = ctx.builder();
  NodeId x = ctx.tensor(node, "self");
  const bool keepdim = ctx.bool_arg(node, "keepdim", false);
  const pt2::Argument* dim_arg = ctx.find_arg(node, "dim");
  const bool flatten = !dim_arg || dim_arg->is_none();
  if (flatten) x = b.reshape(x, {reduced_count(b, x, all_dims_if_empty({}, b.rank(x)))});
  const size_t rank = b.rank(x);
  LUMINAL_CHECK(rank > 0, "argmax/argmin of a 0-d tensor");
  const int64_t d = b.normalize_dim(flatten ? 0 : ctx.int_arg(node, "dim"), rank);
  LUMINAL_CHECK(!b.shape(x)[d]->is_int_const(0), "argmax/argmin of an empty dimension");
  const NodeId extreme = b.reduce_dims(x, {d}, true, is_max ? ir::ReduceOp::Max : ir::ReduceOp::Min, b.dtype(x));
  NodeId result = first_index_of(b, x, extreme, d, keepdim && !flatten);
  if (flatten) result = b.reshape(result, ctx.out_shape(node));
  ctx.set_output(node, result);
}

// max.dim / min.dim -> (values, indices)
void translate_extreme_with_index(Context& ctx, const pt2::Node& node, bool is_max) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const bool keepdim = ctx.bool_arg(node, "keepdim", false);
  const size_t rank = std::max<size_t>(b.rank(x), 1);
  LUMINAL_CHECK(b.rank(x) > 0, "max/min along a dim of a 0-d tensor");
  const int64_t d = b.normalize_dim(ctx.int_arg(node, "dim"), rank);
  LUMINAL_CHECK(!b.shape(x)[d]->is_int_const(0), "max/min of an empty dimension");
  const ir::ReduceOp op = is_max ? ir::ReduceOp::Max : ir::ReduceOp::Min;
  const NodeId extreme = b.reduce_dims(x, {d}, true, op, b.dtype(x));
  ctx.set_output(node, 0, keepdim ? extreme : b.reduce_dims(x, {d}, false, op, b.dtype(x)));
  ctx.set_output(node, 1, first_index_of(b, x, extreme, d, keepdim));
}

// Mean and 1 / sqrt(biased variance + eps) of xc over `dims` (keepdim), in `compute`.
struct Moments {
  NodeId mean, rstd;
};

Moments normalization_moments(Builder& b, NodeId xc, const std::vector<int64_t>& dims, double eps, DType compute) {
  const NodeId mean = keepdim_mean(b, xc, dims, compute);
  const NodeId total = squared_deviations(b, xc, mean, dims, true, compute);
  const Expr count = reduced_count(b, xc, dims);
  const NodeId rstd = b.elementwise({Operand::of(total)}, compute, compute, [&](const std::vector<Expr>& v) {
    const Expr var = ir::binary(ir::ExprOp::Div, v[0], ir::cast(count, compute));
    return ir::unary(ir::ExprOp::Rsqrt, ir::add(var, ir::scalar_const(eps, compute)));
  });
  return {mean, rstd};
}

// One elementwise node: normalized(v) * weight + bias, the optional affine operands appended to
// `operands` (already broadcastable against them).
template <typename Normalized>
NodeId with_affine(Builder& b, std::vector<Operand> operands, std::optional<NodeId> weight, std::optional<NodeId> bias,
                   DType compute, DType out, Normalized normalized) {
  const size_t first_affine = operands.size();
  if (weight) operands.push_back(Operand::of(*weight));
  if (bias) operands.push_back(Operand::of(*bias));
  return b.elementwise(operands, compute, out, [&](const std::vector<Expr>& v) {
    Expr y = normalized(v);
    size_t next = first_affine;
    if (weight) y = ir::mul(y, v[next++]);
    if (bias) y = ir::add(y, v[next]);
    return y;
  });
}

std::optional<NodeId> optional_per_channel(Builder& b, std::optional<NodeId> v, size_t rank) {
  if (!v) return std::nullopt;
  return b.per_channel(*v, rank);
}

Expr centered_scaled(const std::vector<Expr>& v) { return ir::mul(ir::binary(ir::ExprOp::Sub, v[0], v[1]), v[2]); }

// native_group_norm(input, weight, bias, N, C, HxW, group, eps) -> (out, mean [N, G], rstd [N, G])
void translate_group_norm(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "input");
  const Shape shape = b.shape(x);
  LUMINAL_CHECK(shape.size() >= 2, "group_norm needs an input of rank >= 2");
  const int64_t groups = ctx.int_arg(node, "group");
  const DType out = ctx.out_dtype(node, 0);
  LUMINAL_CHECK(is_floating(out), "group_norm needs a floating dtype, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  Expr per_group = ir::floordiv(shape[1], ir::int_const(groups));
  for (size_t d = 2; d < shape.size(); ++d) per_group = ir::mul(per_group, shape[d]);
  const NodeId grouped = b.reshape(b.cast(x, compute), {shape[0], ir::int_const(groups), per_group});
  const Moments moments = normalization_moments(b, grouped, {2}, ctx.float_arg(node, "eps"), compute);
  const NodeId normalized = b.elementwise(
      {Operand::of(grouped), Operand::of(moments.mean), Operand::of(moments.rstd)}, compute, compute, centered_scaled);
  ctx.set_output(node, 0,
                 with_affine(b, {Operand::of(b.reshape(normalized, shape))},
                             optional_per_channel(b, ctx.optional_tensor(node, "weight"), shape.size()),
                             optional_per_channel(b, ctx.optional_tensor(node, "bias"), shape.size()), compute, out,
                             [](const std::vector<Expr>& v) { return v[0]; }));
  const Shape stats_shape{shape[0], ir::int_const(groups)};
  ctx.set_output(node, 1, b.cast(b.reshape(moments.mean, stats_shape), ctx.out_dtype(node, 1)));
  ctx.set_output(node, 2, b.cast(b.reshape(moments.rstd, stats_shape), ctx.out_dtype(node, 2)));
}

// native_layer_norm(input, normalized_shape, weight, bias, eps) -> (out, mean, rstd)
void translate_layer_norm(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "input");
  const size_t k = ctx.symints_arg(node, "normalized_shape").size();
  const size_t rank = b.rank(x);
  LUMINAL_CHECK(k >= 1 && k <= rank, "layer_norm over ", k, " dims of a rank-", rank, " tensor");
  const DType out = ctx.out_dtype(node, 0);
  LUMINAL_CHECK(is_floating(out), "layer_norm needs a floating dtype, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  std::vector<int64_t> dims;
  for (size_t d = rank - k; d < rank; ++d) dims.push_back(static_cast<int64_t>(d));
  const NodeId xc = b.cast(x, compute);
  const Moments moments = normalization_moments(b, xc, dims, ctx.float_arg(node, "eps"), compute);
  ctx.set_output(node, 0,
                 with_affine(b, {Operand::of(xc), Operand::of(moments.mean), Operand::of(moments.rstd)},
                             ctx.optional_tensor(node, "weight"), ctx.optional_tensor(node, "bias"), compute, out,
                             centered_scaled));
  ctx.set_output(node, 1, b.cast(moments.mean, ctx.out_dtype(node, 1)));
  ctx.set_output(node, 2, b.cast(moments.rstd, ctx.out_dtype(node, 2)));
}

// _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum,
// eps) -> (out, empty, empty): inference batch norm with the running statistics.
void translate_batch_norm_inference(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "input");
  const size_t rank = b.rank(x);
  LUMINAL_CHECK(rank >= 2, "batch_norm needs an input of rank >= 2, got rank ", rank);
  const DType out = ctx.out_dtype(node, 0);
  const DType compute = float_compute_dtype(out);
  const double eps = ctx.float_arg(node, "eps");
  const std::vector<Operand> operands{Operand::of(x),
                                      Operand::of(b.per_channel(ctx.tensor(node, "running_mean"), rank)),
                                      Operand::of(b.per_channel(ctx.tensor(node, "running_var"), rank))};
  ctx.set_output(node, 0,
                 with_affine(b, operands, optional_per_channel(b, ctx.optional_tensor(node, "weight"), rank),
                             optional_per_channel(b, ctx.optional_tensor(node, "bias"), rank), compute, out,
                             [&](const std::vector<Expr>& v) {
                               const Expr inv_std =
                                   ir::unary(ir::ExprOp::Rsqrt, ir::add(v[2], ir::scalar_const(eps, compute)));
                               return ir::mul(ir::binary(ir::ExprOp::Sub, v[0], v[1]), inv_std);
                             }));
  for (size_t k = 1; k <= 2; ++k) ctx.set_output(node, k, b.full(ctx.out_shape(node, k), 0.0, ctx.out_dtype(node, k)));
}

// _native_batch_norm_legit.default(input, weight, bias, running_mean, running_var, training,
// momentum, eps): with training=False it is inference batch norm with the running statistics (and
// empty save_mean/save_rstd); training=True updates the running statistics in place (refused).
void translate_batch_norm_legit(Context& ctx, const pt2::Node& node) {
  LUMINAL_CHECK(!ctx.bool_arg(node, "training"),
                "_native_batch_norm_legit with training=True updates running_mean/running_var in place and is not "
                "supported (inference only)");
  // CPU kernels return empty save_mean/save_rstd; CUDA kernels return per-channel values that
  // this translation does not reproduce, so only the empty form is taken.
  for (size_t k = 1; k <= 2; ++k) {
    const Shape saved = ctx.out_shape(node, k);
    LUMINAL_CHECK(saved.size() == 1 && saved[0]->is_int_const(0), "_native_batch_norm_legit with training=False "
                  "and non-empty save_mean/save_rstd outputs (the CUDA kernel's) is not supported");
  }
  translate_batch_norm_inference(ctx, node);
}

// _native_batch_norm_legit_functional (what functionalization makes of the above) -> (out, empty,
// empty, running_mean_out, running_var_out): with training=False the running statistics pass
// through unchanged.
void translate_batch_norm_legit_functional(Context& ctx, const pt2::Node& node) {
  translate_batch_norm_legit(ctx, node);
  Builder& b = ctx.builder();
  ctx.set_output(node, 3, b.cast(ctx.tensor(node, "running_mean"), ctx.out_dtype(node, 3)));
  ctx.set_output(node, 4, b.cast(ctx.tensor(node, "running_var"), ctx.out_dtype(node, 4)));
}

// _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps) -> (out, mean,
// rstd): batch statistics per channel (dim 1) over every other dim, biased variance.
void translate_batch_norm_batch_stats(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  LUMINAL_CHECK(ctx.bool_arg(node, "training"),
                "_native_batch_norm_legit.no_stats with training=False is not supported (torch needs running stats "
                "in evaluation mode)");
  const NodeId x = ctx.tensor(node, "input");
  const size_t rank = b.rank(x);
  LUMINAL_CHECK(rank >= 2, "batch_norm needs an input of rank >= 2, got rank ", rank);
  const DType out = ctx.out_dtype(node, 0);
  LUMINAL_CHECK(is_floating(out), "batch_norm needs a floating dtype, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  std::vector<int64_t> dims{0};
  for (size_t d = 2; d < rank; ++d) dims.push_back(static_cast<int64_t>(d));
  const NodeId xc = b.cast(x, compute);
  const Moments moments = normalization_moments(b, xc, dims, ctx.float_arg(node, "eps"), compute);
  ctx.set_output(node, 0,
                 with_affine(b, {Operand::of(xc), Operand::of(moments.mean), Operand::of(moments.rstd)},
                             optional_per_channel(b, ctx.optional_tensor(node, "weight"), rank),
                             optional_per_channel(b, ctx.optional_tensor(node, "bias"), rank), compute, out,
                             centered_scaled));
  const Shape channels{b.shape(x)[1]};
  ctx.set_output(node, 1, b.cast(b.reshape(moments.mean, channels), ctx.out_dtype(node, 1)));
  ctx.set_output(node, 2, b.cast(b.reshape(moments.rstd, channels), ctx.out_dtype(node, 2)));
}

// ---- breadth: log-sum-exp, norms, scans and other composite reductions ----

Expr is_infinite(const Expr& v, DType dtype) {
  return ir::eq(ir::unary(ir::ExprOp::Abs, v), ir::float_const(std::numeric_limits<double>::infinity(), dtype));
}

// A max used as a shift: +-inf becomes 0 so that all -inf rows give -inf and +inf rows +inf (as
// torch's decomposition does).
NodeId finite_shift(Builder& b, NodeId max, DType compute) {
  return b.elementwise({Operand::of(max)}, compute, compute, [&](const std::vector<Expr>& v) {
    return ir::where(is_infinite(v[0], compute), ir::float_const(0, compute), v[0]);
  });
}

// log(total) + shift, in `out`.
NodeId log_plus(Builder& b, NodeId total, NodeId shift, DType compute, DType out) {
  return b.elementwise({Operand::of(total), Operand::of(shift)}, compute, out, [](const std::vector<Expr>& v) {
    return ir::add(ir::unary(ir::ExprOp::Log, v[0]), v[1]);
  });
}

// Raises for a reduction of a statically empty dimension where torch has no identity either.
void check_nonempty(Builder& b, NodeId x, const std::vector<int64_t>& dims, const char* what) {
  for (int64_t d : all_dims_if_empty(dims, b.rank(x))) {
    if (b.rank(x) == 0) continue;
    LUMINAL_CHECK(!b.shape(x)[b.normalize_dim(d, b.rank(x))]->is_int_const(0), what,
                  " of an empty dimension has no identity (shape ", ir::shape_to_string(b.shape(x)), ")");
  }
}

// logsumexp(self, dim[], keepdim): max-shifted; integer and bool inputs give the default float.
void translate_logsumexp(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "logsumexp needs a floating result dtype, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  const std::vector<int64_t> dims = all_dims_if_empty(dim_or_dims(ctx, node), b.rank(x));
  const bool keepdim = ctx.bool_arg(node, "keepdim", false);
  const NodeId xc = b.cast(x, compute);
  const NodeId shift = finite_shift(b, b.reduce_dims(xc, dims, true, ir::ReduceOp::Max, compute), compute);
  const NodeId exps = b.elementwise({Operand::of(xc), Operand::of(shift)}, compute, compute, [](const std::vector<Expr>& v) {
    return ir::unary(ir::ExprOp::Exp, ir::sub(v[0], v[1]));
  });
  const NodeId total = b.reduce_dims(exps, dims, keepdim, ir::ReduceOp::Sum, compute);
  ctx.set_output(node, log_plus(b, total, keepdim ? shift : b.reshape(shift, ctx.out_shape(node)), compute, out));
}

// aminmax(self, *, dim=None, keepdim) -> (min, max)
void translate_aminmax(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const std::vector<int64_t> dims = dim_or_dims(ctx, node);
  check_nonempty(b, x, dims, "aminmax");
  const bool keepdim = ctx.bool_arg(node, "keepdim", false);
  NodeId lo = b.reduce_dims(x, dims, keepdim, ir::ReduceOp::Min, b.dtype(x));
  NodeId hi = b.reduce_dims(x, dims, keepdim, ir::ReduceOp::Max, b.dtype(x));
  // dim=None with keepdim keeps every dimension as size 1; reduce_dims already does so.
  ctx.set_output(node, 0, b.reshape(lo, ctx.out_shape(node, 0)));
  ctx.set_output(node, 1, b.reshape(hi, ctx.out_shape(node, 1)));
}

// max.default / min.default: a full reduction (NaN propagates).
void translate_full_extreme(Context& ctx, const pt2::Node& node, bool is_max) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  check_nonempty(b, x, {}, is_max ? "max" : "min");
  ctx.set_output(node, b.reduce_dims(x, {}, false, is_max ? ir::ReduceOp::Max : ir::ReduceOp::Min, b.dtype(x)));
}

// nansum(self, dim=None, keepdim, dtype): NaNs count as zero.
void translate_nansum(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  NodeId values = b.cast(x, out);
  if (is_floating(b.dtype(x))) {
    LUMINAL_CHECK(is_floating(out), "nansum of ", dtype_name(b.dtype(x)), " into ", dtype_name(out));
    values = b.elementwise({Operand::of(x)}, out, out, [&](const std::vector<Expr>& v) {
      return ir::where(ir::unary(ir::ExprOp::IsNan, v[0]), ir::scalar_const(0, out), v[0]);
    });
  }
  ctx.set_output(node, b.reduce_dims(values, dim_or_dims(ctx, node), ctx.bool_arg(node, "keepdim", false),
                                     ir::ReduceOp::Sum, out));
}

// count_nonzero(self, dim) with dim an int, a list or None (all dimensions).
void translate_count_nonzero(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType in = b.dtype(x);
  const NodeId nonzero = b.elementwise({Operand::of(x)}, in, DType::I64, [&](const std::vector<Expr>& v) {
    return ir::cast(ir::binary(ir::ExprOp::Ne, v[0], ir::scalar_const(0, in)), DType::I64);
  });
  ctx.set_output(node, b.reduce_dims(nonzero, dim_or_dims(ctx, node), false, ir::ReduceOp::Sum, DType::I64));
}

NodeId map_unary(Builder& b, NodeId x, DType out, const std::function<Expr(const Expr&)>& f) {
  return b.elementwise({Operand::of(x)}, b.dtype(x), out, [&](const std::vector<Expr>& v) { return f(v[0]); });
}

// The vector p-norm of xc (floating, already in `compute`) over `dims` (all when empty):
// inf/-inf: max/min |x|; 0: count of non-zeros; 1: sum |x|; 2: sqrt(sum x^2); else
// (sum |x|^p)^(1/p), as torch's decomposition computes it.
NodeId vector_norm(Builder& b, NodeId xc, double ord, const std::vector<int64_t>& dims, bool keepdim, DType out) {
  const DType compute = b.dtype(xc);
  const auto abs = [](const Expr& v) { return ir::unary(ir::ExprOp::Abs, v); };
  if (std::isinf(ord)) {
    check_nonempty(b, xc, dims, "an infinity norm");
    const ir::ReduceOp op = ord > 0 ? ir::ReduceOp::Max : ir::ReduceOp::Min;
    return b.cast(b.reduce_dims(map_unary(b, xc, compute, abs), dims, keepdim, op, compute), out);
  }
  if (ord == 0.0) {
    const NodeId nonzero = map_unary(b, xc, compute, [&](const Expr& v) {
      return ir::cast(ir::binary(ir::ExprOp::Ne, v, ir::float_const(0, compute)), compute);
    });
    return b.cast(b.reduce_dims(nonzero, dims, keepdim, ir::ReduceOp::Sum, compute), out);
  }
  if (ord == 1.0) return b.cast(b.reduce_dims(map_unary(b, xc, compute, abs), dims, keepdim, ir::ReduceOp::Sum, compute), out);
  if (ord == 2.0) {
    const NodeId squares = map_unary(b, xc, compute, [](const Expr& v) { return ir::mul(v, v); });
    return sqrt_cast(b, b.reduce_dims(squares, dims, keepdim, ir::ReduceOp::Sum, compute), out);
  }
  const NodeId powers = map_unary(b, xc, compute, [&](const Expr& v) {
    return ir::binary(ir::ExprOp::Pow, abs(v), ir::float_const(ord, compute));
  });
  const NodeId total = b.reduce_dims(powers, dims, keepdim, ir::ReduceOp::Sum, compute);
  return map_unary(b, total, out, [&](const Expr& v) {
    return ir::binary(ir::ExprOp::Pow, v, ir::float_const(1.0 / ord, compute));
  });
}

// The norm's input in its compute dtype: cast to the requested result dtype first, as torch does.
NodeId norm_input(Builder& b, NodeId x, DType out, const char* what) {
  LUMINAL_CHECK(is_floating(b.dtype(x)) && is_floating(out), what, " needs a floating tensor, got ",
                dtype_name(b.dtype(x)), " -> ", dtype_name(out));
  return b.cast(b.cast(x, out), float_compute_dtype(out));
}

// linalg_vector_norm(self, ord=2, dim=None, keepdim, *, dtype) and norm.ScalarOpt_dim(self, p, dim, keepdim).
void translate_vector_norm(Context& ctx, const pt2::Node& node, std::string_view ord_name) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  const NodeId xc = norm_input(b, x, out, "vector_norm");
  ctx.set_output(node, vector_norm(b, xc, ctx.float_arg(node, ord_name, 2.0), dim_or_dims(ctx, node),
                                   ctx.bool_arg(node, "keepdim", false), out));
}

// dist(self, other, p=2) = the p-norm of self - other (broadcast) over all elements.
void translate_dist(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "dist needs floating tensors, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  // The difference is rounded to the result dtype before the norm, as torch computes it.
  const NodeId diff = b.elementwise({Operand::of(ctx.tensor(node, "self")), Operand::of(ctx.tensor(node, "other"))}, out,
                                    out, [](const std::vector<Expr>& v) { return ir::sub(v[0], v[1]); });
  ctx.set_output(node, vector_norm(b, b.cast(diff, compute), ctx.float_arg(node, "p", 2.0), {}, false, out));
}

// trace(self): the sum of the main diagonal of a matrix (integers accumulate in int64).
void translate_trace(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape shape = b.shape(x);
  LUMINAL_CHECK(shape.size() == 2, "trace needs a matrix, got shape ", ir::shape_to_string(shape));
  const DType out = ctx.out_dtype(node);
  const Expr diagonal = ir::load(0, b.dtype(x), {ir::reduce_var(0), ir::reduce_var(0)});
  ctx.set_output(node, b.reduce(out, {}, {x}, ir::cast(diagonal, out), ir::ReduceOp::Sum, {ir::min(shape[0], shape[1])}));
}

// The position being scanned and the scan's growing extent: out[.., i, ..] combines x[.., 0..i, ..].
struct Scan {
  int64_t dim;
  std::vector<Expr> at;  // x's index with the scanned position replaced by reduce var 0
  Expr extent;
};

Scan scan_of(Builder& b, NodeId x, int64_t dim) {
  const int64_t d = b.normalize_dim(dim, b.rank(x));
  std::vector<Expr> at = Builder::loop_vars(b.rank(x));
  at[d] = ir::reduce_var(0);
  return {d, at, ir::add(ir::loop_var(static_cast<int>(d)), ir::int_const(1))};
}

// cumsum / cumprod (self, dim, dtype): a reduction whose extent grows with the position
// (quadratic in the scanned dimension).
void translate_scan(Context& ctx, const pt2::Node& node, ir::ReduceOp op) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  if (b.rank(x) == 0) {
    ctx.set_output(node, b.cast(x, out));
    return;
  }
  const Scan scan = scan_of(b, x, ctx.int_arg(node, "dim"));
  const Expr body = ir::cast(ir::load(0, b.dtype(x), scan.at), out);
  ctx.set_output(node, b.reduce(out, b.shape(x), {x}, body, op, {scan.extent}));
}

// logcumsumexp(self, dim): each prefix shifted by its own max.
void translate_logcumsumexp(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "logcumsumexp needs a floating dtype, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  const NodeId xc = b.cast(x, compute);
  if (b.rank(x) == 0) {
    ctx.set_output(node, b.cast(x, out));
    return;
  }
  const Scan scan = scan_of(b, xc, ctx.int_arg(node, "dim"));
  const Shape shape = b.shape(xc);
  const NodeId prefix_max =
      b.reduce(compute, shape, {xc}, ir::load(0, compute, scan.at), ir::ReduceOp::Max, {scan.extent});
  const NodeId shift = finite_shift(b, prefix_max, compute);
  const Expr term = ir::unary(ir::ExprOp::Exp, ir::sub(ir::load(0, compute, scan.at),
                                                       ir::load(1, compute, Builder::loop_vars(shape.size()))));
  const NodeId total = b.reduce(compute, shape, {xc, shift}, term, ir::ReduceOp::Sum, {scan.extent});
  ctx.set_output(node, log_plus(b, total, shift, compute, out));
}

// cummax / cummin(self, dim) -> (values, indices). The index is the last position <= i holding
// the running extreme (a NaN extreme matches NaN), which is what torch's sequential scan
// (updating on >= / <=, and on every NaN) produces.
void translate_cum_extreme(Context& ctx, const pt2::Node& node, bool is_max) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType dtype = b.dtype(x);
  if (b.rank(x) == 0) {
    ctx.set_output(node, 0, x);
    ctx.set_output(node, 1, b.full({}, 0, DType::I64));
    return;
  }
  const Scan scan = scan_of(b, x, ctx.int_arg(node, "dim"));
  const Shape shape = b.shape(x);
  const NodeId values = b.reduce(dtype, shape, {x}, ir::load(0, dtype, scan.at),
                                 is_max ? ir::ReduceOp::Max : ir::ReduceOp::Min, {scan.extent});
  const Expr value = ir::load(0, dtype, scan.at), best = ir::load(1, dtype, Builder::loop_vars(shape.size()));
  Expr match = ir::eq(value, best);
  if (is_floating(dtype)) {
    match = ir::binary(ir::ExprOp::Or, match,
                       ir::logical_and(ir::unary(ir::ExprOp::IsNan, value), ir::unary(ir::ExprOp::IsNan, best)));
  }
  const Expr candidate = ir::where(match, ir::reduce_var(0), ir::int_const(-1));
  ctx.set_output(node, 0, values);
  ctx.set_output(node, 1, b.reduce(DType::I64, shape, {x, values}, candidate, ir::ReduceOp::Max, {scan.extent}));
}

}  // namespace

void register_reduction_ops(Registry& registry) {
  const std::string aten = "torch.ops.aten.";
  registry.add(aten + "sum.dim_IntList", translate_sum);
  registry.add(aten + "sum.default", translate_sum);
  registry.add(aten + "mean.dim", translate_mean);
  registry.add(aten + "mean.default", translate_mean);
  registry.add(aten + "amax.default", translate_extreme<ir::ReduceOp::Max>);
  registry.add(aten + "amin.default", translate_extreme<ir::ReduceOp::Min>);
  registry.add(aten + "prod.default", translate_prod);
  registry.add(aten + "prod.dim_int", translate_prod);
  for (const char* overload : {"default", "dim", "dims"}) {
    registry.add(aten + "any." + overload, translate_any_all<ir::ReduceOp::Any>);
    registry.add(aten + "all." + overload, translate_any_all<ir::ReduceOp::All>);
  }
  for (const char* overload : {"correction", "dim", "default"}) {
    const std::string o = overload;
    registry.add(aten + "var." + o, [](Context& ctx, const pt2::Node& node) { translate_var(ctx, node, false); });
    registry.add(aten + "std." + o, [](Context& ctx, const pt2::Node& node) { translate_var(ctx, node, true); });
    registry.add(aten + "var_mean." + o, [](Context& ctx, const pt2::Node& node) { translate_var_mean(ctx, node, false); });
    registry.add(aten + "std_mean." + o, [](Context& ctx, const pt2::Node& node) { translate_var_mean(ctx, node, true); });
  }
  registry.add(aten + "_softmax.default", [](Context& ctx, const pt2::Node& node) { translate_softmax(ctx, node, false); });
  registry.add(aten + "_log_softmax.default", [](Context& ctx, const pt2::Node& node) { translate_softmax(ctx, node, true); });
  registry.add(aten + "argmax.default", [](Context& ctx, const pt2::Node& node) { translate_arg_extreme(ctx, node, true); });
  registry.add(aten + "argmin.default", [](Context& ctx, const pt2::Node& node) { translate_arg_extreme(ctx, node, false); });
  registry.add(aten + "native_layer_norm.default", translate_layer_norm);
  registry.add(aten + "native_group_norm.default", translate_group_norm);
  registry.add(aten + "cumsum.default", [](Context& ctx, const pt2::Node& node) { translate_scan(ctx, node, ir::ReduceOp::Sum); });
  registry.add(aten + "cumprod.default", [](Context& ctx, const pt2::Node& node) { translate_scan(ctx, node, ir::ReduceOp::Prod); });
  registry.add(aten + "logcumsumexp.default", translate_logcumsumexp);
  registry.add(aten + "cummax.default", [](Context& ctx, const pt2::Node& node) { translate_cum_extreme(ctx, node, true); });
  registry.add(aten + "cummin.default", [](Context& ctx, const pt2::Node& node) { translate_cum_extreme(ctx, node, false); });
  registry.add(aten + "logsumexp.default", translate_logsumexp);
  registry.add(aten + "aminmax.default", translate_aminmax);
  registry.add(aten + "max.default", [](Context& ctx, const pt2::Node& node) { translate_full_extreme(ctx, node, true); });
  registry.add(aten + "min.default", [](Context& ctx, const pt2::Node& node) { translate_full_extreme(ctx, node, false); });
  registry.add(aten + "nansum.default", translate_nansum);
  registry.add(aten + "count_nonzero.default", translate_count_nonzero);
  registry.add(aten + "count_nonzero.dim_IntList", translate_count_nonzero);
  registry.add(aten + "linalg_vector_norm.default", [](Context& ctx, const pt2::Node& node) { translate_vector_norm(ctx, node, "ord"); });
  registry.add(aten + "norm.ScalarOpt_dim", [](Context& ctx, const pt2::Node& node) { translate_vector_norm(ctx, node, "p"); });
  registry.add(aten + "dist.default", translate_dist);
  registry.add(aten + "trace.default", translate_trace);
  registry.add(aten + "max.dim", [](Context& ctx, const pt2::Node& node) { translate_extreme_with_index(ctx, node, true); });
  registry.add(aten + "min.dim", [](Context& ctx, const pt2::Node& node) { translate_extreme_with_index(ctx, node, false); });
  registry.add(aten + "_native_batch_norm_legit_no_training.default", translate_batch_norm_inference);
  registry.add(aten + "_native_batch_norm_legit.default", translate_batch_norm_legit);
  registry.add(aten + "_native_batch_norm_legit_functional.default", translate_batch_norm_legit_functional);
  registry.add(aten + "_native_batch_norm_legit.no_stats", translate_batch_norm_batch_stats);
}

}  // namespace luminal::frontend
