// The row planner (passes/row_plan.h): which graphs run as one row-per-thread kernel, and the
// named reason when one does not.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph_helpers.h"
#include "passes/row_plan.h"

using namespace luminal;
using namespace luminal::ir;
using luminal::testing::GraphFixture;

namespace {

NodeId apply(GraphFixture& f, std::vector<NodeId> operands, ExprOp op) {
  std::vector<frontend::Operand> ops;
  for (NodeId id : operands) ops.push_back(frontend::Operand::of(id));
  return f.b().elementwise(ops, DType::F32, DType::F32, [op](const std::vector<Expr>& v) {
    return v.size() == 1 ? unary(op, v[0]) : binary(op, v[0], v[1]);
  });
}

// DLRM in miniature: a bottom MLP layer on the dense features, one embedding lookup, their dot
// product per row and a sigmoid. Batch `s0`.
void tiny_dlrm(GraphFixture& f) {
  const NodeId dense = f.input(DType::F32, {symbol("s0"), int_const(4)});
  const NodeId index = f.input(DType::I64, {symbol("s0")});
  const NodeId weight = f.input(DType::F32, {int_const(4), int_const(8)});
  const NodeId bias = f.input(DType::F32, {int_const(8)});
  const NodeId table = f.input(DType::F32, {int_const(10), int_const(8)});
  const NodeId bottom = apply(f, {apply(f, {f.b().matmul(dense, weight), bias}, ExprOp::Add)}, ExprOp::Relu);
  const NodeId embedded = f.b().take(table, 0, index, /*wrap_negative=*/false);
  const NodeId dot = f.b().reduce_dims(apply(f, {bottom, embedded}, ExprOp::Mul), {1}, false, ReduceOp::Sum,
                                       DType::F32);
  f.output(apply(f, {dot}, ExprOp::Sigmoid));
}

}  // namespace

TEST(RowPlan, AcceptsATinyDlrm) {
  GraphFixture f;
  tiny_dlrm(f);
  const passes::RowPlan plan = passes::plan_row_kernel(f.graph());
  ASSERT_TRUE(plan.accepted) << plan.reason;
  EXPECT_EQ(plan.reason, "2 computed nodes, 9 values per row, about 331 operations per row");
  EXPECT_EQ(to_string(plan.rows), "s0");
  std::string text = plan.graph.to_string();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  EXPECT_EQ(text, R"(symbols: s0 in [1, inf]
%0: f32[s0, 4] = input user #0 "in0"
%1: i64[s0] = input user #1 "in1"
%2: f32[4, 8] = input user #2 "in2"
%3: f32[8] = input user #3 "in3"
%4: f32[10, 8] = input user #4 "in4"
%5: f32[s0, 8] = pointwise(%0, %2) { sum(r0 < 4: mul(load0[i0, r0], load1[r0, i1])) }  # test
%6: f32[s0] = pointwise(%5, %3, %4, %1) { sigmoid(sum(r0 < 8: mul(relu(add(load0[i0, r0], load1[r0])), load2[check_index(load3[i0], 10), r0]))) }  # test
return %6)");
  for (const Node& node : plan.graph.nodes()) {
    if (node.is_compute()) EXPECT_EQ(node.kind, NodeKind::Pointwise) << text;
  }
}

TEST(RowPlan, DeclinesAReadOfAnotherRow) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {symbol("s0"), int_const(4)});
  const NodeId y = apply(f, {x}, ExprOp::Exp);  // read twice: stays a node of its own
  const NodeId first_row = f.b().expand(f.b().slice(y, 0, int_const(0), int_const(1), 1), {symbol("s0"), int_const(4)});
  f.output(apply(f, {y, first_row}, ExprOp::Add));
  const passes::RowPlan plan = passes::plan_row_kernel(f.graph());
  EXPECT_FALSE(plan.accepted);
  EXPECT_EQ(plan.reason, "%2 test f32[s0, 4] reads %1 at load0[0, i1], not at its own row i0");
}

TEST(RowPlan, DeclinesPastItsLimits) {
  GraphFixture f;
  tiny_dlrm(f);
  passes::RowLimits narrow;
  narrow.max_row_elements = 4;
  EXPECT_EQ(passes::plan_row_kernel(f.graph(), narrow).reason, "%5 test f32[s0, 8] has 8 elements per row; the register-resident row kernel takes at most 4");
  passes::RowLimits few_registers;
  few_registers.max_total_elements = 8;
  EXPECT_EQ(passes::plan_row_kernel(f.graph(), few_registers).reason, "intermediate rows hold 9 elements; the row kernel keeps at most 8 in registers");
  passes::RowLimits cheap;
  cheap.max_work = 10;
  EXPECT_EQ(passes::plan_row_kernel(f.graph(), cheap).reason, "a row costs about 331 operations (%5 test f32[s0, 8]: 240); the one-thread-per-row kernel takes at most 10");
  EXPECT_TRUE(passes::plan_row_kernel(f.graph()).accepted);
}

TEST(RowPlan, DeclinesAnOutputWithoutBatchDimension) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {symbol("s0"), int_const(4)});
  f.output(f.b().reduce_dims(x, {0, 1}, false, ReduceOp::Sum, DType::F32));
  const passes::RowPlan plan = passes::plan_row_kernel(f.graph());
  EXPECT_FALSE(plan.accepted);
  EXPECT_EQ(plan.reason, "output %1 test f32[] has no batch dimension");
}

TEST(RowPlan, DeclinesRowsWithoutElements) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {symbol("s0"), int_const(0), int_const(8)});
  f.output(apply(f, {x}, ExprOp::Exp));
  const passes::RowPlan plan = passes::plan_row_kernel(f.graph());
  EXPECT_FALSE(plan.accepted);
  EXPECT_EQ(plan.reason, "%1 test f32[s0, 0, 8] has rows without elements");
}
