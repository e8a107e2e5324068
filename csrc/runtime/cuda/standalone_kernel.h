// A CUDA kernel from its source, compiled with NVRTC and launched through the driver API or added to
// a CUDA graph as a kernel node: the reference rows of the benchmarks launch their hand-written
// kernels through it, and the generated GEMV (runtime/cuda/gemv.h) its own.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/api.h"

namespace luminal::cuda {

// One kernel parameter, in the C type the kernel declares: a pointer (`T*`), `long long` or `float`.
struct KernelArgument {
  enum class Kind { Pointer, Int64, Float32 };
  Kind kind = Kind::Int64;
  uint64_t bits = 0;  // the pointer, the integer, or the float's bits in the low 4 bytes

  static KernelArgument pointer(const void* address);
  static KernelArgument int64(int64_t value);
  static KernelArgument float32(float value);
  size_t size() const { return kind == Kind::Float32 ? sizeof(float) : sizeof(uint64_t); }
};

struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;  // dynamic shared memory
};

// Where a launch's arguments live until the driver has copied them (the launch, or the graph node
// being added).
struct KernelArgumentSlots {
  std::vector<uint64_t> values;
  std::vector<void*> pointers;  // to values
};

class StandaloneKernel {
 public:
  // Nothing is compiled yet: the first launch on a device compiles `source` for its architecture
  // (NVRTC's caches apply) and loads `name` from it.
  StandaloneKernel(std::string source, std::string name);
  ~StandaloneKernel();
  StandaloneKernel(const StandaloneKernel&) = delete;
  StandaloneKernel& operator=(const StandaloneKernel&) = delete;

  // Enqueues the kernel on `stream` of `device` (its primary context, the one torch uses). Raises
  // when the launch shape is empty, or when the arguments do not match the kernel's parameters in
  // number or size (where the driver can say: cuFuncGetParamInfo, CUDA 12.4 and newer).
  void launch(int device, const LaunchShape& shape, CUstream stream, const std::vector<KernelArgument>& arguments);
  // The same launch as a CUDA graph kernel node's parameters, pointing into `slots` (which must
  // outlive adding the node). Compiles and loads like launch().
  CUDA_KERNEL_NODE_PARAMS node_params(int device, const LaunchShape& shape, const std::vector<KernelArgument>& arguments,
                                      KernelArgumentSlots& slots);

  const std::string& name() const { return name_; }

  // Compiles `source` for `arch` ("sm_90") and checks that the cubin holds `name` as an entry
  // point; needs NVRTC, no GPU. Returns the cubin's size in bytes.
  static size_t check_compiles(const std::string& source, const std::string& name, const std::string& arch);

 private:
  struct Loaded {
    CUcontext context = nullptr;
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    std::vector<size_t> parameter_sizes;  // empty: the driver cannot say
  };
  Loaded& loaded_on(int device);

  std::string source_, name_;
  std::mutex mutex_;
  std::map<int, Loaded> loaded_;  // per device
};

}  // namespace luminal::cuda
