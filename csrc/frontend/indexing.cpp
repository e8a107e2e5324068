// Advanced indexing: index.Tensor in every None/tensor arrangement, index_select, embedding.
//
// Every gathered index is wrapped (where torch allows negative indices) and bounds-checked at run
// time: an out-of-range index raises instead of reading outside the tensor.
#include <algorithm>

#include <limits>

#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

// x[indices] with indices = [None | tensor, ...] (numpy advanced indexing, as torch implements it):
// tensor indices broadcast together to a shape I; if they are adjacent, I replaces the indexed
// dimensions in place, otherwise I goes first, followed by the non-indexed dimensions in order.
void translate_index(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const std::vector<std::optional<NodeId>> indices = ctx.optional_tensors(node, "indices");
  const Shape& x_shape = b.shape(x);
  const size_t rank = x_shape.size();
  LUMINAL_CHECK(indices.size() <= rank, "too many indices (", indices.size(), ") for a tensor of rank ", rank);

  std::vector<size_t> indexed_dims;
  std::vector<NodeId> index_tensors;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d]) continue;
    const DType dt = b.dtype(*indices[d]);
    LUMINAL_CHECK(dt != DType::Bool && dt != DType::U8,
                  "boolean-mask indexing has a data-dependent output shape and is not supported (index ", d, ")");
    LUMINAL_CHECK(dt == DType::I64 || dt == DType::I32, "index ", d, " must be an integer tensor, got ",
                  dtype_name(dt));
    indexed_dims.push_back(d);
    index_tensors.push_back(*indices[d]);
  }
  if (index_tensors.empty()) {
    ctx.set_output(node, x);
    return;
  }
  std::vector<Shape> index_shapes;
  for (NodeId t : index_tensors) index_shapes.push_back(b.shape(t));
  const Shape broadcast = b.broadcast_shapes(index_shapes);
  const bool adjacent = indexed_dims.back() - indexed_dims.front() + 1 == indexed_dims.size();
  const size_t first_axis = adjacent ? indexed_dims.front() : 0;  // output axis where I starts

  // Output shape and, for every non-indexed dimension of x, its output axis.
  Shape out;
  std::vector<int> x_dim_axis(rank, -1);
  auto append_plain_dim = [&](size_t d) {
    x_dim_axis[d] = static_cast<int>(out.size());
    out.push_back(x_shape[d]);
  };
  auto is_indexed = [&](size_t d) {
    return std::find(indexed_dims.begin(), indexed_dims.end(), d) != indexed_dims.end();
  };
  if (adjacent) {
    for (size_t d = 0; d < first_axis; ++d) append_plain_dim(d);
    out.insert(out.end(), broadcast.begin(), broadcast.end());
    for (size_t d = indexed_dims.back() + 1; d < rank; ++d) append_plain_dim(d);
  } else {
    out.insert(out.end(), broadcast.begin(), broadcast.end());
    for (size_t d = 0; d < rank; ++d) {
      if (!is_indexed(d)) append_plain_dim(d);
    }
  }

  // Each index tensor is read at its broadcast position inside I.
  std::vector<NodeId> inputs{x};
  std::vector<Expr> x_index(rank);
  for (size_t k = 0; k < index_tensors.size(); ++k) {
    const NodeId t = index_tensors[k];
    const Shape& t_shape = b.shape(t);
    const size_t offset = first_axis + broadcast.size() - t_shape.size();
    std::vector<Expr> t_index;
    for (size_t j = 0; j < t_shape.size(); ++j) {
      const bool broadcasts = t_shape[j]->is_int_const(1) && !broadcast[broadcast.size() - t_shape.size() + j]->is_int_const(1);
      t_index.push_back(broadcasts ? ir::int_const(0) : ir::loop_var(static_cast<int>(offset + j)));
    }
    const int slot = static_cast<int>(inputs.size());
    inputs.push_back(t);
    const Expr raw = ir::load(slot, b.dtype(t), std::move(t_index));
    x_index[indexed_dims[k]] = Builder::checked_index(raw, x_shape[indexed_dims[k]], /*wrap_negative=*/true);
  }
  for (size_t d = 0; d < rank; ++d) {
    if (!x_index[d]) x_index[d] = ir::loop_var(x_dim_axis[d]);
  }
  ctx.set_output(node, b.pointwise(b.dtype(x), out, inputs, ir::load(0, b.dtype(x), std::move(x_index))));
}

void translate_index_select(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId index = ctx.tensor(node, "index");
  LUMINAL_CHECK(b.rank(index) <= 1, "index_select index must be rank 0 or 1");
  // index_select rejects negative indices.
  ctx.set_output(node, b.take(ctx.tensor(node, "self"), ctx.int_arg(node, "dim"), index, /*wrap_negative=*/false));
}

// embedding(weight, indices, padding_idx, ...): padding only affects gradients.
void translate_embedding(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId weight = ctx.tensor(node, "weight");
  LUMINAL_CHECK(b.rank(weight) == 2, "embedding weight must be rank 2, got ", ir::node_signature(b.node(weight)));
  ctx.set_output(node, b.take(weight, 0, ctx.tensor(node, "indices"), /*wrap_negative=*/false));
}

}  // namespace

namespace {

// gather(self, dim, index): out[i] = self[i with dim replaced by index[i]]; out has index's
// shape. Negative or out-of-range indices raise, as in torch (no wrapping).
void translate_gather(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const NodeId index = ctx.tensor(node, "index");
  const Shape x_shape = b.shape(x), out = b.shape(index);
  LUMINAL_CHECK(out.size() == x_shape.size() || (x_shape.empty() && out.size() <= 1), "gather index of rank ",
                out.size(), " for a tensor of rank ", x_shape.size());
  LUMINAL_CHECK(!is_floating(b.dtype(index)) && b.dtype(index) != DType::Bool, "gather index must be integral, got ",
                dtype_name(b.dtype(index)));
  if (x_shape.empty()) {
    ctx.set_output(node, b.pointwise(b.dtype(x), out, {x, index}, ir::load(0, b.dtype(x), {})));
    return;
  }
  const int64_t d = b.normalize_dim(ctx.int_arg(node, "dim"), x_shape.size());
  std::vector<Expr> at = Builder::loop_vars(out.size());
  const Expr raw = ir::load(1, b.dtype(index), at);
  at[d] = Builder::checked_index(raw, x_shape[d], /*wrap_negative=*/false);
  ctx.set_output(node, b.pointwise(b.dtype(x), out, {x, index}, ir::load(0, b.dtype(x), at)));
}

// slice_scatter(self, src, dim, start, end, step): self with self[start:end:step] (along dim)
// replaced by src.
void translate_slice_scatter(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const NodeId src = ctx.tensor(node, "src");
  const Shape shape = b.shape(self);
  const int64_t d = b.normalize_dim(ctx.int_arg(node, "dim", 0), shape.size());
  const int64_t step = ctx.int_arg(node, "step", 1);
  LUMINAL_CHECK(step > 0, "slice_scatter step must be positive, got ", step);
  Expr start = ctx.symint_arg(node, "start").value_or(ir::int_const(0));
  if (auto c = ir::as_int_const(start); c && *c < 0) start = ir::max(ir::add(shape[d], start), ir::int_const(0));
  const Expr length = b.shape(src)[d];
  const Expr i = ir::loop_var(static_cast<int>(d));
  const Expr offset = ir::sub(i, start);
  Expr inside = ir::logical_and(ir::binary(ir::ExprOp::Ge, offset, ir::int_const(0)),
                                ir::binary(ir::ExprOp::Lt, offset, ir::mul(length, ir::int_const(step))));
  if (step != 1) inside = ir::logical_and(inside, ir::binary(ir::ExprOp::Eq, ir::mod(offset, ir::int_const(step)), ir::int_const(0)));
  std::vector<Expr> src_at = Builder::loop_vars(shape.size());
  src_at[d] = ir::floordiv(offset, ir::int_const(step));
  const DType dtype = b.dtype(self);
  const Expr from_src = ir::cast(ir::load(1, b.dtype(src), src_at, inside), dtype);
  ctx.set_output(node, b.pointwise(dtype, shape, {self, src},
                                   ir::where(inside, from_src, ir::load(0, dtype, Builder::loop_vars(shape.size())))));
}

// select_scatter(self, src, dim, index): self with self.select(dim, index) replaced by src.
void translate_select_scatter(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const NodeId src = ctx.tensor(node, "src");
  const Shape shape = b.shape(self);
  const int64_t d = b.normalize_dim(ctx.int_arg(node, "dim"), shape.size());
  Expr index = ctx.symint_arg(node, "index").value();
  if (auto c = ir::as_int_const(index); c && *c < 0) index = ir::add(shape[d], index);
  const Expr hit = ir::binary(ir::ExprOp::Eq, ir::loop_var(static_cast<int>(d)), index);
  std::vector<Expr> src_at;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (static_cast<int64_t>(k) != d) src_at.push_back(ir::loop_var(static_cast<int>(k)));
  }
  const DType dtype = b.dtype(self);
  const Expr from_src = ir::cast(ir::load(1, b.dtype(src), src_at, hit), dtype);
  ctx.set_output(node, b.pointwise(dtype, shape, {self, src},
                                   ir::where(hit, from_src, ir::load(0, dtype, Builder::loop_vars(shape.size())))));
}

// ---- scatters, in gather form: output element p (coordinate k along dim) folds over the
// positions j of `index` along dim whose other coordinates equal p's and whose index value is k.
// Work per element is index.size(dim); out-of-range indices raise.
struct ScatterForm {
  int64_t dim = 0;
  Expr match;             // index[p with dim = j] == k, and p inside index's extents (j = reduce var 0)
  std::vector<Expr> at_j; // p with dim = j (to read src)
  Expr extent;            // index.size(dim)
};

ScatterForm scatter_form(Builder& b, NodeId self, NodeId index, int64_t dim_arg, int index_slot) {
  const Shape self_shape = b.shape(self), index_shape = b.shape(index);
  LUMINAL_CHECK(index_shape.size() == self_shape.size(), "scatter index of rank ", index_shape.size(),
                " for a tensor of rank ", self_shape.size());
  LUMINAL_CHECK(!is_floating(b.dtype(index)) && b.dtype(index) != DType::Bool, "scatter index must be integral, got ",
                dtype_name(b.dtype(index)));
  ScatterForm form;
  form.dim = b.normalize_dim(dim_arg, self_shape.size());
  form.extent = index_shape[form.dim];
  form.at_j = Builder::loop_vars(self_shape.size());
  form.at_j[form.dim] = ir::reduce_var(0);
  // Other coordinates of p must lie inside index (index may be smaller than self there).
  Expr inside = ir::bool_const(true);
  for (size_t d = 0; d < self_shape.size(); ++d) {
    if (static_cast<int64_t>(d) == form.dim || ir::expr_equal(index_shape[d], self_shape[d])) continue;
    inside = ir::logical_and(inside, ir::binary(ir::ExprOp::Lt, ir::loop_var(static_cast<int>(d)), index_shape[d]));
  }
  const Expr raw = ir::load(index_slot, b.dtype(index), form.at_j, inside);
  const Expr target = Builder::checked_index(raw, self_shape[form.dim], /*wrap_negative=*/false, inside);
  form.match = ir::logical_and(inside, ir::binary(ir::ExprOp::Eq, target, ir::loop_var(static_cast<int>(form.dim))));
  return form;
}

// For each output element, the last position j in [0, extent) where `match` holds (-1 if none):
// sequential assignment semantics for scatter and index_put.
NodeId last_match(Builder& b, const Shape& shape, std::vector<NodeId> inputs, const Expr& match, const Expr& extent) {
  const Expr last = ir::fold(ir::ReduceOp::Max, 0, extent, ir::where(match, ir::reduce_var(0), ir::int_const(-1)));
  return b.pointwise(DType::I64, shape, std::move(inputs), last);
}

// scatter.src / scatter.value: the last matching position wins (torch leaves duplicates unspecified).
void translate_scatter(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const NodeId index = ctx.tensor(node, "index");
  const Shape shape = b.shape(self);
  const DType dtype = b.dtype(self);
  if (shape.empty()) fail("scatter into a 0-d tensor is not supported");
  const ScatterForm form = scatter_form(b, self, index, ctx.int_arg(node, "dim"), 1);
  const NodeId winner = last_match(b, shape, {self, index}, form.match, form.extent);
  const Expr j = ir::load(0, DType::I64, Builder::loop_vars(shape.size()));
  const Expr hit = ir::binary(ir::ExprOp::Ge, j, ir::int_const(0));
  const Expr keep = ir::load(1, dtype, Builder::loop_vars(shape.size()));
  if (const std::optional<NodeId> src = ctx.optional_tensor(node, "src")) {
    std::vector<Expr> at = Builder::loop_vars(shape.size());
    at[form.dim] = j;
    const Expr from_src = ir::cast(ir::load(2, b.dtype(*src), at, hit), dtype);
    ctx.set_output(node, b.pointwise(dtype, shape, {winner, self, *src}, ir::where(hit, from_src, keep)));
    return;
  }
  const Expr value = ir::scalar_const(ctx.float_arg(node, "value"), dtype);
  ctx.set_output(node, b.pointwise(dtype, shape, {winner, self}, ir::where(hit, value, keep)));
}

// scatter_add and scatter_reduce.two (sum, prod, mean, amax, amin; include_self).
void translate_scatter_reduce(Context& ctx, const pt2::Node& node, std::string reduce) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const NodeId index = ctx.tensor(node, "index");
  const NodeId src = ctx.tensor(node, "src");
  const Shape shape = b.shape(self);
  if (shape.empty()) fail("scatter into a 0-d tensor is not supported");
  if (reduce.empty()) reduce = ctx.string_arg(node, "reduce").value_or("sum");
  const bool include_self = ctx.bool_arg(node, "include_self", true);
  const DType dtype = b.dtype(self);
  const DType acc = is_floating(dtype) ? float_compute_dtype(dtype) : DType::I64;
  const ScatterForm form = scatter_form(b, self, index, ctx.int_arg(node, "dim"), 1);
  const Expr value = ir::cast(ir::load(2, b.dtype(src), form.at_j, form.match), acc);
  ir::ReduceOp op = ir::ReduceOp::Sum;
  Expr identity = ir::scalar_const(0, acc);
  if (reduce == "prod") {
    op = ir::ReduceOp::Prod;
    identity = ir::scalar_const(1, acc);
  } else if (reduce == "amax" || reduce == "amin") {
    const bool is_max = reduce == "amax";
    op = is_max ? ir::ReduceOp::Max : ir::ReduceOp::Min;
    const double inf = std::numeric_limits<double>::infinity();
    // Integer identities as exact int64 constants (a double cannot hold INT64_MAX).
    identity = is_floating(dtype) ? ir::scalar_const(is_max ? -inf : inf, acc)
                                  : ir::int_const(is_max ? std::numeric_limits<int64_t>::min()
                                                         : std::numeric_limits<int64_t>::max());
  } else {
    LUMINAL_CHECK(reduce == "sum" || reduce == "mean", "unknown scatter reduce '", reduce, "'");
  }
  const Expr combined = ir::fold(op, 0, form.extent, ir::where(form.match, value, identity));
  const Expr count = ir::fold(ir::ReduceOp::Sum, 0, form.extent, ir::cast(form.match, DType::I64));
  const NodeId folded = b.pointwise(acc, shape, {self, index, src}, combined);
  const NodeId counts = b.pointwise(DType::I64, shape, {self, index, src}, count);
  const std::vector<Expr> at = Builder::loop_vars(shape.size());
  const Expr old = ir::cast(ir::load(0, dtype, at), acc), total = ir::load(1, acc, at), n = ir::load(2, DType::I64, at);
  Expr result;
  if (reduce == "sum") {
    result = include_self ? ir::add(old, total) : total;
  } else if (reduce == "prod") {
    result = include_self ? ir::mul(old, total) : total;
  } else if (reduce == "mean") {
    const Expr sum = include_self ? ir::add(old, total) : total;
    const Expr divisor = ir::cast(include_self ? ir::add(n, ir::int_const(1)) : ir::max(n, ir::int_const(1)), acc);
    result = is_floating(dtype) ? ir::binary(ir::ExprOp::Div, sum, divisor) : ir::floordiv(sum, divisor);
  } else {
    result = include_self ? (op == ir::ReduceOp::Max ? ir::max(old, total) : ir::min(old, total)) : total;
  }
  // Elements no index points at keep self (include_self=False included).
  const Expr untouched = ir::binary(ir::ExprOp::Eq, n, ir::int_const(0));
  ctx.set_output(node, b.pointwise(dtype, shape, {self, folded, counts}, ir::cast(ir::where(untouched, old, result), dtype)));
}

// Reads `values` broadcast (right-aligned) to a target of coordinates `coords`.
std::vector<Expr> broadcast_coords(const Shape& values_shape, const std::vector<Expr>& coords) {
  LUMINAL_CHECK(values_shape.size() <= coords.size(), "values of rank ", values_shape.size(),
                " do not broadcast to rank ", coords.size());
  std::vector<Expr> at;
  const size_t offset = coords.size() - values_shape.size();
  for (size_t t = 0; t < values_shape.size(); ++t) {
    at.push_back(values_shape[t]->is_int_const(1) ? ir::int_const(0) : coords[offset + t]);
  }
  return at;
}

// index_put(self, indices, values, accumulate), the forms models use: one bool mask over leading
// dims with values equal for every selected element (x[mask] = v), or one 1-D integer index on
// the first dim (x[idx] = v, index_put_ with accumulate). Other forms are refused (they run in
// eager through the fallback), never approximated: a bool mask is not an integer index.
void translate_index_put(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const std::vector<std::optional<NodeId>> indices = ctx.optional_tensors(node, "indices");
  const NodeId values = ctx.tensor(node, "values");
  const bool accumulate = ctx.bool_arg(node, "accumulate", false);
  const Shape shape = b.shape(self), values_shape = b.shape(values);
  const DType dtype = b.dtype(self);
  LUMINAL_CHECK(indices.size() == 1 && indices[0].has_value(),
                "index_put is supported with one index tensor (a bool mask, or integer indices on the first "
                "dimension); this node has ", indices.size(), " index entries");
  const NodeId index = *indices[0];
  const Shape index_shape = b.shape(index);
  const std::vector<Expr> at = Builder::loop_vars(shape.size());
  const Expr old = ir::load(0, dtype, at);
  if (b.dtype(index) == DType::Bool) {
    const size_t m = index_shape.size();
    LUMINAL_CHECK(m >= 1 && m <= shape.size(), "index_put mask of rank ", m, " for a tensor of rank ", shape.size());
    for (size_t d = 0; d < m; ++d) b.assert_equal(index_shape[d], shape[d], "index_put mask and tensor dimensions");
    const size_t rest = shape.size() - m;
    LUMINAL_CHECK(values_shape.size() <= rest || (values_shape.size() == rest + 1 && values_shape[0]->is_int_const(1)),
                  "index_put with a bool mask is supported when every selected element gets the same values; values "
                  "have shape ", ir::shape_to_string(values_shape));
    std::vector<Expr> target{ir::int_const(0)};
    for (size_t d = m; d < shape.size(); ++d) target.push_back(at[d]);
    const Expr mask = ir::load(1, DType::Bool, std::vector<Expr>(at.begin(), at.begin() + static_cast<std::ptrdiff_t>(m)));
    const Expr value = ir::cast(ir::load(2, b.dtype(values), broadcast_coords(values_shape, target)), dtype);
    const Expr updated = accumulate ? ir::add(old, value) : value;
    ctx.set_output(node, b.pointwise(dtype, shape, {self, index, values}, ir::where(mask, updated, old)));
    return;
  }
  LUMINAL_CHECK(index_shape.size() == 1 && !is_floating(b.dtype(index)),
                "index_put with integer indices is supported with one 1-D index tensor; got ",
                ir::node_signature(b.node(index)));
  LUMINAL_CHECK(!shape.empty(), "index_put into a 0-d tensor");
  const Expr n = index_shape[0];
  std::vector<Expr> target{ir::reduce_var(0)};
  for (size_t d = 1; d < shape.size(); ++d) target.push_back(at[d]);
  const Expr row = Builder::checked_index(ir::load(1, b.dtype(index), {ir::reduce_var(0)}), shape[0], true);
  const Expr match = ir::binary(ir::ExprOp::Eq, row, at[0]);
  if (accumulate) {
    const DType acc = is_floating(dtype) ? float_compute_dtype(dtype) : DType::I64;
    const Expr value = ir::cast(ir::load(2, b.dtype(values), broadcast_coords(values_shape, target), match), acc);
    const Expr total = ir::fold(ir::ReduceOp::Sum, 0, n, ir::where(match, value, ir::scalar_const(0, acc)));
    ctx.set_output(node, b.pointwise(dtype, shape, {self, index, values}, ir::cast(ir::add(ir::cast(old, acc), total), dtype)));
    return;
  }
  // The last write wins, as for sequential assignment.
  const NodeId winner = last_match(b, shape, {self, index}, match, n);
  const Expr j = ir::load(0, DType::I64, at);
  const Expr hit = ir::binary(ir::ExprOp::Ge, j, ir::int_const(0));
  target[0] = j;
  const Expr value = ir::cast(ir::load(2, b.dtype(values), broadcast_coords(values_shape, target), hit), dtype);
  ctx.set_output(node, b.pointwise(dtype, shape, {winner, self, values}, ir::where(hit, value, ir::load(1, dtype, at))));
}

}  // namespace

void register_index_ops(Registry& registry) {
  registry.add("torch.ops.aten.index_put.default", translate_index_put);
  registry.add("torch.ops.aten.scatter.src", translate_scatter);
  registry.add("torch.ops.aten.scatter.value", translate_scatter);
  registry.add("torch.ops.aten.scatter_add.default",
               [](Context& ctx, const pt2::Node& node) { translate_scatter_reduce(ctx, node, "sum"); });
  registry.add("torch.ops.aten.scatter_reduce.two",
               [](Context& ctx, const pt2::Node& node) { translate_scatter_reduce(ctx, node, ""); });
  registry.add("torch.ops.aten.gather.default", translate_gather);
  registry.add("torch.ops.aten.slice_scatter.default", translate_slice_scatter);
  registry.add("torch.ops.aten.select_scatter.default", translate_select_scatter);
  registry.add("torch.ops.aten.index.Tensor", translate_index);
  // Bounds-checked like index.Tensor: an out-of-range index raises instead of reading past the end.
  registry.add("torch.ops.aten._unsafe_index.Tensor", translate_index);
  registry.add("torch.ops.aten.index_select.default", translate_index_select);
  registry.add("torch.ops.aten.embedding.default", translate_embedding);
}

}  // namespace luminal::frontend
