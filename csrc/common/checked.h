// Checked integer arithmetic for element and byte counts.
//
// Sizes, strides and offsets reach the core from data it does not control: a .pt2 archive (which
// users download and share), symbol values bound at call time, and shape expressions evaluated
// over them. A product that wraps around (an f32 [2**62, 4] tensor "needs" 0 bytes) turns into a
// too-small allocation and writes far past it, so every such count is computed here, and an
// overflow or a negative size raises luminal::Error naming the tensor and its shape instead.
//
// `what` names the tensor (node, weight or output name) for the message; it is only read when
// the check fails, so callers pass a cheap std::string_view even on per-call paths.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "common/dtype.h"
#include "common/error.h"

namespace luminal {

// "[2, 3]": sizes and strides in messages.
inline std::string int_list(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) fail(what, ": integer overflow: ", a, " + ", b, " does not fit in int64");
  return out;
}

inline int64_t checked_sub(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) fail(what, ": integer overflow: ", a, " - ", b, " does not fit in int64");
  return out;
}

inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) fail(what, ": integer overflow: ", a, " * ", b, " does not fit in int64");
  return out;
}

inline size_t checked_add(size_t a, size_t b, std::string_view what) {
  size_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) fail(what, ": integer overflow: ", a, " + ", b, " bytes");
  return out;
}

inline size_t checked_mul(size_t a, size_t b, std::string_view what) {
  size_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) fail(what, ": integer overflow: ", a, " * ", b, " bytes");
  return out;
}

// The number of elements of a tensor of these sizes. Raises for a negative size, and for a
// product that does not fit in int64 (a shape with a zero size has no elements, whatever the
// others are).
inline int64_t element_count(const std::vector<int64_t>& sizes, std::string_view what) {
  int64_t count = 1;
  bool overflow = false, empty = false;
  for (const int64_t size : sizes) {
    if (size < 0) fail(what, ": negative size in shape ", int_list(sizes));
    empty = empty || size == 0;
    overflow = overflow || __builtin_mul_overflow(count, size, &count);
  }
  if (empty) return 0;
  if (overflow) fail(what, ": the element count of shape ", int_list(sizes), " does not fit in int64");
  return count;
}

// Bytes of `count` elements of `element_size` bytes each; at most INT64_MAX so that the result
// is also a valid pointer offset.
inline size_t byte_count(int64_t count, size_t element_size, std::string_view what) {
  if (count < 0) fail(what, ": negative element count ", count);
  int64_t bytes = 0;
  if (element_size > static_cast<size_t>(std::numeric_limits<int64_t>::max()) ||
      __builtin_mul_overflow(count, static_cast<int64_t>(element_size), &bytes)) {
    fail(what, ": ", count, " elements of ", element_size, " bytes do not fit in a 64-bit byte count");
  }
  return static_cast<size_t>(bytes);
}

inline size_t byte_count(int64_t count, DType dtype, std::string_view what) {
  return byte_count(count, dtype_size(dtype), what);
}

// Bytes of a dense tensor of these sizes and dtype (both checks above, the shape in the message).
inline size_t tensor_bytes(const std::vector<int64_t>& sizes, DType dtype, std::string_view what) {
  const int64_t count = element_count(sizes, what);
  int64_t bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<int64_t>(dtype_size(dtype)), &bytes)) {
    fail(what, ": a ", dtype_name(dtype), " tensor of shape ", int_list(sizes), " needs more than 2**63 bytes");
  }
  return static_cast<size_t>(bytes);
}

// The number of storage elements a strided view reaches: storage_offset + 1 + sum((size - 1) *
// stride), or 0 for an empty view. Sizes, strides and the offset must be non-negative (the core
// reads weights and constants only through such views) and every step must fit in int64.
inline int64_t strided_storage_elements(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                                        int64_t storage_offset, std::string_view what) {
  const auto describe = [&] {
    return str_cat("sizes ", int_list(sizes), ", strides ", int_list(strides),
                   ", storage_offset ", storage_offset);
  };
  if (sizes.size() != strides.size()) fail(what, ": ", sizes.size(), " sizes but ", strides.size(), " strides");
  if (storage_offset < 0) fail(what, ": negative storage offset (", describe(), ")");
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) fail(what, ": negative size or stride (", describe(), ")");
    empty = empty || sizes[d] == 0;
  }
  if (empty) return 0;
  int64_t last = storage_offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t reach = 0;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) || __builtin_add_overflow(last, reach, &last)) {
      fail(what, ": the view reaches past int64 elements (", describe(), ")");
    }
  }
  if (last == std::numeric_limits<int64_t>::max()) fail(what, ": the view reaches past int64 elements (", describe(), ")");
  return last + 1;
}

// The machine's physical memory in bytes (INT64_MAX if unknown).
inline int64_t physical_memory_bytes() {
  static const int64_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
    int64_t total = 0;
    if (pages <= 0 || page_size <= 0 || __builtin_mul_overflow(int64_t{pages}, int64_t{page_size}, &total)) {
      return std::numeric_limits<int64_t>::max();
    }
    return total;
  }();
  return bytes;
}

// A complex tensor's layout as its real pairs, as torch.view_as_real sees it: strides counted in
// real elements (twice the complex ones) and a last dimension of 2 with stride 1. One rule for the
// bindings, the frontend's complex constants and the runner's complex state.
inline void complex_layout_as_pairs(std::vector<int64_t>& sizes, std::vector<int64_t>& strides, std::string_view what) {
  for (int64_t& stride : strides) stride = checked_mul(stride, int64_t{2}, what);
  sizes.push_back(2);
  strides.push_back(1);
}

// The most bytes one tensor of a graph may need, whatever device runs it: this machine's memory,
// or 256 GiB (more than any single accelerator holds today) if that is more. Eager would have to
// allocate such a tensor; luminal, which may fuse it away, would otherwise spend hours computing
// it (an archive declaring an f32 [2**57, 4] intermediate). The CPU engine also refuses, at run
// time, graphs whose tensors exceed this machine's memory (runtime/compiled.cpp).
inline int64_t max_tensor_bytes() { return std::max<int64_t>(physical_memory_bytes(), int64_t{256} << 30); }

// tensor_bytes, also refusing a tensor larger than max_tensor_bytes().
inline size_t feasible_tensor_bytes(const std::vector<int64_t>& sizes, DType dtype, std::string_view what) {
  const size_t bytes = tensor_bytes(sizes, dtype, what);
  if (static_cast<int64_t>(bytes) > max_tensor_bytes()) {
    fail(what, ": a ", dtype_name(dtype), " tensor of shape ", int_list(sizes), " needs ", bytes,
         " bytes, more than any device can hold (", max_tensor_bytes(), " bytes: this machine's memory or 256 GiB)");
  }
  return bytes;
}

}  // namespace luminal
