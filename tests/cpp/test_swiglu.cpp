// runtime::gpu::swiglu_operands: the SwiGLU values a paired GEMV launch stores from its gate and
// up products (codegen/gemv.cuh, PAIR). Needs no GPU.
#if LUMINAL_HAVE_CUDA
#include <gtest/gtest.h>

#include <vector>

#include "graph_helpers.h"
#include "runtime/cuda/swiglu.h"

namespace luminal {
namespace {

using ir::Expr;
using ir::int_const;
using ir::NodeId;
using testing::GraphFixture;

// mul(dtype(div(f32(g), add(1, exp(neg(f32(g)))))), u), the frontend's form of silu(g) * u; `shift`
// reads g one element further along (no longer the element it writes).
NodeId swiglu(GraphFixture& f, NodeId gate, NodeId up, DType dtype, bool up_first = false, bool shift = false) {
  ir::Node node;
  node.kind = ir::NodeKind::Pointwise;
  node.dtype = dtype;
  node.shape = f.graph().node(gate).shape;
  node.inputs = {gate, up};
  node.origin = "test";
  const Expr i0 = ir::loop_var(0), i1 = ir::loop_var(1);
  const Expr g = ir::cast(ir::load(0, dtype, {i0, shift ? ir::add(i1, int_const(1)) : i1}), DType::F32);
  const Expr exp = ir::unary(ir::ExprOp::Exp, ir::unary(ir::ExprOp::Neg, g));
  const Expr silu = ir::binary(ir::ExprOp::Div, g, ir::add(ir::float_const(1.0, DType::F32), exp));
  const Expr rounded = ir::cast(silu, dtype), u = ir::load(1, dtype, {i0, i1});
  node.body = up_first ? ir::mul(u, rounded) : ir::mul(rounded, u);
  return f.graph().add(std::move(node));
}

TEST(SwiGlu, TheFrontendsFormIsRecognizedInEitherOrder) {
  for (const DType dtype : {DType::BF16, DType::F16}) {
    for (const bool up_first : {false, true}) {
      GraphFixture f;
      const NodeId gate = f.input(dtype, {int_const(2), int_const(40)});
      const NodeId up = f.input(dtype, {int_const(2), int_const(40)});
      const NodeId values = swiglu(f, gate, up, dtype, up_first);
      const auto operands = runtime::gpu::swiglu_operands(f.graph(), f.graph().node(values));
      ASSERT_TRUE(operands.has_value()) << dtype_name(dtype);
      EXPECT_EQ(operands->first, gate);
      EXPECT_EQ(operands->second, up);
    }
  }
}

TEST(SwiGlu, OtherValuesAreNot) {
  GraphFixture f;
  const NodeId gate = f.input(DType::BF16, {int_const(2), int_const(40)});
  const NodeId up = f.input(DType::BF16, {int_const(2), int_const(40)});
  const NodeId shifted = swiglu(f, gate, up, DType::BF16, false, /*shift=*/true);
  EXPECT_FALSE(runtime::gpu::swiglu_operands(f.graph(), f.graph().node(shifted)).has_value());
  // f32 values (no rounding between the steps): not the form the GEMV repeats.
  const NodeId gate32 = f.input(DType::F32, {int_const(2), int_const(40)});
  const NodeId up32 = f.input(DType::F32, {int_const(2), int_const(40)});
  EXPECT_FALSE(runtime::gpu::swiglu_operands(f.graph(), f.graph().node(swiglu(f, gate32, up32, DType::F32))));
  // An up operand of another shape (a broadcast).
  const NodeId row = f.input(DType::BF16, {int_const(1), int_const(40)});
  EXPECT_FALSE(runtime::gpu::swiglu_operands(f.graph(), f.graph().node(swiglu(f, gate, row, DType::BF16))));
}

}  // namespace
}  // namespace luminal
#endif
