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
