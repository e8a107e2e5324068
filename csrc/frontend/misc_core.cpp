// Core-ATen inference ops without a family of their own: masked_scatter, as_strided, distances
// (cdist, pdist), col2im, grid_sampler_2d, bilinear upsampling, histc and _assert_async. All are index arithmetic,
// masked loads and reductions, so the executors and the CUDA codegen need no special support.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "common/error.h"
#include "frontend/translate.h"
#include "ir/simplify.h"

namespace luminal::frontend {

namespace {

using ir::ExprOp;

Expr in_range(const Expr& position, const Expr& size) {
  return ir::logical_and(ir::ge(position, ir::int_const(0)), ir::lt(position, size));
}

// ---- masked_scatter ------------------------------------------------------------------------

// masked_scatter(self, mask, source): where the (broadcast) mask is true, the next element of the
// flattened source, in row-major order of the output. The position in source is the number of
// true mask elements before the current one (an exclusive prefix count, quadratic like cumsum).
void translate_masked_scatter(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const NodeId mask = ctx.tensor(node, "mask");
  const NodeId source = ctx.tensor(node, "source");
  LUMINAL_CHECK(b.dtype(mask) == DType::Bool, "masked_scatter mask must be bool, got ", dtype_name(b.dtype(mask)));
  const Shape shape = ctx.out_shape(node);
  const DType dtype = ctx.out_dtype(node);
  const Expr total = ir::product(shape);
  const NodeId flags = b.reshape(b.cast(b.expand(mask, shape), DType::I64), {total});
  const NodeId before = b.reduce(DType::I64, {total}, {flags}, ir::load(0, DType::I64, {ir::reduce_var(0)}),
                                 ir::ReduceOp::Sum, {ir::loop_var(0)});
  const Expr source_count = ir::product(b.shape(source));
  const NodeId flat_source = b.reshape(source, {source_count});
  const std::vector<Expr> at = Builder::loop_vars(shape.size());
  const Expr selected = b.broadcast_load(1, mask, shape);
  // Raises when source has fewer elements than the mask selects.
  const Expr position = Builder::checked_index(ir::load(2, DType::I64, at), source_count, false, selected, "source");
  const Expr from_source = ir::cast(ir::load(3, b.dtype(source), {position}, selected), dtype);
  const Expr kept = ir::cast(b.broadcast_load(0, self, shape), dtype);
  ctx.set_output(node, b.pointwise(dtype, shape, {self, mask, b.reshape(before, shape), flat_source},
                                   ir::where(selected, from_source, kept)));
}

// ---- as_strided ----------------------------------------------------------------------------

// Ops whose result shares its operand's storage: an as_strided of their result addresses memory
// outside the values luminal has.
bool is_view_target(const std::string& target) {
  static const std::set<std::string> views = [] {
    std::set<std::string> names;
    for (const char* op : {"view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "slice", "select",
                           "squeeze", "unsqueeze", "alias", "diagonal", "unfold", "split", "split_with_sizes", "chunk",
                           "narrow", "as_strided", "view_as_real", "view_as_complex", "unbind", "movedim", "detach",
                           "lift_fresh", "_reshape_alias", "real", "imag", "tensor_split", "swapaxes", "flatten",
                           "unflatten", "expand_as", "view_as"}) {
      names.insert(op);
    }
    return names;
  }();
  // "torch.ops.aten.view.default" -> "view"
  const std::string prefix = "torch.ops.aten.";
  if (target.rfind(prefix, 0) != 0) return true;  // getitem of a multi-output op, other namespaces: unknown layout
  const std::string rest = target.substr(prefix.size());
  return views.count(rest.substr(0, rest.find('.'))) > 0;
}

const pt2::Node* producer_of(const pt2::Graph& graph, const std::string& name) {
  for (const pt2::Node& n : graph.nodes) {
    for (const pt2::Argument& out : n.outputs) {
      if (out.kind() == pt2::Argument::Kind::Tensor && out.as_tensor().name == name) return &n;
    }
  }
  return nullptr;
}

// as_strided(self, size, stride, storage_offset): element i reads storage element
// offset + sum(i_d * stride_d) of self's storage in eager. Only sound when that storage is exactly
// self's values: self must come from a non-view op, with offset 0 and a dense layout in the export
// metadata (row-major, or a permutation of it: eager's elementwise ops keep their input's layout).
// Views are followed to the op that allocated their storage (storage_producer); graph inputs are
// refused (they run in eager).
Expr symint_expr(const pt2::SymInt& value) {
  return value.is_int() ? ir::int_const(value.as_int()) : sympy_to_expr(value.as_expr().expr_str);
}

Expr element_count(const pt2::TensorMeta& meta) {
  Expr count = ir::int_const(1);
  for (const pt2::SymInt& size : meta.sizes) count = ir::mul(count, symint_expr(size));
  return ir::simplify(count, {});
}

// The op that allocated the storage `name` reads: views (Longformer chunks a reshaped product with
// as_strided) are followed to their source. A view is accepted only when it spans its source's
// whole storage (same element count), so that its storage is exactly the source's values.
const pt2::Node* storage_producer(Context& ctx, const std::string& name) {
  std::string current = name;
  for (;;) {
    const pt2::Node* producer = producer_of(ctx.pt2_graph(), current);
    LUMINAL_CHECK(producer != nullptr,
                  "as_strided of a graph input is not supported: its storage layout is unknown to luminal");
    if (!is_view_target(producer->target)) {
      LUMINAL_CHECK(ir::expr_equal(element_count(ctx.tensor_meta(current)), element_count(ctx.tensor_meta(name))),
                    "as_strided of a view of part of the result of ", short_target(producer->target),
                    " is not supported");
      return producer;
    }
    const pt2::Argument* source = ctx.find_arg(*producer, "self");
    const bool aten = producer->target.rfind("torch.ops.aten.", 0) == 0;
    LUMINAL_CHECK(aten && source && source->kind() == pt2::Argument::Kind::Tensor, "as_strided of the result of ",
                  short_target(producer->target), " (an op of unknown storage layout) is not supported");
    current = source->as_tensor().name;
  }
}

void translate_as_strided(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const pt2::Argument* self_arg = ctx.find_arg(node, "self");
  LUMINAL_CHECK(self_arg && self_arg->kind() == pt2::Argument::Kind::Tensor, "as_strided needs a tensor operand");
  const std::string& name = self_arg->as_tensor().name;
  const pt2::Node* producer = storage_producer(ctx, name);
  const pt2::TensorMeta& meta = ctx.tensor_meta(name);
  LUMINAL_CHECK(meta.storage_offset.is_int() && meta.storage_offset.as_int() == 0,
                "as_strided of a tensor with a storage offset is not supported");
  LUMINAL_CHECK(meta.strides.size() == meta.sizes.size(), "as_strided operand metadata has no strides");
  // Dims of size > 1 by increasing stride must tile the storage densely. Symbolic strides (a
  // dynamic batch) are ordered by their example values and checked as expressions: each stride
  // must be the product of the sizes below it.
  struct Dim {
    int64_t order;  // the stride, or its example value
    size_t index;
    Expr size, stride;
  };
  std::vector<Dim> by_stride;
  for (size_t d = 0; d < meta.sizes.size(); ++d) {
    const Expr size = symint_expr(meta.sizes[d]), stride = symint_expr(meta.strides[d]);
    if (size->is_int_const(1)) continue;
    const std::optional<int64_t> order = example_value(meta.strides[d]);
    LUMINAL_CHECK(order.has_value(), "as_strided of a tensor whose symbolic strides have no example values");
    by_stride.push_back({*order, d, size, stride});
  }
  std::stable_sort(by_stride.begin(), by_stride.end(), [](const Dim& a, const Dim& c) { return a.order < c.order; });
  Expr dense = ir::int_const(1);
  for (const Dim& dim : by_stride) {
    LUMINAL_CHECK(ir::expr_equal(ir::simplify(dim.stride, {}), ir::simplify(dense, {})), "as_strided of a tensor "
                  "whose layout (from ", short_target(producer->target), ") is not dense is not supported");
    dense = ir::mul(dense, dim.size);
  }
  const NodeId x = ctx.tensor(node, "self");
  const Shape x_shape = b.shape(x);
  LUMINAL_CHECK(x_shape.size() == meta.sizes.size(), "as_strided operand rank differs from its metadata");
  const std::vector<Expr> size = ctx.symints_arg(node, "size");
  const std::vector<Expr> stride = ctx.symints_arg(node, "stride");
  LUMINAL_CHECK(size.size() == stride.size(), "as_strided size and stride lengths differ");
  Expr flat = ctx.symint_arg(node, "storage_offset").value_or(ir::int_const(0));
  for (size_t d = 0; d < size.size(); ++d) flat = ir::add(flat, ir::mul(ir::loop_var(static_cast<int>(d)), stride[d]));
  flat = Builder::checked_index(flat, dense, false, nullptr, "storage position");
  // Storage position -> coordinates of self in its (permuted) layout.
  std::vector<Expr> at(x_shape.size(), ir::int_const(0));
  for (const Dim& dim : by_stride) at[dim.index] = ir::mod(ir::floordiv(flat, dim.stride), dim.size);
  ctx.set_output(node, b.pointwise(b.dtype(x), size, {x}, ir::load(0, b.dtype(x), at)));
}

// ---- distances -----------------------------------------------------------------------------

// The p-norm of a difference vector as a reduction: op and per-element term over d = a - b, and
// the final transform of the reduced value.
struct Norm {
  ir::ReduceOp op = ir::ReduceOp::Sum;
  std::function<Expr(const Expr&)> term;
  std::function<Expr(const Expr&)> finish;
};

Norm p_norm(double p, DType compute) {
  LUMINAL_CHECK(p >= 0 && !std::isnan(p), "distance p must be non-negative, got ", p);
  const Expr zero = ir::scalar_const(0, compute);
  auto abs = [](const Expr& d) { return ir::unary(ExprOp::Abs, d); };
  auto identity = [](const Expr& v) { return v; };
  if (p == 0) return {ir::ReduceOp::Sum, [=](const Expr& d) { return ir::cast(ir::binary(ExprOp::Ne, d, zero), compute); }, identity};
  if (p == 1) return {ir::ReduceOp::Sum, abs, identity};
  if (p == 2) {
    return {ir::ReduceOp::Sum, [](const Expr& d) { return ir::mul(d, d); },
            [](const Expr& v) { return ir::unary(ExprOp::Sqrt, v); }};
  }
  if (std::isinf(p)) {
    // max(., 0): an empty feature dim gives 0, not -inf.
    return {ir::ReduceOp::Max, abs, [=](const Expr& v) { return ir::max(v, zero); }};
  }
  const Expr power = ir::scalar_const(p, compute), root = ir::scalar_const(1.0 / p, compute);
  return {ir::ReduceOp::Sum, [=](const Expr& d) { return ir::binary(ExprOp::Pow, ir::unary(ExprOp::Abs, d), power); },
          [=](const Expr& v) { return ir::binary(ExprOp::Pow, v, root); }};
}

// _cdist_forward(x1 [..., P, M], x2 [..., R, M], p, compute_mode) -> [..., P, R]; batch dims broadcast.
// Computed directly for every p (torch may use a matmul expansion for p = 2: equal within rounding).
void translate_cdist(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  NodeId x1 = ctx.tensor(node, "x1");
  NodeId x2 = ctx.tensor(node, "x2");
  const Shape out_shape = ctx.out_shape(node);
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "cdist needs floating tensors, got ", dtype_name(out));
  LUMINAL_CHECK(b.rank(x1) >= 2 && b.rank(x2) >= 2 && out_shape.size() >= 2, "cdist needs inputs of rank >= 2");
  const DType compute = float_compute_dtype(out);
  const size_t batch = out_shape.size() - 2;
  const Shape s1 = b.shape(x1), s2 = b.shape(x2);
  b.assert_equal(s1.back(), s2.back(), "cdist feature dimensions");
  Shape full1(out_shape.begin(), out_shape.begin() + static_cast<std::ptrdiff_t>(batch)), full2 = full1;
  full1.insert(full1.end(), s1.end() - 2, s1.end());
  full2.insert(full2.end(), s2.end() - 2, s2.end());
  x1 = b.expand(x1, full1);
  x2 = b.expand(x2, full2);
  std::vector<Expr> at1 = Builder::loop_vars(batch), at2 = at1;
  at1.push_back(ir::loop_var(static_cast<int>(batch)));
  at2.push_back(ir::loop_var(static_cast<int>(batch + 1)));
  at1.push_back(ir::reduce_var(0));
  at2.push_back(ir::reduce_var(0));
  const Norm norm = p_norm(ctx.float_arg(node, "p"), compute);
  const Expr diff = ir::sub(ir::cast(ir::load(0, b.dtype(x1), at1), compute), ir::cast(ir::load(1, b.dtype(x2), at2), compute));
  const NodeId reduced = b.reduce(compute, out_shape, {x1, x2}, norm.term(diff), norm.op, {s1.back()});
  ctx.set_output(node, b.elementwise({Operand::of(reduced)}, compute, out,
                                     [&](const std::vector<Expr>& v) { return norm.finish(v[0]); }));
}

// _pdist_forward(x [N, M], p) -> [N (N - 1) / 2]: distances of rows i < j, row-major over (i, j).
void translate_pdist(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape shape = b.shape(x);
  LUMINAL_CHECK(shape.size() == 2, "pdist needs a 2-D input, got ", ir::node_signature(b.node(x)));
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "pdist needs a floating tensor, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  const Expr n = shape[0];
  const Shape out_shape = ctx.out_shape(node);
  // Pairs of row r start at flat position start(r) = r N - r (r + 1) / 2; row i of pair k is the
  // number of rows r >= 1 (r < N) with start(r) <= k.
  auto start = [&](const Expr& r) {
    return ir::sub(ir::mul(r, n), ir::floordiv(ir::mul(r, ir::add(r, ir::int_const(1))), ir::int_const(2)));
  };
  const Expr k = ir::loop_var(0);
  // Fold variable 1: this node may be inlined into the distance reduction, which binds r0.
  const Expr r = ir::add(ir::reduce_var(1), ir::int_const(1));
  const Expr row_count = ir::max(ir::sub(n, ir::int_const(1)), ir::int_const(0));
  const NodeId rows = b.pointwise(DType::I64, out_shape, {},
                                  ir::fold(ir::ReduceOp::Sum, 1, row_count, ir::cast(ir::binary(ExprOp::Le, start(r), k), DType::I64)));
  const Expr i = ir::load(0, DType::I64, {k});
  const NodeId cols = b.pointwise(DType::I64, out_shape, {rows}, ir::add(ir::sub(k, start(i)), ir::add(i, ir::int_const(1))));
  const Expr row_i = Builder::checked_index(ir::load(1, DType::I64, {k}), n, false, nullptr, "row of a pair");
  const Expr row_j = Builder::checked_index(ir::load(2, DType::I64, {k}), n, false, nullptr, "column of a pair");
  const Norm norm = p_norm(ctx.float_arg(node, "p", 2.0), compute);
  const DType dtype = b.dtype(x);
  const Expr diff = ir::sub(ir::cast(ir::load(0, dtype, {row_i, ir::reduce_var(0)}), compute),
                            ir::cast(ir::load(0, dtype, {row_j, ir::reduce_var(0)}), compute));
  const NodeId reduced = b.reduce(compute, out_shape, {x, rows, cols}, norm.term(diff), norm.op, {shape[1]});
  ctx.set_output(node, b.elementwise({Operand::of(reduced)}, compute, out,
                                     [&](const std::vector<Expr>& v) { return norm.finish(v[0]); }));
}

// ---- col2im --------------------------------------------------------------------------------

std::vector<int64_t> pair_arg(Context& ctx, const pt2::Node& node, const char* name) {
  std::vector<int64_t> values = ctx.ints_arg(node, name);
  if (values.size() == 1) values.push_back(values[0]);
  LUMINAL_CHECK(values.size() == 2, "col2im ", name, " needs 2 values, got ", values.size());
  return values;
}

// col2im(self [N, C kh kw, L], output_size, kernel_size, dilation, padding, stride) -> [N, C, H, W]:
// each output pixel sums the patch entries that land on it (the inverse layout of im2col).
void translate_col2im(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  NodeId x = ctx.tensor(node, "self");
  const bool batched = b.rank(x) == 3;
  LUMINAL_CHECK(batched || b.rank(x) == 2, "col2im needs a 2-D or 3-D input, got ", ir::node_signature(b.node(x)));
  if (!batched) x = b.unsqueeze(x, 0);
  const std::vector<Expr> size = ctx.symints_arg(node, "output_size");
  LUMINAL_CHECK(size.size() == 2, "col2im output_size needs 2 values");
  const std::vector<int64_t> kernel = pair_arg(ctx, node, "kernel_size"), dilation = pair_arg(ctx, node, "dilation"),
                             padding = pair_arg(ctx, node, "padding"), stride = pair_arg(ctx, node, "stride");
  const Shape in = b.shape(x);
  const DType out = ctx.out_dtype(node);
  const DType compute = is_floating(out) ? float_compute_dtype(out) : out;
  std::vector<Expr> blocks;
  for (size_t k = 0; k < 2; ++k) {
    LUMINAL_CHECK(kernel[k] > 0 && stride[k] > 0 && dilation[k] > 0 && padding[k] >= 0,
                  "col2im needs positive kernel, stride and dilation and non-negative padding");
    const int64_t span = dilation[k] * (kernel[k] - 1) + 1;
    blocks.push_back(ir::add(ir::floordiv(ir::sub(ir::add(size[k], ir::int_const(2 * padding[k])), ir::int_const(span)),
                                          ir::int_const(stride[k])),
                             ir::int_const(1)));
  }
  b.assert_equal(in[2], ir::mul(blocks[0], blocks[1]), "col2im block count");
  const int64_t patch = kernel[0] * kernel[1];
  const Expr channels = ir::floordiv(in[1], ir::int_const(patch));
  b.assert_equal(in[1], ir::mul(channels, ir::int_const(patch)), "col2im channels times kernel size");
  const Shape out_shape{in[0], channels, size[0], size[1]};
  // Output (y, x) receives kernel offset (a, c) of block (l_h, l_w) when y + pad - a dil = l_h stride.
  Expr inside = ir::bool_const(true);
  std::vector<Expr> block;
  for (size_t k = 0; k < 2; ++k) {
    const Expr t = ir::sub(ir::add(ir::loop_var(static_cast<int>(2 + k)), ir::int_const(padding[k])),
                           ir::mul(ir::reduce_var(static_cast<int>(k)), ir::int_const(dilation[k])));
    const Expr l = ir::floordiv(t, ir::int_const(stride[k]));
    inside = ir::logical_and(inside, ir::logical_and(ir::ge(t, ir::int_const(0)), ir::lt(l, blocks[k])));
    if (stride[k] != 1) inside = ir::logical_and(inside, ir::eq(ir::mod(t, ir::int_const(stride[k])), ir::int_const(0)));
    block.push_back(l);
  }
  const Expr row = ir::add(ir::mul(ir::loop_var(1), ir::int_const(patch)),
                           ir::add(ir::mul(ir::reduce_var(0), ir::int_const(kernel[1])), ir::reduce_var(1)));
  const Expr column = ir::add(ir::mul(block[0], blocks[1]), block[1]);
  const Expr value = ir::cast(ir::load(0, b.dtype(x), {ir::loop_var(0), row, column}, inside), compute);
  NodeId result = b.reduce(compute, out_shape, {x}, value, ir::ReduceOp::Sum,
                           {ir::int_const(kernel[0]), ir::int_const(kernel[1])});
  result = b.cast(result, out);
  if (!batched) result = b.reshape(result, {channels, size[0], size[1]});
  ctx.set_output(node, result);
}

// ---- grid_sampler_2d -----------------------------------------------------------------------

// grid_sampler_2d(input [N, C, H, W], grid [N, Ho, Wo, 2], interpolation_mode, padding_mode,
// align_corners) -> [N, C, Ho, Wo]. Bilinear and nearest with zeros, border or reflection padding.
void translate_grid_sampler_2d(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "input");
  const NodeId grid = ctx.tensor(node, "grid");
  const int64_t mode = ctx.int_arg(node, "interpolation_mode");
  const int64_t padding = ctx.int_arg(node, "padding_mode");
  const bool align = ctx.bool_arg(node, "align_corners");
  LUMINAL_CHECK(mode == 0 || mode == 1, "grid_sampler_2d interpolation mode ", mode,
                " is not supported (bilinear and nearest are; bicubic is not)");
  LUMINAL_CHECK(padding >= 0 && padding <= 2, "grid_sampler_2d padding mode ", padding,
                " is not supported (zeros, border and reflection are)");
  const Shape in = b.shape(x), gs = b.shape(grid);
  LUMINAL_CHECK(in.size() == 4 && gs.size() == 4, "grid_sampler_2d needs a 4-D input and grid");
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "grid_sampler_2d needs floating tensors, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  const Shape out_shape{in[0], in[1], gs[1], gs[2]};
  auto c = [&](double v) { return ir::scalar_const(v, compute); };
  // torch's reflect_coordinates: the coordinate mirrored into [low, high] = [0, size - 1]
  // (align_corners) or [-0.5, size - 0.5], by its distance from low modulo the span and the
  // parity of the number of spans crossed. A span of 0 (one element, align_corners) gives 0.
  auto reflected = [&](const Expr& coord, const Expr& size) {
    const Expr low = align ? c(0) : c(-0.5);
    const Expr span = align ? ir::sub(size, c(1)) : size;
    const Expr distance = ir::unary(ExprOp::Abs, ir::sub(coord, low));
    const Expr extra = ir::binary(ExprOp::Fmod, distance, span);
    const Expr flips = ir::unary(ExprOp::Floor, ir::binary(ExprOp::Div, distance, span));
    const Expr even = ir::eq(ir::binary(ExprOp::Fmod, flips, c(2)), c(0));
    const Expr mirrored = ir::where(even, ir::add(extra, low), ir::add(ir::sub(span, extra), low));
    return ir::where(ir::eq(span, c(0)), c(0), mirrored);
  };
  // Source coordinate along a dim of `size` for the normalized grid value (x: component 0 on W).
  auto source = [&](int component, const Expr& size) {
    const Expr g = ir::cast(ir::load(1, b.dtype(grid), {ir::loop_var(0), ir::loop_var(2), ir::loop_var(3),
                                                      ir::int_const(component)}),
                            compute);
    const Expr s = ir::cast(size, compute);
    Expr coord = align ? ir::mul(ir::binary(ExprOp::Div, ir::add(g, c(1)), c(2)), ir::sub(s, c(1)))
                       : ir::binary(ExprOp::Div, ir::sub(ir::mul(ir::add(g, c(1)), s), c(1)), c(2));
    if (padding == 2) coord = reflected(coord, s);
    if (padding >= 1) coord = ir::min(ir::max(coord, c(0)), ir::sub(s, c(1)));  // then clipped, as torch does
    return coord;
  };
  const Expr ix = source(0, in[3]), iy = source(1, in[2]);
  auto sample = [&](const Expr& row, const Expr& col) {
    const Expr inside = ir::logical_and(in_range(row, in[2]), in_range(col, in[3]));
    return ir::cast(ir::load(0, b.dtype(x), {ir::loop_var(0), ir::loop_var(1), row, col}, inside), compute);
  };
  Expr value;
  if (mode == 1) {
    value = sample(ir::cast(ir::unary(ExprOp::Round, iy), DType::I64), ir::cast(ir::unary(ExprOp::Round, ix), DType::I64));
  } else {
    const Expr x0f = ir::unary(ExprOp::Floor, ix), y0f = ir::unary(ExprOp::Floor, iy);
    const Expr x0 = ir::cast(x0f, DType::I64), y0 = ir::cast(y0f, DType::I64);
    const Expr x1 = ir::add(x0, ir::int_const(1)), y1 = ir::add(y0, ir::int_const(1));
    const Expr wx1 = ir::sub(ix, x0f), wx0 = ir::sub(ir::add(x0f, c(1)), ix);
    const Expr wy1 = ir::sub(iy, y0f), wy0 = ir::sub(ir::add(y0f, c(1)), iy);
    value = ir::add(ir::add(ir::mul(sample(y0, x0), ir::mul(wx0, wy0)), ir::mul(sample(y0, x1), ir::mul(wx1, wy0))),
                    ir::add(ir::mul(sample(y1, x0), ir::mul(wx0, wy1)), ir::mul(sample(y1, x1), ir::mul(wx1, wy1))));
  }
  ctx.set_output(node, b.pointwise(out, out_shape, {x, grid}, ir::cast(value, out)));
}

// ---- upsample_bilinear2d -------------------------------------------------------------------

// upsample_bilinear2d.vec(input, output_size, align_corners, scale_factors): torch's source index
// (area_pixel_compute_source_index) and two-tap linear weights per spatial dim.
void translate_upsample_bilinear(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "input");
  const Shape in = b.shape(x);
  const Shape out_shape = ctx.out_shape(node);
  LUMINAL_CHECK(in.size() == 4 && out_shape.size() == 4, "upsample_bilinear2d needs a 4-D input, got ",
                ir::node_signature(b.node(x)));
  const DType out = ctx.out_dtype(node);
  LUMINAL_CHECK(is_floating(out), "upsample_bilinear2d needs a floating tensor, got ", dtype_name(out));
  const DType compute = float_compute_dtype(out);
  const bool align = ctx.bool_arg(node, "align_corners");
  std::vector<double> factors;
  if (const pt2::Argument* f = ctx.find_arg(node, "scale_factors"); f && !f->is_none()) factors = f->as_floats();
  auto c = [&](double v) { return ir::scalar_const(v, compute); };
  struct Taps {
    Expr i0, i1, w0, w1;
  };
  std::vector<Taps> taps;
  for (size_t k = 0; k < 2; ++k) {
    const Expr n_in = in[2 + k], n_out = out_shape[2 + k];
    Expr scale;
    if (align) {
      scale = ir::where(ir::binary(ExprOp::Gt, n_out, ir::int_const(1)),
                        ir::binary(ExprOp::Div, ir::cast(ir::sub(n_in, ir::int_const(1)), compute),
                                   ir::cast(ir::sub(n_out, ir::int_const(1)), compute)),
                        c(0));
    } else if (k < factors.size() && factors[k] > 0) {
      scale = c(1.0 / factors[k]);
    } else {
      scale = ir::binary(ExprOp::Div, ir::cast(n_in, compute), ir::cast(n_out, compute));
    }
    const Expr o = ir::cast(ir::loop_var(static_cast<int>(2 + k)), compute);
    const Expr src = align ? ir::mul(scale, o) : ir::max(ir::sub(ir::mul(scale, ir::add(o, c(0.5))), c(0.5)), c(0));
    const Expr i0 = ir::min(ir::cast(src, DType::I64), ir::sub(n_in, ir::int_const(1)));
    const Expr i1 = ir::add(i0, ir::cast(ir::lt(i0, ir::sub(n_in, ir::int_const(1))), DType::I64));
    const Expr w1 = ir::min(ir::max(ir::sub(src, ir::cast(i0, compute)), c(0)), c(1));
    taps.push_back({i0, i1, ir::sub(c(1), w1), w1});
  }
  auto at = [&](const Expr& h, const Expr& w) {
    return ir::cast(ir::load(0, b.dtype(x), {ir::loop_var(0), ir::loop_var(1), h, w}), compute);
  };
  const Taps& h = taps[0];
  const Taps& w = taps[1];
  const Expr value = ir::add(ir::mul(h.w0, ir::add(ir::mul(w.w0, at(h.i0, w.i0)), ir::mul(w.w1, at(h.i0, w.i1)))),
                             ir::mul(h.w1, ir::add(ir::mul(w.w0, at(h.i1, w.i0)), ir::mul(w.w1, at(h.i1, w.i1)))));
  ctx.set_output(node, b.pointwise(out, out_shape, {x}, ir::cast(value, out)));
}

// ---- histc ---------------------------------------------------------------------------------
//
// histc(self, bins, min, max): counts of the elements in `bins` equal-width bins over [min, max],
// in the input's dtype. Both torch kernels (CPU: LINEAR_INTERPOLATION in HistogramKernel.cpp,
// CUDA: getBin in SummaryOps.cu) skip elements outside [min, max] (and NaN), place x in bin
// (x - min) * bins / (max - min), truncated, and move x == max from bin `bins` to the last bin.
// Floating inputs compute that in the input dtype (each op rounded for float16/bfloat16, the
// bounds and the bin count converted to the dtype first); integer inputs (CUDA only) in int64
// with integer division. Each output element counts its bin's elements (a reduction over the
// input, like the other gather-form ops). min == max takes the range from the data: refused.

// Where an element goes: `inside` (in [min, max]) and its bin (meaningful where inside).
struct HistcBin {
  Expr inside;
  Expr bin;
};

// A Scalar bound or the bin count as the kernels see it: converted to the input dtype (through
// float for the half types, as Scalar::to does).
double in_dtype(double value, DType dtype) {
  LUMINAL_CHECK(is_floating(dtype), "histc: ", dtype_name(dtype), " is not a floating dtype");
  return float_value_in(dtype, value);
}

HistcBin floating_histc_bin(const Expr& v, DType dtype, int64_t bins, double min, double max) {
  LUMINAL_CHECK(min != max, "histc with min == max (", min,
                ") takes its range from the data's minimum and maximum at run time; not supported");
  LUMINAL_CHECK(std::isfinite(min) && std::isfinite(max) && min < max, "histc range [", min, ", ", max,
                "] must be finite with min < max (eager raises)");
  const double lo = in_dtype(min, dtype), hi = in_dtype(max, dtype);
  const double count = in_dtype(static_cast<double>(bins), dtype);
  LUMINAL_CHECK(lo < hi, "histc range [", min, ", ", max, "] is empty in ", dtype_name(dtype));
  LUMINAL_CHECK(count == static_cast<double>(bins), "histc with ", bins, " bins, which ", dtype_name(dtype),
                " does not represent exactly (eager can place elements past the last bin)");
  // The width in the dtype's arithmetic: float16/bfloat16 subtract in float and round.
  const double width =
      dtype == DType::F64 ? hi - lo : in_dtype(static_cast<double>(static_cast<float>(hi) - static_cast<float>(lo)), dtype);
  const Expr lo_c = ir::float_const(lo, dtype), hi_c = ir::float_const(hi, dtype);
  const Expr inside = ir::logical_and(ir::ge(v, lo_c), ir::binary(ExprOp::Le, v, hi_c));
  const Expr scaled =
      ir::binary(ExprOp::Div, ir::mul(ir::sub(v, lo_c), ir::float_const(count, dtype)), ir::float_const(width, dtype));
  // Elements outside are not converted (a NaN or inf has no integer value).
  return {inside, ir::cast(ir::where(inside, scaled, ir::float_const(0, dtype)), DType::I64)};  // truncates
}

std::pair<int64_t, int64_t> integer_range(DType dtype) {
  switch (dtype) {
    case DType::I8: return {std::numeric_limits<int8_t>::min(), std::numeric_limits<int8_t>::max()};
    case DType::I16: return {std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max()};
    case DType::I32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::I64: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    case DType::U8: return {0, std::numeric_limits<uint8_t>::max()};
    default: fail("histc: ", dtype_name(dtype), " is not an integer dtype");
  }
}

// CUDA's integer histc: the bounds are Scalar::to<int64_t> (truncated) then narrowed to the dtype.
HistcBin integer_histc_bin(const Expr& v, DType dtype, int64_t bins, double min, double max) {
  constexpr double kExactInt = 9007199254740992.0;  // 2^53: larger Scalars lost digits in the archive
  LUMINAL_CHECK(std::abs(min) < kExactInt && std::abs(max) < kExactInt, "histc range [", min, ", ", max,
                "] is too large for an integer histogram");
  const int64_t lo = static_cast<int64_t>(min), hi = static_cast<int64_t>(max);
  LUMINAL_CHECK(lo != hi, "histc with integer bounds min == max (", lo,
                ") takes its range from the data's minimum and maximum at run time; not supported");
  LUMINAL_CHECK(lo < hi, "histc range [", lo, ", ", hi, "] must have min < max (eager raises)");
  const auto [lowest, highest] = integer_range(dtype);
  LUMINAL_CHECK(lo >= lowest && hi <= highest, "histc range [", lo, ", ", hi, "] does not fit ", dtype_name(dtype),
                " (eager narrows it)");
  const Expr x = ir::cast(v, DType::I64);
  // (x - lo) * bins must fit int64 (the kernel's arithmetic): (hi - lo) * bins does.
  const uint64_t width = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  LUMINAL_CHECK(width <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(bins),
                "histc range [", lo, ", ", hi, "] times ", bins, " bins overflows int64");
  const Expr inside = ir::logical_and(ir::ge(x, ir::int_const(lo)), ir::binary(ExprOp::Le, x, ir::int_const(hi)));
  const Expr offset = ir::where(inside, ir::sub(x, ir::int_const(lo)), ir::int_const(0));  // >= 0: floor = trunc
  return {inside, ir::floordiv(ir::mul(offset, ir::int_const(bins)), ir::int_const(static_cast<int64_t>(width)))};
}

// The largest count the dtype holds exactly. torch adds each element's 1 to a per-thread
// histogram in the input dtype and sums those, so a bigger bin gets a count that depends on how
// the input was split between threads. Integer counts wrap as eager's do.
std::optional<int64_t> exact_count_limit(DType dtype) {
  switch (dtype) {
    case DType::F32: return int64_t{1} << 24;
    case DType::F16: return 2048;
    case DType::BF16: return 256;
    default: return std::nullopt;  // float64 (2^53), integers
  }
}

void translate_histc(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const DType dtype = b.dtype(x);
  const bool half = dtype == DType::F16 || dtype == DType::BF16;
  const bool cuda = ctx.on_cuda(node, "self");
  // Eager's kernels: CPU takes floating types, CUDA float32/float64 and integers.
  LUMINAL_CHECK(is_floating(dtype) ? !(half && cuda) : (cuda && dtype != DType::Bool), "histc of ",
                dtype_name(dtype), " on ", cuda ? "CUDA" : "CPU", " (eager has no kernel for it)");
  const int64_t bins = ctx.int_arg(node, "bins", 100);
  LUMINAL_CHECK(bins > 0 && bins <= std::numeric_limits<int32_t>::max(), "histc bins must be in [1, 2^31), got ", bins);
  const double min = ctx.float_arg(node, "min", 0.0), max = ctx.float_arg(node, "max", 0.0);
  const Expr numel = ir::simplify(ir::product(b.shape(x)), {});
  const auto static_numel = ir::as_int_const(numel);
  const std::optional<int64_t> limit = exact_count_limit(dtype);
  const bool counts_exact = !limit || (static_numel && *static_numel <= *limit);
  LUMINAL_CHECK(counts_exact || !half, "histc of ", dtype_name(dtype), " over ", ir::to_string(numel),
                " elements: eager's counts are exact only up to ", limit.value_or(0), " per bin");

  const Expr v = ir::load(0, dtype, {ir::reduce_var(0)});
  const HistcBin where =
      is_floating(dtype) ? floating_histc_bin(v, dtype, bins, min, max) : integer_histc_bin(v, dtype, bins, min, max);
  Expr bin = ir::where(ir::eq(where.bin, ir::int_const(bins)), ir::int_const(bins - 1), where.bin);
  // Rounding could carry an element past `bins` only for huge bin counts (an ulp of the scaled
  // value >= 1); eager would then write outside its histogram: raise instead.
  bin = ir::check_index(bin, ir::int_const(bins), where.inside);
  const Expr hit = ir::cast(ir::logical_and(where.inside, ir::eq(bin, ir::loop_var(0))), DType::I64);
  const NodeId flat = b.reshape(x, {numel});
  const NodeId counts = b.reduce(DType::I64, {ir::int_const(bins)}, {flat}, hit, ir::ReduceOp::Sum, {numel});
  if (counts_exact) {
    ctx.set_output(node, b.cast(counts, dtype));
    return;
  }
  // float32 with more elements than 2^24: a bin that big raises (its label names the reason).
  const Expr checked = ir::check_index(
      ir::load(0, DType::I64, {ir::loop_var(0)}), ir::int_const(*limit + 1), nullptr,
      "{op}: a bin count above {limit} ({value}), where float32 counts are inexact ({target}, node {node})");
  ctx.set_output(node, b.pointwise(dtype, {ir::int_const(bins)}, {counts}, ir::cast(checked, dtype)));
}

}  // namespace

// ---- _assert_async ----------------------------------------------------------------------------

// _assert_async(cond[, msg]): eager raises the message when the one element of cond is zero (false),
// e.g. one_hot's "Class values must be smaller than num_classes." that torch.export keeps beside
// the one_hot it decomposes. A 0-d bool that holds true, computed through a value check of
// `cond is zero` in [0, 1), becomes a check output of the graph: computed every call, never
// returned. (Dropping it would return a row of zeros where eager raises.)
void translate_assert_async(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId cond = ctx.tensor(node, "self");
  const Shape& shape = b.shape(cond);
  const auto elements = ir::as_int_const(ir::product(shape));
  LUMINAL_CHECK(elements && *elements == 1, "_assert_async of a tensor of ", ir::shape_to_string(shape),
                " (eager takes one element)");
  std::string message = ctx.string_arg(node, "assert_msg").value_or("");  // absent in _assert_async.default
  if (message.empty()) message = "Expected Tensor with single nonzero value, but got zero";
  const std::vector<Expr> first(shape.size(), ir::int_const(0));
  const Expr holds = ir::cast(ir::load(0, b.dtype(cond), first), DType::Bool);  // nonzero, NaN included
  const Expr failed = ir::sub(ir::int_const(1), ir::cast(holds, DType::I64));
  const Expr checked = ir::check_value(failed, ir::int_const(1), str_cat(message, " ({target}, node {node})"));
  ctx.add_check(b.pointwise(DType::Bool, {}, {cond}, ir::eq(checked, ir::int_const(0))));
}

void register_misc_core_ops(Registry& registry) {
  const std::string aten = "torch.ops.aten.";
  registry.add(aten + "masked_scatter.default", translate_masked_scatter);
  registry.add(aten + "as_strided.default", translate_as_strided);
  registry.add(aten + "_cdist_forward.default", translate_cdist);
  registry.add(aten + "_pdist_forward.default", translate_pdist);
  registry.add(aten + "col2im.default", translate_col2im);
  registry.add(aten + "grid_sampler_2d.default", translate_grid_sampler_2d);
  registry.add(aten + "upsample_bilinear2d.vec", translate_upsample_bilinear);
  registry.add(aten + "histc.default", translate_histc);
  registry.add(aten + "_assert_async.msg", translate_assert_async);
  registry.add(aten + "_assert_async.default", translate_assert_async);
}

}  // namespace luminal::frontend
