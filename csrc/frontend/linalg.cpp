// Matrix products: mm, bmm, addmm, t.
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

}  // namespace

void register_linalg_ops(Registry& registry) {
  registry.add("torch.ops.aten.mm.default", translate_mm);
  registry.add("torch.ops.aten.bmm.default", translate_mm);
  registry.add("torch.ops.aten.addmm.default", translate_addmm);
  registry.add("torch.ops.aten.t.default", translate_t);
}

}  // namespace luminal::frontend
