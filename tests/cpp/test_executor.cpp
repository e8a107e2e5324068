// The CPU executor on graphs built with the frontend Builder: dtype semantics, broadcasting,
// concatenation, gathers with bounds checks, ragged and ordinary reductions, matmul by strides,
// symbolic shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error.h"
#include "common/half.h"
#include "graph_helpers.h"
#include "runtime/symbols.h"

using namespace luminal;
using namespace luminal::ir;
using luminal::testing::GraphFixture;
using luminal::testing::Host;

namespace {

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Executor, BroadcastArithmeticF32) {
  GraphFixture f;
  const NodeId a = f.input(DType::F32, {int_const(2), int_const(3)});
  const NodeId c = f.input(DType::F32, {int_const(3)});
  f.output(f.b().elementwise({frontend::Operand::of(a), frontend::Operand::of(c)}, DType::F32, DType::F32,
                             [](const std::vector<Expr>& v) { return unary(ExprOp::Relu, sub(v[0], v[1])); }));
  const auto out = f.run({Host::of<float>(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                          Host::of<float>(DType::F32, {3}, {2, 2, 7})});
  const float expected[] = {0, 0, 0, 2, 3, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0].data<float>()[i], expected[i]) << i;
}

TEST(Executor, Int32ArithmeticWrapsAndF16Rounds) {
  GraphFixture f;
  const NodeId a = f.input(DType::I32, {int_const(2)});
  const NodeId h = f.input(DType::F16, {int_const(2)});
  f.output(f.b().elementwise({frontend::Operand::of(a)}, DType::I32, DType::I32,
                             [](const std::vector<Expr>& v) { return add(v[0], v[0]); }));
  // 1 + 1e-4 is not representable in f16: the sum rounds back to 1.
  f.output(f.b().elementwise({frontend::Operand::of(h), frontend::Operand::number(1e-4, DType::F64)}, DType::F16,
                             DType::F16, [](const std::vector<Expr>& v) { return binary(ExprOp::Add, v[0], v[1]); }));
  const std::vector<uint16_t> halves{float_to_half_bits(1.0f), float_to_half_bits(-2.5f)};
  const auto out = f.run({Host::of<int32_t>(DType::I32, {2}, {2147483647, -7}),
                          Host::of<uint16_t>(DType::F16, {2}, halves)});
  EXPECT_EQ(out[0].data<int32_t>()[0], -2);  // wrapped
  EXPECT_EQ(out[0].data<int32_t>()[1], -14);
  EXPECT_EQ(half_bits_to_float(out[1].data<uint16_t>()[0]), 1.0f);
  EXPECT_EQ(half_bits_to_float(out[1].data<uint16_t>()[1]), -2.5f);
}

TEST(Executor, ConcatenationOfThreeParts) {
  GraphFixture f;
  const NodeId a = f.input(DType::I64, {int_const(2), int_const(1)});
  const NodeId c = f.input(DType::I64, {int_const(2), int_const(2)});
  const NodeId d = f.input(DType::I64, {int_const(2), int_const(1)});
  f.output(f.b().concat({a, c, d}, 1));
  const auto out = f.run({Host::of<int64_t>(DType::I64, {2, 1}, {1, 2}), Host::of<int64_t>(DType::I64, {2, 2}, {3, 4, 5, 6}),
                          Host::of<int64_t>(DType::I64, {2, 1}, {7, 8})});
  const int64_t expected[] = {1, 3, 4, 7, 2, 5, 6, 8};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[0].data<int64_t>()[i], expected[i]) << i;
}

TEST(Executor, GatherChecksIndicesAndWrapsNegatives) {
  GraphFixture f;
  const NodeId table = f.input(DType::F32, {int_const(4), int_const(2)});
  const NodeId index = f.input(DType::I64, {int_const(3)});
  f.output(f.b().take(table, 0, index, /*wrap_negative=*/true));
  const Host t = Host::of<float>(DType::F32, {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  const auto out = f.run({t, Host::of<int64_t>(DType::I64, {3}, {2, -1, 0})});
  const float expected[] = {20, 21, 30, 31, 0, 1};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0].data<float>()[i], expected[i]) << i;
  // An index that a 32-bit truncation would make valid (2^32 + 1 -> 1) must raise.
  const std::string message = error_of([&] { f.run({t, Host::of<int64_t>(DType::I64, {3}, {0, (int64_t{1} << 32) + 1, 0})}); });
  EXPECT_NE(message.find("out of bounds"), std::string::npos) << message;
}

TEST(Executor, IntegerDivisionByZeroRaises) {
  GraphFixture f;
  const NodeId a = f.input(DType::I64, {int_const(2)});
  const NodeId d = f.input(DType::I64, {int_const(2)});
  f.output(f.b().elementwise({frontend::Operand::of(a), frontend::Operand::of(d)}, DType::I64, DType::I64,
                             [](const std::vector<Expr>& v) { return floordiv(v[0], v[1]); }));
  const auto out = f.run({Host::of<int64_t>(DType::I64, {2}, {-7, 7}), Host::of<int64_t>(DType::I64, {2}, {2, -2})});
  EXPECT_EQ(out[0].data<int64_t>()[0], -4);  // floor semantics
  EXPECT_EQ(out[0].data<int64_t>()[1], -4);
  const std::string message = error_of([&] {
    f.run({Host::of<int64_t>(DType::I64, {2}, {1, 2}), Host::of<int64_t>(DType::I64, {2}, {1, 0})});
  });
  EXPECT_NE(message.find("division by zero"), std::string::npos) << message;
}

TEST(Executor, RaggedReductionOverOffsets) {
  // out[b, d] = sum over r < offsets[b+1] - offsets[b] of table[offsets[b] + r, d]
  GraphFixture f;
  const NodeId table = f.input(DType::F32, {int_const(5), int_const(2)});
  const NodeId offsets = f.input(DType::I64, {int_const(4)});
  const Expr start = load(1, DType::I64, {loop_var(0)});
  const Expr end = load(1, DType::I64, {add(loop_var(0), int_const(1))});
  const Expr row = check_index(add(start, reduce_var(0)), int_const(5));
  f.output(f.b().reduce(DType::F32, {int_const(3), int_const(2)}, {table, offsets}, load(0, DType::F32, {row, loop_var(1)}),
                        ReduceOp::Sum, {max(sub(end, start), int_const(0))}));
  const auto out = f.run({Host::of<float>(DType::F32, {5, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}),
                          Host::of<int64_t>(DType::I64, {4}, {0, 2, 2, 5})});
  const float expected[] = {4, 6, 0, 0, 21, 24};  // bags [0,2), [2,2) empty, [2,5)
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0].data<float>()[i], expected[i]) << i;
}

TEST(Executor, ReductionsAlongAndAcrossLanes) {
  GraphFixture f;
  const int64_t n = 10000;
  const NodeId x = f.input(DType::F32, {int_const(n)});
  const NodeId m = f.input(DType::F32, {int_const(300), int_const(3)});
  f.output(f.b().reduce_dims(x, {0}, false, ReduceOp::Sum, DType::F32));   // one long reduction
  f.output(f.b().reduce_dims(m, {1}, true, ReduceOp::Max, DType::F32));    // many short ones
  std::vector<float> xs(n), ms(900);
  for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i % 7) - 3.0f;
  for (int i = 0; i < 900; ++i) ms[i] = static_cast<float>((i * 37) % 101);
  const auto out = f.run({Host::of<float>(DType::F32, {n}, xs), Host::of<float>(DType::F32, {300, 3}, ms)});
  double sum = 0;
  for (float v : xs) sum += v;
  EXPECT_EQ(out[0].data<float>()[0], static_cast<float>(sum));
  for (int r = 0; r < 300; ++r) {
    const float want = std::max({ms[3 * r], ms[3 * r + 1], ms[3 * r + 2]});
    EXPECT_EQ(out[1].data<float>()[r], want) << r;
  }
}

TEST(Executor, MatmulReadsTransposedViewByStrides) {
  GraphFixture f;
  const NodeId a = f.input(DType::F32, {int_const(2), int_const(3)});
  const NodeId w = f.input(DType::F32, {int_const(4), int_const(3)});
  f.output(f.b().matmul(a, f.b().permute(w, {1, 0})));
  const std::vector<float> av{1, 2, 3, 4, 5, 6};
  const std::vector<float> wv{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1};
  const auto out = f.run({Host::of<float>(DType::F32, {2, 3}, av), Host::of<float>(DType::F32, {4, 3}, wv)});
  const float expected[] = {1, 2, 3, 6, 4, 5, 6, 15};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[0].data<float>()[i], expected[i]) << i;
}

TEST(Executor, SymbolicShapesBindPerCall) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {symbol("s0"), int_const(2)});
  const NodeId y = f.input(DType::F32, {symbol("s0")});
  f.output(f.b().elementwise({frontend::Operand::of(x), frontend::Operand::of(f.b().unsqueeze(y, 1))}, DType::F32,
                             DType::F32, [](const std::vector<Expr>& v) { return mul(v[0], v[1]); }));
  for (int64_t n : {1, 3, 7}) {
    std::vector<float> xs(2 * n), ys(n);
    for (int64_t i = 0; i < 2 * n; ++i) xs[i] = static_cast<float>(i);
    for (int64_t i = 0; i < n; ++i) ys[i] = static_cast<float>(i + 1);
    const auto out = f.run({Host::of<float>(DType::F32, {n, 2}, xs), Host::of<float>(DType::F32, {n}, ys)});
    ASSERT_EQ(out[0].sizes, (std::vector<int64_t>{n, 2}));
    for (int64_t i = 0; i < 2 * n; ++i) EXPECT_EQ(out[0].data<float>()[i], xs[i] * ys[i / 2]);
  }
  // Inconsistent sizes for s0 raise, naming the input.
  const std::string message = error_of([&] {
    f.run({Host::of<float>(DType::F32, {2, 2}, std::vector<float>(4)), Host::of<float>(DType::F32, {3}, std::vector<float>(3))});
  });
  EXPECT_NE(message.find("s0"), std::string::npos) << message;
}

// A complex input binds as its pairs only: a real tensor of the pairs' shape is refused, and a
// complex tensor's pairs are refused where the graph takes real values (frontend/complex.cpp).
TEST(Executor, ComplexInputsBindAsTheirPairsOnly) {
  GraphFixture f;
  const NodeId z = f.input(DType::F32, {int_const(3), int_const(2)});
  f.graph().node(z).complex_pairs = true;
  const NodeId x = f.input(DType::F32, {int_const(3), int_const(2)});
  f.output(f.b().elementwise({frontend::Operand::of(z), frontend::Operand::of(x)}, DType::F32, DType::F32,
                             [](const std::vector<Expr>& v) { return add(v[0], v[1]); }));
  const std::vector<float> values{1, 2, 3, 4, 5, 6};
  Host pairs = Host::of<float>(DType::F32, {3, 2}, values), real = Host::of<float>(DType::F32, {3, 2}, values);
  const auto bind = [&](bool first_complex, bool second_complex) {
    std::vector<runtime::TensorView> views{pairs.view(), real.view()};
    views[0].complex_pairs = first_complex;
    views[1].complex_pairs = second_complex;
    return error_of([&] { runtime::bind_inputs(f.graph(), views); });
  };
  EXPECT_EQ(bind(true, false), "");
  EXPECT_NE(bind(false, false).find("input #0 'in0' must be a complex tensor, as the pairs float32[3, 2]"),
            std::string::npos) << bind(false, false);
  EXPECT_NE(bind(true, true).find("the pairs of a complex tensor"), std::string::npos) << bind(true, true);
}

// _grouped_mm's MoE form: rows grouped by run-time ends, a transposed weight read in place.
TEST(Executor, GroupedRowsMatmulReadsTransposedWeightsAndChecksEnds) {
  GraphFixture f;
  const NodeId a = f.input(DType::F32, {int_const(5), int_const(2)});
  const NodeId w = f.input(DType::F32, {int_const(2), int_const(3), int_const(2)});  // [G, N, K]
  const NodeId ends = f.input(DType::I32, {int_const(2)});
  const NodeId out = f.b().grouped_rows_matmul(a, f.b().transpose(w, 1, 2), ends, DType::F32);
  f.output(out);
  EXPECT_EQ(f.graph().node(out).contraction, Contraction::GroupedRowsTransposedB);
  EXPECT_EQ(f.graph().node(out).inputs[1], w);  // no copy of the transposed weight

  const std::vector<float> rows = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::vector<float> weights = {1, 0, 0, 1, 1, 1, 2, 0, 0, 2, -1, 1};  // group 0: e0, e1, e0+e1
  const auto result = f.run({Host::of<float>(DType::F32, {5, 2}, rows),
                             Host::of<float>(DType::F32, {2, 3, 2}, weights),
                             Host::of<int32_t>(DType::I32, {2}, {1, 4})});
  // Row 0: group 0; rows 1-3: group 1 (2*x0, 2*x1, x1-x0); row 4 is past the last end: zeros.
  const float expected[] = {1, 2, 3, 6, 8, 1, 10, 12, 1, 14, 16, 1, 0, 0, 0};
  for (int i = 0; i < 15; ++i) EXPECT_FLOAT_EQ(result[0].data<float>()[i], expected[i]) << "element " << i;

  for (const std::vector<int32_t>& bad : {std::vector<int32_t>{3, 1}, std::vector<int32_t>{2, 6}}) {
    const std::string message = error_of([&] {
      f.run({Host::of<float>(DType::F32, {5, 2}, rows), Host::of<float>(DType::F32, {2, 3, 2}, weights),
             Host::of<int32_t>(DType::I32, {2}, bad)});
    });
    EXPECT_NE(message.find("out of bounds"), std::string::npos) << message;
  }
}

// A long chain of elementwise ops (a hostile archive can declare thousands) fuses in pieces of at
// most max_fused_ops operations: fusing it whole re-simplified a growing body per link (50 s and
// 1.9 GB for 5,000 links). The pieces still compute the chain.
TEST(Executor, LongElementwiseChainsFuseInBoundedPieces) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4)});
  NodeId link = x;
  constexpr int kLinks = 3000;
  for (int i = 0; i < kLinks; ++i) {
    link = f.b().elementwise({frontend::Operand::of(link)}, DType::F32, DType::F32,
                             [](const std::vector<Expr>& v) {
                               return unary(ExprOp::Abs, sub(v[0], scalar_const(0.75, DType::F32)));
                             });
  }
  f.output(link);
  const passes::OptimizeOptions options;
  const Graph optimized = passes::optimize(f.graph(), options);
  size_t kernels = 0;
  for (const Node& node : optimized.nodes()) {
    if (node.kind != NodeKind::Pointwise) continue;
    ++kernels;
    EXPECT_LE(passes::arithmetic_op_count(node.body), 2 * options.max_fused_ops);
  }
  EXPECT_GE(kernels, static_cast<size_t>(kLinks / (2 * options.max_fused_ops)));
  const std::vector<float> in{0, 1, -2000, 0.5};
  const auto out = f.run({Host::of<float>(DType::F32, {4}, in)});
  for (int i = 0; i < 4; ++i) {
    float expected = in[i];
    for (int k = 0; k < kLinks; ++k) expected = std::fabs(expected - 0.75f);
    EXPECT_EQ(out[0].data<float>()[i], expected) << i;
  }
}

// The reference attention: causal (query i sees keys j <= i), a bool mask broadcast over queries,
// grouped-query heads, and a row that sees no key (query 0 with key 0 masked out) is 0.
TEST(Executor, AttentionIsCausalMaskedGroupedAndZeroForEmptyRows) {
  GraphFixture f;
  const NodeId q = f.input(DType::F32, {int_const(1), int_const(2), int_const(3), int_const(2)});
  const NodeId k = f.input(DType::F32, {int_const(1), int_const(1), int_const(3), int_const(2)});
  const NodeId v = f.input(DType::F32, {int_const(1), int_const(1), int_const(3), int_const(1)});
  const NodeId mask = f.input(DType::Bool, {int_const(1), int_const(1), int_const(1), int_const(3)});
  f.output(f.b().attention(q, k, v, mask, 0.5, true));
  const std::vector<float> qs = {1, 0, 0, 1, 1, 1, -1, 2, 0.5f, 0.5f, 2, -1};
  const std::vector<float> ks = {1, 2, -1, 0, 0.5f, 3};
  const std::vector<float> vs = {10, 20, 40};
  const auto out = f.run({Host::of<float>(DType::F32, {1, 2, 3, 2}, qs), Host::of<float>(DType::F32, {1, 1, 3, 2}, ks),
                          Host::of<float>(DType::F32, {1, 1, 3, 1}, vs),
                          Host::of<uint8_t>(DType::Bool, {1, 1, 1, 3}, {0, 1, 1})});
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 3; ++i) {
      // Keys 1..i (key 0 is masked out), softmax in double.
      double max = -INFINITY, sum = 0, acc = 0;
      std::vector<double> s(3, -INFINITY);
      for (int j = 1; j <= i; ++j) {
        s[j] = 0.5 * (qs[(h * 3 + i) * 2] * ks[j * 2] + qs[(h * 3 + i) * 2 + 1] * ks[j * 2 + 1]);
        max = std::max(max, s[j]);
      }
      for (int j = 1; j <= i; ++j) sum += std::exp(s[j] - max);
      for (int j = 1; j <= i; ++j) acc += std::exp(s[j] - max) / sum * vs[j];
      EXPECT_NEAR(out[0].data<float>()[h * 3 + i], i == 0 ? 0.0 : acc, 1e-5) << "head " << h << " query " << i;
    }
  }
}

// As torch has it: at::empty({2, 0}) has strides [1, 1], and an output of that shape must bind.
TEST(TensorView, WithoutElementsIsContiguousWhateverItsStrides) {
  runtime::TensorView empty;
  empty.sizes = {2, 0};
  empty.strides = {1, 1};
  EXPECT_TRUE(empty.is_contiguous());
  runtime::TensorView full = empty;
  full.sizes = {2, 3};
  EXPECT_FALSE(full.is_contiguous());
  full.strides = {3, 1};
  EXPECT_TRUE(full.is_contiguous());
}
