#include "runtime/input_overlap.h"

#include <algorithm>
#include <limits>

#include "common/dtype.h"

namespace luminal::runtime {

namespace {

// The bytes a strided view can touch: [first, last) (empty for zero elements).
std::pair<uintptr_t, uintptr_t> byte_extent(const TensorView& view) {
  const std::optional<ElementSpan> span = element_span(view.sizes, view.strides);
  if (!span) return {0, 0};
  const auto base = reinterpret_cast<uintptr_t>(view.data);
  const auto item = static_cast<int64_t>(dtype_size(view.dtype));
  return {base + span->low * item, base + (span->high + 1) * item};
}

// Whether `b` touches a byte of [a_first, a_last), the extent of a non-empty view on `a_device`.
bool reaches(const Device& a_device, uintptr_t a_first, uintptr_t a_last, const TensorView& b) {
  if (a_device.type != b.device.type || a_device.index != b.device.index) return false;
  const auto [b_first, b_last] = byte_extent(b);
  return b_first < b_last && a_first < b_last && b_first < a_last;
}

}  // namespace

std::optional<std::pair<size_t, size_t>> MutatedInputOverlap::find_involving(const std::vector<TensorView>& inputs,
                                                                             const std::vector<size_t>& moved) const {
  if (inputs.size() != mutated_.size()) return std::nullopt;  // another count: binding raises
  // Each moved input costs a pass over the others: past a few, one sorted sweep of all is cheaper.
  constexpr size_t kMostMovedForPairs = 8;
  if (moved.size() > kMostMovedForPairs) return find(inputs);
  for (const size_t k : moved) {
    const auto [first, last] = byte_extent(inputs[k]);  // once per moved input, not per pair
    if (first == last) continue;                         // no elements: it overlaps nothing
    for (size_t other = 0; other < inputs.size(); ++other) {
      if (other == k || !(mutated_[k] || mutated_[other])) continue;
      if (reaches(inputs[k].device, first, last, inputs[other])) {
        return mutated_[k] ? std::make_pair(k, other) : std::make_pair(other, k);
      }
    }
  }
  return std::nullopt;
}

namespace {

// Whether distinct indices of the view may reach one element: with the dimensions of size above 1
// sorted by stride, each stride must exceed the farthest offset the dimensions before it reach.
bool may_share_elements(const TensorView& view) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size)
  for (size_t d = 0; d < view.sizes.size(); ++d) {
    if (view.sizes[d] == 0) return false;  // no elements
    if (view.sizes[d] > 1) dims.emplace_back(view.strides[d] < 0 ? -view.strides[d] : view.strides[d], view.sizes[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // the largest offset the dimensions so far reach
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return true;
    if (stride > (std::numeric_limits<int64_t>::max() - reach) / (size - 1)) return false;  // beyond any memory
    reach += stride * (size - 1);
  }
  return false;
}

}  // namespace

std::optional<size_t> MutatedInputOverlap::find_self_overlapping(const std::vector<TensorView>& inputs,
                                                                 const std::vector<size_t>* candidates) const {
  if (inputs.size() != mutated_.size()) return std::nullopt;  // another count: binding raises
  const auto check = [&](size_t k) { return mutated_[k] && may_share_elements(inputs[k]); };
  if (candidates) {
    for (const size_t k : *candidates) {
      if (check(k)) return k;
    }
    return std::nullopt;
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (check(k)) return k;
  }
  return std::nullopt;
}

bool MutatedInputOverlap::Extent::before(const Extent& other) const {
  if (device_type != other.device_type) return device_type < other.device_type;
  if (device_index != other.device_index) return device_index < other.device_index;
  return first < other.first;
}

// Insertion sort from the last call's order: linear when few inputs moved. One that moves far
// (another graph's order, the first call) switches to std::sort.
void MutatedInputOverlap::sort_extents(std::vector<Extent>& extents) const {
  const size_t budget = 8 * extents.size() + 64;
  size_t moves = 0;
  for (size_t i = 1; i < extents.size() && moves <= budget; ++i) {
    const Extent moving = extents[i];
    size_t j = i;
    for (; j > 0 && moving.before(extents[j - 1]) && moves <= budget; --j, ++moves) extents[j] = extents[j - 1];
    extents[j] = moving;
  }
  if (moves > budget) {
    std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.before(b); });
  }
}

std::optional<std::pair<size_t, size_t>> MutatedInputOverlap::find(const std::vector<TensorView>& inputs) const {
  if (inputs.size() != mutated_.size()) return std::nullopt;  // another count: binding raises
  const std::lock_guard<std::mutex> lock(mutex_);
  if (last_order_.size() != inputs.size()) {
    last_order_.resize(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) last_order_[k] = k;
  }
  thread_local std::vector<Extent> extents;
  extents.clear();
  for (const size_t k : last_order_) {
    const auto [first, last] = byte_extent(inputs[k]);
    const Device& device = inputs[k].device;
    extents.push_back({static_cast<int>(device.type), device.index, first, last, k});
  }
  sort_extents(extents);
  for (size_t i = 0; i < extents.size(); ++i) last_order_[i] = extents[i].input;
  // One sweep: the furthest end among the extents already swept (of any input, and of mutated ones).
  const Extent* reach_any = nullptr;
  const Extent* reach_mutated = nullptr;
  for (const Extent& extent : extents) {
    if (extent.first == extent.last) continue;  // no elements
    if (reach_any && (reach_any->device_type != extent.device_type || reach_any->device_index != extent.device_index)) {
      reach_any = reach_mutated = nullptr;
    }
    if (mutated_[extent.input] && reach_any && extent.first < reach_any->last) {
      return std::make_pair(extent.input, reach_any->input);
    }
    if (reach_mutated && extent.first < reach_mutated->last) return std::make_pair(reach_mutated->input, extent.input);
    if (!reach_any || extent.last > reach_any->last) reach_any = &extent;
    if (mutated_[extent.input] && (!reach_mutated || extent.last > reach_mutated->last)) reach_mutated = &extent;
  }
  return std::nullopt;
}

}  // namespace luminal::runtime
