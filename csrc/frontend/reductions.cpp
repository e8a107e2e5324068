// Reductions over dimension lists: sum, mean, amax, amin (keepdim, dtype).
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
  const NodeId total = b.reduce_dims(b.cast(x, out), dims, keepdim, ir::ReduceOp::Sum, out);
  const ir::Node& t = b.node(total);
  const Expr divided =
      ir::binary(ir::ExprOp::Div, ir::load(0, out, Builder::loop_vars(t.rank())), ir::cast(count, out));
  ctx.set_output(node, b.pointwise(out, t.shape, {total}, divided));
}

template <ir::ReduceOp Op>
void translate_extreme(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  std::vector<int64_t> dims = reduce_dims_arg(ctx, node);
  for (int64_t d : dims) {
    if (b.rank(x) > 0) {
      const Expr& size = b.shape(x)[b.normalize_dim(d, b.rank(x))];
      LUMINAL_CHECK(!size->is_int_const(0), "amax/amin of an empty dimension has no identity");
    }
  }
  ctx.set_output(node, b.reduce_dims(x, dims, ctx.bool_arg(node, "keepdim", false), Op, b.dtype(x)));
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
}

}  // namespace luminal::frontend
