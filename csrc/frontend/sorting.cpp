// sort and topk in gather form: the rank of an element along the sorted dim is the number of
// elements that come before it (a reduction over the dim), and output position p gathers the
// element whose rank is p (a second reduction). Quadratic in the sorted dim, like cumsum, but
// exact for every dtype and needs no sorting support in the executors or the CUDA codegen.
#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

using ir::ExprOp;

// Does `a` (at position ja) come before `b` (at position jb) in torch's order? NaN is greater than
// every number and equal to NaN; equal keys keep their index order (torch's stable sort).
Expr comes_before(const Expr& a, const Expr& b, const Expr& ja, const Expr& jb, bool descending, DType dtype) {
  const Expr& lo = descending ? b : a;
  const Expr& hi = descending ? a : b;
  Expr less = ir::binary(ExprOp::Lt, lo, hi);
  Expr equal = ir::binary(ExprOp::Eq, a, b);
  if (is_floating(dtype)) {
    const Expr lo_nan = ir::unary(ExprOp::IsNan, lo), hi_nan = ir::unary(ExprOp::IsNan, hi);
    less = ir::binary(ExprOp::Or, less, ir::logical_and(ir::unary(ExprOp::Not, lo_nan), hi_nan));
    equal = ir::binary(ExprOp::Or, equal, ir::logical_and(lo_nan, hi_nan));
  }
  return ir::binary(ExprOp::Or, less, ir::logical_and(equal, ir::lt(ja, jb)));
}

struct Sorted {
  NodeId values, indices;
};

// The first `count` elements of x along d in sorted order (count = the dim's size for sort).
Sorted sorted_prefix(Builder& b, NodeId x, int64_t d, const Expr& count, bool descending) {
  const Shape shape = b.shape(x);
  const DType dtype = b.dtype(x);
  const Expr n = shape[d];
  const std::vector<Expr> at = Builder::loop_vars(shape.size());
  std::vector<Expr> at_r = at;
  at_r[d] = ir::reduce_var(0);
  // rank[.., i, ..] = #{ j : x[.., j, ..] comes before x[.., i, ..] }
  const Expr before = comes_before(ir::load(0, dtype, at_r), ir::load(0, dtype, at), ir::reduce_var(0),
                                   at[d], descending, dtype);
  const NodeId rank = b.reduce(DType::I64, shape, {x}, ir::cast(before, DType::I64), ir::ReduceOp::Sum, {n});
  // indices[.., p, ..] = the j whose rank is p (ranks are a permutation of 0..n-1).
  Shape out_shape = shape;
  out_shape[d] = count;
  const Expr hit = ir::eq(ir::load(0, DType::I64, at_r), at[d]);
  const NodeId indices = b.reduce(DType::I64, out_shape, {rank}, ir::where(hit, ir::reduce_var(0), ir::int_const(0)),
                                  ir::ReduceOp::Sum, {n});
  std::vector<Expr> at_index = at;
  at_index[d] = Builder::checked_index(ir::load(1, DType::I64, at), n, /*wrap_negative=*/false);
  const NodeId values = b.pointwise(dtype, out_shape, {x, indices}, ir::load(0, dtype, at_index));
  return {values, indices};
}

// sort.default(self, dim, descending) / sort.stable(self, stable, dim, descending). Ties keep index
// order for both (a valid order for the unstable overload too).
void translate_sort(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const bool descending = ctx.bool_arg(node, "descending", false);
  if (b.rank(x) == 0) {
    b.normalize_dim(ctx.int_arg(node, "dim", -1), 0);
    ctx.set_output(node, 0, b.copy(x));
    ctx.set_output(node, 1, b.full({}, 0, DType::I64));
    return;
  }
  const int64_t d = b.normalize_dim(ctx.int_arg(node, "dim", -1), b.rank(x));
  const Sorted s = sorted_prefix(b, x, d, b.shape(x)[d], descending);
  ctx.set_output(node, 0, s.values);
  ctx.set_output(node, 1, s.indices);
}

// topk(self, k, dim, largest, sorted): always sorted (torch leaves the order unspecified for
// sorted=False); ties come in index order.
void translate_topk(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Expr k = ctx.symint_arg(node, "k").value();
  const bool largest = ctx.bool_arg(node, "largest", true);
  if (b.rank(x) == 0) {
    b.normalize_dim(ctx.int_arg(node, "dim", -1), 0);
    LUMINAL_CHECK(ir::as_int_const(k).has_value(), "topk of a 0-d tensor needs a static k");
    LUMINAL_CHECK(*ir::as_int_const(k) == 1, "topk of a 0-d tensor needs k = 1, got k = ", *ir::as_int_const(k),
                  " (k = 0 is not supported)");
    ctx.set_output(node, 0, b.copy(x));
    ctx.set_output(node, 1, b.full({}, 0, DType::I64));
    return;
  }
  const int64_t d = b.normalize_dim(ctx.int_arg(node, "dim", -1), b.rank(x));
  b.assert_equal(ir::min(k, b.shape(x)[d]), k, "topk k must not exceed the dimension size");
  if (ir::as_int_const(k) == 0) {  // nothing to select: empty results, and no sort (whose rows would be empty)
    Shape empty = b.shape(x);
    empty[d] = ir::int_const(0);
    ctx.set_output(node, 0, b.full(empty, 0, b.dtype(x)));
    ctx.set_output(node, 1, b.full(empty, 0, DType::I64));
    return;
  }
  const Sorted s = sorted_prefix(b, x, d, k, largest);
  ctx.set_output(node, 0, s.values);
  ctx.set_output(node, 1, s.indices);
}

}  // namespace

void register_sorting_ops(Registry& registry) {
  registry.add("torch.ops.aten.sort.default", translate_sort);
  registry.add("torch.ops.aten.sort.stable", translate_sort);
  registry.add("torch.ops.aten.topk.default", translate_topk);
}

}  // namespace luminal::frontend
