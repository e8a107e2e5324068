// Whether a call's inputs that the graph updates in place share memory with other inputs: then the
// compiled graph would not see an update through the alias as eager does, and the call must run
// in eager. Checked on every call of a graph that updates inputs (a decode step's KV caches and
// step counters: hundreds of tensors), so it is linear in the inputs on repeated calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace luminal::runtime {

class MutatedInputOverlap {
 public:
  // `mutated[k]`: whether input k is updated in place.
  explicit MutatedInputOverlap(std::vector<bool> mutated) : mutated_(std::move(mutated)) {}

  // The first pair (mutated input, other input) whose memory may overlap, conservatively (by byte
  // extent: interleaved views that share no element count as overlapping); nullopt when none does.
  // `inputs` must have one view per input.
  std::optional<std::pair<size_t, size_t>> find(const std::vector<TensorView>& inputs) const;

  // find() for a call whose inputs are those of a call find() passed, except `moved` (their memory
  // changed): only the pairs with a moved input can overlap now, so only those are checked (a
  // decode step's new token and position tensors against the caches: no sort of them all). With
  // more than a few moved, it is find().
  std::optional<std::pair<size_t, size_t>> find_involving(const std::vector<TensorView>& inputs,
                                                          const std::vector<size_t>& moved) const;

  // The first input updated in place, among `candidates` (every input when null), whose elements
  // may share memory with each other (an expanded tensor: a stride of 0 over a size above 1; or
  // strides that do not nest). Eager's in-place ops refuse the first kind ("more than one element
  // of the written-to tensor refers to a single memory location") and write the second in their
  // own order; the compiled graph would write either without a word.
  std::optional<size_t> find_self_overlapping(const std::vector<TensorView>& inputs,
                                              const std::vector<size_t>* candidates) const;

 private:
  struct Extent {
    int device_type = 0, device_index = 0;
    uintptr_t first = 0, last = 0;  // [first, last) bytes
    size_t input = 0;
    bool before(const Extent& other) const;
  };
  void sort_extents(std::vector<Extent>& extents) const;

  std::vector<bool> mutated_;
  // The inputs in the order of their addresses at the last call: sorting starts from it, and the
  // same inputs at the same addresses (weights, caches) leave only the few new ones to move.
  mutable std::mutex mutex_;
  mutable std::vector<size_t> last_order_;
};

}  // namespace luminal::runtime
