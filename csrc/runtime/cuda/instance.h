// One instance of a CUDA program: the program instantiated for one shape binding (and stream and
// TF32 setting): buffers, the arena, cuBLASLt plans, kernel parameters and the recorded CUDA graph.
// Built by build_instance; replayed by the Executor (runtime/cuda/executor.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/choices.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cudnn_call.h"
#include "runtime/cuda/executor.h"
#include "runtime/cuda/program.h"
#include "runtime/symbols.h"
#include "runtime/tensor.h"

namespace luminal::runtime::gpu {

// The launch configuration of one generated kernel, as a CUDA graph kernel node (also what a
// direct launch needs). `args` must outlive the use of the result.
CUDA_KERNEL_NODE_PARAMS kernel_node(CUfunction function, const codegen::Kernel& kernel, unsigned grid, void** args);

// The module and the constants, loaded on the first device that runs the graph.
struct DeviceState {
  int device = 0;
  CUcontext context = nullptr;  // the device's primary context (retained once)
  std::string arch;
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;  // per kernel
  CUfunction export_errors = nullptr;
  CUfunction trap_errors = nullptr;  // after a compiled graph added to a caller's capture
  CUstream capture_stream = nullptr;
  std::vector<std::shared_ptr<void>> constants;  // per node id (Constant nodes only)

  DeviceState() = default;
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;
  ~DeviceState() {
    // Best effort: at interpreter exit the context may already be gone.
    try {
      const cuda::DriverApi& api = cuda::driver();
      if (capture_stream) api.cuStreamDestroy(capture_stream);
      if (module) api.cuModuleUnload(module);
    } catch (const Error&) {
    }
  }
};

struct Buffer {
  CUdeviceptr ptr = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

// A kernel parameter whose value comes from the caller (input/output pointers, input strides).
struct ExternalParam {
  enum class Kind { InputPointer, InputStride, OutputPointer };
  size_t field;  // index in the packed parameter struct
  Kind kind;
  int position;  // call input or output index
  int dim = -1;
};

inline uint64_t external_value(const ExternalParam& e, const std::vector<TensorView>& inputs,
                        const std::vector<TensorView>& outputs) {
  switch (e.kind) {
    case ExternalParam::Kind::InputPointer: return reinterpret_cast<uint64_t>(inputs[e.position].data);
    case ExternalParam::Kind::InputStride: return static_cast<uint64_t>(inputs[e.position].strides[e.dim]);
    case ExternalParam::Kind::OutputPointer: return reinterpret_cast<uint64_t>(outputs[e.position].data);
  }
  return 0;
}

// Page-locked host memory the GPU writes the error record into.
struct PinnedRecord {
  int64_t* values = nullptr;
  PinnedRecord() {
    void* p = nullptr;
    LUMINAL_CU(cuda::driver().cuMemAllocHost(&p, 4 * sizeof(int64_t)));
    values = static_cast<int64_t*>(p);
    std::fill(values, values + 4, 0);
  }
  ~PinnedRecord() {
    try {
      if (values) cuda::driver().cuMemFreeHost(values);
    } catch (const Error&) {
    }
  }
  PinnedRecord(const PinnedRecord&) = delete;
  PinnedRecord& operator=(const PinnedRecord&) = delete;
};


struct Instance {
  std::shared_ptr<void> arena;
  void* workspace = nullptr;  // cuBLASLt's, inside the arena
  std::shared_ptr<void> error_record;  // device int64[4]
  PinnedRecord host_error;
  CUevent done = nullptr;
  bool launched = false;
  std::vector<Buffer> buffers;  // per node
  std::vector<std::unique_ptr<cuda::Matmul>> matmuls;
  // The steps cuDNN computes (convolutions, fused attention; the others run their generated
  // kernel), in step order. cuDNN reads the node's inputs and writes its buffer directly.
  struct CudnnStep {
    size_t step = 0;
    std::unique_ptr<cuda::CudnnCall> library;
  };
  std::vector<CudnnStep> cudnn_steps;
  // Each measured or forced choice between alternatives, with their times (stats, explain).
  std::vector<std::string> choices;
  ChoiceCounts choice_counts;  // of the measured choices: taken from the on-disk cache, or timed

  struct Launch {
    size_t step = 0;
    int kernel = -1;
    unsigned grid = 1;
    std::vector<uint64_t> fields;
    std::vector<ExternalParam> externals;
    CUgraphNode node = nullptr;
    // A scatter's base copy: skipped on calls whose output is the base input's own memory (its
    // graph node disabled; or absent, see Instance::scatter_copies_recorded). -1: always runs.
    int alias_output = -1, alias_input = -1;
    bool enabled = true;
    size_t copy_bytes = 0;
  };
  std::vector<Launch> launches;
  std::vector<std::pair<int, uint64_t>> parameter_pointers;  // (input, pointer) read by library calls
  // Library calls captured the parameters' addresses: whether one of them moved (a rebuild is due).
  bool parameters_moved(const std::vector<TensorView>& inputs) const {
    return std::any_of(parameter_pointers.begin(), parameter_pointers.end(), [&](const auto& entry) {
      return reinterpret_cast<uint64_t>(inputs[entry.first].data) != entry.second;
    });
  }
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  size_t bytes_per_call = 0;
  size_t graph_nodes = 0;
  size_t programmatic_edges = 0;  // kernel-to-kernel edges that let the later one launch early
  size_t grouped_gemvs = 0;       // matmuls recorded in grouped GEMV launches
  size_t grouped_kernels = 0;     // generated kernels that share a launch (runtime/cuda/launch_groups.h)
  size_t swiglu_pairs = 0;        // paired launches storing a SwiGLU's values (runtime/cuda/swiglu.h)
  // Whether the graph holds the scatter base copies that some calls skip (Launch::alias_output).
  // An instance is first recorded without them, for calls that update their inputs in place (a
  // decode step's cache): every kernel then keeps its programmatic edges, which a node that calls
  // disable may not have. A call that needs a copy gets the instance recorded again with them.
  bool scatter_copies_recorded = true;

  ~Instance() {
    try {
      const cuda::DriverApi& api = cuda::driver();
      if (exec) api.cuGraphExecDestroy(exec);
      if (graph) api.cuGraphDestroy(graph);
      if (done) api.cuEventDestroy(done);
    } catch (const Error&) {
    }
  }
};

// The device pointers cuDNN reads for `node`'s inputs, in the node's order.
std::vector<const void*> cudnn_operands(const Instance& instance, const ir::Node& node);

// Enqueues a step cuDNN computes on `stream`.
void run_cudnn_step(const Instance& instance, const Instance::CudnnStep& call, const ir::Node& node,
                             CUstream stream);

// Instantiates `program` on the device `device` loaded it on. Adds the host synchronizations it
// needed (cuBLASLt algorithm timing) to `host_syncs`. `scatter_copies`: whether the CUDA graph holds
// the scatter base copies that calls updating their inputs in place skip (Instance::scatter_copies_recorded).
std::unique_ptr<Instance> build_instance(const CudaProgram& program, const DeviceState& device,
                                         const SymbolValues& symbols, const CallContext& context,
                                         const std::vector<TensorView>& inputs, size_t& host_syncs,
                                         bool scatter_copies);

}  // namespace luminal::runtime::gpu
