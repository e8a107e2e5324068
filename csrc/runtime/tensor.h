// Non-owning views of tensors handed to the core by the binding layer.
#pragma once

#include <cstdint>
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

  int64_t numel() const;
  bool is_contiguous() const;
};

std::string describe(const TensorView& view);  // "float32[4, 13] (cpu, strides [13, 1])"
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);

}  // namespace luminal::runtime
