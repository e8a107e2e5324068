// IR invariants (verifier), text form, and the passes: inlining, dead code, outputs, views, pieces.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "graph_helpers.h"

using namespace luminal;
using namespace luminal::ir;
using luminal::testing::GraphFixture;
using luminal::testing::Host;

namespace {

Node pointwise(DType dtype, Shape shape, std::vector<NodeId> inputs, Expr body) {
  Node n;
  n.kind = NodeKind::Pointwise;
  n.dtype = dtype;
  n.shape = std::move(shape);
  n.inputs = std::move(inputs);
  n.body = std::move(body);
  n.origin = "test";
  return n;
}

size_t count_kind(const Graph& g, NodeKind kind) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.kind == kind;
  return n;
}

}  // namespace

TEST(Verifier, RejectsMalformedNodes) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(3)});
  Graph& g = f.graph();
  {
    Graph bad = g;
    bad.add(pointwise(DType::F32, {int_const(4)}, {x}, load(0, DType::F32, {loop_var(0)})));  // rank 1 load of rank 2
    EXPECT_THROW(bad.verify(), Error);
  }
  {
    Graph bad = g;
    bad.add(pointwise(DType::F32, {int_const(4)}, {x}, load(0, DType::F64, {loop_var(0), int_const(0)})));
    EXPECT_THROW(bad.verify(), Error);  // load dtype differs from the input's
  }
  {
    Graph bad = g;
    bad.add(pointwise(DType::I64, {symbol("nope")}, {}, loop_var(0)));
    EXPECT_THROW(bad.verify(), Error);  // unknown symbol
  }
  {
    Graph bad = g;
    bad.add(pointwise(DType::I64, {int_const(2)}, {}, reduce_var(0)));
    EXPECT_THROW(bad.verify(), Error);  // reduce variable in a pointwise node
  }
  {
    Graph bad = g;
    bad.add(pointwise(DType::I64, {int_const(2)}, {}, loop_var(1)));
    EXPECT_THROW(bad.verify(), Error);  // loop variable beyond the rank
  }
  EXPECT_NO_THROW(g.verify());
}

TEST(Printer, ShowsSignaturesBodiesAndOrigins) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {symbol("s0"), int_const(3)});
  f.b().set_origin("relu_1 (aten.relu.default)");
  f.output(f.b().elementwise({frontend::Operand::of(x)}, DType::F32, DType::F32,
                             [](const std::vector<Expr>& v) { return unary(ExprOp::Relu, v[0]); }));
  const std::string text = f.graph().to_string();
  EXPECT_NE(text.find("%0: f32[s0, 3] = input user #0"), std::string::npos) << text;
  EXPECT_NE(text.find("relu(load0[i0, i1])"), std::string::npos) << text;
  EXPECT_NE(text.find("# relu_1 (aten.relu.default)"), std::string::npos) << text;
  EXPECT_NE(text.find("return %1"), std::string::npos) << text;
}

TEST(Passes, InliningFusesChainsIntoOneNode) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(3)});
  auto unary_op = [&](NodeId in, ExprOp op) {
    return f.b().elementwise({frontend::Operand::of(in)}, DType::F32, DType::F32,
                             [op](const std::vector<Expr>& v) { return unary(op, v[0]); });
  };
  const NodeId t = f.b().transpose(unary_op(x, ExprOp::Exp), 0, 1);
  f.output(unary_op(unary_op(t, ExprOp::Sigmoid), ExprOp::Tanh));
  const Graph optimized = passes::optimize(f.graph());
  EXPECT_EQ(count_kind(optimized, NodeKind::Pointwise), 1u) << optimized.to_string();
  const Node& out = optimized.node(optimized.outputs[0].node);
  EXPECT_EQ(to_string(out.body), "tanh(sigmoid(exp(load0[i1, i0])))");
}

TEST(Passes, DeadNodesAreRemovedButInputsStay) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(2)});
  f.input(DType::F32, {int_const(9)});  // unused input: still part of the call signature
  f.b().copy(x);                        // unused node
  f.output(f.b().cast(x, DType::F64));
  const Graph optimized = passes::optimize(f.graph());
  EXPECT_EQ(optimized.size(), 3u) << optimized.to_string();
  EXPECT_EQ(optimized.inputs.size(), 2u);
}

TEST(Passes, OutputsThatAreInputsOrRepeatedGetCopies) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(2)});
  const NodeId y = f.b().copy(x);
  f.output(x);
  f.output(y);
  f.output(y);
  const Graph optimized = passes::optimize(f.graph());
  std::set<NodeId> nodes;
  for (const GraphOutput& out : optimized.outputs) {
    EXPECT_TRUE(optimized.node(out.node).is_compute());
    nodes.insert(out.node);
  }
  EXPECT_EQ(nodes.size(), 3u);
}

TEST(Passes, AffineViewOfPermute) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), symbol("s0")});
  const NodeId t = f.b().permute(x, {1, 0});
  const auto view = passes::as_affine_view(f.graph(), t);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->base, x);
  // input dim 0 follows output dim 1, input dim 1 follows output dim 0
  EXPECT_TRUE(view->coefficients[0][1]->is_int_const(1));
  EXPECT_TRUE(view->coefficients[0][0]->is_int_const(0));
  EXPECT_TRUE(view->coefficients[1][0]->is_int_const(1));
  // A gather is not a view.
  const NodeId idx = f.input(DType::I64, {int_const(3)});
  EXPECT_FALSE(passes::as_affine_view(f.graph(), f.b().take(x, 0, idx, false)).has_value());
}

TEST(Passes, ConcatenationSplitsIntoResolvedPieces) {
  GraphFixture f;
  const NodeId a = f.input(DType::F32, {int_const(3), int_const(2)});
  const NodeId c = f.input(DType::F32, {int_const(3), int_const(5)});
  const NodeId cat = f.b().concat({a, c}, 1);
  const auto pieces = passes::split_pointwise(f.graph().node(cat));
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].axis, 1);
  EXPECT_TRUE(pieces[1].begin->is_int_const(2));
  EXPECT_TRUE(pieces[1].extent->is_int_const(5));
  EXPECT_EQ(to_string(pieces[0].body), "load0[i0, i1]");
  EXPECT_EQ(to_string(pieces[1].body), "load1[i0, i1]");
}

TEST(Passes, InliningRenumbersTheFoldsOfProducers) {
  // row_sum[i] = sum(r0 < 3: x[i, r0]) and window[i] = max(r0 < 3: row_sum[i + r0]) are pointwise
  // nodes with folds over r0; pairs[i] = sum over r0 < 2 of window[2i + r0] reads them at an index
  // that uses its own r0. Substituted as they are, the producer's fold would capture the
  // consumer's r0 (and rebind it: "fold variable r0 is already bound").
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(8), int_const(3)});
  const Expr i0 = loop_var(0), r0 = reduce_var(0);
  const NodeId row_sum =
      f.b().pointwise(DType::F32, {int_const(8)}, {x}, fold(ReduceOp::Sum, 0, int_const(3), load(0, DType::F32, {i0, r0})));
  const NodeId window = f.b().pointwise(DType::F32, {int_const(6)}, {row_sum},
                                        fold(ReduceOp::Max, 0, int_const(3), load(0, DType::F32, {add(i0, r0)})));
  f.output(f.b().reduce(DType::F32, {int_const(3)}, {window}, load(0, DType::F32, {add(mul(i0, int_const(2)), r0)}),
                        ReduceOp::Sum, {int_const(2)}));
  const Graph optimized = passes::optimize(f.graph());  // verifies
  EXPECT_EQ(optimized.size(), 2u) << optimized.to_string();  // the input and one fused reduction

  std::vector<float> xs(24);
  for (int k = 0; k < 24; ++k) xs[k] = static_cast<float>((k * 7) % 11) - 5.0f;
  const auto out = f.run({Host::of<float>(DType::F32, {8, 3}, xs)});
  float sums[8];
  for (int i = 0; i < 8; ++i) sums[i] = xs[3 * i] + xs[3 * i + 1] + xs[3 * i + 2];
  for (int i = 0; i < 3; ++i) {
    float expected = 0;
    for (int r = 0; r < 2; ++r) {
      const int w = 2 * i + r;
      expected += std::max({sums[w], sums[w + 1], sums[w + 2]});
    }
    EXPECT_EQ(out[0].data<float>()[i], expected) << i;
  }
}

TEST(Passes, InlinedReductionsBecomeFoldsPastTheConsumersVariables) {
  // pairs[i] = sum(r0 < 2: row_sum[2i + r0]) with row_sum a reduction over r0: inlined as a fold,
  // the reduction's variable must not be the consumer's r0.
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(6), int_const(3)});
  const NodeId row_sum = f.b().reduce_dims(x, {1}, false, ReduceOp::Sum, DType::F32);
  const Expr index = add(mul(loop_var(0), int_const(2)), reduce_var(0));
  f.output(f.b().pointwise(DType::F32, {int_const(3)}, {row_sum},
                           fold(ReduceOp::Sum, 0, int_const(2), load(0, DType::F32, {index}))));
  const Graph optimized = passes::optimize(f.graph());
  EXPECT_EQ(optimized.size(), 2u) << optimized.to_string();
  std::vector<float> xs(18);
  for (int k = 0; k < 18; ++k) xs[k] = static_cast<float>((k * 5) % 7) - 3.0f;
  const auto out = f.run({Host::of<float>(DType::F32, {6, 3}, xs)});
  for (int i = 0; i < 3; ++i) {
    float expected = 0;
    for (int k = 0; k < 6; ++k) expected += xs[6 * i + k];
    EXPECT_EQ(out[0].data<float>()[i], expected) << i;
  }
}

TEST(Attention, PrintsAndVerifiesItsInvariants) {
  GraphFixture f;
  const NodeId q = f.input(DType::BF16, {int_const(2), int_const(8), symbol("s0"), int_const(64)});
  const NodeId k = f.input(DType::BF16, {int_const(2), int_const(2), int_const(9), int_const(64)});
  const NodeId v = f.input(DType::BF16, {int_const(2), int_const(2), int_const(9), int_const(32)});
  const NodeId mask = f.input(DType::Bool, {int_const(2), int_const(1), int_const(1), int_const(9)});
  f.b().set_origin("sdpa (aten._scaled_dot_product_efficient_attention.default)");
  const NodeId out = f.b().attention(q, k, v, mask, 0.125, true);
  f.output(out);
  EXPECT_NO_THROW(f.graph().verify());
  const std::string text = f.graph().to_string();
  EXPECT_NE(text.find("%4: bf16[2, 8, s0, 32] = attention(q %0, k %1, v %2, mask %3) scale 0.125 causal  # sdpa "
                      "(aten._scaled_dot_product_efficient_attention.default)"),
            std::string::npos)
      << text;
  const auto broken = [&](auto&& change) {
    Graph g = f.graph();
    change(g.node(out));
    EXPECT_THROW(g.verify(), Error) << g.to_string();
  };
  broken([&](Node& n) { n.inputs = {q, k}; });                         // no value
  broken([&](Node& n) { n.inputs = {q, v, k}; });                      // head sizes differ
  broken([&](Node& n) { n.inputs = {q, k, v, q}; });                   // mask of another shape and dtype
  broken([&](Node& n) { n.dtype = DType::F32; });                      // output dtype is not q's
  broken([&](Node& n) { n.shape[3] = int_const(64); });                // output is [B, H, Lq, Dv]
  broken([&](Node& n) { n.attention_scale = std::nan(""); });          // the scale must be finite
  const NodeId three_kv_heads = f.input(DType::BF16, {int_const(2), int_const(3), int_const(9), int_const(64)});
  const NodeId three_kv_values = f.input(DType::BF16, {int_const(2), int_const(3), int_const(9), int_const(32)});
  broken([&](Node& n) { n.inputs = {q, three_kv_heads, three_kv_values}; });  // 8 heads over 3 groups
}
