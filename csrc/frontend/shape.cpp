// Views and layout: view/reshape, permute/transpose, expand, (un)squeeze, slice, select, cat,
// clone/copies and dtype conversion.
#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

// The export metadata already holds the resolved shape (with -1 and symbolic sizes worked out);
// reshape() checks that the element counts agree.
void translate_view(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().reshape(ctx.tensor(node, "self"), ctx.out_shape(node)));
}

void translate_permute(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().permute(ctx.tensor(node, "self"), ctx.ints_arg(node, "dims")));
}

void translate_transpose(Context& ctx, const pt2::Node& node) {
  const NodeId x = ctx.tensor(node, "self");
  Builder& b = ctx.builder();
  if (b.rank(x) < 2) {
    ctx.set_output(node, x);
    return;
  }
  ctx.set_output(node, b.transpose(x, ctx.int_arg(node, "dim0"), ctx.int_arg(node, "dim1")));
}

void translate_expand(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().expand(ctx.tensor(node, "self"), ctx.symints_arg(node, "size")));
}

void translate_unsqueeze(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().unsqueeze(ctx.tensor(node, "self"), ctx.int_arg(node, "dim")));
}

void translate_squeeze(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  std::vector<int64_t> dims;
  if (ctx.find_arg(node, "dim")) {
    dims = ctx.ints_arg(node, "dim");
  } else {
    for (size_t d = 0; d < b.rank(x); ++d) dims.push_back(static_cast<int64_t>(d));
  }
  ctx.set_output(node, b.squeeze(x, dims));
}

void translate_slice(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const int64_t dim = ctx.int_arg(node, "dim", 0);
  const Expr start = ctx.symint_arg(node, "start").value_or(ir::int_const(0));
  const Expr end = ctx.symint_arg(node, "end").value_or(ir::int_const(INT64_MAX));
  const int64_t step = ctx.int_arg(node, "step", 1);
  ctx.set_output(node, b.slice(x, dim, start, end, step));
}

void translate_select(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  ctx.set_output(node, b.select(ctx.tensor(node, "self"), ctx.int_arg(node, "dim"), ctx.symint_arg(node, "index").value()));
}

void translate_cat(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId out = b.concat(ctx.tensors(node, "tensors"), ctx.int_arg(node, "dim", 0));
  ctx.set_output(node, b.cast(out, ctx.out_dtype(node)));
}

// clone / alias / copies: values are immutable in the IR, so an identity is enough.
void translate_identity(Context& ctx, const pt2::Node& node) { ctx.set_output(node, ctx.tensor(node, "self")); }

void translate_to_copy(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().cast(ctx.tensor(node, "self"), ctx.out_dtype(node)));
}

void translate_flatten(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const size_t rank = b.rank(x);
  if (rank == 0) {
    ctx.set_output(node, b.reshape(x, {ir::int_const(1)}));
    return;
  }
  const int64_t start = b.normalize_dim(ctx.int_arg(node, "start_dim", 0), rank);
  const int64_t end = b.normalize_dim(ctx.int_arg(node, "end_dim", -1), rank);
  Shape shape;
  Expr merged = ir::int_const(1);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t di = static_cast<int64_t>(d);
    if (di < start || di > end) {
      shape.push_back(b.shape(x)[d]);
    } else {
      merged = ir::mul(merged, b.shape(x)[d]);
      if (di == end) shape.push_back(merged);
    }
  }
  ctx.set_output(node, b.reshape(x, shape));
}

// Reads x at `index` (one expression per dim of x) for an output of `shape`.
NodeId gather_by_index(Builder& b, NodeId x, Shape shape, std::vector<Expr> index) {
  return b.pointwise(b.dtype(x), std::move(shape), {x}, ir::load(0, b.dtype(x), std::move(index)));
}

void translate_flip(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape shape = b.shape(x);
  std::vector<Expr> index = Builder::loop_vars(shape.size());
  for (int64_t dim : ctx.ints_arg(node, "dims")) {
    const int64_t d = b.normalize_dim(dim, shape.size());
    index[d] = ir::sub(ir::sub(shape[d], ir::int_const(1)), ir::loop_var(static_cast<int>(d)));
  }
  ctx.set_output(node, gather_by_index(b, x, shape, index));
}

// repeat(self, repeats): tiles x; repeats may add leading dimensions.
void translate_repeat(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const std::vector<Expr> repeats = ctx.symints_arg(node, "repeats");
  const Shape in = b.shape(x);
  LUMINAL_CHECK(repeats.size() >= in.size(), "repeat needs at least ", in.size(), " repeats, got ", repeats.size());
  const size_t offset = repeats.size() - in.size();
  Shape out;
  std::vector<Expr> index;
  for (size_t j = 0; j < repeats.size(); ++j) {
    const Expr size = j < offset ? ir::int_const(1) : in[j - offset];
    out.push_back(ir::mul(size, repeats[j]));
    if (j >= offset) index.push_back(ir::mod(ir::loop_var(static_cast<int>(j)), size));
  }
  ctx.set_output(node, gather_by_index(b, x, out, index));
}

// Padding of the last dims; `pad` lists (before, after) pairs from the last dimension backwards.
struct PadSpec {
  std::vector<Expr> before, after;  // per padded dim, indexed from the last dimension
};

PadSpec pad_spec(Context& ctx, const pt2::Node& node, size_t rank, std::string_view name) {
  const std::vector<Expr> pad = ctx.symints_arg(node, name);
  LUMINAL_CHECK(pad.size() % 2 == 0 && pad.size() / 2 <= rank, "padding of ", pad.size(), " values for rank ", rank);
  PadSpec spec;
  for (size_t k = 0; k < pad.size(); k += 2) {
    spec.before.push_back(pad[k]);
    spec.after.push_back(pad[k + 1]);
  }
  return spec;
}

// constant_pad_nd (negative pads crop), reflection_pad*d and replication_pad*d.
enum class PadMode { Constant, Reflect, Replicate };

void translate_pad(Context& ctx, const pt2::Node& node, PadMode mode) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  const PadSpec spec = pad_spec(ctx, node, in.size(), mode == PadMode::Constant ? "pad" : "padding");
  Shape out = in;
  std::vector<Expr> index = Builder::loop_vars(in.size());
  Expr inside = ir::bool_const(true);
  for (size_t k = 0; k < spec.before.size(); ++k) {
    const size_t d = in.size() - 1 - k;
    const Expr size = in[d];
    out[d] = ir::add(ir::add(size, spec.before[k]), spec.after[k]);
    const Expr position = ir::sub(ir::loop_var(static_cast<int>(d)), spec.before[k]);  // in x's coordinates
    switch (mode) {
      case PadMode::Constant:
        inside = ir::logical_and(inside, ir::logical_and(ir::binary(ir::ExprOp::Ge, position, ir::int_const(0)),
                                                         ir::binary(ir::ExprOp::Lt, position, size)));
        index[d] = position;
        break;
      case PadMode::Replicate: index[d] = ir::min(ir::max(position, ir::int_const(0)), ir::sub(size, ir::int_const(1))); break;
      case PadMode::Reflect: {
        // Reflection without repeating the edge: |p| folded back at size - 1.
        const Expr last = ir::sub(size, ir::int_const(1));
        const Expr magnitude = ir::max(position, ir::sub(ir::int_const(0), position));
        index[d] = ir::sub(last, ir::max(ir::sub(last, magnitude), ir::sub(magnitude, last)));
        break;
      }
    }
  }
  const DType dtype = b.dtype(x);
  if (mode != PadMode::Constant) {
    ctx.set_output(node, gather_by_index(b, x, out, index));
    return;
  }
  const double value = ctx.find_arg(node, "value") ? ctx.float_arg(node, "value", 0.0) : 0.0;
  const Expr loaded = ir::load(0, dtype, index, inside);
  ctx.set_output(node, b.pointwise(dtype, out, {x}, ir::where(inside, loaded, ir::scalar_const(value, dtype))));
}

// split_with_sizes(self, split_sizes, dim) -> Tensor[]
void translate_split_with_sizes(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const int64_t dim = ctx.int_arg(node, "dim", 0);
  Expr start = ir::int_const(0);
  const std::vector<Expr> sizes = ctx.symints_arg(node, "split_sizes");
  for (size_t k = 0; k < sizes.size(); ++k) {
    const Expr end = ir::add(start, sizes[k]);
    ctx.set_output(node, k, b.slice(x, dim, start, end, 1));
    start = end;
  }
}

// diagonal(self, offset, dim1, dim2): the diagonal becomes the last dimension.
void translate_diagonal(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  const int64_t offset = ctx.int_arg(node, "offset", 0);
  const int64_t d1 = b.normalize_dim(ctx.int_arg(node, "dim1", 0), in.size());
  const int64_t d2 = b.normalize_dim(ctx.int_arg(node, "dim2", 1), in.size());
  LUMINAL_CHECK(d1 != d2, "diagonal dimensions cannot be identical");
  Shape out;
  std::vector<Expr> index(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    if (static_cast<int64_t>(d) == d1 || static_cast<int64_t>(d) == d2) continue;
    index[d] = ir::loop_var(static_cast<int>(out.size()));
    out.push_back(in[d]);
  }
  const Expr k = ir::loop_var(static_cast<int>(out.size()));
  const Expr rows = offset >= 0 ? in[d1] : ir::add(in[d1], ir::int_const(offset));
  const Expr cols = offset >= 0 ? ir::sub(in[d2], ir::int_const(offset)) : in[d2];
  out.push_back(ir::max(ir::min(rows, cols), ir::int_const(0)));
  index[d1] = offset >= 0 ? k : ir::sub(k, ir::int_const(offset));
  index[d2] = offset >= 0 ? ir::add(k, ir::int_const(offset)) : k;
  ctx.set_output(node, gather_by_index(b, x, out, index));
}

// fill.Scalar(self, value): a tensor like self, full of value.
void translate_fill(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  ctx.set_output(node, b.full(b.shape(x), ctx.float_arg(node, "value"), ctx.out_dtype(node)));
}

// copy(self, src): src broadcast to self's shape, in self's dtype (functional copy_).
void translate_copy(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const NodeId src = ctx.tensor(node, "src");
  const Shape shape = b.shape(self);
  const DType out = ctx.out_dtype(node);
  ctx.set_output(node, b.pointwise(out, shape, {src}, ir::cast(b.broadcast_load(0, src, shape), out)));
}

}  // namespace

void register_shape_ops(Registry& registry) {
  for (const char* target : {"torch.ops.aten.view.default", "torch.ops.aten._unsafe_view.default",
                             "torch.ops.aten.reshape.default", "torch.ops.aten.view_copy.default"}) {
    registry.add(target, translate_view);
  }
  registry.add("torch.ops.aten.permute.default", translate_permute);
  registry.add("torch.ops.aten.permute_copy.default", translate_permute);
  registry.add("torch.ops.aten.transpose.int", translate_transpose);
  registry.add("torch.ops.aten.expand.default", translate_expand);
  registry.add("torch.ops.aten.expand_copy.default", translate_expand);
  registry.add("torch.ops.aten.unsqueeze.default", translate_unsqueeze);
  registry.add("torch.ops.aten.unsqueeze_copy.default", translate_unsqueeze);
  registry.add("torch.ops.aten.squeeze.dim", translate_squeeze);
  registry.add("torch.ops.aten.squeeze.dims", translate_squeeze);
  registry.add("torch.ops.aten.squeeze.default", translate_squeeze);
  registry.add("torch.ops.aten.slice.Tensor", translate_slice);
  registry.add("torch.ops.aten.slice_copy.Tensor", translate_slice);
  registry.add("torch.ops.aten.select.int", translate_select);
  registry.add("torch.ops.aten.select_copy.int", translate_select);
  registry.add("torch.ops.aten.cat.default", translate_cat);
  registry.add("torch.ops.aten.flatten.using_ints", translate_flatten);
  registry.add("torch.ops.aten.flip.default", translate_flip);
  registry.add("torch.ops.aten.repeat.default", translate_repeat);
  registry.add("torch.ops.aten.constant_pad_nd.default",
               [](Context& ctx, const pt2::Node& node) { translate_pad(ctx, node, PadMode::Constant); });
  for (const char* target : {"torch.ops.aten.reflection_pad1d.default", "torch.ops.aten.reflection_pad2d.default",
                             "torch.ops.aten.reflection_pad3d.default"}) {
    registry.add(target, [](Context& ctx, const pt2::Node& node) { translate_pad(ctx, node, PadMode::Reflect); });
  }
  for (const char* target : {"torch.ops.aten.replication_pad1d.default", "torch.ops.aten.replication_pad2d.default",
                             "torch.ops.aten.replication_pad3d.default"}) {
    registry.add(target, [](Context& ctx, const pt2::Node& node) { translate_pad(ctx, node, PadMode::Replicate); });
  }
  registry.add("torch.ops.aten.split_with_sizes.default", translate_split_with_sizes);
  registry.add("torch.ops.aten.split_with_sizes_copy.default", translate_split_with_sizes);
  registry.add("torch.ops.aten.diagonal.default", translate_diagonal);
  registry.add("torch.ops.aten.diagonal_copy.default", translate_diagonal);
  registry.add("torch.ops.aten.fill.Scalar", translate_fill);
  registry.add("torch.ops.aten.copy.default", translate_copy);
  for (const char* target : {"torch.ops.aten.clone.default", "torch.ops.aten.alias.default",
                             "torch.ops.aten.detach.default", "torch.ops.aten.lift_fresh_copy.default",
                             "torch.ops.aten.contiguous.default"}) {
    registry.add(target, translate_identity);
  }
  registry.add("torch.ops.aten._to_copy.default", translate_to_copy);
  registry.add("torch.ops.aten.to.dtype", translate_to_copy);
  registry.add("torch.ops.aten.to.dtype_layout", translate_to_copy);
}

}  // namespace luminal::frontend
