// runtime::MutatedInputOverlap: inputs updated in place must share no memory with other inputs.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/input_overlap.h"

namespace luminal {
namespace {

using runtime::MutatedInputOverlap;
using runtime::TensorView;

alignas(64) float memory[4096];

// A float view of `count` elements from element `offset` of `memory`, with `stride`.
TensorView view_at(int64_t offset, int64_t count, int64_t stride = 1,
                   runtime::DeviceType device = runtime::DeviceType::CPU) {
  TensorView v;
  v.data = memory + offset;
  v.dtype = DType::F32;
  v.sizes = {count};
  v.strides = {stride};
  v.device = runtime::Device{device, 0};
  return v;
}

using Pair = std::optional<std::pair<size_t, size_t>>;

TEST(MutatedInputOverlap, DisjointInputsPass) {
  const MutatedInputOverlap check({true, false, true});
  EXPECT_EQ(check.find({view_at(0, 10), view_at(10, 10), view_at(20, 10)}), Pair{});
}

TEST(MutatedInputOverlap, AMutatedInputSharingMemoryIsFound) {
  const MutatedInputOverlap check({false, true});
  EXPECT_EQ(check.find({view_at(0, 10), view_at(9, 10)}), Pair(std::make_pair(1, 0)));
  EXPECT_EQ(check.find({view_at(9, 10), view_at(0, 10)}), Pair(std::make_pair(1, 0)));  // either order in memory
}

TEST(MutatedInputOverlap, InputsOnlyReadMayShareMemory) {
  const MutatedInputOverlap check({false, false, true});
  EXPECT_EQ(check.find({view_at(0, 10), view_at(5, 10), view_at(100, 4)}), Pair{});
}

TEST(MutatedInputOverlap, InterleavedViewsCountAsOverlapping) {
  const MutatedInputOverlap check({true, false});
  EXPECT_NE(check.find({view_at(0, 10, 2), view_at(1, 10, 2)}), Pair{});
}

TEST(MutatedInputOverlap, EmptyInputsAndOtherDevicesTouchNothing) {
  const MutatedInputOverlap check({true, false, false});
  EXPECT_EQ(check.find({view_at(0, 10), view_at(0, 0), view_at(0, 10, 1, runtime::DeviceType::CUDA)}), Pair{});
}

// Repeated calls start from the last order of addresses: inputs that moved (a new token tensor
// each call), reversed orders and new overlaps are all still found.
TEST(MutatedInputOverlap, RepeatedCallsWithMovingInputs) {
  const size_t n = 200;
  std::vector<bool> mutated(n, false);
  for (size_t k = 0; k < n; k += 4) mutated[k] = true;
  const MutatedInputOverlap check(mutated);
  std::vector<TensorView> inputs;
  for (size_t k = 0; k < n; ++k) inputs.push_back(view_at(static_cast<int64_t>(10 * k), 10));
  EXPECT_EQ(check.find(inputs), Pair{});
  inputs[1] = view_at(3000, 5);  // moved far
  EXPECT_EQ(check.find(inputs), Pair{});
  std::vector<TensorView> reversed(inputs.rbegin(), inputs.rend());
  std::vector<bool> reversed_mutated(mutated.rbegin(), mutated.rend());
  EXPECT_EQ(MutatedInputOverlap(reversed_mutated).find(reversed), Pair{});
  inputs[1] = view_at(45, 10);  // now overlaps mutated input 4 ([40, 50))
  EXPECT_EQ(check.find(inputs), Pair(std::make_pair(4, 1)));
  inputs[1] = view_at(3000, 5);
  EXPECT_EQ(check.find(inputs), Pair{});
}

// find_involving checks only the pairs with a moved input: after a call find() passed, it agrees
// with find() on whether the inputs overlap, wherever the moved ones land.
TEST(MutatedInputOverlap, OnlyMovedInputsAgreeWithAFullCheck) {
  const size_t n = 40;
  std::vector<bool> mutated(n, false);
  for (size_t k = 0; k < n; k += 3) mutated[k] = true;
  const MutatedInputOverlap check(mutated);
  std::vector<TensorView> placed;
  for (size_t k = 0; k < n; ++k) placed.push_back(view_at(static_cast<int64_t>(50 * k), 20));
  ASSERT_EQ(check.find(placed), Pair{});
  size_t overlaps = 0;
  for (const size_t moving : {size_t{1}, size_t{3}}) {  // read only; updated in place
    for (int64_t offset = 0; offset < 50 * static_cast<int64_t>(n); offset += 7) {
      std::vector<TensorView> inputs = placed;
      inputs[moving] = view_at(offset, 20);
      const Pair full = check.find(inputs), moved = check.find_involving(inputs, {moving});
      EXPECT_EQ(full.has_value(), moved.has_value()) << "input " << moving << " at " << offset;
      if (moved) {
        EXPECT_TRUE(moved->first == moving || moved->second == moving);
        EXPECT_TRUE(mutated[moved->first]);
        ++overlaps;
      }
    }
  }
  EXPECT_GT(overlaps, 0u);
  EXPECT_EQ(check.find_involving(placed, {}), Pair{});
  // Many moved (the full sweep): an overlap among them is still found.
  std::vector<TensorView> shifted = placed;
  std::vector<size_t> all(n);
  for (size_t k = 0; k < n; ++k) {
    shifted[k] = view_at(static_cast<int64_t>(50 * k + 25), 20);
    all[k] = k;
  }
  EXPECT_EQ(check.find_involving(shifted, all), Pair{});
  shifted[1] = view_at(150, 20);  // [150, 170): between inputs 2 and 3
  EXPECT_EQ(check.find_involving(shifted, all), Pair{});
  shifted[1] = view_at(180, 20);  // [180, 200) meets mutated input 3 at [175, 195)
  EXPECT_EQ(check.find_involving(shifted, all), Pair(std::make_pair(3, 1)));
}

}  // namespace
TEST(MutatedInputOverlap, AWrittenInputWhoseElementsShareMemoryIsFound) {
  const MutatedInputOverlap check({false, true});
  const auto with_layout = [](std::vector<int64_t> sizes, std::vector<int64_t> strides) {
    TensorView v = view_at(0, 1);
    v.sizes = std::move(sizes);
    v.strides = std::move(strides);
    return v;
  };
  const TensorView plain = with_layout({4, 3}, {3, 1});
  EXPECT_EQ(check.find_self_overlapping({plain, plain}, nullptr), std::nullopt);
  EXPECT_EQ(check.find_self_overlapping({plain, with_layout({4, 3}, {1, 4})}, nullptr), std::nullopt);  // transposed
  EXPECT_EQ(check.find_self_overlapping({plain, with_layout({4, 1, 3}, {3, 0, 1})}, nullptr), std::nullopt);
  EXPECT_EQ(check.find_self_overlapping({plain, with_layout({4, 0}, {0, 0})}, nullptr), std::nullopt);  // empty
  EXPECT_EQ(check.find_self_overlapping({plain, with_layout({4, 3}, {0, 1})}, nullptr), 1u);  // expanded
  EXPECT_EQ(check.find_self_overlapping({plain, with_layout({4, 3}, {2, 1})}, nullptr), 1u);  // strides overlap
  // Only inputs written in place count, and with candidates only those are looked at.
  EXPECT_EQ(check.find_self_overlapping({with_layout({4, 3}, {0, 1}), plain}, nullptr), std::nullopt);
  const std::vector<size_t> none_moved;
  EXPECT_EQ(check.find_self_overlapping({plain, with_layout({4, 3}, {0, 1})}, &none_moved), std::nullopt);
}

}  // namespace luminal
