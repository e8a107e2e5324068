// cuDNN backend-API helpers shared by the operations of cudnn_call.h (convolution, attention):
// descriptors owned by RAII, per-device handles, tensor descriptors, and the candidate plans of an
// operation graph. Included only where cuDNN's headers are (LUMINAL_HAVE_CUDNN).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/cudnn_call.h"

#if LUMINAL_HAVE_CUDNN

namespace luminal::cuda::cudnn_backend {

// A backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type);
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept : d_(std::exchange(other.d_, nullptr)) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor& operator=(Descriptor&& other) noexcept;

  cudnnBackendDescriptor_t get() const { return d_; }
  // The address of the handle, for attributes that take descriptors.
  const cudnnBackendDescriptor_t* address() const { return &d_; }

  template <typename T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, int64_t count) {
    check(cudnn().cudnnBackendSetAttribute(d_, name, type, count, values), "cudnnBackendSetAttribute");
  }
  void set_ints(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values) {
    set(name, CUDNN_TYPE_INT64, values.data(), static_cast<int64_t>(values.size()));
  }
  void set_descriptor(cudnnBackendAttributeName_t name, const Descriptor& value) {
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, value.address(), 1);
  }
  void finalize(const char* what) { check(cudnn().cudnnBackendFinalize(d_), what); }
  bool try_finalize() { return cudnn().cudnnBackendFinalize(d_) == CUDNN_STATUS_SUCCESS; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

cudnnDataType_t cudnn_type(DType dtype);

// One handle per device, for the process's lifetime (cuDNN handles belong to the device current
// when they are created). Calls on a handle are serialized: cudnnSetStream then execute.
struct HandleSlot {
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
};
HandleSlot& handle_for_current_device();

// A tensor descriptor. `by_value`: a host scalar passed at execution (its pointer in the variant pack).
struct TensorSpec {
  int64_t uid = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> sizes, strides;
  int64_t alignment = 16;
  bool is_virtual = false;
  bool by_value = false;
};
Descriptor tensor(const TensorSpec& spec);

// The operation graph of `ops` on `handle`.
Descriptor operation_graph(const std::vector<const Descriptor*>& ops, cudnnHandle_t handle);

// Which engines keep luminal's numerics for operands of `dtype`: no half-precision accumulation;
// float32 (and float64) inputs not rounded to less, unless TF32 is allowed.
struct Numerics {
  DType dtype = DType::F32;
  bool allow_tf32 = false;
};

}  // namespace luminal::cuda::cudnn_backend

namespace luminal::cuda {

struct CudnnCall::Plans {
  struct Candidate {
    cudnn_backend::Descriptor config;
    cudnn_backend::Descriptor plan;
    int64_t workspace = 0;
    int64_t engine = -1;
  };
  cudnn_backend::HandleSlot* slot = nullptr;
  std::vector<cudnn_backend::Descriptor> keep;  // tensors, operations and the graph the plans were made from
  std::vector<Candidate> candidates;
  size_t chosen = 0;
  std::vector<int64_t> operand_uids;  // the node's inputs, in order
  int64_t out_uid = 0;
  std::vector<std::pair<int64_t, float>> host_floats;  // by-value scalars (uid, value), fixed after construction

  // Execution plans for the engines of `graph` (the last of `keep`) that keep `numerics`,
  // heuristics' order first, then fallbacks: at most `max_candidates`, or `only_engine` alone.
  // Raises (naming `what`) when none takes the problem.
  void add_candidates(const cudnn_backend::Numerics& numerics, size_t max_candidates,
                      std::optional<int64_t> only_engine, const std::string& what);
};

}  // namespace luminal::cuda

#endif
