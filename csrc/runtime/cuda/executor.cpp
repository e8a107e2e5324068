#include "runtime/cuda/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/cache_files.h"
#include "common/checked.h"
#include "common/config.h"
#include "common/error.h"
#include "common/notices.h"
#include "ir/check_label.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/instance.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/cuda/timing.h"

namespace luminal::runtime::gpu {

using codegen::Kernel;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;
using schedule::StepKind;

namespace {

double microseconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

constexpr size_t kMaxInstances = 16;

// Element counts of evaluated shapes; every node's was checked when its shape was evaluated (plan).
int64_t product(const std::vector<int64_t>& sizes) { return element_count(sizes, "evaluated shape"); }

// LUMINAL_DUMP_KERNELS=<dir>: keeps every generated module (a debugging aid: a directory that
// cannot be written gives one notice, never a failed compile).
void dump_kernels(const std::string& source) {
  const std::shared_ptr<const Config> settings = config();
  const std::string& value = settings->dump_kernels_dir;
  if (value.empty()) return;
  std::string problem;
  const std::string dir = resolve_user_directory(value, problem);
  std::error_code ec;
  if (problem.empty()) std::filesystem::create_directories(dir, ec);
  if (problem.empty() && ec) problem = str_cat("cannot create ", dir, ": ", ec.message());
  const std::filesystem::path file =
      std::filesystem::path(dir) / str_cat("module_", std::hex, fnv1a64(source), ".cu");
  if (problem.empty()) {
    std::ofstream out(file, std::ios::binary);
    out << source;
    out.close();
    if (!out) problem = str_cat("cannot write ", file.string());
  }
  if (!problem.empty()) {
    notify_once("dump", str_cat("dump-kernels:", value),
                str_cat("luminal: LUMINAL_DUMP_KERNELS='", value, "' is not usable (", problem,
                        "); generated CUDA modules are not dumped"));
  }
}

}  // namespace

Executor::Executor(std::shared_ptr<const CudaProgram> program) : program_(std::move(program)) {
  LUMINAL_CHECK(program_ != nullptr, "internal error: a CUDA executor without a program");
  const std::vector<int> uses = program_->graph->use_counts();
  for (NodeId input : program_->graph->inputs) input_read_.push_back(uses[input] > 0);
  stats_.kernels = program_->kernels.size();
  stats_.staging_copies = program_->staging_copies;
  stats_.megakernel = program_->plan.is_row_kernel();
}

Executor::~Executor() = default;

Instance& Executor::instance_for(const SymbolValues& symbols, const CallContext& context,
                                 const std::vector<TensorView>& inputs) {
  // Most calls repeat the previous one's key: search from the most recently used.
  for (auto it = instances_.rbegin(); it != instances_.rend(); ++it) {
    const InstanceKey& key = it->first;
    if (!(key == InstanceKey{context.stream, context.allow_tf32, context.allow_tf32_convolution, symbols})) continue;
    const auto position = std::prev(it.base());
    if (it->second->parameters_moved(inputs)) {
      raise_pending_errors(*position->second, /*wait=*/true);
      instances_.erase(position);
      break;
    }
    if (position + 1 != instances_.end()) std::rotate(position, position + 1, instances_.end());
    return *instances_.back().second;
  }
  if (instances_.size() >= kMaxInstances) {
    raise_pending_errors(*instances_.front().second, /*wait=*/true);
    instances_.erase(instances_.begin());
  }
  auto built =
      build_instance(*program_, *device_, symbols, context, inputs, stats_.host_syncs, /*scatter_copies=*/false);
  ++stats_.instances;
  ++stats_.graph_builds;
  stats_.choices = built->choices;
  stats_.choice_cache_hits += built->choice_counts.hits;
  stats_.choice_cache_misses += built->choice_counts.misses;
  instances_.emplace_back(InstanceKey{context.stream, context.allow_tf32, context.allow_tf32_convolution, symbols},
                          std::move(built));
  return *instances_.back().second;
}

Instance& Executor::with_scatter_copies_if_needed(Instance& instance, const SymbolValues& symbols,
                                                  const CallContext& context, const std::vector<TensorView>& inputs,
                                                  const std::vector<TensorView>& outputs) {
  if (instance.scatter_copies_recorded) return instance;
  bool needed = false;
  for (const Instance::Launch& launch : instance.launches) {
    const bool copies = launch.alias_output >= 0;
    needed = needed || (copies && outputs[launch.alias_output].data != inputs[launch.alias_input].data);
  }
  if (!needed) return instance;
  // instance_for returned the most recently used instance, the last one.
  LUMINAL_CHECK(&instance == instances_.back().second.get(),
                "internal error: the instance to record again is not the last");
  raise_pending_errors(instance, /*wait=*/true);
  instances_.back().second =
      build_instance(*program_, *device_, symbols, context, inputs, stats_.host_syncs, /*scatter_copies=*/true);
  ++stats_.graph_builds;
  return *instances_.back().second;
}

void Executor::make_context_current(int device) {
  if (!device_ || device_->device != device) {
    cuda::use_primary_context(device);  // first call, or a wrong device that run() reports
    return;
  }
  const cuda::DriverApi& api = cuda::driver();
  CUcontext current = nullptr;
  LUMINAL_CU(api.cuCtxGetCurrent(&current));
  if (current != device_->context) LUMINAL_CU(api.cuCtxSetCurrent(device_->context));
}

void Executor::raise_pending_errors(Instance& instance, bool wait) {
  if (!instance.launched) return;
  const cuda::DriverApi& api = cuda::driver();
  if (wait) {
    ++stats_.host_syncs;
    LUMINAL_CU(api.cuEventSynchronize(instance.done));
  } else {
    const CUresult status = api.cuEventQuery(instance.done);
    if (status == CUDA_ERROR_NOT_READY) return;
    LUMINAL_CU(status);
  }
  raise_recorded_error(instance);
}

void Executor::raise_recorded_error(Instance& instance) {
  volatile int64_t* record = instance.host_error.values;
  const int64_t code = record[0];
  if (code == 0) return;
  const int64_t value = record[1], bound = record[2], check = record[3];
  for (int i = 0; i < 4; ++i) record[i] = 0;
  if (code == static_cast<int64_t>(codegen::DeviceError::IndexOutOfBounds)) {
    const bool labelled = check >= 0 && check < static_cast<int64_t>(program_->check_labels.size());
    const std::string message =
        labelled ? ir::check_failure_message(program_->check_labels[check].label, value, bound, program_->check_labels[check].origin)
                 : str_cat("index ", value, " is out of bounds for a dimension of size ", bound);
    fail(message, " (detected on the GPU during an earlier call of this compiled graph; set LUMINAL_SYNC_CHECK=1 to "
         "raise in the failing call)");
  }
  fail("integer division by zero (detected on the GPU during an earlier call of this compiled graph)");
}

// Loads the module and uploads the constants, on the first device that runs the program.
void Executor::load_module(const CallContext& context) {
  const cuda::DriverApi& api = cuda::driver();
  auto state = std::make_shared<DeviceState>();
  state->device = context.device;
  state->context = cuda::use_primary_context(context.device);
  state->arch = cuda::device_arch(context.device);
  // The tensor-core attention kernel traps below sm_80 (which would end the CUDA context): refuse
  // the device instead, with an error the caller can fall back on.
  LUMINAL_CHECK(program_->module_source.find("mma.sync") == std::string::npos || state->arch >= "sm_80" ||
                    state->arch.size() > 5,
                "this graph's tensor-core attention kernel needs a GPU of compute capability 8.0 or newer; the device is ",
                state->arch);
  dump_kernels(program_->module_source);
  const std::string cubin = cuda::compile_to_cubin(program_->module_source, state->arch);
  LUMINAL_CU(api.cuModuleLoadData(&state->module, cubin.data()));
  for (const Kernel& kernel : program_->kernels) {
    CUfunction f = nullptr;
    LUMINAL_CU(api.cuModuleGetFunction(&f, state->module, kernel.name.c_str()));
    state->functions.push_back(f);
  }
  LUMINAL_CU(api.cuModuleGetFunction(&state->export_errors, state->module, kExportErrorsKernelName));
  LUMINAL_CU(api.cuModuleGetFunction(&state->trap_errors, state->module, kTrapErrorsKernelName));
  LUMINAL_CU(api.cuStreamCreate(&state->capture_stream, CU_STREAM_NON_BLOCKING));
  // Constants are uploaded once (synchronously, at first use).
  // Views of one storage (aliased weights) share one upload.
  const ir::Graph& graph = *program_->graph;
  state->constants.resize(graph.size());
  std::map<const std::string*, std::shared_ptr<void>> uploaded;
  for (const Node& node : graph.nodes()) {
    if (node.kind != NodeKind::Constant) continue;
    const std::string& bytes = *node.constant->bytes;
    std::shared_ptr<void>& memory = uploaded[&bytes];
    if (!memory) {
      memory = context.allocator->allocate(std::max<size_t>(bytes.size(), 1), context.device);
      if (!bytes.empty()) {
        LUMINAL_CU(api.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(memory.get()), bytes.data(), bytes.size()));
      }
    }
    state->constants[node.id] = memory;
  }
  device_ = std::move(state);
}

// Points the kernels at this call's tensors (only nodes whose values changed are updated).
void Executor::update_pointers(Instance& instance, const std::vector<TensorView>& inputs,
                               const std::vector<TensorView>& outputs) {
  const cuda::DriverApi& api = cuda::driver();
  for (Instance::Launch& launch : instance.launches) {
    bool changed = false;
    for (const ExternalParam& e : launch.externals) {
      const uint64_t value = external_value(e, inputs, outputs);
      if (launch.fields[e.field] != value) {
        launch.fields[e.field] = value;
        changed = true;
      }
    }
    if (launch.alias_output >= 0) {
      const bool enabled = outputs[launch.alias_output].data != inputs[launch.alias_input].data;
      if (enabled != launch.enabled && launch.node) {
        LUMINAL_CU(api.cuGraphNodeSetEnabled(instance.exec, launch.node, enabled ? 1 : 0));
        launch.enabled = enabled;
      }
    }
    if (!changed || !launch.node) continue;
    void* args[] = {launch.fields.data()};
    const CUDA_KERNEL_NODE_PARAMS params =
        kernel_node(device_->functions[launch.kernel], program_->kernels[launch.kernel], launch.grid, args);
    LUMINAL_CU(api.cuGraphExecKernelNodeSetParams(instance.exec, launch.node, &params));
    ++stats_.pointer_updates;
  }
}

void Executor::prepare(const CallContext& context) {
  std::lock_guard<std::mutex> lock(mutex_);
  LUMINAL_CHECK(context.allocator != nullptr, "internal error: no device allocator");
  make_context_current(context.device);
  if (!device_) load_module(context);
  LUMINAL_CHECK(device_->device == context.device, "this compiled graph runs on cuda:", device_->device,
                "; it was prepared for cuda:", context.device);
}

void Executor::check_input_devices(const std::vector<TensorView>& inputs, const CallContext& context) const {
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!input_read_.at(k)) continue;
    LUMINAL_CHECK(inputs[k].device.type == DeviceType::CUDA && inputs[k].device.index == context.device,
                  "input #", k, " must be on cuda:", context.device, ", got ", describe(inputs[k]));
  }
}

void Executor::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!device_) return;
  make_context_current(device_->device);
  for (auto& [key, instance] : instances_) raise_pending_errors(*instance, /*wait=*/true);
}

void Executor::run(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                   const SymbolValues& symbols, const CallContext& context) {
  const auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  LUMINAL_CHECK(context.allocator != nullptr, "internal error: no device allocator");
  make_context_current(context.device);
  if (cuda::stream_capturing(static_cast<CUstream>(context.stream))) {
    run_in_capture(inputs, outputs, symbols, context);
    return;
  }
  if (!device_) load_module(context);
  LUMINAL_CHECK(device_->device == context.device, "this compiled graph runs on cuda:", device_->device,
                "; it was called with tensors on cuda:", context.device);
  check_input_devices(inputs, context);

  Instance& instance = with_scatter_copies_if_needed(instance_for(symbols, context, inputs), symbols, context,
                                                     inputs, outputs);
  raise_pending_errors(instance, /*wait=*/false);
  update_pointers(instance, inputs, outputs);
  stats_.scatter_copy_bytes = 0;
  for (const Instance::Launch& launch : instance.launches) stats_.scatter_copy_bytes += launch.enabled ? launch.copy_bytes : 0;
  const CUstream stream = static_cast<CUstream>(context.stream);
  if (config()->profile) {
    run_steps_one_by_one(instance, stream);
    return;
  }
  const cuda::DriverApi& api = cuda::driver();
  const auto launch = std::chrono::steady_clock::now();
  LUMINAL_CU(api.cuGraphLaunch(instance.exec, stream));
  LUMINAL_CU(api.cuEventRecord(instance.done, stream));
  stats_.host_prepare_us = microseconds_between(start, launch);
  stats_.host_launch_us = microseconds_between(launch, std::chrono::steady_clock::now());
  instance.launched = true;
  ++stats_.calls;
  stats_.library_calls = instance.matmuls.size() + instance.cudnn_steps.size();
  stats_.graph_nodes = instance.graph_nodes;
  stats_.programmatic_edges = instance.programmatic_edges;
  stats_.grouped_gemvs = instance.grouped_gemvs;
  stats_.grouped_kernels = instance.grouped_kernels;
  stats_.swiglu_pairs = instance.swiglu_pairs;
  stats_.bytes_per_call = instance.bytes_per_call;
  if (config()->sync_check) raise_pending_errors(instance, /*wait=*/true);
}

// LUMINAL_PROFILE=1: every step is launched on its own between its own pair of events and the times
// printed after one synchronization at the end: slow, for finding slow or failing kernels. The times
// are GPU times only when the host runs ahead of the GPU (benchmarks/profile_steps.py queues a sleep
// kernel first); otherwise a step's time also holds the host's launch latency.
void Executor::run_steps_one_by_one(Instance& instance, void* raw_stream) {
  const CUstream stream = static_cast<CUstream>(raw_stream);
  const cuda::DriverApi& api = cuda::driver();
  struct Timed {
    Timed(int timed_node, std::string timed_what) : node(timed_node), what(std::move(timed_what)) {}
    int node;
    std::string what;
    cuda::TimingEvent start, end;  // released with the list, also when a launch raises
  };
  std::deque<Timed> timed;  // built in place: events do not move
  const std::vector<schedule::Step>& steps = program_->plan.steps;
  const ir::Graph& graph = *program_->graph;
  size_t launch_index = 0, matmul_index = 0, cudnn_index = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const schedule::Step& step = steps[s];
    const Node& node = graph.node(step.node);
    const bool is_matmul = step.kind == StepKind::LibraryMatmul;
    if (is_matmul && product(instance.buffers[node.id].sizes) == 0) {
      ++matmul_index;
      continue;
    }
    const auto timed_step = [&](const std::string& what, const auto& launch_it) {
      Timed& t = timed.emplace_back(node.id, what);
      LUMINAL_CU(api.cuEventRecord(t.start.get(), stream));
      launch_it();
      LUMINAL_CU(api.cuEventRecord(t.end.get(), stream));
    };
    if (is_matmul) {
      timed_step(instance.matmuls[matmul_index]->chosen_name(), [&] {
        instance.matmuls[matmul_index++]->run(reinterpret_cast<void*>(instance.buffers[node.id].ptr),
                                              instance.workspace, stream);
      });
      continue;
    }
    if (cudnn_index < instance.cudnn_steps.size() && instance.cudnn_steps[cudnn_index].step == s) {
      const Instance::CudnnStep& call = instance.cudnn_steps[cudnn_index++];
      timed_step(call.library->chosen_name(),
                 [&] { run_cudnn_step(instance, call, node, static_cast<CUstream>(stream)); });
      continue;
    }
    for (; launch_index < instance.launches.size() && instance.launches[launch_index].step == s; ++launch_index) {
      Instance::Launch& launch = instance.launches[launch_index];
      if (!launch.enabled) continue;
      timed_step(program_->kernels[launch.kernel].name, [&] {
        void* args[] = {launch.fields.data()};
        const CUDA_KERNEL_NODE_PARAMS p =
            kernel_node(device_->functions[launch.kernel], program_->kernels[launch.kernel], launch.grid, args);
        LUMINAL_CU(api.cuLaunchKernel(p.func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                                      p.blockDimZ, 0, stream, p.kernelParams, nullptr));
      });
    }
  }
  ++stats_.host_syncs;
  if (!timed.empty()) LUMINAL_CU(api.cuEventSynchronize(timed.back().end.get()));
  float total = 0;
  for (const Timed& t : timed) {
    float ms = 0;
    LUMINAL_CU(api.cuEventElapsedTime(&ms, t.start.get(), t.end.get()));
    total += ms;
    std::fprintf(stderr, "[luminal cuda] %%%d %-24s %9.1f us  %s\n", t.node, t.what.c_str(), ms * 1000.0f,
                 graph.node(t.node).origin.c_str());
  }
  std::fprintf(stderr, "[luminal cuda] total %.1f us over %zu steps\n", total * 1000.0f, timed.size());
  raise_pending_errors(instance, /*wait=*/false);
}

Stats Executor::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string check_codegen(const CudaProgram& program, const std::string& arch) {
  dump_kernels(program.module_source);
  cuda::check_compiles(program.module_source, arch);
  return program.module_source;
}

}  // namespace luminal::runtime::gpu
