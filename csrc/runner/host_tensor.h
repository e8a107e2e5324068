// A dense, row-major tensor in host memory that owns its bytes: what the runner reads from a .npy
// file and what it returns as an output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "runtime/tensor.h"

namespace luminal::runner {

class HostTensor {
 public:
  HostTensor() = default;
  // Zero-filled storage for a dense tensor of these sizes (byte count overflow-checked, and at most
  // max_tensor_bytes(); `what` names the tensor in the error).
  HostTensor(DType dtype, std::vector<int64_t> sizes, const std::string& what);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return nbytes_; }
  const unsigned char* data() const { return storage_.data(); }
  unsigned char* data() { return storage_.data(); }
  // A contiguous view of the storage for the core (CPU).
  runtime::TensorView view();
  std::string describe() const;  // "float32[4, 13]"

 private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> sizes_;
  int64_t numel_ = 0;
  size_t nbytes_ = 0;
  // At least one byte, so that data() is never null; new[]'s alignment (16 bytes) covers every dtype.
  std::vector<unsigned char> storage_;
};

}  // namespace luminal::runner
