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
// The result's shape, and for every dimension of x its coordinate as an expression over the
// result's loop variables (index tensors are loaded as slots first_slot, first_slot + 1, ...;
// negative indices wrap, and every coordinate is bounds-checked). Read by index.Tensor (a gather)
// and written by index_put (a scatter over the same positions).
struct AdvancedIndex {
  Shape shape;
  std::vector<NodeId> tensors;    // the index tensors, in slot order
  std::vector<Expr> coordinates;  // one per dimension of x
};

AdvancedIndex advanced_index(Builder& b, const Shape& x_shape, const std::vector<std::optional<NodeId>>& indices,
                             int first_slot) {
  const size_t rank = x_shape.size();
  LUMINAL_CHECK(indices.size() <= rank, "too many indices (", indices.size(), ") for a tensor of rank ", rank);
  AdvancedIndex result;
  std::vector<size_t> indexed_dims;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d]) continue;
    const DType dt = b.dtype(*indices[d]);
    LUMINAL_CHECK(dt != DType::Bool && dt != DType::U8,
                  "boolean-mask indexing has a data-dependent output shape and is not supported (index ", d, ")");
    LUMINAL_CHECK(dt == DType::I64 || dt == DType::I32, "index ", d, " must be an integer tensor, got ",
                  dtype_name(dt));
    indexed_dims.push_back(d);
    result.tensors.push_back(*indices[d]);
  }
  if (result.tensors.empty()) {
    result.shape = x_shape;
    result.coordinates = Builder::loop_vars(rank);
    return result;
  }
  std::vector<Shape> index_shapes;
  for (NodeId t : result.tensors) index_shapes.push_back(b.shape(t));
  const Shape broadcast = b.broadcast_shapes(index_shapes);
  const bool adjacent = indexed_dims.back() - indexed_dims.front() + 1 == indexed_dims.size();
  const size_t first_axis = adjacent ? indexed_dims.front() : 0;  // result axis where I starts

  // The result's shape and, for every non-indexed dimension of x, its result axis.
  std::vector<int> x_dim_axis(rank, -1);
  auto append_plain_dim = [&](size_t d) {
    x_dim_axis[d] = static_cast<int>(result.shape.size());
    result.shape.push_back(x_shape[d]);
  };
  auto is_indexed = [&](size_t d) {
    return std::find(indexed_dims.begin(), indexed_dims.end(), d) != indexed_dims.end();
  };
  if (adjacent) {
    for (size_t d = 0; d < first_axis; ++d) append_plain_dim(d);
    result.shape.insert(result.shape.end(), broadcast.begin(), broadcast.end());
    for (size_t d = indexed_dims.back() + 1; d < rank; ++d) append_plain_dim(d);
  } else {
    result.shape.insert(result.shape.end(), broadcast.begin(), broadcast.end());
    for (size_t d = 0; d < rank; ++d) {
      if (!is_indexed(d)) append_plain_dim(d);
    }
  }

  // Each index tensor is read at its broadcast position inside I.
  result.coordinates.resize(rank);
  for (size_t k = 0; k < result.tensors.size(); ++k) {
    const NodeId t = result.tensors[k];
    const Shape& t_shape = b.shape(t);
    const size_t offset = first_axis + broadcast.size() - t_shape.size();
    std::vector<Expr> t_index;
    for (size_t j = 0; j < t_shape.size(); ++j) {
      const bool broadcasts = t_shape[j]->is_int_const(1) && !broadcast[broadcast.size() - t_shape.size() + j]->is_int_const(1);
      t_index.push_back(broadcasts ? ir::int_const(0) : ir::loop_var(static_cast<int>(offset + j)));
    }
    const Expr raw = ir::load(first_slot + static_cast<int>(k), b.dtype(t), std::move(t_index));
    result.coordinates[indexed_dims[k]] = Builder::checked_index(raw, x_shape[indexed_dims[k]], /*wrap_negative=*/true,
                                                                 nullptr, str_cat("indices[", indexed_dims[k], "]"));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (!result.coordinates[d]) result.coordinates[d] = ir::loop_var(x_dim_axis[d]);
  }
  return result;
}

void translate_index(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const AdvancedIndex index = advanced_index(b, b.shape(x), ctx.optional_tensors(node, "indices"), 1);
  if (index.tensors.empty()) {
    ctx.set_output(node, x);
    return;
  }
  std::vector<NodeId> inputs{x};
  inputs.insert(inputs.end(), index.tensors.begin(), index.tensors.end());
  ctx.set_output(node, b.pointwise(b.dtype(x), index.shape, inputs, ir::load(0, b.dtype(x), index.coordinates)));
}

void translate_index_select(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId index = ctx.tensor(node, "index");
  LUMINAL_CHECK(b.rank(index) <= 1, "index_select index must be rank 0 or 1");
  // index_select rejects negative indices.
  const NodeId self = ctx.tensor(node, "self");
  ctx.set_output(node, b.take(self, ctx.int_arg(node, "dim"), index, /*wrap_negative=*/false, "index"));
}

// embedding(weight, indices, padding_idx, ...): padding only affects gradients.
void translate_embedding(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId weight = ctx.tensor(node, "weight");
  LUMINAL_CHECK(b.rank(weight) == 2, "embedding weight must be rank 2, got ", ir::node_signature(b.node(weight)));
  ctx.set_output(node, b.take(weight, 0, ctx.tensor(node, "indices"), /*wrap_negative=*/false, "indices"));
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
  at[d] = Builder::checked_index(raw, x_shape[d], /*wrap_negative=*/false, nullptr, "index");
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

// ---- scatter_reduce's other reductions, in gather form: output element p (coordinate k along
// dim) folds over the positions j of `index` along dim whose other coordinates equal p's and whose
// index value is k. Work per element is index.size(dim); out-of-range indices raise.
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
  const Expr target = Builder::checked_index(raw, self_shape[form.dim], /*wrap_negative=*/false, inside, "index");
  form.match = ir::logical_and(inside, ir::binary(ir::ExprOp::Eq, target, ir::loop_var(static_cast<int>(form.dim))));
  return form;
}

// The value a scatter writes: `raw` in the node's dtype, or in its accumulation dtype.
Expr scatter_value(const Expr& raw, DType dtype, bool accumulate) {
  return ir::cast(raw, accumulate ? ir::scatter_compute_dtype(dtype) : dtype);
}

// Where scatter(self, dim, index, ...) writes element j of index: j with dim replaced by index[j]
// (index is loaded as `index_slot`; no wrapping: negative positions raise, as in torch).
std::vector<Expr> scatter_targets(Builder& b, NodeId self, NodeId index, int64_t dim, int index_slot) {
  const Shape self_shape = b.shape(self), index_shape = b.shape(index);
  LUMINAL_CHECK(index_shape.size() == self_shape.size(), "scatter index of rank ", index_shape.size(),
                " for a tensor of rank ", self_shape.size());
  LUMINAL_CHECK(!is_floating(b.dtype(index)) && b.dtype(index) != DType::Bool, "scatter index must be integral, got ",
                dtype_name(b.dtype(index)));
  std::vector<Expr> targets = Builder::loop_vars(index_shape.size());
  targets[dim] = Builder::checked_index(ir::load(index_slot, b.dtype(index), Builder::loop_vars(index_shape.size())),
                                        self_shape[dim], /*wrap_negative=*/false, nullptr, "index");
  return targets;
}

// scatter.src / scatter.value (assignment: among duplicate positions the last wins on the CPU,
// torch leaves it unspecified) and scatter_add, as scatter nodes over index's elements.
void translate_linear_scatter(Context& ctx, const pt2::Node& node, bool accumulate) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const NodeId index = ctx.tensor(node, "index");
  const DType dtype = b.dtype(self);
  if (b.shape(self).empty()) fail("scatter into a 0-d tensor is not supported");
  const int64_t dim = b.normalize_dim(ctx.int_arg(node, "dim"), b.rank(self));
  const std::vector<Expr> targets = scatter_targets(b, self, index, dim, 1);
  const Shape domain = b.shape(index);
  if (const std::optional<NodeId> src = ctx.optional_tensor(node, "src")) {
    const Shape src_shape = b.shape(*src);
    LUMINAL_CHECK(src_shape.size() == domain.size(), "scatter src ", ir::node_signature(b.node(*src)),
                  " must have the rank of index ", ir::node_signature(b.node(index)));
    // index may be smaller than src: element j of index takes src at j.
    const Expr value = ir::load(2, b.dtype(*src), Builder::loop_vars(domain.size()));
    ctx.set_output(node, b.scatter(self, domain, {index, *src}, targets, scatter_value(value, dtype, accumulate),
                                   accumulate));
    return;
  }
  const Operand number = ctx.operand(node, "value");
  b.check_storable(number, dtype, "scatter's value");
  const Expr value = b.scalar_expr(number, dtype);
  ctx.set_output(node, b.scatter(self, domain, {index}, targets, scatter_value(value, dtype, accumulate), accumulate));
}

// scatter_reduce.two (sum, prod, mean, amax, amin; include_self). A sum including self is an
// accumulating scatter; the others are computed in gather form (each output element folds over the
// positions of index along dim that hit it).
void translate_scatter_reduce(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const NodeId index = ctx.tensor(node, "index");
  const NodeId src = ctx.tensor(node, "src");
  const Shape shape = b.shape(self);
  if (shape.empty()) fail("scatter into a 0-d tensor is not supported");
  const std::string reduce = ctx.string_arg(node, "reduce").value_or("sum");
  const bool include_self = ctx.bool_arg(node, "include_self", true);
  if (reduce == "sum" && include_self) {
    translate_linear_scatter(ctx, node, /*accumulate=*/true);
    return;
  }
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

// Values broadcast (right-aligned) over a scatter's domain: the value of element j.
Expr broadcast_value(Builder& b, int slot, NodeId values, const Shape& domain) {
  const Shape values_shape = b.shape(values);
  LUMINAL_CHECK(values_shape.size() <= domain.size(), "values ", ir::node_signature(b.node(values)),
                " do not broadcast to the indexed shape ", ir::shape_to_string(domain));
  const size_t offset = domain.size() - values_shape.size();
  for (size_t d = 0; d < values_shape.size(); ++d) {
    if (!values_shape[d]->is_int_const(1)) b.assert_equal(values_shape[d], domain[offset + d], "index_put values");
  }
  return ir::load(slot, b.dtype(values), broadcast_coords(values_shape, Builder::loop_vars(domain.size())));
}

// index_put(self, indices, values, accumulate): self[indices] = values (or +=). A single bool
// mask over leading dims with values equal for every selected element (x[mask] = v) blends
// elementwise; integer indices in any None/tensor arrangement scatter the values over the
// positions self[indices] reads (x[:, :, pos] = v, the KV-cache write), linear in the elements
// written. A bool mask is never treated as integer indices; other mask forms are refused (they
// run in eager through the fallback).
void translate_index_put(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const std::vector<std::optional<NodeId>> indices = ctx.optional_tensors(node, "indices");
  const NodeId values = ctx.tensor(node, "values");
  const bool accumulate = ctx.bool_arg(node, "accumulate", false);
  const Shape shape = b.shape(self), values_shape = b.shape(values);
  const DType dtype = b.dtype(self);
  LUMINAL_CHECK(!shape.empty(), "index_put into a 0-d tensor is not supported");
  const bool has_mask = std::any_of(indices.begin(), indices.end(), [&](const std::optional<NodeId>& index) {
    return index && (b.dtype(*index) == DType::Bool || b.dtype(*index) == DType::U8);
  });
  if (!has_mask) {
    const AdvancedIndex target = advanced_index(b, shape, indices, 1);
    std::vector<NodeId> operands = target.tensors;
    operands.push_back(values);
    const Expr value = broadcast_value(b, static_cast<int>(operands.size()), values, target.shape);
    ctx.set_output(node, b.scatter(self, target.shape, operands, target.coordinates,
                                   scatter_value(value, dtype, accumulate), accumulate));
    return;
  }
  LUMINAL_CHECK(indices.size() == 1 && indices[0].has_value() && b.dtype(*indices[0]) == DType::Bool,
                "index_put with a bool mask is supported as the only index (x[mask] = v); this node has ",
                indices.size(), " index entries");
  const NodeId index = *indices[0];
  const Shape index_shape = b.shape(index);
  const std::vector<Expr> at = Builder::loop_vars(shape.size());
  const Expr old = ir::load(0, dtype, at);
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
}

// index_copy(self, dim, index, source) and index_add(self, dim, index, source, alpha): the slices of
// `source` along dim go to (or are added to) self at positions index[k]. index is 1-D (or 0-d with
// one slice); negative or out-of-range positions raise, as in torch (no wrapping).
void translate_index_update(Context& ctx, const pt2::Node& node, bool accumulate) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const NodeId index = ctx.tensor(node, "index");
  const NodeId source = ctx.tensor(node, "source");
  const Shape shape = b.shape(self), source_shape = b.shape(source);
  const DType dtype = b.dtype(self);
  LUMINAL_CHECK(!shape.empty(), short_target(node.target), " on a 0-d tensor is not supported");
  LUMINAL_CHECK(b.dtype(index) == DType::I64 || b.dtype(index) == DType::I32, "index must be an integer tensor, got ",
                ir::node_signature(b.node(index)));
  LUMINAL_CHECK(b.rank(index) <= 1, "index must be 0-d or 1-D, got ", ir::node_signature(b.node(index)));
  LUMINAL_CHECK(source_shape.size() == shape.size(), "source ", ir::node_signature(b.node(source)),
                " must have the rank of self ", ir::node_signature(b.node(self)));
  const int64_t dim = b.normalize_dim(ctx.int_arg(node, "dim"), shape.size());
  const Expr count = b.rank(index) == 0 ? ir::int_const(1) : b.shape(index)[0];
  for (size_t d = 0; d < shape.size(); ++d) {
    b.assert_equal(source_shape[d], static_cast<int64_t>(d) == dim ? count : shape[d], "index_copy/index_add source");
  }
  const std::vector<Expr> j = Builder::loop_vars(shape.size());
  std::vector<Expr> targets = j;
  const std::vector<Expr> at_k = b.rank(index) == 0 ? std::vector<Expr>{} : std::vector<Expr>{j[dim]};
  targets[dim] = Builder::checked_index(ir::load(1, b.dtype(index), at_k), shape[dim], /*wrap_negative=*/false, nullptr,
                                        "index");
  Expr value = scatter_value(ir::load(2, b.dtype(source), j), dtype, accumulate);
  const pt2::Argument* alpha_arg = accumulate ? ctx.find_arg(node, "alpha") : nullptr;
  if (alpha_arg && !alpha_arg->is_none()) {
    const Operand alpha = ctx.operand(node, "alpha");
    LUMINAL_CHECK(!alpha.tensor && !alpha.symbolic, "index_add's alpha must be a number known at compile time");
    if (!alpha.is_one()) value = ir::mul(value, b.scalar_expr(alpha, value->dtype));
  }
  ctx.set_output(node, b.scatter(self, source_shape, {index, source}, targets, value, accumulate));
}

}  // namespace

void register_index_ops(Registry& registry) {
  registry.add("torch.ops.aten.index_put.default", translate_index_put);
  registry.add("torch.ops.aten.index_copy.default",
               [](Context& ctx, const pt2::Node& node) { translate_index_update(ctx, node, false); });
  registry.add("torch.ops.aten.index_add.default",
               [](Context& ctx, const pt2::Node& node) { translate_index_update(ctx, node, true); });
  registry.add("torch.ops.aten.scatter.src",
               [](Context& ctx, const pt2::Node& node) { translate_linear_scatter(ctx, node, false); });
  registry.add("torch.ops.aten.scatter.value",
               [](Context& ctx, const pt2::Node& node) { translate_linear_scatter(ctx, node, false); });
  registry.add("torch.ops.aten.scatter_add.default",
               [](Context& ctx, const pt2::Node& node) { translate_linear_scatter(ctx, node, true); });
  registry.add("torch.ops.aten.scatter_reduce.two", translate_scatter_reduce);
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
