#include "runner/runner.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <cctype>
#include <sstream>
#include <utility>

#include "common/checked.h"
#include "common/config.h"
#include "common/error.h"
#include "ir/expr.h"
#include "pt2/archive.h"
#include "runner/cuda_device.h"
#include "runner/package.h"
#include "runtime/compiled.h"

namespace luminal::runner {

// The memory a model runs on besides the caller's: its parameters and buffers (a package's state,
// the program's first inputs) on the engine's device, and the CUDA device. Runs are serialized: the
// program may update a buffer in place.
class ModelState {
 public:
  std::unique_ptr<CudaDevice> cuda;  // set on the CUDA engine
  bool allow_tf32_matmul = false;
  bool allow_tf32_convolution = false;
  std::vector<StateTensor> host;      // the CPU engine's state memory (on CUDA: released after the upload)
  std::vector<DeviceMemory> device;   // the CUDA engine's state memory
  std::vector<runtime::TensorView> views;  // each state tensor's view, on the engine's device
  // The check outputs' bytes (runtime::OutputInfo::check) for run_on_device, allocated at its first
  // call and kept: a run is asynchronous there, so memory freed on return could still be written.
  DeviceMemory check_outputs;
  std::mutex run_mutex;

  runtime::CudaCallContext cuda_context(void* stream) const {
    return cuda->context(stream, allow_tf32_matmul, allow_tf32_convolution);
  }
};

namespace {

std::vector<std::string> shape_text(const ir::Shape& shape) {
  std::vector<std::string> dims;
  dims.reserve(shape.size());
  for (const ir::Expr& dim : shape) dims.push_back(ir::to_string(dim));
  return dims;
}

std::string describe_signature(const TensorSignature& signature) {
  if (!signature.is_tensor) return "int";
  std::string text = str_cat(dtype_name(signature.dtype), "[");
  for (size_t d = 0; d < signature.shape.size(); ++d) text += str_cat(d ? ", " : "", signature.shape[d]);
  return text + "]";
}

// The bytes [first, last) a view may touch (empty views: none).
std::pair<uintptr_t, uintptr_t> byte_range(const runtime::TensorView& view) {
  std::vector<int64_t> strides = view.strides;  // a size-1 dimension's stride is never used (bind allows any)
  for (size_t d = 0; d < strides.size(); ++d) strides[d] = view.sizes[d] <= 1 ? 0 : strides[d];
  const int64_t elements = strided_storage_elements(view.sizes, strides, 0, "input");
  const auto first = reinterpret_cast<uintptr_t>(view.data);
  return {first, first + byte_count(elements, view.dtype, "input")};
}

// An input the program updates in place is written back as one dense block after the run: it must
// be contiguous, and share no memory with another input (eager would see the update through the
// alias while the program runs; the runner would not).
void check_writable(const std::vector<runtime::TensorView>& inputs, size_t k, const std::string& name) {
  const runtime::TensorView& view = inputs[k];
  LUMINAL_CHECK(view.is_contiguous(), "input #", k, " '", name, "' is updated in place by the program and must be "
                "contiguous, got ", runtime::describe(view));
  const auto [first, last] = byte_range(view);
  for (size_t other = 0; other < inputs.size(); ++other) {
    if (other == k) continue;
    const auto [other_first, other_last] = byte_range(inputs[other]);
    LUMINAL_CHECK(last <= other_first || other_last <= first || first == last || other_first == other_last,
                  "input #", k, " '", name, "' is updated in place by the program and shares memory with input #",
                  other);
  }
}

// LUMINAL_POISON_OUTPUTS: outputs start as NaN (all bytes 0xff in every float dtype), -1 (255 for
// uint8) or the invalid bool byte 0x5A, so that an element the program fails to write cannot pass
// for a computed zero (as the Python binding does).
void poison(HostTensor& tensor) {
  std::memset(tensor.data(), tensor.dtype() == DType::Bool ? 0x5A : 0xff, tensor.nbytes());
}

}  // namespace

Model::Model(std::shared_ptr<const runtime::CompiledGraph> graph, std::shared_ptr<ModelState> state,
             const std::vector<std::string>& input_names)
    : graph_(std::move(graph)), state_(std::move(state)) {
  const ir::Graph& ir_graph = graph_->graph();
  const size_t fixed = state_->views.size();
  LUMINAL_CHECK(graph_->num_inputs() >= fixed, "the program takes ", graph_->num_inputs(), " inputs, fewer than the ",
                fixed, " parameters and buffers of the package");
  LUMINAL_CHECK(input_names.empty() || input_names.size() == graph_->num_inputs() - fixed, "the package names ",
                input_names.size(), " inputs, its program takes ", graph_->num_inputs() - fixed, " besides its state");
  for (size_t k = fixed; k < graph_->num_inputs(); ++k) {
    const ir::Node& node = graph_->input(k);
    const std::string& name = input_names.empty() ? node.name : input_names[k - fixed];
    inputs_.push_back({name, true, node.dtype, shape_text(node.shape)});
  }
  for (size_t k = 0; k < ir_graph.outputs.size(); ++k) {
    const ir::GraphOutput& out = ir_graph.outputs[k];
    if (out.check) continue;  // computed for its run-time checks, never returned
    if (out.mutated_input >= 0) {
      const auto input = static_cast<size_t>(out.mutated_input);
      if (input >= fixed) {
        updated_inputs_.push_back(input - fixed);
      } else {
        LUMINAL_CHECK(state_->views[input].is_contiguous(), "buffer '", graph_->input(input).name,
                      "' is updated in place by the program and must be contiguous, got ",
                      runtime::describe(state_->views[input]));
      }
      continue;
    }
    if (out.kind == ir::GraphOutput::Kind::Int) {
      outputs_.push_back({out.name, false, DType::I64, {}});
    } else {
      const ir::Node& node = ir_graph.node(out.node);
      outputs_.push_back({out.name, true, node.dtype, shape_text(node.shape)});
    }
  }
  for (const auto& [name, info] : ir_graph.symbols) symbols_.push_back({name, info.min, info.max});
}

namespace {

// The options luminal's Python path compiles a package's program with (bindings/module.cpp,
// compile_options): the same environment settings, the package's roles and megakernel option.
runtime::CompileOptions package_compile_options(const Package& package, const LoadOptions& options) {
  runtime::CompileOptions compile;
  const std::shared_ptr<const Config> settings = config();
  compile.check_cuda_arch = settings->check_cuda_arch;
  compile.cpu_runs_row_graph = settings->cpu_runs_row_graph;
  compile.megakernel = package.megakernel;
  compile.input_roles = package.roles;
  compile.max_archive_bytes = options.max_archive_bytes;
  return compile;
}

runtime::TensorView state_view(const StateTensor& tensor, void* data, const runtime::Device& device) {
  runtime::TensorView view;
  view.data = data;
  view.dtype = tensor.storage.dtype();
  view.sizes = tensor.sizes;
  view.strides = tensor.strides;
  view.device = device;
  view.complex_pairs = tensor.complex_pairs;
  return view;
}

// Puts the state on the engine's device (CUDA: one upload, at load) and makes its views.
void place_state(ModelState& state, std::vector<StateTensor> tensors, const runtime::Device& device) {
  for (StateTensor& tensor : tensors) {
    if (!state.cuda) {
      state.views.push_back(state_view(tensor, tensor.storage.data(), device));
      continue;
    }
    DeviceMemory memory = state.cuda->allocate(tensor.storage.nbytes());
    state.cuda->copy_to_device(memory.get(), tensor.storage.data(), tensor.storage.nbytes(), nullptr);
    state.views.push_back(state_view(tensor, memory.get(), device));
    state.device.push_back(std::move(memory));
  }
  if (state.cuda) {
    state.cuda->synchronize(nullptr);
  } else {
    state.host = std::move(tensors);
  }
}

}  // namespace

Model Model::load(const std::string& path, const LoadOptions& options) {
  auto state = std::make_shared<ModelState>();
  state->allow_tf32_matmul = options.allow_tf32_matmul;
  state->allow_tf32_convolution = options.allow_tf32_convolution;
  register_cuda_library_dirs(options.cuda_library_dirs);
  std::optional<CallerContext> callers;  // loading makes the device current: the caller's is put back
  if (options.device.type == runtime::DeviceType::CUDA) {
    callers.emplace();
    state->cuda = std::make_unique<CudaDevice>(options.device.index);
  }
  const pt2::Archive archive =
      pt2::Archive::from_file(path, pt2::ReadLimits::with_max_archive_bytes(options.max_archive_bytes));
  std::shared_ptr<const runtime::CompiledGraph> graph;
  std::vector<std::string> input_names;
  const bool package = is_luminal_package(archive);
  if (package) {
    Package contents = read_package(archive, options.install_cache_entries);
    graph = runtime::CompiledGraph::from_archive_bytes(std::move(contents.program),
                                                       package_compile_options(contents, options));
    input_names = std::move(contents.input_names);
    place_state(*state, std::move(contents.state), options.device);
  } else {
    // As luminal.load compiles a .pt2 (bindings/module.cpp, "load"): default options.
    runtime::CompileOptions compile;
    compile.max_archive_bytes = options.max_archive_bytes;
    graph = runtime::CompiledGraph::from_archive_file(path, compile);
  }
  if (state->cuda) {
    state->cuda->make_current();
    graph->prepare_cuda(state->cuda_context(nullptr));  // the module, and the weights uploaded once
  }
  Model model(std::move(graph), std::move(state), input_names);
  model.device_ = options.device;
  model.is_package_ = package;
  return model;
}

std::string Model::signature_text() const {
  std::ostringstream out;
  for (size_t k = 0; k < inputs_.size(); ++k) {
    out << "input " << k << " " << inputs_[k].name << ": " << describe_signature(inputs_[k]) << "\n";
  }
  for (size_t k = 0; k < outputs_.size(); ++k) {
    out << "output " << k << " " << outputs_[k].name << ": " << describe_signature(outputs_[k]) << "\n";
  }
  for (const size_t k : updated_inputs_) out << "updates input " << k << " " << inputs_[k].name << " in place\n";
  for (const SymbolRange& symbol : symbols_) {
    out << "symbol " << symbol.name << ": " << symbol.min << " <= " << symbol.name << " <= ";
    if (symbol.max) {
      out << *symbol.max << "\n";
    } else {
      out << "inf\n";
    }
  }
  return out.str();
}


namespace {

void check_host_inputs(const std::vector<runtime::TensorView>& inputs) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const runtime::TensorView& view = inputs[k];
    LUMINAL_CHECK(view.device.type == runtime::DeviceType::CPU, "input #", k, " is on ",
                  runtime::device_name(view.device), ": run() takes host memory (run_on_device takes device memory)");
    LUMINAL_CHECK(view.sizes.size() == view.strides.size(), "input #", k, " has ", view.sizes.size(), " sizes but ",
                  view.strides.size(), " strides");
    const int64_t elements = element_count(view.sizes, str_cat("input #", k));
    LUMINAL_CHECK(view.data != nullptr || elements == 0, "input #", k, " has no data pointer but ", elements,
                  " elements");
  }
}

runtime::TensorView dense_view(void* data, DType dtype, const std::vector<int64_t>& sizes,
                               const runtime::Device& device) {
  runtime::TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.sizes = sizes;
  view.strides = runtime::contiguous_strides(sizes);
  view.device = device;
  return view;
}

size_t view_bytes(const runtime::TensorView& view) {
  const auto [first, last] = byte_range(view);
  return last - first;
}

}  // namespace

// The core numbers the program's inputs, the state first: its messages are rewritten to name the
// caller's inputs (input #k among the user inputs) and the state by name.
std::string Model::caller_message(const std::string& message) const {
  // A scan rather than std::regex: node names come from the archive and may be long.
  static const std::string marker = "input #";
  const size_t fixed = state_->views.size();
  std::string out;
  size_t position = 0;
  for (size_t found; (found = message.find(marker, position)) != std::string::npos;) {
    out.append(message, position, found - position);
    const size_t digits = found + marker.size();
    size_t end = digits;
    while (end < message.size() && end - digits < 9 && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    position = end;
    if (end == digits) {
      out += marker;
      continue;
    }
    const size_t k = std::stoul(message.substr(digits, end - digits));
    if (message.compare(end, 2, " '") == 0) {  // the program input's name, which the core adds
      const size_t close = message.find('\'', end + 2);
      if (close != std::string::npos) end = close + 1;
    }
    if (k < fixed) {
      out += str_cat("parameter or buffer '", graph_->input(k).name, "'");
    } else if (k - fixed < inputs_.size()) {
      out += str_cat("input #", k - fixed, " '", inputs_[k - fixed].name, "'");
    } else {
      out.append(message, found, end - found);
    }
    position = end;
  }
  out.append(message, position, std::string::npos);
  return out;
}

runtime::SymbolValues Model::bind(const std::vector<runtime::TensorView>& all) const {
  if (state_->views.empty()) return graph_->bind(all);
  try {
    return graph_->bind(all);
  } catch (const Error& error) {
    throw Error(caller_message(error.what()));
  }
}

std::vector<runtime::TensorView> Model::program_inputs(const std::vector<runtime::TensorView>& user_inputs) const {
  LUMINAL_CHECK(user_inputs.size() == inputs_.size(), "expected ", inputs_.size(), " tensor inputs, got ",
                user_inputs.size());
  std::vector<runtime::TensorView> all = state_->views;
  all.insert(all.end(), user_inputs.begin(), user_inputs.end());
  return all;
}

std::vector<std::vector<int64_t>> Model::output_shapes(const std::vector<runtime::TensorView>& inputs) const {
  const runtime::SymbolValues symbols = bind(program_inputs(inputs));
  std::vector<std::vector<int64_t>> shapes;
  const auto& infos = graph_->outputs();
  for (size_t k = 0; k < infos.size(); ++k) {
    if (!infos[k].returned()) continue;
    shapes.push_back(infos[k].is_tensor ? graph_->output_shape(k, symbols) : std::vector<int64_t>{});
  }
  return shapes;
}

std::vector<HostTensor> Model::run(const std::vector<runtime::TensorView>& inputs) const {
  check_host_inputs(inputs);
  const std::lock_guard<std::mutex> lock(state_->run_mutex);
  return state_->cuda ? run_cuda_from_host(inputs) : run_cpu(inputs);
}

namespace {

// Host outputs for every program output (integer outputs: empty), poisoned under LUMINAL_POISON_OUTPUTS.
std::vector<HostTensor> host_outputs(const runtime::CompiledGraph& graph, const runtime::SymbolValues& symbols) {
  const auto& infos = graph.outputs();
  const bool poison_outputs = config()->poison_outputs;
  std::vector<HostTensor> results(infos.size());
  for (size_t k = 0; k < infos.size(); ++k) {
    if (!infos[k].is_tensor) continue;  // an empty view: the core skips integer outputs
    results[k] = HostTensor(infos[k].dtype, graph.output_shape(k, symbols), str_cat("output #", k));
    if (poison_outputs) poison(results[k]);
  }
  return results;
}

// The user outputs in order (integer outputs as int64 0-d tensors); the new values of inputs the
// program updated in place were written back already.
std::vector<HostTensor> user_outputs(const runtime::CompiledGraph& graph, const runtime::SymbolValues& symbols,
                                     std::vector<HostTensor>& results) {
  const auto& infos = graph.outputs();
  std::vector<HostTensor> outputs;
  for (size_t k = 0; k < infos.size(); ++k) {
    if (!infos[k].returned()) continue;
    if (infos[k].is_tensor) {
      outputs.push_back(std::move(results[k]));
      continue;
    }
    HostTensor value(DType::I64, {}, str_cat("output #", k));
    const int64_t number = graph.int_output(k, symbols);
    std::memcpy(value.data(), &number, sizeof number);
    outputs.push_back(std::move(value));
  }
  return outputs;
}

void check_updated_inputs(const runtime::CompiledGraph& graph, const std::vector<runtime::TensorView>& all,
                          size_t fixed) {
  for (const auto& info : graph.outputs()) {
    if (info.mutated_input < 0 || static_cast<size_t>(info.mutated_input) < fixed) continue;
    const auto k = static_cast<size_t>(info.mutated_input);
    check_writable(all, k, graph.input(k).name);
  }
}

}  // namespace

void Model::check_updated(const std::vector<runtime::TensorView>& all) const {
  try {
    check_updated_inputs(*graph_, all, state_->views.size());
  } catch (const Error& error) {
    throw Error(caller_message(error.what()));
  }
}

std::vector<HostTensor> Model::run_cpu(const std::vector<runtime::TensorView>& inputs) const {
  const std::vector<runtime::TensorView> all = program_inputs(inputs);
  const runtime::SymbolValues symbols = bind(all);  // count, dtypes, shapes, symbols
  check_updated(all);
  std::vector<HostTensor> results = host_outputs(*graph_, symbols);
  std::vector<runtime::TensorView> views(results.size());
  for (size_t k = 0; k < results.size(); ++k) {
    if (graph_->outputs()[k].is_tensor) views[k] = results[k].view();
  }
  graph_->run(all, views, symbols);
  for (const auto& info : graph_->outputs()) {
    if (info.mutated_input < 0) continue;
    // Contiguous (checked above, or at load for the state) and of the output's dtype and shape.
    const size_t k = &info - graph_->outputs().data();
    std::memcpy(all.at(static_cast<size_t>(info.mutated_input)).data, results[k].data(), results[k].nbytes());
  }
  return user_outputs(*graph_, symbols, results);
}

std::vector<HostTensor> Model::run_cuda_from_host(const std::vector<runtime::TensorView>& inputs) const {
  const CudaDevice& cuda = *state_->cuda;
  const CallerContext callers;
  cuda.make_current();
  const size_t fixed = state_->views.size();
  check_updated(program_inputs(inputs));  // on the caller's host memory (program_inputs checks the count)
  // Each input's bytes, as laid out (its strides kept: the program binds the same layout).
  std::vector<DeviceMemory> uploads;
  std::vector<runtime::TensorView> device_inputs = inputs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const auto [first, last] = byte_range(inputs[k]);
    uploads.push_back(cuda.allocate(last - first));
    cuda.copy_to_device(uploads.back().get(), reinterpret_cast<const void*>(first), last - first, nullptr);
    const uintptr_t offset = reinterpret_cast<uintptr_t>(inputs[k].data) - first;
    device_inputs[k].data = static_cast<unsigned char*>(uploads.back().get()) + offset;
    device_inputs[k].device = device_;
  }
  const std::vector<runtime::TensorView> all = program_inputs(device_inputs);
  const runtime::SymbolValues symbols = bind(all);
  std::vector<HostTensor> results = host_outputs(*graph_, symbols);
  const auto& infos = graph_->outputs();
  std::vector<DeviceMemory> memory(infos.size());
  std::vector<runtime::TensorView> views(infos.size());
  const bool poison_outputs = config()->poison_outputs;
  for (size_t k = 0; k < infos.size(); ++k) {
    if (!infos[k].is_tensor) continue;
    memory[k] = cuda.allocate(results[k].nbytes());
    if (poison_outputs) cuda.fill(memory[k].get(), infos[k].dtype == DType::Bool ? 0x5A : 0xff, results[k].nbytes(), nullptr);
    views[k] = dense_view(memory[k].get(), infos[k].dtype, results[k].sizes(), device_);
  }
  const runtime::CudaCallContext context = state_->cuda_context(nullptr);
  graph_->run(all, views, symbols, &context);
  graph_->finish_cuda();  // raises what the kernels recorded (an index out of range)
  for (size_t k = 0; k < infos.size(); ++k) {
    if (!infos[k].is_tensor) continue;
    const int input = infos[k].mutated_input;
    if (input >= 0 && static_cast<size_t>(input) < fixed) {
      cuda.copy_on_device(all[input].data, memory[k].get(), results[k].nbytes(), nullptr);  // a buffer's new value
    } else {
      cuda.copy_to_host(results[k].data(), memory[k].get(), results[k].nbytes(), nullptr);
    }
  }
  cuda.synchronize(nullptr);
  for (size_t k = 0; k < infos.size(); ++k) {
    const int input = infos[k].mutated_input;
    if (input < 0 || static_cast<size_t>(input) < fixed) continue;
    std::memcpy(inputs.at(static_cast<size_t>(input) - fixed).data, results[k].data(), results[k].nbytes());
  }
  return user_outputs(*graph_, symbols, results);
}

std::vector<std::optional<int64_t>> Model::run_on_device(const std::vector<runtime::TensorView>& inputs,
                                                         const std::vector<runtime::TensorView>& outputs,
                                                         void* stream) const {
  LUMINAL_CHECK(state_->cuda != nullptr, "run_on_device: this model runs on the CPU (load it with LoadOptions::device "
                "set to a CUDA device)");
  const CudaDevice& cuda = *state_->cuda;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const runtime::TensorView& view = inputs[k];
    LUMINAL_CHECK(view.device.type == runtime::DeviceType::CUDA && view.device.index == device_.index, "input #", k,
                  " must be device memory on ", runtime::device_name(device_), ", got ", runtime::describe(view));
    LUMINAL_CHECK(view.sizes.size() == view.strides.size(), "input #", k, " has ", view.sizes.size(), " sizes but ",
                  view.strides.size(), " strides");
  }
  const std::lock_guard<std::mutex> lock(state_->run_mutex);
  const CallerContext callers;
  cuda.make_current();
  // A run makes calls a capture forbids (loading kernels, waiting on earlier runs' error records):
  // refused before any of them, so that the caller's capture stays valid.
  LUMINAL_CHECK(!cuda.capturing(stream), "run_on_device: the stream is being captured into a CUDA graph, which "
                "luminal's compiled program does not support; run it outside the capture");
  const std::vector<runtime::TensorView> all = program_inputs(inputs);
  const runtime::SymbolValues symbols = bind(all);
  check_updated(all);
  const auto& infos = graph_->outputs();
  LUMINAL_CHECK(outputs.size() == outputs_.size(), "run_on_device: the program has ", outputs_.size(),
                " user outputs, ", outputs.size(), " output views given");
  std::vector<runtime::TensorView> views(infos.size());
  std::vector<DeviceMemory> scratch(infos.size());  // outputs that update an input through a copy
  if (!state_->check_outputs && std::any_of(infos.begin(), infos.end(), [](const auto& info) { return info.check; })) {
    state_->check_outputs = cuda.allocate(infos.size());  // one byte per output: plenty
  }
  size_t user = 0;
  for (size_t k = 0; k < infos.size(); ++k) {
    const int input = infos[k].mutated_input;
    if (infos[k].check) {
      views[k] = dense_view(static_cast<uint8_t*>(state_->check_outputs.get()) + k, infos[k].dtype, {}, device_);
      continue;
    }
    if (input < 0) {
      const runtime::TensorView& given = outputs[user++];
      if (!infos[k].is_tensor) continue;
      const std::vector<int64_t> shape = graph_->output_shape(k, symbols);
      LUMINAL_CHECK(given.device.type == runtime::DeviceType::CUDA && given.device.index == device_.index &&
                        given.dtype == infos[k].dtype && given.sizes == shape && given.is_contiguous() &&
                        (given.data != nullptr || element_count(shape, "output") == 0),
                    "output #", user - 1, " must be dense device memory on ", runtime::device_name(device_), " for ",
                    dtype_name(infos[k].dtype), int_list(shape), ", got ", runtime::describe(given));
      views[k] = given;
      continue;
    }
    const std::vector<int64_t> shape = graph_->output_shape(k, symbols);
    const runtime::TensorView& target = all[static_cast<size_t>(input)];
    if (infos[k].in_place && target.is_contiguous() && target.sizes == shape && target.dtype == infos[k].dtype) {
      views[k] = target;  // the scatter updates the input's own memory
      continue;
    }
    scratch[k] = cuda.allocate(byte_count(element_count(shape, "output"), infos[k].dtype, "output"));
    views[k] = dense_view(scratch[k].get(), infos[k].dtype, shape, device_);
  }
  const runtime::CudaCallContext context = state_->cuda_context(stream);
  graph_->run(all, views, symbols, &context);
  bool copied = false;
  for (size_t k = 0; k < infos.size(); ++k) {
    if (!scratch[k]) continue;
    cuda.copy_on_device(all[static_cast<size_t>(infos[k].mutated_input)].data, scratch[k].get(), view_bytes(views[k]),
                        stream);
    copied = true;
  }
  if (copied) cuda.synchronize(stream);  // the scratch memory is freed on return
  std::vector<std::optional<int64_t>> integers;
  for (size_t k = 0; k < infos.size(); ++k) {
    if (!infos[k].returned()) continue;
    integers.push_back(infos[k].is_tensor ? std::nullopt : std::optional<int64_t>(graph_->int_output(k, symbols)));
  }
  return integers;
}

void Model::synchronize() const {
  if (!state_->cuda) return;
  const CallerContext callers;
  state_->cuda->make_current();
  graph_->finish_cuda();
}

std::string Model::report() const {
  const runtime::Stats stats = graph_->stats();
  std::ostringstream out;
  out << "engine: " << (state_->cuda ? runtime::device_name(device_) : "cpu") << "\n";
  out << "package: " << (is_package_ ? "luminal package" : ".pt2 archive") << ", " << state_->views.size()
      << " parameters and buffers\n";
  out << "ir nodes: " << stats.ir_nodes << ", megakernel candidate: " << (stats.megakernel ? "yes" : "no") << "\n";
#if LUMINAL_HAVE_CUDA
  if (stats.cuda_used) {
    out << "cuda kernels: " << stats.cuda.kernels << ", library calls: " << stats.cuda.library_calls
        << ", megakernel: " << (stats.cuda.megakernel ? "yes" : "no") << "\n";
    out << "cuda choices: " << stats.cuda.choice_cache_hits << " from the cache, " << stats.cuda.choice_cache_misses
        << " measured\n";
    for (const std::string& choice : stats.cuda.choices) out << "choice: " << choice << "\n";
  }
#endif
  if (state_->cuda) out << CudaDevice::loaded_libraries();
  return out.str();
}

}  // namespace luminal::runner
