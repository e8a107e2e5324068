// Non-owning views of tensors handed to the core by the binding layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace luminal::runtime {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
};

std::string device_name(const Device& device);

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in elements
  Device device;
  // A complex64 (complex128) tensor seen as its f32 (f64) pairs: sizes and strides with a last
  // dimension of 2 (what torch.view_as_real gives). Binds only inputs the graph takes as complex.
  bool complex_pairs = false;

  int64_t numel() const;
  bool is_contiguous() const;
};

std::string describe(const TensorView& view);  // "float32[4, 13] (cpu, strides [13, 1])"
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);

// The element offsets of the lowest and the highest element a strided tensor reaches, relative to
// its first element (negative strides reach below it); nullopt for zero elements.
struct ElementSpan {
  int64_t low = 0, high = 0;
};
std::optional<ElementSpan> element_span(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);

}  // namespace luminal::runtime
