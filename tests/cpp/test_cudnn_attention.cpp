// Which attentions luminal hands to cuDNN's SDPA operation (runtime/cuda/cudnn_attention.h): the
// refusal rules are pure, so they are checked here without a GPU; running cuDNN is checked against
// eager on the device (tests/test_cudnn_attention.py).
#if LUMINAL_HAVE_CUDA
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "runtime/cuda/cudnn_attention.h"

namespace luminal {
namespace {

using cuda::AttentionProblem;
using cuda::cudnn_attention_refusal;

// q/k/v as strided views of one [B, L, 3H, D] projection, the output contiguous: ViT's attention.
AttentionProblem vit_like() {
  AttentionProblem p;
  p.dtype = DType::BF16;
  const int64_t b = 2, h = 4, l = 197, d = 64;
  p.q_sizes = p.k_sizes = p.v_sizes = p.o_sizes = {b, h, l, d};
  p.q_strides = p.k_strides = p.v_strides = {l * 3 * h * d, d, 3 * h * d, 1};
  p.o_strides = {h * l * d, l * d, d, 1};
  p.scale = 0.125f;
  p.alignment = 128;
  return p;
}

TEST(CudnnAttentionRefusal, TakesStridedHalfPrecisionViews) {
  EXPECT_EQ(cudnn_attention_refusal(vit_like()), std::nullopt);
  AttentionProblem f16 = vit_like();
  f16.dtype = DType::F16;
  EXPECT_EQ(cudnn_attention_refusal(f16), std::nullopt);
}

TEST(CudnnAttentionRefusal, TakesGroupedQueryHeads) {
  AttentionProblem p = vit_like();
  p.k_sizes[1] = p.v_sizes[1] = 2;
  EXPECT_EQ(cudnn_attention_refusal(p), std::nullopt);
  p.k_sizes[1] = p.v_sizes[1] = 3;  // 4 query heads do not share 3 kv heads evenly
  EXPECT_NE(cudnn_attention_refusal(p), std::nullopt);
}

TEST(CudnnAttentionRefusal, RefusesWhatTheOperationCannotCompute) {
  const auto refusal = [](void (*change)(AttentionProblem&)) {
    AttentionProblem p = vit_like();
    change(p);
    return cudnn_attention_refusal(p).value_or("");
  };
  EXPECT_NE(refusal([](AttentionProblem& p) { p.dtype = DType::F32; }).find("float32"), std::string::npos);
  EXPECT_NE(refusal([](AttentionProblem& p) { p.dtype = DType::F64; }).find("float64"), std::string::npos);
  EXPECT_NE(refusal([](AttentionProblem& p) { p.q_sizes[3] = p.k_sizes[3] = 60; }).find("head sizes"),
            std::string::npos);
  EXPECT_NE(refusal([](AttentionProblem& p) { p.v_sizes[3] = p.o_sizes[3] = 264; }).find("head sizes"),
            std::string::npos);
  EXPECT_NE(refusal([](AttentionProblem& p) { p.k_strides[3] = 2; }).find("not contiguous"), std::string::npos);
  EXPECT_NE(refusal([](AttentionProblem& p) { p.alignment = 8; }).find("aligned"), std::string::npos);
  EXPECT_NE(refusal([](AttentionProblem& p) { p.o_sizes[2] = 196; }).find("do not pair up"), std::string::npos);
  EXPECT_NE(refusal([](AttentionProblem& p) { p.v_sizes[2] = 100; }).find("do not pair up"), std::string::npos);
  EXPECT_NE(refusal([](AttentionProblem& p) { p.q_sizes.pop_back(); }).find("rank 4"), std::string::npos);
  EXPECT_NE(refusal([](AttentionProblem& p) { p.k_sizes[2] = p.v_sizes[2] = 0; }).find("empty"), std::string::npos);
  EXPECT_NE(refusal([](AttentionProblem& p) { p.q_sizes[2] = p.o_sizes[2] = 0; }).find("empty"), std::string::npos);
}

}  // namespace
}  // namespace luminal
#endif
