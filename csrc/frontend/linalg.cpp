// Matrix products: mm, bmm, addmm, baddbmm, mv, addmv, addr, dot/vdot, t, _grouped_mm and
// transformers' grouped_mm_fallback.
#include <cmath>
#include <limits>

#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

void translate_mm(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  ctx.set_output(node, b.matmul(ctx.tensor(node, "self"), ctx.tensor(node, "mat2")));
}

// addmm(self, mat1, mat2, beta=1, alpha=1) = beta*self + alpha*(mat1 @ mat2)
void translate_addmm(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId bias = ctx.tensor(node, "self");
  const NodeId product = b.matmul(ctx.tensor(node, "mat1"), ctx.tensor(node, "mat2"));
  const double beta = ctx.float_arg(node, "beta", 1.0);
  const double alpha = ctx.float_arg(node, "alpha", 1.0);
  const DType dtype = ctx.out_dtype(node);
  const NodeId out = b.elementwise({Operand::of(bias), Operand::of(product)}, dtype, dtype,
                                   [&](const std::vector<Expr>& v) {
                                     // beta == 0 ignores self entirely (NaN/inf included), as torch does.
                                     const Expr scaled_product = ir::mul(v[1], ir::float_const(alpha, dtype));
                                     if (beta == 0.0) return scaled_product;
                                     return ir::add(ir::mul(v[0], ir::float_const(beta, dtype)), scaled_product);
                                   });
  ctx.set_output(node, out);
}

void translate_t(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  ctx.set_output(node, b.rank(x) < 2 ? x : b.transpose(x, 0, 1));
}

// beta * self + alpha * product (the product of the factors, self broadcast against them), in
// float for half types and rounded once, as torch's kernels do. beta == 0 ignores self entirely
// (NaN/inf included), as torch does. Bool results combine with and/or, as torch's addr.
NodeId scaled_sum(Builder& b, NodeId self, const std::vector<NodeId>& factors, double beta, double alpha, DType dtype) {
  const DType compute = is_floating(dtype) ? float_compute_dtype(dtype) : dtype;
  std::vector<Operand> operands{Operand::of(self)};
  for (NodeId f : factors) operands.push_back(Operand::of(f));
  return b.elementwise(operands, compute, dtype, [&](const std::vector<Expr>& v) {
    Expr product = v[1];
    for (size_t k = 2; k < v.size(); ++k) {
      product = dtype == DType::Bool ? ir::binary(ir::ExprOp::And, product, v[k]) : ir::mul(product, v[k]);
    }
    if (dtype == DType::Bool) {
      const Expr scaled_product = alpha != 0.0 ? product : ir::bool_const(false);
      return beta != 0.0 ? ir::binary(ir::ExprOp::Or, v[0], scaled_product) : scaled_product;
    }
    const Expr scaled_product = alpha == 1.0 ? product : ir::mul(ir::scalar_const(alpha, compute), product);
    if (beta == 0.0) return scaled_product;
    const Expr scaled_self = beta == 1.0 ? v[0] : ir::mul(v[0], ir::scalar_const(beta, compute));
    return ir::add(scaled_self, scaled_product);
  });
}

// Scalars beta/alpha: integer results need integral values (torch raises otherwise).
std::pair<double, double> beta_alpha(Context& ctx, const pt2::Node& node, DType dtype) {
  const double beta = ctx.float_arg(node, "beta", 1.0), alpha = ctx.float_arg(node, "alpha", 1.0);
  if (!is_floating(dtype)) {
    LUMINAL_CHECK(beta == std::floor(beta) && alpha == std::floor(alpha), "integer ", dtype_name(dtype),
                  " product with fractional beta ", beta, " or alpha ", alpha);
  }
  return {beta, alpha};
}

// sum_k a[.., k] * v[k] for integer types (matmul handles floating types only).
NodeId integer_matvec(Builder& b, NodeId mat, NodeId vec) {
  const Shape ms = b.shape(mat), vs = b.shape(vec);
  b.assert_equal(ms[1], vs[0], "matrix-vector inner dimensions");
  const DType dtype = b.dtype(mat);
  const Expr body = ir::mul(ir::load(0, dtype, {ir::loop_var(0), ir::reduce_var(0)}), ir::load(1, dtype, {ir::reduce_var(0)}));
  return b.reduce(dtype, {ms[0]}, {mat, vec}, body, ir::ReduceOp::Sum, {ms[1]});
}

// mat [n, m] @ vec [m] -> [n]
NodeId matvec(Builder& b, NodeId mat, NodeId vec) {
  LUMINAL_CHECK(b.rank(mat) == 2 && b.rank(vec) == 1, "mv needs a matrix and a vector, got ",
                ir::node_signature(b.node(mat)), " and ", ir::node_signature(b.node(vec)));
  LUMINAL_CHECK(b.dtype(mat) == b.dtype(vec), "mv operands must share a dtype, got ", dtype_name(b.dtype(mat)),
                " and ", dtype_name(b.dtype(vec)));
  LUMINAL_CHECK(b.dtype(mat) != DType::Bool, "mv of bool tensors");
  if (!is_floating(b.dtype(mat))) return integer_matvec(b, mat, vec);
  const Expr m = b.shape(vec)[0];
  return b.reshape(b.matmul(mat, b.reshape(vec, {m, ir::int_const(1)})), {b.shape(mat)[0]});
}

void translate_mv(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, matvec(ctx.builder(), ctx.tensor(node, "self"), ctx.tensor(node, "vec")));
}

// addmv(self, mat, vec, beta, alpha) = beta*self + alpha*(mat @ vec)
void translate_addmv(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType dtype = ctx.out_dtype(node);
  const NodeId product = matvec(b, ctx.tensor(node, "mat"), ctx.tensor(node, "vec"));
  const auto [beta, alpha] = beta_alpha(ctx, node, dtype);
  ctx.set_output(node, scaled_sum(b, ctx.tensor(node, "self"), {product}, beta, alpha, dtype));
}

// baddbmm(self, batch1, batch2, beta, alpha) = beta*self + alpha*(batch1 @ batch2)
void translate_baddbmm(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType dtype = ctx.out_dtype(node);
  const NodeId product = b.matmul(ctx.tensor(node, "batch1"), ctx.tensor(node, "batch2"));
  const auto [beta, alpha] = beta_alpha(ctx, node, dtype);
  ctx.set_output(node, scaled_sum(b, ctx.tensor(node, "self"), {product}, beta, alpha, dtype));
}

// addr(self, vec1, vec2, beta, alpha) = beta*self + alpha*outer(vec1, vec2)
void translate_addr(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType dtype = ctx.out_dtype(node);
  const NodeId v1 = ctx.tensor(node, "vec1"), v2 = ctx.tensor(node, "vec2");
  LUMINAL_CHECK(b.rank(v1) == 1 && b.rank(v2) == 1, "addr needs two vectors, got ", ir::node_signature(b.node(v1)),
                " and ", ir::node_signature(b.node(v2)));
  const auto [beta, alpha] = beta_alpha(ctx, node, dtype);
  ctx.set_output(node, scaled_sum(b, ctx.tensor(node, "self"), {b.unsqueeze(v1, 1), b.unsqueeze(v2, 0)}, beta, alpha, dtype));
}

// dot / vdot (real): sum of products of two vectors, accumulated in float for half types and in
// the dtype itself for integers (no promotion to int64, as torch).
void translate_dot(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self"), y = ctx.tensor(node, ctx.find_arg(node, "tensor") ? "tensor" : "other");
  const DType dtype = b.dtype(x);
  LUMINAL_CHECK(b.rank(x) == 1 && b.rank(y) == 1 && dtype == b.dtype(y) && dtype != DType::Bool,
                "dot needs two vectors of one numeric dtype, got ", ir::node_signature(b.node(x)), " and ",
                ir::node_signature(b.node(y)));
  b.assert_equal(b.shape(x)[0], b.shape(y)[0], "dot vector lengths");
  const DType compute = is_floating(dtype) ? float_compute_dtype(dtype) : dtype;
  const Expr r = ir::reduce_var(0);
  const Expr body = ir::mul(ir::cast(ir::load(0, dtype, {r}), compute), ir::cast(ir::load(1, dtype, {r}), compute));
  ctx.set_output(node, b.cast(b.reduce(compute, {}, {x, y}, body, ir::ReduceOp::Sum, {b.shape(x)[0]}), dtype));
}

// ---- _grouped_mm: the MoE grouped GEMM with run-time group offsets ----------------------------
//
// offs (int32, one entry per group) holds cumulative group ends along the grouped dimension:
//   2-D x 3-D  a[M, K], b[G, K, N] -> out[M, N]:    rows of a grouped, row m uses b[group(m)]
//   3-D x 2-D  a[G, M, K], b[K, N] -> out[M, N]:    columns of b grouped, column n uses a[group(n)]
//   2-D x 2-D  a[M, K], b[K, N]    -> out[G, M, N]: the inner dimension grouped
//   3-D x 3-D  a[G, M, K], b[G, K, N]: a batched matmul (no offs)
// Weights are read in place through the group index; nothing is gathered per token. Rows (or
// columns) past the last offset belong to no group: torch leaves them unwritten, luminal writes 0.
// Products accumulate in f32 and round once to the result dtype.

// group[i] = number of group ends <= i, for i in [0, length): the group of row/column i, or G
// for positions past the last end.
NodeId group_of_positions(Builder& b, NodeId offs, const Expr& length) {
  const Expr num_groups = b.shape(offs)[0];
  const Expr end = ir::cast(ir::load(0, DType::I32, {ir::reduce_var(0)}), DType::I64);
  const Expr counted = ir::cast(ir::binary(ir::ExprOp::Le, end, ir::loop_var(0)), DType::I64);
  return b.reduce(DType::I64, {length}, {offs}, counted, ir::ReduceOp::Sum, {num_groups});
}

void check_grouped_mm_operands(Builder& b, NodeId a, NodeId mat2, std::optional<NodeId> offs) {
  const DType dtype = b.dtype(a);
  LUMINAL_CHECK(dtype == b.dtype(mat2) && (dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16),
                "_grouped_mm operands must share dtype float32, bfloat16 or float16, got ",
                ir::node_signature(b.node(a)), " and ", ir::node_signature(b.node(mat2)));
  const size_t ra = b.rank(a), rb = b.rank(mat2);
  LUMINAL_CHECK((ra == 2 || ra == 3) && (rb == 2 || rb == 3), "_grouped_mm needs 2-D or 3-D operands, got ",
                ir::node_signature(b.node(a)), " and ", ir::node_signature(b.node(mat2)));
  const bool batched = ra == 3 && rb == 3;
  LUMINAL_CHECK(batched != offs.has_value(), "_grouped_mm with ", ra, "-D and ", rb, "-D operands ",
                batched ? "takes no offs" : "needs offs");
  if (offs) {
    LUMINAL_CHECK(b.rank(*offs) == 1 && b.dtype(*offs) == DType::I32, "_grouped_mm offs must be a 1-D int32 tensor, got ",
                  ir::node_signature(b.node(*offs)));
  }
}

void translate_grouped_mm(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId a = ctx.tensor(node, "self"), mat2 = ctx.tensor(node, "mat2");
  const std::optional<NodeId> offs = ctx.optional_tensor(node, "offs");
  LUMINAL_CHECK(!ctx.optional_tensor(node, "bias"), "_grouped_mm with a bias is not supported (torch: not yet either)");
  check_grouped_mm_operands(b, a, mat2, offs);
  const DType out_dtype = ctx.dtype_arg(node, "out_dtype").value_or(b.dtype(a));
  LUMINAL_CHECK(out_dtype == DType::F32 || out_dtype == DType::BF16 || out_dtype == DType::F16,
                "_grouped_mm out_dtype must be float32, bfloat16 or float16, got ", dtype_name(out_dtype));
  const DType in = b.dtype(a), acc = DType::F32;
  const Shape sa = b.shape(a), sb = b.shape(mat2);
  const auto product = [&](const std::vector<Expr>& a_index, const std::vector<Expr>& b_index, const Expr& mask) {
    return ir::mul(ir::cast(ir::load(0, in, a_index, mask), acc), ir::cast(ir::load(1, in, b_index, mask), acc));
  };
  const Expr i0 = ir::loop_var(0), i1 = ir::loop_var(1), i2 = ir::loop_var(2), r = ir::reduce_var(0);

  NodeId result = -1;
  if (!offs) {  // 3-D x 3-D
    result = b.matmul(a, mat2);
    ctx.set_output(node, out_dtype == in ? result : b.cast(result, out_dtype));
    return;
  }
  const Expr num_groups = b.shape(*offs)[0];
  if (b.rank(a) == 2 && b.rank(mat2) == 3) {
    ctx.set_output(node, b.grouped_rows_matmul(a, mat2, *offs, out_dtype));
    return;
  }
  if (b.rank(a) == 3 && b.rank(mat2) == 2) {
    b.assert_equal(sa[2], sb[0], "_grouped_mm inner dimensions");
    b.assert_equal(num_groups, sa[0], "_grouped_mm offs length and groups of self");
    const NodeId group = group_of_positions(b, *offs, sb[1]);
    const Expr g = ir::load(2, DType::I64, {i1});
    const Expr in_group = ir::lt(g, sa[0]);
    result = b.reduce(acc, {sa[1], sb[1]}, {a, mat2, group}, product({ir::where(in_group, g, ir::int_const(0)), i0, r}, {r, i1}, in_group),
                      ir::ReduceOp::Sum, {sa[2]});
  } else if (b.rank(a) == 2 && b.rank(mat2) == 2) {
    b.assert_equal(sa[1], sb[0], "_grouped_mm inner dimensions");
    // Group i0 covers k in [start, end): start is the previous group's end (0 for the first).
    const Expr k_total = sa[1];
    const Expr end_of = [&](const Expr& group) {
      return Builder::checked_index(ir::cast(ir::load(2, DType::I32, {group}), DType::I64),
                                    ir::add(k_total, ir::int_const(1)), false, nullptr, "offs");
    }(i0);
    const Expr has_previous = ir::ge(i0, ir::int_const(1));
    const Expr previous = ir::cast(ir::load(2, DType::I32, {ir::sub(i0, ir::int_const(1))}, has_previous), DType::I64);
    const Expr start = Builder::checked_index(previous, ir::add(k_total, ir::int_const(1)), false, nullptr, "offs");
    const Expr extent = ir::max(ir::sub(end_of, start), ir::int_const(0));
    const Expr k = ir::check_index(ir::add(start, r), k_total);
    result = b.reduce(acc, {num_groups, sa[0], sb[1]}, {a, mat2, *offs}, product({i1, k}, {k, i2}, nullptr), ir::ReduceOp::Sum,
                      {extent});
  } else {
    throw Error(str_cat("_grouped_mm: unexpected operands ", ir::node_signature(b.node(a)), " and ",
                        ir::node_signature(b.node(mat2))));
  }
  ctx.set_output(node, b.cast(result, out_dtype));
}

// transformers.grouped_mm_fallback(input, weight, offs): the custom op transformers (5.x) runs for
// MoE experts when torch._grouped_mm is unavailable or unsuitable (CPU, non-bf16 weights): rows
// [offs[e-1], offs[e]) of input [S, K] (sorted by expert) times weight[e] [K, N] (usually a
// transposed [E, N, K] view, read in place), rows past offs[-1] zero (transformers' loop leaves
// them at zero too). _grouped_mm's MoE form, except that offs may be int64.
void translate_grouped_mm_fallback(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId input = ctx.tensor(node, "input"), weight = ctx.tensor(node, "weight"), offs = ctx.tensor(node, "offs");
  const DType dtype = b.dtype(input);
  // The grouped GEMM accumulates in float32: float64 would lose precision.
  LUMINAL_CHECK(dtype == b.dtype(weight) && (dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16),
                "grouped_mm_fallback operands must share dtype float32, bfloat16 or float16, got ",
                ir::node_signature(b.node(input)), " and ", ir::node_signature(b.node(weight)));
  LUMINAL_CHECK(b.rank(input) == 2 && b.rank(weight) == 3, "grouped_mm_fallback needs input [S, K] and weight [E, K, N], got ",
                ir::node_signature(b.node(input)), " and ", ir::node_signature(b.node(weight)));
  const DType offs_dtype = b.dtype(offs);
  LUMINAL_CHECK(b.rank(offs) == 1 && (offs_dtype == DType::I32 || offs_dtype == DType::I64),
                "grouped_mm_fallback offs must be a 1-D int32 or int64 tensor, got ", ir::node_signature(b.node(offs)));
  NodeId ends = offs;
  if (offs_dtype == DType::I64) {
    // Valid ends lie in [0, S] (the contraction checks that they do not decrease); checked here
    // first, they fit int32, which the contraction reads.
    const Expr bound = ir::min(ir::add(b.shape(input)[0], ir::int_const(1)), ir::int_const(std::numeric_limits<int32_t>::max()));
    const Expr end = ir::check_index(ir::load(0, DType::I64, {ir::loop_var(0)}), bound);
    ends = b.pointwise(DType::I32, b.shape(offs), {offs}, ir::cast(end, DType::I32));
  }
  ctx.set_output(node, b.grouped_rows_matmul(input, weight, ends, dtype));
}

}  // namespace

void register_linalg_ops(Registry& registry) {
  registry.add("torch.ops.aten.mm.default", translate_mm);
  registry.add("torch.ops.aten.bmm.default", translate_mm);
  registry.add("torch.ops.aten.addmm.default", translate_addmm);
  registry.add("torch.ops.aten.t.default", translate_t);
  registry.add("torch.ops.aten.baddbmm.default", translate_baddbmm);
  registry.add("torch.ops.aten.addr.default", translate_addr);
  registry.add("torch.ops.aten.dot.default", translate_dot);
  registry.add("torch.ops.aten.vdot.default", translate_dot);
  registry.add("torch.ops.aten.mv.default", translate_mv);
  registry.add("torch.ops.aten.addmv.default", translate_addmv);
  registry.add("torch.ops.aten._grouped_mm.default", translate_grouped_mm);
  registry.add("torch.ops.transformers.grouped_mm_fallback.default", translate_grouped_mm_fallback);
}

}  // namespace luminal::frontend
