// Calls made while the caller's stream is being captured into a CUDA graph (torch.cuda.graph, as
// serving stacks capture a compiled model per batch size).
//
// Launching the instance's executable graph is not something a capture records, so the instance's
// recorded graph is added to the caller's graph as a child graph node, with this call's pointers,
// followed by lm_trap_errors (program.cpp): the caller's replays run luminal's kernels, and an error
// they record (an index out of range) ends the CUDA context as eager's device-side assert does in a
// replay, since no later call of luminal would read it.
//
// The child graph refers to the instance's memory (its arena of intermediates, cuBLASLt's
// workspace, the pinned error record), to the module's kernels and to the constants, for as long
// as the caller keeps its graph, which luminal cannot know. So the instance is given to the
// capture: it leaves the executor (a later call with the same binding records a new one) and is
// kept, with the module, until the process ends. One instance per capture: serving stacks capture
// a few graphs, once.
//
// What a capture forbids is never done here: no kernel is compiled or measured, no memory is
// allocated, nothing waits. A call that would need it (the first call on the device, a binding no
// earlier call built) raises CaptureUnsupported, which the bindings turn into a call in eager.
#include <mutex>

#include "common/error.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/executor.h"
#include "runtime/cuda/instance.h"

namespace luminal::runtime::gpu {

namespace {

// What a child graph in a caller's CUDA graph refers to.
struct GivenToCapture {
  std::shared_ptr<const CudaProgram> program;
  std::shared_ptr<DeviceState> device;
  std::unique_ptr<Instance> instance;
};

void keep_until_exit(GivenToCapture given) {
  static std::mutex mutex;
  // Deliberately never destroyed: a caller may replay its graph until the process ends, and at exit
  // torch's allocator, which owns the arenas, may already be gone.
  static auto* const kept = new std::vector<GivenToCapture>();  // NOLINT(cppcoreguidelines-owning-memory)
  const std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(given));
}

[[noreturn]] void refuse(const std::string& why) {
  throw CaptureUnsupported(str_cat("the call is being captured into a CUDA graph (torch.cuda.graph), and ", why));
}

bool driver_can_extend_captures() {
  const cuda::DriverApi& api = cuda::driver();
  return api.cuStreamGetCaptureInfo_v3 && api.cuStreamUpdateCaptureDependencies_v2 &&
         api.cuGraphKernelNodeSetParams_v2;
}

}  // namespace

void Executor::run_in_capture(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                              const SymbolValues& symbols, const CallContext& context) {
  if (!device_) {
    refuse("this is the compiled graph's first call on the device, which loads and measures its kernels: call it "
           "once before the capture, as torch.cuda.graph asks of the code it captures");
  }
  LUMINAL_CHECK(device_->device == context.device, "this compiled graph runs on cuda:", device_->device,
                "; it was called with tensors on cuda:", context.device);
  check_input_devices(inputs, context);
  if (!driver_can_extend_captures()) refuse("the CUDA driver lacks the capture functions of CUDA 12.3");
  // An instance an earlier call built for this binding, on any stream (a capture runs on its own).
  const InstanceKey wanted{context.stream, context.allow_tf32, context.allow_tf32_convolution, symbols};
  auto found = instances_.end();  // the most recently used match: the list's last
  for (auto it = instances_.begin(); it != instances_.end(); ++it) {
    if (it->first.same_binding(wanted) && !it->second->parameters_moved(inputs)) found = it;
  }
  if (found == instances_.end()) {
    refuse("no earlier call had these sizes, settings and parameters: call it once so before the capture");
  }
  Instance& instance = *found->second;
  // The recorded graph runs every node it holds: a scatter's base copy must be there exactly when
  // this call needs it (an output that is not its base input's memory).
  for (const Instance::Launch& launch : instance.launches) {
    if (launch.alias_output < 0) continue;
    const bool copies = outputs[launch.alias_output].data != inputs[launch.alias_input].data;
    if (copies != (launch.node != nullptr)) {
      refuse("its inputs updated in place are not bound as in the earlier call: call it once so before the capture");
    }
  }
  // An error an earlier call recorded would be overwritten by the first replay.
  if (instance.launched) raise_recorded_error(instance);

  const cuda::DriverApi& api = cuda::driver();
  for (const Instance::Launch& launch : instance.launches) {
    if (!launch.node) continue;
    std::vector<uint64_t> fields = launch.fields;
    for (const ExternalParam& e : launch.externals) fields[e.field] = external_value(e, inputs, outputs);
    void* args[] = {fields.data()};
    const CUDA_KERNEL_NODE_PARAMS params =
        kernel_node(device_->functions[launch.kernel], program_->kernels[launch.kernel], launch.grid, args);
    LUMINAL_CU(api.cuGraphKernelNodeSetParams_v2(launch.node, &params));  // copies the arguments
  }
  const CUstream stream = static_cast<CUstream>(context.stream);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUgraph graph = nullptr;
  const CUgraphNode* dependencies = nullptr;
  const CUgraphEdgeData* edges = nullptr;  // dropped: a child graph waits for its dependencies whole
  size_t count = 0;
  LUMINAL_CU(api.cuStreamGetCaptureInfo_v3(stream, &status, &id, &graph, &dependencies, &edges, &count));
  LUMINAL_CHECK(status == CU_STREAM_CAPTURE_STATUS_ACTIVE,
                "the stream's CUDA graph capture is no longer active (an earlier error invalidated it)");
  CUgraphNode child = nullptr;
  LUMINAL_CU(api.cuGraphAddChildGraphNode(&child, graph, dependencies, count, instance.graph));
  CUDA_KERNEL_NODE_PARAMS trap{};
  trap.func = device_->trap_errors;
  trap.gridDimX = trap.gridDimY = trap.gridDimZ = 1;
  trap.blockDimX = trap.blockDimY = trap.blockDimZ = 1;
  void* host_record = instance.host_error.values;
  void* trap_args[] = {&host_record};
  trap.kernelParams = trap_args;
  CUgraphNode last = nullptr;
  LUMINAL_CU(api.cuGraphAddKernelNode(&last, graph, &child, 1, &trap));
  LUMINAL_CU(api.cuStreamUpdateCaptureDependencies_v2(stream, &last, nullptr, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));

  keep_until_exit({program_, device_, std::move(found->second)});
  instances_.erase(found);
  ++stats_.captured_calls;
}

}  // namespace luminal::runtime::gpu
