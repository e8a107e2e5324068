// Layout assignment (passes::assign_layouts): a convolution whose output is read across channels
// moves channels-last with its x (and a channels-last copy of its weight), and computes what the
// logical layout computes; outputs never move; verify() refuses orders that are no permutation.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernel_helpers.h"

using namespace luminal;
using namespace luminal::ir;
using luminal::testing::GraphFixture;
using luminal::testing::Host;

namespace {

constexpr int64_t kBatch = 2, kChannels = 3, kFilters = 7, kLength = 9, kKernel = 3;
constexpr int64_t kOut = kLength - kKernel + 1;

Node pointwise(DType dtype, Shape shape, std::vector<NodeId> inputs, Expr body) {
  Node node;
  node.kind = NodeKind::Pointwise;
  node.dtype = dtype;
  node.shape = std::move(shape);
  node.inputs = std::move(inputs);
  node.body = std::move(body);
  node.origin = "test";
  return node;
}

// h = 2 * x (an intermediate); y = conv(h, w); out[n, l, k] = y[n, k, l] + 1 (read across
// channels). With `conv_is_output`, y is returned too.
void build(GraphFixture& f, bool conv_is_output) {
  const NodeId x = f.input(DType::F32, {int_const(kBatch), int_const(kChannels), int_const(kLength)});
  const NodeId w = f.input(DType::F32, {int_const(kFilters), int_const(kChannels), int_const(kKernel)});
  const NodeId h = f.graph().add(
      pointwise(DType::F32, f.graph().node(x).shape, {x},
                mul(load(0, DType::F32, {loop_var(0), loop_var(1), loop_var(2)}), float_const(2.0))));
  const Expr c = reduce_var(0), r = reduce_var(1);
  const Expr product = mul(load(0, DType::F32, {loop_var(0), c, add(loop_var(2), r)}),
                           load(1, DType::F32, {loop_var(1), c, r}));
  const NodeId y = f.b().convolution(DType::F32, {int_const(kBatch), int_const(kFilters), int_const(kOut)}, h, w,
                                     product, {int_const(kChannels), int_const(kKernel)},
                                     Convolution{{1}, {0}, {1}, 1, nullptr, {}, {}, {}});
  const NodeId out = f.graph().add(
      pointwise(DType::F32, {int_const(kBatch), int_const(kOut), int_const(kFilters)}, {y},
                add(load(0, DType::F32, {loop_var(0), loop_var(2), loop_var(1)}), float_const(1.0))));
  f.output(out);
  if (conv_is_output) f.output(y);
}

std::vector<Host> inputs() {
  std::vector<float> x(kBatch * kChannels * kLength), w(kFilters * kChannels * kKernel);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37 % 23) - 11) / 7.0f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 13 % 17) - 8) / 5.0f;
  return {Host::of(DType::F32, {kBatch, kChannels, kLength}, x), Host::of(DType::F32, {kFilters, kChannels, kKernel}, w)};
}

const Node* the_convolution(const Graph& g) {
  for (const Node& node : g.nodes()) {
    if (node.convolution) return &node;
  }
  return nullptr;
}

void expect_same_outputs(const std::vector<Host>& a, const std::vector<Host>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].sizes, b[k].sizes);
    ASSERT_EQ(a[k].bytes.size(), b[k].bytes.size());
    // The same sums in the same order: bit-identical.
    EXPECT_EQ(std::memcmp(a[k].bytes.data(), b[k].bytes.data(), a[k].bytes.size()), 0) << "output " << k;
  }
}

}  // namespace

TEST(Layout, ConvolutionReadAcrossChannelsMovesChannelsLast) {
  GraphFixture f;
  build(f, false);
  const Graph optimized = passes::optimize(f.graph());
  const Node* conv = the_convolution(optimized);
  ASSERT_NE(conv, nullptr);
  const std::vector<int> last{0, 2, 1};
  EXPECT_EQ(conv->convolution->x_order, last);
  EXPECT_EQ(conv->convolution->y_order, last);
  EXPECT_EQ(conv->convolution->w_order, last);  // 3 channels per group: a channels-last weight copy
  EXPECT_EQ(shape_to_string(conv->shape), shape_to_string({int_const(kBatch), int_const(kOut), int_const(kFilters)}));
  EXPECT_EQ(conv->body, conv->convolution->body);
  // The output reads the stored convolution in its own order: a plain (untransposed) load.
  const Node& out = optimized.node(optimized.outputs[0].node);
  EXPECT_NE(to_string(out.body).find("load0[i0, i1, i2]"), std::string::npos) << to_string(out.body);

  passes::OptimizeOptions logical;
  logical.assign_layouts = false;
  const Node* unmoved = the_convolution(passes::optimize(f.graph(), logical));
  ASSERT_NE(unmoved, nullptr);
  EXPECT_TRUE(unmoved->convolution->y_order.empty());
  expect_same_outputs(f.run(inputs()), f.run(inputs(), logical));
}

TEST(Layout, ReturnedConvolutionKeepsItsLayout) {
  GraphFixture f;
  build(f, true);
  const Graph optimized = passes::optimize(f.graph());
  for (const GraphOutput& o : optimized.outputs) {
    const Node& node = optimized.node(o.node);
    if (node.convolution) EXPECT_TRUE(node.convolution->y_order.empty());
  }
  passes::OptimizeOptions logical;
  logical.assign_layouts = false;
  expect_same_outputs(f.run(inputs()), f.run(inputs(), logical));
}

TEST(Layout, VerifyRefusesAnOrderThatIsNoPermutation) {
  GraphFixture f;
  build(f, false);
  Graph g = f.graph();
  for (const Node& node : g.nodes()) {
    if (!node.convolution) continue;
    auto params = std::make_shared<Convolution>(*node.convolution);
    params->y_order = {0, 1, 1};
    g.node(node.id).convolution = params;
  }
  EXPECT_THROW(g.verify(), Error);
}

TEST(Layout, LogicalOrderOfStoredSizes) {
  EXPECT_EQ(logical_order({2, 5, 4}, {0, 2, 1}), (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(logical_order({2, 8, 8, 96}, {0, 2, 3, 1}), (std::vector<int64_t>{2, 96, 8, 8}));
  EXPECT_EQ(logical_order({6144, 768, 96, 1}, {0, 2, 3, 1}), (std::vector<int64_t>{6144, 1, 768, 96}));
  EXPECT_EQ(logical_order({3, 4}, {}), (std::vector<int64_t>{3, 4}));
}
