// Golden IR before and after each pass of passes/passes.h, on graphs built by hand. The goldens
// are Graph::to_string() text: a change in what a pass does shows up as a readable diff.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "graph_helpers.h"

using namespace luminal;
using namespace luminal::ir;
using luminal::testing::GraphFixture;

namespace {

NodeId unary_op(GraphFixture& f, NodeId in, ExprOp op) {
  return f.b().elementwise({frontend::Operand::of(in)}, DType::F32, DType::F32,
                           [op](const std::vector<Expr>& v) { return unary(op, v[0]); });
}

NodeId binary_op(GraphFixture& f, NodeId a, NodeId b, ExprOp op) {
  return f.b().elementwise({frontend::Operand::of(a), frontend::Operand::of(b)}, DType::F32, DType::F32,
                           [op](const std::vector<Expr>& v) { return binary(op, v[0], v[1]); });
}

NodeId scaled(GraphFixture& f, NodeId in, double factor) {
  return f.b().elementwise({frontend::Operand::of(in), frontend::Operand::number(factor, DType::F32)}, DType::F32,
                           DType::F32, [](const std::vector<Expr>& v) { return binary(ExprOp::Mul, v[0], v[1]); });
}

// The graph as text without the trailing newline, for readable goldens.
std::string text(const Graph& graph) {
  std::string out = graph.to_string();
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

TEST(PassGolden, EliminateDeadCode) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(2)});
  f.input(DType::F32, {int_const(9)});  // unused input: still part of the call signature
  f.b().copy(x);                        // unused node
  f.output(f.b().cast(x, DType::F64));
  EXPECT_EQ(text(f.graph()), R"(%0: f32[2] = input user #0 "in0"
%1: f32[9] = input user #1 "in1"
%2: f32[2] = pointwise(%0) { load0[i0] }  # test
%3: f64[2] = pointwise(%0) { f64(load0[i0]) }  # test
return %3)");
  EXPECT_EQ(text(passes::eliminate_dead_code(f.graph())), R"(%0: f32[2] = input user #0 "in0"
%1: f32[9] = input user #1 "in1"
%2: f64[2] = pointwise(%0) { f64(load0[i0]) }  # test
return %2)");
}

// Repeats (the same definition over the same inputs, also once their own inputs were merged) are
// read through the first; a reduction repeats too; outputs keep their nodes; a different constant
// or reduction is no repeat.
TEST(PassGolden, EliminateCommonSubexpressions) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(5)});
  const NodeId a = unary_op(f, x, ExprOp::Exp);
  const NodeId b = unary_op(f, x, ExprOp::Exp);                 // repeats a
  const NodeId a2 = scaled(f, a, 2.0);
  const NodeId b2 = scaled(f, b, 2.0);                          // repeats a2 once b is a
  const NodeId b3 = scaled(f, b, 3.0);                          // another constant
  const NodeId sum_a = f.b().reduce_dims(a2, {1}, false, ReduceOp::Sum, DType::F32);
  const NodeId sum_b = f.b().reduce_dims(b2, {1}, false, ReduceOp::Sum, DType::F32);  // repeats sum_a
  const NodeId max_b = f.b().reduce_dims(b2, {1}, false, ReduceOp::Max, DType::F32);  // another reduction
  f.output(binary_op(f, sum_a, sum_b, ExprOp::Add));
  f.output(max_b);
  f.output(b3);
  f.output(unary_op(f, x, ExprOp::Exp));  // an output that repeats a: keeps its node
  Graph graph = f.graph();
  passes::eliminate_common_subexpressions(graph);
  EXPECT_EQ(text(passes::eliminate_dead_code(graph)), R"(%0: f32[4, 5] = input user #0 "in0"
%1: f32[4, 5] = pointwise(%0) { exp(load0[i0, i1]) }  # test
%2: f32[4, 5] = pointwise(%1) { mul(load0[i0, i1], 2) }  # test
%3: f32[4, 5] = pointwise(%1) { mul(load0[i0, i1], 3) }  # test
%4: f32[4] = reduce.sum(%2) over [r0 < 5] { load0[i0, r0] }  # test
%5: f32[4] = reduce.max(%2) over [r0 < 5] { load0[i0, r0] }  # test
%6: f32[4] = pointwise(%4, %4) { add(load0[i0], load1[i0]) }  # test
%7: f32[4, 5] = pointwise(%0) { exp(load0[i0, i1]) }  # test
return %6, %5, %3, %7)");
}

// Grouped-query attention on keys and values expanded to the query heads reads the unexpanded
// tensors; with different groups for keys and values (or one not expanded) nothing changes.
TEST(PassGolden, ReadGroupedHeadsInPlace) {
  const auto repeat_heads = [](GraphFixture& f, NodeId source, int64_t group) {
    Node node;
    node.kind = NodeKind::Pointwise;
    node.dtype = DType::BF16;
    node.shape = {int_const(1), int_const(8), int_const(5), int_const(8)};  // 8 query heads
    node.inputs = {source};
    node.body = load(0, DType::BF16, {loop_var(0), floordiv(loop_var(1), int_const(group)), loop_var(2), loop_var(3)});
    node.origin = "repeat";
    return f.graph().add(std::move(node));
  };
  for (const int64_t v_group : {int64_t{4}, int64_t{2}}) {
    GraphFixture f;
    const NodeId q = f.input(DType::BF16, {int_const(1), int_const(8), int_const(1), int_const(8)});
    const NodeId k = f.input(DType::BF16, {int_const(1), int_const(2), int_const(5), int_const(8)});
    const NodeId v = f.input(DType::BF16, {int_const(1), int_const(8 / v_group), int_const(5), int_const(8)});
    f.b().set_origin("attention");
    const NodeId k_repeated = repeat_heads(f, k, 4);
    const NodeId v_repeated = repeat_heads(f, v, v_group);
    f.output(f.b().attention(q, k_repeated, v_repeated, std::nullopt, 0.125, false));
    Graph graph = f.graph();
    passes::read_grouped_heads_in_place(graph);
    const std::string expected = v_group == 4 ? "attention(q %0, k %1, v %2)" : "attention(q %0, k %3, v %4)";
    EXPECT_NE(text(passes::eliminate_dead_code(graph)).find(expected), std::string::npos) << text(graph);
  }
}

TEST(PassGolden, InlinePointwise) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(3)});
  const NodeId t = f.b().transpose(unary_op(f, x, ExprOp::Exp), 0, 1);
  f.output(unary_op(f, unary_op(f, t, ExprOp::Sigmoid), ExprOp::Tanh));
  EXPECT_EQ(text(f.graph()), R"(%0: f32[4, 3] = input user #0 "in0"
%1: f32[4, 3] = pointwise(%0) { exp(load0[i0, i1]) }  # test
%2: f32[3, 4] = pointwise(%1) { load0[i1, i0] }  # test
%3: f32[3, 4] = pointwise(%2) { sigmoid(load0[i0, i1]) }  # test
%4: f32[3, 4] = pointwise(%3) { tanh(load0[i0, i1]) }  # test
return %4)");
  Graph graph = f.graph();
  passes::inline_pointwise(graph, {});
  EXPECT_EQ(text(graph), R"(%0: f32[4, 3] = input user #0 "in0"
%1: f32[4, 3] = pointwise(%0) { exp(load0[i0, i1]) }  # test
%2: f32[3, 4] = pointwise(%0) { exp(load0[i1, i0]) }  # test
%3: f32[3, 4] = pointwise(%0) { sigmoid(exp(load0[i1, i0])) }  # test
%4: f32[3, 4] = pointwise(%0) { tanh(sigmoid(exp(load0[i1, i0]))) }  # test
return %4)");
}

// A scatter's values and indices are bodies over its domain: a pointwise producer read there (a
// transposed, rotated key written into a cache; the position an index adds) is computed inside the
// scatter. Its base (the output's memory) is never read: a producer that reads it, or reads a view
// of it, stays a kernel of its own.
TEST(PassGolden, InlinePointwiseIntoScatter) {
  GraphFixture f;
  const NodeId cache = f.input(DType::F32, {int_const(2), int_const(5)});
  const NodeId position = f.input(DType::I64, {int_const(1)});
  const NodeId projected = f.input(DType::F32, {int_const(1), int_const(2)});
  const NodeId value = f.b().transpose(unary_op(f, projected, ExprOp::Exp), 0, 1);  // [2, 1]
  const NodeId index = f.b().elementwise({frontend::Operand::of(position)}, DType::I64, DType::I64,
                                         [](const std::vector<Expr>& v) { return add(v[0], int_const(1)); });
  const Shape domain{int_const(2), int_const(1)};
  const Expr target = load(1, DType::I64, {loop_var(1)});
  const NodeId written = f.b().scatter(cache, domain, {index, value}, {loop_var(0), target},
                                       load(2, DType::F32, {loop_var(0), loop_var(1)}), false);
  const NodeId from_base = unary_op(f, f.b().transpose(written, 0, 1), ExprOp::Neg);  // [5, 2]: reads the base
  const Shape one_row{int_const(2), int_const(1)};
  f.output(f.b().scatter(written, one_row, {from_base}, {loop_var(0), loop_var(1)},
                         load(1, DType::F32, {loop_var(1), loop_var(0)}), false));
  Graph graph = f.graph();
  passes::inline_pointwise(graph, {});
  EXPECT_EQ(text(passes::eliminate_dead_code(graph)), R"(%0: f32[2, 5] = input user #0 "in0"
%1: i64[1] = input user #1 "in1"
%2: f32[1, 2] = input user #2 "in2"
%3: f32[2, 5] = scatter(%0, %1, %2) over [2, 1] { [i0, check_index((load1[i1] + 1), 5)] = exp(load2[i1, i0]) }  # test
%4: f32[5, 2] = pointwise(%3) { neg(load0[i1, i0]) }  # test
%5: f32[2, 5] = scatter(%3, %4) over [2, 1] { [i0, i1] = load1[i1, i0] }  # test
return %5)");
}

TEST(PassGolden, LowerSmallMatmuls) {
  GraphFixture f;
  const NodeId a = f.input(DType::F32, {int_const(4), int_const(8)});
  const NodeId b = f.input(DType::F32, {int_const(8), int_const(3)});
  f.output(f.b().matmul(a, b));
  EXPECT_EQ(text(f.graph()), R"(%0: f32[4, 8] = input user #0 "in0"
%1: f32[8, 3] = input user #1 "in1"
%2: f32[4, 3] = matmul(%0, %1)  # test
return %2)");
  Graph graph = f.graph();
  passes::lower_small_matmuls(graph, {});
  EXPECT_EQ(text(graph), R"(%0: f32[4, 8] = input user #0 "in0"
%1: f32[8, 3] = input user #1 "in1"
%2: f32[4, 3] = reduce.sum(%0, %1) over [r0 < 8] { mul(load0[i0, r0], load1[r0, i1]) }  # test
return %2)");
  // K = 64 and N = 96: above both limits, the matmul stays for the library.
  GraphFixture big;
  big.output(big.b().matmul(big.input(DType::F32, {int_const(4), int_const(64)}),
                            big.input(DType::F32, {int_const(64), int_const(96)})));
  Graph kept = big.graph();
  passes::lower_small_matmuls(kept, {});
  EXPECT_EQ(text(kept), text(big.graph()));
}

TEST(PassGolden, InlineReductions) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(5)});
  const NodeId sum = f.b().reduce_dims(x, {1}, /*keepdim=*/false, ReduceOp::Sum, DType::F32);
  f.output(scaled(f, sum, 2.0));
  EXPECT_EQ(text(f.graph()), R"(%0: f32[4, 5] = input user #0 "in0"
%1: f32[4] = reduce.sum(%0) over [r0 < 5] { load0[i0, r0] }  # test
%2: f32[4] = pointwise(%1) { mul(load0[i0], 2) }  # test
return %2)");
  Graph graph = f.graph();
  passes::inline_reductions(graph, {});
  EXPECT_EQ(text(graph), R"(%0: f32[4, 5] = input user #0 "in0"
%1: f32[4] = reduce.sum(%0) over [r0 < 5] { load0[i0, r0] }  # test
%2: f32[4] = pointwise(%0) { mul(sum(r0 < 5: load0[i0, r0]), 2) }  # test
return %2)");
}

TEST(PassGolden, FuseMatmulEpilogues) {
  GraphFixture f;
  const NodeId a = f.input(DType::F32, {int_const(4), int_const(64)});
  const NodeId w = f.input(DType::F32, {int_const(64), int_const(96)});
  const NodeId bias = f.input(DType::F32, {int_const(96)});
  f.output(unary_op(f, binary_op(f, f.b().matmul(a, w), bias, ExprOp::Add), ExprOp::Relu));
  Graph graph = f.graph();
  passes::inline_pointwise(graph, {});  // the epilogue is matched on one fused pointwise consumer
  graph = passes::eliminate_dead_code(graph);
  EXPECT_EQ(text(graph), R"(%0: f32[4, 64] = input user #0 "in0"
%1: f32[64, 96] = input user #1 "in1"
%2: f32[96] = input user #2 "in2"
%3: f32[4, 96] = matmul(%0, %1)  # test
%4: f32[4, 96] = pointwise(%3, %2) { relu(add(load0[i0, i1], load1[i1])) }  # test
return %4)");
  passes::fuse_matmul_epilogues(graph);
  EXPECT_EQ(text(passes::eliminate_dead_code(graph)), R"(%0: f32[4, 64] = input user #0 "in0"
%1: f32[64, 96] = input user #1 "in1"
%2: f32[96] = input user #2 "in2"
%3: f32[4, 96] = matmul(%0, %1, %2) + bias, relu  # test
return %3)");
}

TEST(PassGolden, MaterializeOutputs) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(2)});
  const NodeId y = f.b().copy(x);
  f.output(x);
  f.output(y);
  f.output(y);
  EXPECT_EQ(text(f.graph()), R"(%0: f32[2] = input user #0 "in0"
%1: f32[2] = pointwise(%0) { load0[i0] }  # test
return %0, %1, %1)");
  Graph graph = f.graph();
  passes::materialize_outputs(graph);
  EXPECT_EQ(text(graph), R"(%0: f32[2] = input user #0 "in0"
%1: f32[2] = pointwise(%0) { load0[i0] }  # test
%2: f32[2] = pointwise(%0) { load0[i0] }  # copy of output 'out0'
%3: f32[2] = pointwise(%1) { load0[i0] }  # copy of output 'out2'
return %2, %1, %3)");
}

TEST(PassGolden, Optimize) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {symbol("s0"), int_const(8)});
  const NodeId w = f.input(DType::F32, {int_const(8), int_const(2)});
  const NodeId h = unary_op(f, f.b().matmul(x, w), ExprOp::Relu);
  const NodeId total = f.b().reduce_dims(h, {1}, /*keepdim=*/false, ReduceOp::Sum, DType::F32);
  f.output(scaled(f, total, 0.5));
  f.output(h);
  EXPECT_EQ(text(f.graph()), R"(symbols: s0 in [1, inf]
%0: f32[s0, 8] = input user #0 "in0"
%1: f32[8, 2] = input user #1 "in1"
%2: f32[s0, 2] = matmul(%0, %1)  # test
%3: f32[s0, 2] = pointwise(%2) { relu(load0[i0, i1]) }  # test
%4: f32[s0] = reduce.sum(%3) over [r0 < 2] { load0[i0, r0] }  # test
%5: f32[s0] = pointwise(%4) { mul(load0[i0], 0.5) }  # test
return %5, %3)");
  EXPECT_EQ(text(passes::optimize(f.graph())), R"(symbols: s0 in [1, inf]
%0: f32[s0, 8] = input user #0 "in0"
%1: f32[8, 2] = input user #1 "in1"
%2: f32[s0, 2] = pointwise(%0, %1) { relu(sum(r0 < 8: mul(load0[i0, r0], load1[r0, i1]))) }  # test
%3: f32[s0] = pointwise(%2) { mul(sum(r0 < 2: load0[i0, r0]), 0.5) }  # test
return %3, %2)");
}

TEST(PassGolden, InlinePointwiseKeepsAProducerReadTwice) {
  // exp is one arithmetic operation, above max_recompute_ops = 0: computed once, read twice.
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(3)});
  const NodeId e = unary_op(f, x, ExprOp::Exp);
  f.output(binary_op(f, e, unary_op(f, e, ExprOp::Neg), ExprOp::Add));
  Graph graph = f.graph();
  passes::inline_pointwise(graph, {});
  EXPECT_EQ(text(passes::eliminate_dead_code(graph)), R"(%0: f32[3] = input user #0 "in0"
%1: f32[3] = pointwise(%0) { exp(load0[i0]) }  # test
%2: f32[3] = pointwise(%1) { add(load0[i0], neg(load0[i0])) }  # test
return %2)");
  passes::OptimizeOptions recompute;
  recompute.max_recompute_ops = 1;  // now cheap enough to recompute at both reads
  Graph fused = f.graph();
  passes::inline_pointwise(fused, recompute);
  EXPECT_EQ(text(passes::eliminate_dead_code(fused)), R"(%0: f32[3] = input user #0 "in0"
%1: f32[3] = pointwise(%0) { add(exp(load0[i0]), neg(exp(load0[i0]))) }  # test
return %1)");
}

// The same graph on a buffer (a table computed from the model's state, not from an activation):
// recomputed at both reads, up to max_table_elements.
TEST(PassGolden, InlinePointwiseRecomputesASmallTableAtEachRead) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(3)});
  f.graph().node(x).role = InputRole::Buffer;
  const NodeId e = unary_op(f, x, ExprOp::Exp);
  f.output(binary_op(f, e, unary_op(f, e, ExprOp::Neg), ExprOp::Add));
  Graph graph = f.graph();
  passes::inline_pointwise(graph, {});
  EXPECT_EQ(text(passes::eliminate_dead_code(graph)), R"(%0: f32[3] = input buffer #0 "in0"
%1: f32[3] = pointwise(%0) { add(exp(load0[i0]), neg(exp(load0[i0]))) }  # test
return %1)");
  passes::OptimizeOptions small_tables;
  small_tables.max_table_elements = 2;
  Graph large = f.graph();
  passes::inline_pointwise(large, small_tables);
  EXPECT_EQ(text(passes::eliminate_dead_code(large)), R"(%0: f32[3] = input buffer #0 "in0"
%1: f32[3] = pointwise(%0) { exp(load0[i0]) }  # test
%2: f32[3] = pointwise(%1) { add(load0[i0], neg(load0[i0])) }  # test
return %2)");
}

// A reduction over one element (a batched matmul with K = 1: a RoPE table's angles) becomes the
// pointwise node of its body at r = 0; other reductions stay.
TEST(PassGolden, PointwiseUnitReductions) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(1)});
  const NodeId y = f.input(DType::F32, {int_const(4), int_const(3)});
  f.output(f.b().reduce_dims(x, {1}, /*keepdim=*/false, ReduceOp::Sum, DType::F32));
  f.output(f.b().reduce_dims(y, {1}, /*keepdim=*/false, ReduceOp::Sum, DType::F32));
  Graph graph = f.graph();
  passes::pointwise_unit_reductions(graph);
  EXPECT_EQ(text(graph), R"(%0: f32[4, 1] = input user #0 "in0"
%1: f32[4, 3] = input user #1 "in1"
%2: f32[4] = pointwise(%0) { load0[i0, 0] }  # test
%3: f32[4] = reduce.sum(%1) over [r0 < 3] { load0[i0, r0] }  # test
return %2, %3)");
}

// A convolution (ir::Convolution) stays whole: its pointwise producer is not inlined into it, nor is
// it inlined into its consumer, so a library can still compute it from its operands; and verify()
// refuses a convolution whose body is no longer the one its parameters describe.
TEST(PassGolden, ConvolutionStaysWhole) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(1), int_const(2), int_const(5)});
  const NodeId w = f.input(DType::F32, {int_const(3), int_const(2), int_const(2)});
  const NodeId relu = unary_op(f, x, ExprOp::Relu);
  const Expr product = mul(load(0, DType::F32, {loop_var(0), reduce_var(0), add(loop_var(2), reduce_var(1))}),
                           load(1, DType::F32, {loop_var(1), reduce_var(0), reduce_var(1)}));
  const NodeId conv = f.b().reduce(DType::F32, {int_const(1), int_const(3), int_const(4)}, {relu, w}, product,
                                   ReduceOp::Sum, {int_const(2), int_const(2)});
  Node& node = f.graph().node(conv);
  node.convolution = std::make_shared<const Convolution>(Convolution{{1}, {0}, {1}, 1, node.body});
  f.output(scaled(f, conv, 2.0));
  const Graph optimized = passes::optimize(f.graph(), passes::OptimizeOptions{});
  size_t convolutions = 0;
  for (const Node& n : optimized.nodes()) {
    if (!n.convolution) continue;
    ++convolutions;
    EXPECT_EQ(optimized.node(n.inputs[0]).kind, NodeKind::Pointwise);  // the relu, still its own node
    EXPECT_NE(text(optimized).find("[convolution stride [1], padding [0], dilation [1], groups 1]"), std::string::npos);
  }
  EXPECT_EQ(convolutions, 1u) << text(optimized);

  Graph changed = f.graph();
  changed.node(conv).body = add(changed.node(conv).body, float_const(0.5, DType::F32));
  EXPECT_THROW(changed.verify(), Error);
}
