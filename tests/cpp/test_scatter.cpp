// Scatter nodes: verification, the CPU executor (assignment in order, accumulation rounded per add,
// bounds checks), a base taken over from an intermediate and an update made in the base's memory.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "common/half.h"
#include "graph_helpers.h"

using namespace luminal;
using namespace luminal::ir;
using luminal::testing::GraphFixture;
using luminal::testing::Host;

namespace {

// out = base; out[index[j], :] (+)= values[j, :] for j < n: the form of x.index_put((index,), values).
NodeId row_scatter(GraphFixture& f, NodeId base, NodeId index, NodeId values, bool accumulate) {
  const Shape values_shape = f.graph().node(values).shape;
  const DType dtype = f.graph().node(base).dtype;
  const Expr row = cast(load(1, DType::I64, {loop_var(0)}), DType::I64);
  Expr value = load(2, dtype, {loop_var(0), loop_var(1)});
  if (accumulate) value = cast(value, scatter_compute_dtype(dtype));
  return f.b().scatter(base, values_shape, {index, values}, {row, loop_var(1)}, value, accumulate);
}

std::string error_of(GraphFixture& f, std::vector<Host> inputs) {
  try {
    f.run(std::move(inputs));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Scatter, AssignmentsRunInOrderAndKeepUntouchedElements) {
  GraphFixture f;
  const NodeId base = f.input(DType::F32, {int_const(4), int_const(2)});
  const NodeId index = f.input(DType::I64, {int_const(3)});
  const NodeId values = f.input(DType::F32, {int_const(3), int_const(2)});
  f.output(row_scatter(f, base, index, values, false));
  const auto out = f.run({Host::of<float>(DType::F32, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}),
                          Host::of<int64_t>(DType::I64, {3}, {2, 0, 2}),
                          Host::of<float>(DType::F32, {3, 2}, {10, 11, 20, 21, 30, 31})});
  const float expected[] = {20, 21, 3, 4, 30, 31, 7, 8};  // row 2 written twice: the last write wins
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[0].data<float>()[i], expected[i]) << i;
}

TEST(Scatter, Bf16AccumulationRoundsAfterEveryAdd) {
  GraphFixture f;
  const NodeId base = f.input(DType::BF16, {int_const(1), int_const(1)});
  const NodeId index = f.input(DType::I64, {int_const(2)});
  const NodeId values = f.input(DType::BF16, {int_const(2), int_const(1)});
  f.output(row_scatter(f, base, index, values, true));
  // 256 + 1 rounds back to 256 in bf16 (8 bits of mantissa), twice; one rounding at the end would give 258.
  const std::vector<uint16_t> one{float_to_bf16_bits(1.0f), float_to_bf16_bits(1.0f)};
  const auto out = f.run({Host::of<uint16_t>(DType::BF16, {1, 1}, {float_to_bf16_bits(256.0f)}),
                          Host::of<int64_t>(DType::I64, {2}, {0, 0}), Host::of<uint16_t>(DType::BF16, {2, 1}, one)});
  EXPECT_EQ(bf16_bits_to_float(out[0].data<uint16_t>()[0]), 256.0f);
}

TEST(Scatter, Int32AccumulationWraps) {
  GraphFixture f;
  const NodeId base = f.input(DType::I32, {int_const(2), int_const(1)});
  const NodeId index = f.input(DType::I64, {int_const(2)});
  const NodeId values = f.input(DType::I32, {int_const(2), int_const(1)});
  f.output(row_scatter(f, base, index, values, true));
  const auto out = f.run({Host::of<int32_t>(DType::I32, {2, 1}, {2147483647, 5}),
                          Host::of<int64_t>(DType::I64, {2}, {0, 1}), Host::of<int32_t>(DType::I32, {2, 1}, {1, -7})});
  EXPECT_EQ(out[0].data<int32_t>()[0], -2147483647 - 1);
  EXPECT_EQ(out[0].data<int32_t>()[1], -2);
}

TEST(Scatter, OutOfRangeTargetRaises) {
  GraphFixture f;
  const NodeId base = f.input(DType::F32, {int_const(2), int_const(2)});
  const NodeId index = f.input(DType::I64, {int_const(1)});
  const NodeId values = f.input(DType::F32, {int_const(1), int_const(2)});
  f.output(row_scatter(f, base, index, values, false));
  const std::string message = error_of(f, {Host::of<float>(DType::F32, {2, 2}, {1, 2, 3, 4}),
                                           Host::of<int64_t>(DType::I64, {1}, {2}),
                                           Host::of<float>(DType::F32, {1, 2}, {5, 6})});
  EXPECT_NE(message.find("out of bounds"), std::string::npos) << message;
}

TEST(Scatter, ChainOnAnIntermediateTakesOverItsMemory) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(3), int_const(2)});
  const NodeId index = f.input(DType::I64, {int_const(1)});
  const NodeId values = f.input(DType::F32, {int_const(1), int_const(2)});
  const NodeId doubled = f.b().elementwise({frontend::Operand::of(x)}, DType::F32, DType::F32,
                                           [](const std::vector<Expr>& v) { return add(v[0], v[0]); });
  const NodeId first = row_scatter(f, doubled, index, values, false);
  const NodeId second = row_scatter(f, first, index, values, true);
  f.output(second);
  const auto out = f.run({Host::of<float>(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6}),
                          Host::of<int64_t>(DType::I64, {1}, {1}), Host::of<float>(DType::F32, {1, 2}, {10, 20})});
  const float expected[] = {2, 4, 20, 40, 10, 12};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0].data<float>()[i], expected[i]) << i;
  // The first scatter takes over the doubled tensor's memory; the second, the graph output, copies it.
  EXPECT_EQ(f.copied_bytes(), 6 * sizeof(float));
}

TEST(Scatter, UpdatesTheBaseInPlaceWhenTheOutputIsItsMemory) {
  GraphFixture f;
  const NodeId base = f.input(DType::F32, {int_const(3), int_const(2)});
  const NodeId index = f.input(DType::I64, {int_const(1)});
  const NodeId values = f.input(DType::F32, {int_const(1), int_const(2)});
  f.output(row_scatter(f, base, index, values, false));
  auto graph = std::make_shared<const Graph>(passes::optimize(f.graph()));
  runtime::cpu::Executor executor(graph);
  Host cache = Host::of<float>(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  Host positions = Host::of<int64_t>(DType::I64, {1}, {2});
  Host update = Host::of<float>(DType::F32, {1, 2}, {7, 8});
  const std::vector<runtime::TensorView> inputs{cache.view(), positions.view(), update.view()};
  const runtime::SymbolValues symbols = runtime::bind_inputs(*graph, inputs);
  const size_t copied = executor.run(inputs, {cache.view()}, symbols);  // the output is the input's memory
  EXPECT_EQ(copied, 0u);
  const float expected[] = {1, 2, 3, 4, 7, 8};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(cache.data<float>()[i], expected[i]) << i;
}

TEST(Scatter, VerifierRejectsABodyThatReadsTheBase) {
  GraphFixture f;
  const NodeId base = f.input(DType::F32, {int_const(2)});
  Node node;
  node.kind = NodeKind::Scatter;
  node.dtype = DType::F32;
  node.shape = {int_const(2)};
  node.inputs = {base};
  node.scatter_domain = {int_const(1)};
  node.scatter_targets = {int_const(0)};
  node.body = load(0, DType::F32, {int_const(1)});
  node.origin = "bad";
  f.output(f.graph().add(std::move(node)));
  try {
    f.graph().verify();
    FAIL() << "verification passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a scatter reads its base"), std::string::npos) << e.what();
  }
}
