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

}  // namespace
}  // namespace luminal
