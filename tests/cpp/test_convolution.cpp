// Half-precision convolutions (ir::Convolution): the node stores the input's dtype while its body
// sums in f32, rounded once when stored. verify() allows that wider body for convolutions alone,
// the CPU executor accumulates wide, and a convolution turned into a pointwise fold (row kernels)
// rounds explicitly.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "common/half.h"
#include "kernel_helpers.h"
#include "passes/row_plan.h"

using namespace luminal;
using namespace luminal::ir;
using luminal::testing::GraphFixture;
using luminal::testing::Host;
using luminal::testing::conv1d;

namespace {

// Makes `id` the graph's output and verifies the graph (throws what verify() raises).
void verify_with_output(GraphFixture& f, NodeId id) {
  f.output(id);
  f.graph().verify();
}

}  // namespace

TEST(ConvolutionIR, VerifyAcceptsAHalfConvolutionWithAFloatBody) {
  for (const DType dtype : {DType::BF16, DType::F16, DType::F32, DType::F64}) {
    GraphFixture f;
    const NodeId conv = conv1d(f, dtype, 2, 3, 4, 6, 3);
    const Node& node = f.graph().node(conv);
    EXPECT_EQ(node.dtype, dtype);
    EXPECT_EQ(node.body->dtype, float_compute_dtype(dtype));
    ASSERT_NE(node.convolution, nullptr);
    EXPECT_NO_THROW(verify_with_output(f, conv)) << dtype_name(dtype);
  }
}

TEST(ConvolutionIR, VerifyRefusesAWiderBodyAnywhereElse) {
  {  // a pointwise bf16 node with an f32 body
    GraphFixture f;
    const NodeId x = f.input(DType::BF16, {int_const(3)});
    Node node;
    node.kind = NodeKind::Pointwise;
    node.dtype = DType::BF16;
    node.shape = {int_const(3)};
    node.inputs = {x};
    node.body = cast(load(0, DType::BF16, {loop_var(0)}), DType::F32);
    node.origin = "test";
    const NodeId id = f.graph().add(std::move(node));
    EXPECT_THROW(verify_with_output(f, id), Error);
  }
  {  // a bf16 reduce that is no convolution, with an f32 body
    GraphFixture f;
    const NodeId conv = conv1d(f, DType::BF16, 1, 2, 2, 4, 2);
    f.graph().node(conv).convolution = nullptr;
    EXPECT_THROW(verify_with_output(f, conv), Error);
  }
  {  // a bf16 convolution whose body is bf16 (summed in bf16: not eager's numerics)
    GraphFixture f;
    const NodeId conv = conv1d(f, DType::BF16, 1, 2, 2, 4, 2);
    Node& node = f.graph().node(conv);
    node.body = cast(node.body, DType::BF16);
    auto params = std::make_shared<Convolution>(*node.convolution);
    params->body = node.body;
    node.convolution = params;
    EXPECT_THROW(verify_with_output(f, conv), Error);
  }
  {  // a bf16 convolution stored as f32 (the old widened form)
    GraphFixture f;
    const NodeId conv = conv1d(f, DType::BF16, 1, 2, 2, 4, 2);
    f.graph().node(conv).dtype = DType::F32;
    EXPECT_THROW(verify_with_output(f, conv), Error);
  }
}

// 256 + 1 + 1: bf16 has 8 bits of mantissa, so a bf16 running sum stays at 256, and a sum rounded
// after each step too; the f32 sum 258 rounded once is 258.
TEST(ConvolutionIR, CpuSumsWideAndRoundsOnce) {
  GraphFixture f;
  const NodeId conv = conv1d(f, DType::BF16, 1, 3, 1, 1, 1);
  f.output(conv);
  const std::vector<uint16_t> x{float_to_bf16_bits(256.0f), float_to_bf16_bits(1.0f), float_to_bf16_bits(1.0f)};
  const std::vector<uint16_t> w(3, float_to_bf16_bits(1.0f));
  const auto out =
      f.run({Host::of<uint16_t>(DType::BF16, {1, 3, 1}, x), Host::of<uint16_t>(DType::BF16, {1, 3, 1}, w)});
  ASSERT_EQ(out[0].dtype, DType::BF16);
  EXPECT_EQ(bf16_bits_to_float(out[0].data<uint16_t>()[0]), 258.0f);
}

// Against a double reference rounded once, on varied values (f16 and bf16).
TEST(ConvolutionIR, CpuHalfConvolutionMatchesAReferenceRoundedOnce) {
  for (const DType dtype : {DType::BF16, DType::F16}) {
    GraphFixture f;
    constexpr int64_t N = 2, C = 3, K = 4, L = 7, R = 3, O = L - R + 1;
    f.output(conv1d(f, dtype, N, C, K, L, R));
    const auto to_bits = [&](float v) { return dtype == DType::BF16 ? float_to_bf16_bits(v) : float_to_half_bits(v); };
    const auto to_float = [&](uint16_t b) {
      return dtype == DType::BF16 ? bf16_bits_to_float(b) : half_bits_to_float(b);
    };
    std::vector<uint16_t> x(N * C * L), w(K * C * R);
    for (size_t i = 0; i < x.size(); ++i) x[i] = to_bits(std::sin(0.7f * static_cast<float>(i)) * 3.0f);
    for (size_t i = 0; i < w.size(); ++i) w[i] = to_bits(std::cos(1.3f * static_cast<float>(i)));
    const auto out = f.run({Host::of<uint16_t>(dtype, {N, C, L}, x), Host::of<uint16_t>(dtype, {K, C, R}, w)});
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < K; ++k) {
        for (int64_t o = 0; o < O; ++o) {
          double sum = 0;
          for (int64_t c = 0; c < C; ++c) {
            for (int64_t r = 0; r < R; ++r) {
              sum += static_cast<double>(to_float(x[(n * C + c) * L + o + r])) * to_float(w[(k * C + c) * R + r]);
            }
          }
          const uint16_t got = out[0].data<uint16_t>()[(n * K + k) * O + o];
          EXPECT_EQ(got, to_bits(static_cast<float>(sum)))
              << dtype_name(dtype) << " at " << n << ", " << k << ", " << o;
        }
      }
    }
  }
}

// A row kernel folds a convolution into a pointwise node: the fold is rounded to the node's dtype
// by an explicit cast, so the pointwise node verifies (its body has its dtype).
TEST(ConvolutionIR, AsAPointwiseFoldTheSumIsRounded) {
  GraphFixture f;
  const NodeId conv = conv1d(f, DType::BF16, 2, 3, 4, 6, 3);
  f.output(conv);
  const Node pointwise = passes::reduce_as_pointwise(f.graph().node(conv));
  EXPECT_EQ(pointwise.kind, NodeKind::Pointwise);
  EXPECT_EQ(pointwise.convolution, nullptr);
  EXPECT_EQ(pointwise.dtype, DType::BF16);
  ASSERT_EQ(pointwise.body->op, ExprOp::Cast);
  EXPECT_EQ(pointwise.body->dtype, DType::BF16);
  EXPECT_EQ(pointwise.body->args[0]->dtype, DType::F32);
  f.graph().node(conv) = pointwise;
  EXPECT_NO_THROW(f.graph().verify());
}
