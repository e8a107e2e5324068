// The CUDA engine: generated kernels (NVRTC) and cuBLASLt matmuls, replayed as one CUDA graph.
//
// The executor instantiates a CudaProgram (runtime/cuda/program.h: the plan of steps and the
// generated code) and records the graph; it neither rewrites graphs nor generates code.
// Per program: one CUDA module holding every kernel. Per shape binding (and stream and TF32
// setting): an instance with launch configurations, an arena of intermediates planned by
// liveness, cuBLASLt plans, and an instantiated CUDA graph. Every call launches that graph once
// on the caller's stream; when the caller's input or output pointers change, only the kernel
// nodes that read or write them get new parameters. Library calls only ever see arena and
// weight memory, so their captured child graphs never need updates.
//
// A call made while the caller captures a CUDA graph adds the instance's recorded graph to that
// capture instead of launching it (capture.cpp).
//
// Device-side errors (an out-of-range index) are recorded in a device flag, exported to pinned
// host memory at the end of every replay, and raised by the first later call that finds the
// replay finished (or by the same call under LUMINAL_SYNC_CHECK=1). No call blocks on the GPU.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cuda_codegen.h"
#include "ir/graph.h"
#include "runtime/cuda/program.h"
#include "runtime/symbols.h"
#include "runtime/tensor.h"

namespace luminal::runtime::gpu {

// Device memory from the caller's allocator (torch's caching allocator in the bindings). The
// memory stays valid while the returned handle lives.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual std::shared_ptr<void> allocate(size_t bytes, int device) = 0;
};

struct CallContext {
  void* stream = nullptr;  // CUstream; nullptr is the legacy default stream
  int device = 0;
  bool allow_tf32 = false;              // matmuls (torch.backends.cuda.matmul.allow_tf32)
  bool allow_tf32_convolution = false;  // convolutions (torch.backends.cudnn.allow_tf32)
  DeviceAllocator* allocator = nullptr;
};

struct Stats {
  size_t kernels = 0;            // generated kernels in the module
  size_t library_calls = 0;      // cuBLASLt matmuls and cuDNN convolutions per call (last instance)
  size_t graph_nodes = 0;        // nodes of the replayed CUDA graph (last instance)
  size_t programmatic_edges = 0;  // of its edges, programmatic ones (LUMINAL_PDL)
  size_t grouped_gemvs = 0;       // matmuls that share a grouped GEMV launch (last instance)
  size_t grouped_kernels = 0;     // generated kernels that share a launch with others (last instance)
  size_t swiglu_pairs = 0;        // gate/up products that store their SwiGLU's values (last instance)
  size_t launches_per_call = 1;  // graph launches per call
  size_t staging_copies = 0;     // copies added so that library calls see stable memory
  size_t bytes_per_call = 0;     // bytes read and written by the steps (estimate, last instance)
  size_t instances = 0;          // shape/stream/precision variants built so far
  size_t graph_builds = 0;
  size_t pointer_updates = 0;    // kernel-node parameter updates, cumulative
  size_t calls = 0;
  size_t captured_calls = 0;     // calls added to the caller's CUDA graph capture (capture.cpp)
  size_t host_syncs = 0;         // waits for the GPU (instance builds, error checks that must wait), cumulative
  bool megakernel = false;       // the whole graph runs as one row kernel
  std::vector<std::string> choices;  // the last instance's choices between measured alternatives
  // Measured choices (cuBLASLt algorithms, cuDNN engines, cuDNN or generated) taken from the on-disk
  // cache, and timed on the device (no usable entry, or caching off), over every instance built.
  size_t choice_cache_hits = 0;
  size_t choice_cache_misses = 0;
  size_t scatter_copy_bytes = 0;  // bytes of scatter bases the last call copied (in-place scatters copy none)
  // Host time of the last call, microseconds: from run() to the graph launch (instance lookup,
  // checks, pointer updates), and the launch itself.
  double host_prepare_us = 0;
  double host_launch_us = 0;
};

struct Instance;     // runtime/cuda/instance.h
struct DeviceState;  // the module and constants on a device (runtime/cuda/instance.h)

class Executor {
 public:
  explicit Executor(std::shared_ptr<const CudaProgram> program);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // `outputs` has one view per graph output (integer outputs: an empty view), allocated by the
  // caller on the same device.
  void run(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs, const SymbolValues& symbols,
           const CallContext& context);
  // Compiles (or takes from the cache) the module and uploads the constants on the context's
  // device now, rather than at the first run (a runner that loads a model once, runs it many times).
  void prepare(const CallContext& context);
  // Waits for every launched replay and raises the device-side errors they recorded (an index out
  // of range): what a caller that needs the outputs on the host does after its last run.
  void finish();

  Stats stats() const;
  // The CUDA source of the module (prelude and every kernel).
  const std::string& module_source() const { return program_->module_source; }
  const CudaProgram& program() const { return *program_; }

 private:
  void load_module(const CallContext& context);
  void update_pointers(Instance& instance, const std::vector<TensorView>& inputs,
                       const std::vector<TensorView>& outputs);
  void make_context_current(int device);
  // Every input the graph reads is on the call's device.
  void check_input_devices(const std::vector<TensorView>& inputs, const CallContext& context) const;
  // `instance` (from instance_for: recorded without scatter base copies at first), or, when this
  // call needs one of them (an output that is not its base input's memory), the same instance
  // recorded again with them, which replaces it for good.
  Instance& with_scatter_copies_if_needed(Instance& instance, const SymbolValues& symbols, const CallContext& context,
                                          const std::vector<TensorView>& inputs,
                                          const std::vector<TensorView>& outputs);
  Instance& instance_for(const SymbolValues& symbols, const CallContext& context,
                         const std::vector<TensorView>& inputs);
  void raise_pending_errors(Instance& instance, bool wait);
  // Raises what the last finished replay of `instance` exported, if anything (and clears it).
  void raise_recorded_error(Instance& instance);
  // A call while `context.stream` is being captured into the caller's CUDA graph (capture.cpp).
  void run_in_capture(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                      const SymbolValues& symbols, const CallContext& context);
  void run_steps_one_by_one(Instance& instance, void* stream);

  struct InstanceKey {
    void* stream = nullptr;
    bool allow_tf32 = false, allow_tf32_convolution = false;
    SymbolValues symbols;
    // Everything but the stream (a capture runs on its own stream: capture.cpp).
    bool same_binding(const InstanceKey& other) const {
      return allow_tf32 == other.allow_tf32 && allow_tf32_convolution == other.allow_tf32_convolution &&
             symbols == other.symbols;
    }
    bool operator==(const InstanceKey& other) const { return stream == other.stream && same_binding(other); }
  };

  std::shared_ptr<const CudaProgram> program_;
  std::vector<bool> input_read_;  // per call input: does the graph read it

  mutable std::mutex mutex_;
  // Module and constants, on the first device used. Shared with the instances given to callers'
  // CUDA graph captures (capture.cpp), which outlive the executor.
  std::shared_ptr<DeviceState> device_;
  std::vector<std::pair<InstanceKey, std::unique_ptr<Instance>>> instances_;  // most recently used last
  Stats stats_;
};

// Compiles the program's CUDA module with NVRTC for `arch` (no GPU needed): the check CI runs over
// every graph the test suite compiles. Returns the module source.
std::string check_codegen(const CudaProgram& program, const std::string& arch);

}  // namespace luminal::runtime::gpu
