// Sliding-window ops: convolution, pooling, nearest upsampling. Each output element reduces over
// its window with masked loads (positions in the padding read nothing), so the executors and the
// CUDA codegen need no special support.
#include <limits>
#include <memory>
#include <optional>

#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

using ir::ExprOp;

// A per-spatial-dim parameter list: one value repeated, or one per dim (empty -> fallback).
std::vector<int64_t> per_dim(std::vector<int64_t> values, size_t dims, int64_t fallback, const char* what) {
  if (values.empty()) values = {fallback};
  if (values.size() == 1) values.assign(dims, values[0]);
  LUMINAL_CHECK(values.size() == dims, what, " has ", values.size(), " values for ", dims, " spatial dims");
  return values;
}

Expr in_range(const Expr& position, const Expr& size) {
  return ir::logical_and(ir::binary(ExprOp::Ge, position, ir::int_const(0)), ir::binary(ExprOp::Lt, position, size));
}

// Output length of a window of `kernel` (dilated) sliding with `stride` over `size` + 2 * `pad`.
Expr window_count(const Expr& size, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode) {
  const int64_t span = dilation * (kernel - 1) + 1;
  const Expr room = ir::sub(ir::add(size, ir::int_const(2 * pad)), ir::int_const(span));
  if (!ceil_mode) return ir::add(ir::floordiv(room, ir::int_const(stride)), ir::int_const(1));
  // ceil_mode: torch counts ceil(room / stride) + 1 windows, then drops the last one when it would
  // start in the right padding ((count - 1) * stride >= size + pad). Dropping it is the same as
  // capping the count at the windows starting before size + pad, floor((size + pad - 1) / stride) + 1
  // (the cap is at least the count less one, as pad <= the dilated kernel): a min, which shape
  // code (CUDA kernels with symbolic sizes) can emit, unlike a select.
  const Expr count = ir::add(ir::floordiv(ir::add(room, ir::int_const(stride - 1)), ir::int_const(stride)), ir::int_const(1));
  const Expr starting_inside =
      ir::add(ir::floordiv(ir::add(size, ir::int_const(pad - 1)), ir::int_const(stride)), ir::int_const(1));
  return ir::min(count, starting_inside);
}

// convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
void translate_convolution(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "input");
  const NodeId w = ctx.tensor(node, "weight");
  LUMINAL_CHECK(!ctx.bool_arg(node, "transposed", false), "transposed convolution is not supported yet");
  const Shape xs = b.shape(x), ws = b.shape(w);
  LUMINAL_CHECK(xs.size() >= 3 && xs.size() == ws.size(), "convolution of input rank ", xs.size(), " with weight rank ",
                ws.size(), " (batched 1d/2d/3d inputs are supported)");
  const size_t spatial = xs.size() - 2;
  const std::vector<int64_t> stride = per_dim(ctx.ints_arg(node, "stride", std::vector<int64_t>{}), spatial, 1, "stride");
  const std::vector<int64_t> padding = per_dim(ctx.ints_arg(node, "padding", std::vector<int64_t>{}), spatial, 0, "padding");
  const std::vector<int64_t> dilation = per_dim(ctx.ints_arg(node, "dilation", std::vector<int64_t>{}), spatial, 1, "dilation");
  const int64_t groups = ctx.int_arg(node, "groups", 1);
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "convolution needs floating-point tensors, got ", dtype_name(out));
  const DType acc = float_compute_dtype(out);
  const Expr in_per_group = ws[1];
  const Expr out_per_group = ir::floordiv(ws[0], ir::int_const(groups));

  Shape out_shape{xs[0], ws[0]};
  std::vector<Expr> extents{in_per_group};
  for (size_t k = 0; k < spatial; ++k) {
    const auto kernel = ir::as_int_const(ws[2 + k]);
    LUMINAL_CHECK(kernel.has_value(), "convolution kernel sizes must be static");
    out_shape.push_back(window_count(xs[2 + k], *kernel, stride[k], padding[k], dilation[k], false));
    extents.push_back(ws[2 + k]);
  }
  // out[n, co, o...] = sum over (ci, r...) of x[n, g * Cg + ci, o * s + r * d - p] * w[co, ci, r...]
  const Expr group = ir::floordiv(ir::loop_var(1), out_per_group);
  std::vector<Expr> x_at{ir::loop_var(0), ir::add(ir::mul(group, in_per_group), ir::reduce_var(0))};
  std::vector<Expr> w_at{ir::loop_var(1), ir::reduce_var(0)};
  Expr inside = ir::bool_const(true);
  for (size_t k = 0; k < spatial; ++k) {
    const Expr r = ir::reduce_var(static_cast<int>(1 + k));
    const Expr position = ir::sub(ir::add(ir::mul(ir::loop_var(static_cast<int>(2 + k)), ir::int_const(stride[k])),
                                          ir::mul(r, ir::int_const(dilation[k]))),
                                  ir::int_const(padding[k]));
    inside = ir::logical_and(inside, in_range(position, xs[2 + k]));
    x_at.push_back(position);
    w_at.push_back(r);
  }
  const Expr product = ir::mul(ir::cast(ir::load(0, b.dtype(x), x_at, inside), acc), ir::cast(ir::load(1, b.dtype(w), w_at), acc));
  // Stored in the output's dtype, summed in `acc` and rounded once (eager's convolution). The
  // parameters let a library compute the same node (ir::Convolution).
  const ir::Convolution params{stride, padding, dilation, groups, nullptr, {}, {}, {}};
  const NodeId result = b.convolution(out, out_shape, x, w, product, extents, params);
  // With a bias, round(round(conv) + bias) in the output's dtype, as torch's cuDNN path
  // (output.add_(bias)) computes half-precision convolutions; without, a plain copy (in the
  // output's dtype: no widening and rounding back that consumers would inline).
  std::vector<Operand> operands{Operand::of(result)};
  const std::optional<NodeId> bias = ctx.optional_tensor(node, "bias");
  if (bias) operands.push_back(Operand::of(b.per_channel(*bias, xs.size())));
  ctx.set_output(node, b.elementwise(operands, bias ? acc : out, out, [&](const std::vector<Expr>& v) {
    return bias ? ir::add(v[0], v[1]) : v[0];
  }));
}

struct Window {
  size_t spatial = 0, lead = 0;  // pooled dims (the last `spatial`) and the dims before them
  std::vector<int64_t> kernel, stride, padding, dilation;
};

Window pooling_window(Context& ctx, const pt2::Node& node, size_t rank, size_t spatial) {
  Window win;
  win.spatial = spatial;
  LUMINAL_CHECK(rank == spatial + 1 || rank == spatial + 2, "pooling over ", spatial, " dims of a rank-", rank, " tensor");
  win.lead = rank - spatial;
  win.kernel = per_dim(ctx.ints_arg(node, "kernel_size"), spatial, 1, "kernel_size");
  win.stride = per_dim(ctx.ints_arg(node, "stride", std::vector<int64_t>{}), spatial, 0, "stride");
  for (size_t k = 0; k < spatial; ++k) {
    if (win.stride[k] == 0) win.stride[k] = win.kernel[k];  // torch: empty stride = kernel_size
  }
  win.padding = per_dim(ctx.ints_arg(node, "padding", std::vector<int64_t>{}), spatial, 0, "padding");
  win.dilation = ctx.find_arg(node, "dilation") ? per_dim(ctx.ints_arg(node, "dilation"), spatial, 1, "dilation")
                                                 : std::vector<int64_t>(spatial, 1);
  return win;
}

// Positions of the window element (reduce vars) for the current output element, and whether it
// lies inside the input.
struct WindowIndex {
  std::vector<Expr> at;
  Expr inside = ir::bool_const(true);
  Expr flat;  // position within the pooled plane, row-major (max_pool's indices)
};

WindowIndex window_index(const Window& win, const Shape& in) {
  WindowIndex w;
  w.at = Builder::loop_vars(win.lead);
  w.flat = ir::int_const(0);
  for (size_t k = 0; k < win.spatial; ++k) {
    const Expr position = ir::sub(ir::add(ir::mul(ir::loop_var(static_cast<int>(win.lead + k)), ir::int_const(win.stride[k])),
                                          ir::mul(ir::reduce_var(static_cast<int>(k)), ir::int_const(win.dilation[k]))),
                                  ir::int_const(win.padding[k]));
    w.inside = ir::logical_and(w.inside, in_range(position, in[win.lead + k]));
    w.at.push_back(position);
    w.flat = ir::add(ir::mul(w.flat, in[win.lead + k]), position);
  }
  return w;
}

Shape pooled_shape(const Window& win, const Shape& in, bool ceil_mode) {
  Shape out(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(win.lead));
  for (size_t k = 0; k < win.spatial; ++k) {
    LUMINAL_CHECK(win.padding[k] * 2 <= win.kernel[k], "pooling padding must be at most half the kernel size");
    out.push_back(window_count(in[win.lead + k], win.kernel[k], win.stride[k], win.padding[k], win.dilation[k], ceil_mode));
  }
  return out;
}

std::vector<Expr> kernel_extents(const Window& win) {
  std::vector<Expr> extents;
  for (int64_t k : win.kernel) extents.push_back(ir::int_const(k));
  return extents;
}

// The divisor of avg_pool's output element (as torch's kernels compute it): per pooled dim, the
// window [start, start + kernel) with start = o * stride - pad is first clipped to the padded
// input (ceil_mode's last window may overhang it) and counts that many positions with
// count_include_pad; without it the window is clipped to the input itself. Windows are never
// empty: the last one starts inside the input or its left padding, and padding <= kernel / 2.
Expr avg_pool_divisor(const Window& win, const Shape& in, bool include_pad) {
  Expr count = ir::int_const(1);
  for (size_t k = 0; k < win.spatial; ++k) {
    const Expr size = in[win.lead + k];
    const Expr pad = ir::int_const(win.padding[k]);
    const Expr start = ir::sub(ir::mul(ir::loop_var(static_cast<int>(win.lead + k)), ir::int_const(win.stride[k])), pad);
    const Expr end = ir::min(ir::add(start, ir::int_const(win.kernel[k])), ir::add(size, pad));
    const Expr extent = include_pad ? ir::sub(end, start) : ir::sub(ir::min(end, size), ir::max(start, ir::int_const(0)));
    count = ir::mul(count, extent);
  }
  return count;
}

// avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
void translate_avg_pool(Context& ctx, const pt2::Node& node, size_t spatial) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  const Window win = pooling_window(ctx, node, in.size(), spatial);
  const bool ceil_mode = ctx.bool_arg(node, "ceil_mode", false);
  const bool include_pad = ctx.bool_arg(node, "count_include_pad", true);
  const pt2::Argument* divisor_arg = ctx.find_arg(node, "divisor_override");
  const bool has_divisor = divisor_arg && !divisor_arg->is_none();
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "avg_pool needs a floating-point tensor, got ", dtype_name(out));
  const DType acc = float_compute_dtype(out);
  const WindowIndex w = window_index(win, in);
  const Shape out_shape = pooled_shape(win, in, ceil_mode);
  const NodeId total = b.reduce(acc, out_shape, {x}, ir::cast(ir::load(0, b.dtype(x), w.at, w.inside), acc),
                                ir::ReduceOp::Sum, kernel_extents(win));
  Expr divisor;
  if (has_divisor) {
    const int64_t value = ctx.int_arg(node, "divisor_override");
    LUMINAL_CHECK(value != 0, "avg_pool divisor_override must be non-zero");  // torch raises too
    divisor = ir::scalar_const(static_cast<double>(value), acc);
  } else {
    divisor = ir::cast(avg_pool_divisor(win, in, include_pad), acc);
  }
  const Expr mean = ir::binary(ExprOp::Div, ir::load(0, acc, Builder::loop_vars(out_shape.size())), divisor);
  ctx.set_output(node, b.pointwise(out, out_shape, {total}, ir::cast(mean, out)));
}

// The identity of max for `dtype`: -inf, or the integer type's minimum.
Expr lowest_value(DType dtype) {
  switch (dtype) {
    case DType::I8: return ir::scalar_const(-128, dtype);
    case DType::I16: return ir::scalar_const(-32768, dtype);
    case DType::I32: return ir::scalar_const(static_cast<double>(std::numeric_limits<int32_t>::min()), dtype);
    case DType::I64: return ir::int_const(std::numeric_limits<int64_t>::min());
    case DType::U8:
    case DType::Bool: return ir::scalar_const(0, dtype);
    default: return ir::scalar_const(-std::numeric_limits<double>::infinity(), dtype);
  }
}

// Adaptive window o of a pooled dimension (input size n, output size m): [floor(o * n / m),
// ceil((o + 1) * n / m)), as torch's kernels take it.
struct AdaptiveWindow {
  Expr start, extent;
};
AdaptiveWindow adaptive_window(const Expr& o, const Expr& n, const Expr& m) {
  const Expr start = ir::floordiv(ir::mul(o, n), m);
  const Expr end = ir::floordiv(ir::add(ir::mul(ir::add(o, ir::int_const(1)), n), ir::sub(m, ir::int_const(1))), m);
  return {start, ir::sub(end, start)};
}

// The position eager's kernels keep, scanning row-major and taking a position when
// `val > max || isnan(val)`: the first holding the maximum `best`, or the last NaN. `position` is
// the candidate's (non-negative) position, `value` its value; the reduction that takes the
// smallest candidate gives `position` of the first maximum, or -position of the last NaN (undone
// by kept_position).
Expr position_candidate(const Expr& value, const Expr& best, const Expr& position, DType dtype) {
  const Expr none = ir::int_const(std::numeric_limits<int64_t>::max());
  const Expr first_max = ir::where(ir::binary(ExprOp::Eq, value, best), position, none);
  if (!is_floating(dtype)) return first_max;
  const Expr last_nan = ir::where(ir::unary(ExprOp::IsNan, value), ir::sub(ir::int_const(0), position), none);
  return ir::where(ir::unary(ExprOp::IsNan, best), last_nan, first_max);
}
Expr kept_position(const Expr& key, const Expr& best, DType dtype) {
  return is_floating(dtype) ? ir::where(ir::unary(ExprOp::IsNan, best), ir::sub(ir::int_const(0), key), key) : key;
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (values, indices)
void translate_max_pool(Context& ctx, const pt2::Node& node, size_t spatial) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  const Window win = pooling_window(ctx, node, in.size(), spatial);
  const bool ceil_mode = ctx.bool_arg(node, "ceil_mode", false);
  const DType dtype = b.dtype(x);
  const WindowIndex w = window_index(win, in);
  const Shape out_shape = pooled_shape(win, in, ceil_mode);
  const Expr lowest = lowest_value(dtype);
  const Expr value = ir::where(w.inside, ir::load(0, dtype, w.at, w.inside), lowest);
  const NodeId values = b.reduce(dtype, out_shape, {x}, value, ir::ReduceOp::Max, kernel_extents(win));
  ctx.set_output(node, 0, values);
  // The position eager keeps (position_candidate), among the window's positions inside the input.
  const std::vector<Expr> out_at = Builder::loop_vars(out_shape.size());
  const Expr candidate = ir::where(w.inside, position_candidate(value, ir::load(1, dtype, out_at), w.flat, dtype),
                                   ir::int_const(std::numeric_limits<int64_t>::max()));
  const NodeId key = b.reduce(DType::I64, out_shape, {x, values}, candidate, ir::ReduceOp::Min, kernel_extents(win));
  ctx.set_output(node, 1, b.pointwise(DType::I64, out_shape, {key, values},
                                      kept_position(ir::load(0, DType::I64, out_at), ir::load(1, dtype, out_at), dtype)));
}

// _adaptive_avg_pool2d(self, output_size): window o covers [floor(o * in / out), ceil((o + 1) * in / out)).
// Windows differ in size, and a ragged reduction has one dimension: one reduction per pooled dim.
void translate_adaptive_avg_pool(Context& ctx, const pt2::Node& node, size_t spatial) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  LUMINAL_CHECK(in.size() == spatial + 1 || in.size() == spatial + 2, "adaptive pooling of a rank-", in.size(), " tensor");
  const size_t lead = in.size() - spatial;
  const std::vector<Expr> sizes = ctx.symints_arg(node, "output_size");
  LUMINAL_CHECK(sizes.size() == spatial, "adaptive pooling output_size needs ", spatial, " values");
  const DType out = ctx.out_dtype(node);
  const DType acc = float_compute_dtype(out);
  NodeId current = b.cast(x, acc);
  Expr count = ir::int_const(1);
  for (size_t k = 0; k < spatial; ++k) {
    const size_t d = lead + k;
    const AdaptiveWindow window = adaptive_window(ir::loop_var(static_cast<int>(d)), in[d], sizes[k]);
    Shape shape = b.shape(current);
    shape[d] = sizes[k];
    std::vector<Expr> at = Builder::loop_vars(shape.size());
    at[d] = ir::add(window.start, ir::reduce_var(0));
    current = b.reduce(acc, shape, {current}, ir::load(0, acc, at), ir::ReduceOp::Sum, {window.extent});
    count = ir::mul(count, window.extent);
  }
  const Shape out_shape = b.shape(current);
  ctx.set_output(node, b.pointwise(out, out_shape, {current},
                                   ir::cast(ir::binary(ExprOp::Div, ir::load(0, acc, Builder::loop_vars(out_shape.size())),
                                                       ir::cast(count, acc)),
                                            out)));
}

// Adaptive max pooling along dimension d of `values` to size m: the maxima and the positions eager
// keeps (kept_position's rule). A candidate's position is its index along d, or, given `inner`
// (positions of an earlier dimension's pooling, of `values`'s shape), inner's there times `stride`
// plus that index.
struct PooledMax {
  NodeId values, positions;
};
PooledMax adaptive_max_along(Builder& b, NodeId values, std::optional<NodeId> inner, size_t d, const Expr& m,
                             const Expr& stride) {
  const DType dtype = b.dtype(values);
  Shape out = b.shape(values);
  const AdaptiveWindow window = adaptive_window(ir::loop_var(static_cast<int>(d)), out[d], m);
  out[d] = m;
  std::vector<Expr> at = Builder::loop_vars(out.size());
  const Expr index = ir::add(window.start, ir::reduce_var(0));
  at[d] = index;
  const Expr value = ir::load(0, dtype, at);
  const NodeId maxima = b.reduce(dtype, out, {values}, value, ir::ReduceOp::Max, {window.extent});
  const std::vector<Expr> out_at = Builder::loop_vars(out.size());
  std::vector<NodeId> inputs{values, maxima};
  Expr position = index;
  if (inner) {
    inputs.push_back(*inner);
    position = ir::add(ir::mul(ir::load(2, DType::I64, at), stride), index);
  }
  const NodeId key = b.reduce(DType::I64, out, inputs, position_candidate(value, ir::load(1, dtype, out_at), position, dtype),
                              ir::ReduceOp::Min, {window.extent});
  const Expr kept = kept_position(ir::load(0, DType::I64, out_at), ir::load(1, dtype, out_at), dtype);
  return {maxima, b.pointwise(DType::I64, out, {key, maxima}, kept)};
}

// adaptive_max_pool2d(self, output_size) -> (values, indices): per output element, the maximum of
// its adaptive window and that element's position h * W + w in its input plane. Windows differ in
// size, and a ragged reduction has one dimension: the rows are pooled first (per column, its
// maximum and the row eager keeps), then the columns.
void translate_adaptive_max_pool2d(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  LUMINAL_CHECK(in.size() == 3 || in.size() == 4, "adaptive_max_pool2d of a rank-", in.size(), " tensor");
  const std::vector<Expr> sizes = ctx.symints_arg(node, "output_size");
  LUMINAL_CHECK(sizes.size() == 2, "adaptive_max_pool2d output_size needs 2 values");
  const size_t h = in.size() - 2, w = in.size() - 1;
  const PooledMax rows = adaptive_max_along(b, x, std::nullopt, h, sizes[0], ir::int_const(1));
  const PooledMax pooled = adaptive_max_along(b, rows.values, rows.positions, w, sizes[1], in[w]);
  ctx.set_output(node, 0, pooled.values);
  ctx.set_output(node, 1, pooled.positions);
}

// upsample_nearest{1,2,3}d.vec(input, output_size, scale_factors): source index
// min(floor(o * scale), in - 1) in float32, scale = 1 / factor when given, else in / out (as torch).
void translate_upsample_nearest(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "input");
  const Shape in = b.shape(x);
  const Shape out_shape = ctx.out_shape(node);
  LUMINAL_CHECK(out_shape.size() == in.size() && in.size() >= 3, "upsample_nearest of a rank-", in.size(), " tensor");
  const size_t spatial = in.size() - 2;
  std::vector<double> factors;
  if (const pt2::Argument* f = ctx.find_arg(node, "scale_factors"); f && !f->is_none()) factors = f->as_floats();
  std::vector<Expr> at = Builder::loop_vars(2);
  for (size_t k = 0; k < spatial; ++k) {
    const Expr o = ir::cast(ir::loop_var(static_cast<int>(2 + k)), DType::F32);
    Expr scale;
    if (k < factors.size() && factors[k] > 0) {
      scale = ir::scalar_const(static_cast<float>(1.0 / factors[k]), DType::F32);
    } else {
      scale = ir::binary(ExprOp::Div, ir::cast(in[2 + k], DType::F32), ir::cast(out_shape[2 + k], DType::F32));
    }
    const Expr source = ir::cast(ir::unary(ExprOp::Floor, ir::mul(o, scale)), DType::I64);
    at.push_back(ir::min(source, ir::sub(in[2 + k], ir::int_const(1))));
  }
  ctx.set_output(node, b.pointwise(b.dtype(x), out_shape, {x}, ir::load(0, b.dtype(x), at)));
}

}  // namespace

void register_window_ops(Registry& registry) {
  const std::string aten = "torch.ops.aten.";
  registry.add(aten + "convolution.default", translate_convolution);
  registry.add(aten + "avg_pool2d.default", [](Context& c, const pt2::Node& n) { translate_avg_pool(c, n, 2); });
  registry.add(aten + "avg_pool1d.default", [](Context& c, const pt2::Node& n) { translate_avg_pool(c, n, 1); });
  registry.add(aten + "avg_pool3d.default", [](Context& c, const pt2::Node& n) { translate_avg_pool(c, n, 3); });
  registry.add(aten + "max_pool2d_with_indices.default", [](Context& c, const pt2::Node& n) { translate_max_pool(c, n, 2); });
  registry.add(aten + "max_pool3d_with_indices.default", [](Context& c, const pt2::Node& n) { translate_max_pool(c, n, 3); });
  registry.add(aten + "_adaptive_avg_pool2d.default",
               [](Context& c, const pt2::Node& n) { translate_adaptive_avg_pool(c, n, 2); });
  registry.add(aten + "adaptive_max_pool2d.default", translate_adaptive_max_pool2d);
  registry.add(aten + "_adaptive_avg_pool3d.default",
               [](Context& c, const pt2::Node& n) { translate_adaptive_avg_pool(c, n, 3); });
  for (const char* overload : {"upsample_nearest1d.vec", "upsample_nearest2d.vec", "upsample_nearest3d.vec"}) {
    registry.add(aten + overload, translate_upsample_nearest);
  }
}

}  // namespace luminal::frontend
