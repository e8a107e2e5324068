// The runner's side of the CUDA engine, torch-free: the device (its primary context, the one a
// framework in the same process would share), device memory from cuMemAlloc, and the copies the
// host convenience path makes. Every CUDA library is loaded at run time (runtime/cuda/api.h); in a
// build without the CUDA toolkit's headers each function here raises, saying so.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "runtime/compiled.h"
#include "runtime/tensor.h"

namespace luminal::runner {

// Registers directories searched first for libnvrtc, libcublasLt and libcudnn (runtime/cuda/api.h),
// then /usr/local/cuda/lib64. NVRTC also serves the CPU engine's LUMINAL_CHECK_CUDA_CODEGEN check.
void register_cuda_library_dirs(std::vector<std::string> dirs);

// Device memory that frees itself (with its device's context made current) when the last handle goes.
using DeviceMemory = std::shared_ptr<void>;

// Puts back, when it leaves scope, the CUDA context that was current on the thread when it was
// made (cuda::CurrentContextGuard): every runner entry point that makes its device current holds
// one, so that the caller's current device is the same after the call.
class CallerContext {
 public:
  CallerContext();
  ~CallerContext();
  CallerContext(const CallerContext&) = delete;
  CallerContext& operator=(const CallerContext&) = delete;

 private:
  struct Saved;
  std::unique_ptr<Saved> saved_;
};

class CudaDevice {
 public:
  // Loads the driver and checks that device `index` exists; raises an error naming what is missing
  // otherwise.
  explicit CudaDevice(int index);
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  int index() const { return index_; }
  // Makes the device's primary context current on the calling thread (every entry point calls it).
  void make_current() const;
  DeviceMemory allocate(size_t bytes) const;
  // The call context of the engine: this device, `stream`, the TF32 settings, this allocator.
  runtime::CudaCallContext context(void* stream, bool allow_tf32_matmul, bool allow_tf32_convolution) const;

  void copy_to_device(void* device, const void* host, size_t bytes, void* stream) const;
  void copy_to_host(void* host, const void* device, size_t bytes, void* stream) const;
  void copy_on_device(void* to, const void* from, size_t bytes, void* stream) const;
  void fill(void* device, unsigned char value, size_t bytes, void* stream) const;
  void synchronize(void* stream) const;
  // Whether `stream` is being captured into a CUDA graph (any capture status but none).
  bool capturing(void* stream) const;

  // The files the CUDA libraries are loaded from ("libcublasLt: /path/libcublasLt.so.12"), one per
  // line (loading them where not yet loaded): the bits depend on them (README, "luminal-run on CUDA").
  static std::string loaded_libraries();

 private:
  struct Impl;
  int index_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace luminal::runner
