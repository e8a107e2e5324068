#include "runtime/tensor.h"

#include <algorithm>

#include "common/error.h"

namespace luminal::runtime {

std::string device_name(const Device& device) {
  return device.type == DeviceType::CPU ? std::string("cpu") : str_cat("cuda:", device.index);
}

std::optional<ElementSpan> element_span(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  ElementSpan span;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return std::nullopt;
    const int64_t reach = (sizes[d] - 1) * strides.at(d);
    (reach < 0 ? span.low : span.high) += reach;
  }
  return span;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// As torch defines it: a tensor without elements is contiguous whatever its strides (at::empty of
// [2, 0] has strides [1, 1]).
bool TensorView::is_contiguous() const {
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return true;
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  return strides;
}

namespace {

std::string list(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace

std::string describe(const TensorView& view) {
  std::string out = str_cat(dtype_name(view.dtype), list(view.sizes), " (", device_name(view.device));
  if (view.complex_pairs) out += ", the pairs of a complex tensor";
  if (!view.is_contiguous()) out += ", strides " + list(view.strides);
  return out + ")";
}

}  // namespace luminal::runtime
