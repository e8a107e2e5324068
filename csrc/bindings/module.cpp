// luminal._C: glue between torch tensors and the torch-free core. Converts tensors to views,
// allocates outputs with torch's allocator, writes in-place mutations back, maps errors.
#include <torch/extension.h>

#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#if LUMINAL_TORCH_CUDA
#include <ATen/Context.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "bindings/reference_kernel.h"
#include "common/cache_files.h"
#include "common/checked.h"
#include "common/config.h"
#include "common/error.h"
#include "common/notices.h"
#include "frontend/translate.h"
#include "runtime/compiled.h"
#include "runtime/input_overlap.h"
#if LUMINAL_HAVE_CUDA
#include "runtime/cuda/api.h"
#include "runtime/cuda/nvrtc.h"
#endif

namespace py = pybind11;
using namespace luminal;

namespace {

DType to_dtype(at::ScalarType type) {
  switch (type) {
    case at::kBool: return DType::Bool;
    case at::kByte: return DType::U8;
    case at::kChar: return DType::I8;
    case at::kShort: return DType::I16;
    case at::kInt: return DType::I32;
    case at::kLong: return DType::I64;
    case at::kHalf: return DType::F16;
    case at::kBFloat16: return DType::BF16;
    case at::kFloat: return DType::F32;
    case at::kDouble: return DType::F64;
    default: fail("tensors of dtype ", c10::toString(type), " are not supported");
  }
}

at::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return at::kBool;
    case DType::U8: return at::kByte;
    case DType::I8: return at::kChar;
    case DType::I16: return at::kShort;
    case DType::I32: return at::kInt;
    case DType::I64: return at::kLong;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
    case DType::F32: return at::kFloat;
    case DType::F64: return at::kDouble;
  }
  fail("invalid dtype");
}

// A call the compiled graph cannot take although Dynamo let it through: its inputs do not bind
// (sizes outside what the export assumed), or a size argument cannot be carried. The Python
// backend runs that call in eager (which also raises what eager raises).
class CallInEager : public Error {
 public:
  using Error::Error;
};

// Raised by a call in which an input that the graph updates in place shares memory with another
// input. Eager applies in-place updates through aliases one after another; a compiled graph reads
// every input at entry and writes the updated ones back at the end, so such a call would differ
// from eager. The Python backend runs that call in eager instead.
class InputsOverlap : public CallInEager {
 public:
  using CallInEager::CallInEager;
};

// Raised by a call with an input whose conjugate or negative bit is set: torch negates its stored
// values lazily on read, and the graph reads memory by pointer. The Python side runs that call in
// eager (luminal.compile's modules too, where other binding failures raise).
class LazyInput : public CallInEager {
 public:
  using CallInEager::CallInEager;
};

// Raised by a call made while torch's stream is being captured into a CUDA graph that the engine
// cannot add to the capture (runtime::CaptureUnsupported: the first call on the device, a binding
// no earlier call built). The Python side runs that call in eager, whose kernels are captured.
class StreamCapture : public CallInEager {
 public:
  using CallInEager::CallInEager;
};

// Whether torch's current stream on `device` is being captured into a CUDA graph.
bool stream_capturing(const at::Device& device) {
#if LUMINAL_TORCH_CUDA && LUMINAL_HAVE_CUDA
  if (!device.is_cuda()) return false;
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device.index());
  return cuda::stream_capturing(reinterpret_cast<CUstream>(stream.stream()));
#else
  (void)device;
  return false;
#endif
}

// An integer argument of a graph as the tensor that carries it: its value plus kSizeCarrierOffset
// is the leading size of an empty [n, 0] tensor (no memory), so the core binds it as a shape
// symbol. The offset keeps 0 and 1 from being specialized by torch.export (see backend.py).
constexpr int64_t kSizeCarrierOffset = 2;

at::Tensor size_carrier(int64_t value) {
  if (value < -kSizeCarrierOffset || value > (int64_t{1} << 62)) {
    throw CallInEager(str_cat("integer argument ", value, " is outside what the compiled graph takes"));
  }
  return at::empty({value + kSizeCarrierOffset, 0}, at::TensorOptions().dtype(at::kByte));
}

// The real dtype of a complex tensor's pairs (complex32 has none here).
std::optional<DType> pair_dtype(at::ScalarType type) {
  if (type == at::kComplexFloat) return DType::F32;
  if (type == at::kComplexDouble) return DType::F64;
  return std::nullopt;
}

// A tensor whose conjugate or negative bit is set (z.conj(), z.conj().imag) stores values that
// torch negates lazily on read: bound by pointer, the graph would read the stored ones. Such a call
// runs in eager.
void refuse_lazy_bits(const at::Tensor& t, size_t position) {
  if (t.is_conj() || t.is_neg()) {
    throw LazyInput(str_cat("input #", position, " has its ", t.is_conj() ? "conjugate" : "negative",
                              " bit set (a lazy view, e.g. of z.conj()): call .resolve_conj() or .resolve_neg() "
                              "on it to compile the call"));
  }
}

// Fills `view` in place (its size and stride vectors keep their capacity: no allocation per call).
// A complex tensor becomes its pairs (TensorView::complex_pairs), as torch.view_as_real sees it.
void fill_view(runtime::TensorView& view, const at::Tensor& t, size_t position) {
  LUMINAL_CHECK(t.defined(), "input #", position, " is an undefined tensor");
  LUMINAL_CHECK(t.layout() == at::kStrided, "input #", position, " is not a strided tensor");
  refuse_lazy_bits(t, position);
  view.data = t.data_ptr();
  const std::optional<DType> pair = pair_dtype(t.scalar_type());
  view.dtype = pair ? *pair : to_dtype(t.scalar_type());
  view.complex_pairs = pair.has_value();
  const at::IntArrayRef sizes = t.sizes(), strides = t.strides();
  view.sizes.assign(sizes.begin(), sizes.end());
  view.strides.assign(strides.begin(), strides.end());
  if (pair) complex_layout_as_pairs(view.sizes, view.strides, str_cat("input #", position, "'s strides as pairs"));
  if (t.is_cuda()) {
    view.device = runtime::Device{runtime::DeviceType::CUDA, t.get_device()};
  } else {
    LUMINAL_CHECK(t.is_cpu(), "input #", position, " is on unsupported device ", t.device().str());
    view.device = runtime::Device{};
  }
}

// Whether `view` (filled by fill_view: on the CPU or a CUDA device) is on `device`.
bool view_on(const runtime::TensorView& view, const at::Device& device) {
  return device.is_cuda() ? view.device.type == runtime::DeviceType::CUDA && view.device.index == device.index()
                          : device.is_cpu() && view.device.type == runtime::DeviceType::CPU;
}

// How an input differs from the view fill_view made of the input at its position in an earlier
// call: not at all, in its memory only, or in what binding checks (dtype, sizes, strides, device;
// also what fill_view refuses, which it then raises).
enum class ViewChange { None, Memory, Layout };

ViewChange change_of(const runtime::TensorView& view, const at::Tensor& t) {
  if (!t.defined() || t.layout() != at::kStrided || t.is_conj() || t.is_neg()) return ViewChange::Layout;
  const std::optional<DType> pair = pair_dtype(t.scalar_type());
  if (pair.has_value() != view.complex_pairs || (pair ? *pair != view.dtype : t.scalar_type() != to_scalar_type(view.dtype))) {
    return ViewChange::Layout;
  }
  // A complex tensor's view has one more dimension (the pair) and strides twice its own.
  const size_t rank = view.sizes.size() - (pair ? 1 : 0);
  const int64_t scale = pair ? 2 : 1;
  const at::IntArrayRef sizes = t.sizes(), strides = t.strides();
  const bool same_layout =
      view_on(view, t.device()) && sizes.size() == rank &&
      std::equal(sizes.begin(), sizes.end(), view.sizes.begin()) &&
      std::equal(strides.begin(), strides.end(), view.strides.begin(),
                 [scale](int64_t stride, int64_t seen) { return seen % scale == 0 && seen / scale == stride; });
  if (!same_layout) return ViewChange::Layout;
  return t.data_ptr() == view.data ? ViewChange::None : ViewChange::Memory;
}

// What this thread's last call of a graph bound (its inputs' views and their symbols), so that the
// next call of that graph checks only what changed: a decode step passes ~200 tensors, of which
// the token and the position are new and none is reshaped.
struct BoundCall {
  uint64_t graph = 0;  // the graph's PyCompiledGraph::memo_id_; 0 while a call is being bound
  std::vector<runtime::TensorView> views;
  runtime::SymbolValues symbols;
  std::vector<size_t> moved;  // the inputs whose view changed since that call
};

uint64_t next_memo_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

runtime::TensorView to_view(const at::Tensor& t, size_t position) {
  runtime::TensorView view;
  fill_view(view, t, position);
  return view;
}

void poison(at::Tensor& t) {
  if (at::isFloatingType(t.scalar_type())) {
    t.fill_(std::numeric_limits<double>::quiet_NaN());
  } else if (t.scalar_type() == at::kBool) {
    t.view(at::kByte).fill_(0x5A);  // not a valid bool: reads as true, and never as what eager wrote
  } else {
    t.fill_(-1);
  }
}

#if LUMINAL_TORCH_CUDA
// Intermediates and constants come from torch's caching allocator: the memory returns to torch's
// pool when the handle dies.
class TorchCudaAllocator : public runtime::gpu::DeviceAllocator {
 public:
  std::shared_ptr<void> allocate(size_t bytes, int device) override {
    at::Tensor storage = at::empty({static_cast<int64_t>(bytes)},
                                   at::TensorOptions().dtype(at::kByte).device(at::Device(at::kCUDA, device)));
    void* data = storage.data_ptr();
    return std::shared_ptr<void>(data, [storage](void*) mutable { storage.reset(); });
  }
};

runtime::CudaCallContext cuda_context(const at::Device& device) {
  static TorchCudaAllocator allocator;
  runtime::CudaCallContext context;
  context.device = device.index();
  context.stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  context.allow_tf32 = at::globalContext().allowTF32CuBLAS();
  context.allow_tf32_convolution = at::globalContext().allowTF32CuDNN();
  context.allocator = &allocator;
  return context;
}
#endif

runtime::CompileOptions compile_options(const std::vector<std::string>& roles, bool megakernel) {
  runtime::CompileOptions options;
  const std::shared_ptr<const Config> settings = config();
  options.check_cuda_arch = settings->check_cuda_arch;
  options.megakernel = megakernel;
  options.cpu_runs_row_graph = settings->cpu_runs_row_graph;
  options.optimize.assign_layouts = settings->assign_layouts;
  for (const std::string& role : roles) {
    if (role == "parameter") {
      options.input_roles.push_back(ir::InputRole::Parameter);
    } else if (role == "buffer") {
      options.input_roles.push_back(ir::InputRole::Buffer);
    } else if (role == "user") {
      options.input_roles.push_back(ir::InputRole::User);
    } else {
      fail("unknown input role '", role, "' (expected user, parameter or buffer)");
    }
  }
  return options;
}

#if LUMINAL_HAVE_CUDA
constexpr bool kHasCudaEngine = true;
#else
constexpr bool kHasCudaEngine = false;
#endif

double microseconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

double microseconds_since(std::chrono::steady_clock::time_point from) {
  return microseconds_between(from, std::chrono::steady_clock::now());
}

// The device of a call. A graph's inputs share one device, except host tensors that hold no
// elements of their own to read there: 0-d tensors (Python scalars, which eager lets sit beside
// CUDA tensors) and the size carriers of integer arguments (empty). So: the first input on a GPU;
// else, if some input with elements of its own is on the host, the CPU; else the device the export
// recorded for the outputs (a graph that builds tensors from integers alone, as after a graph
// break whose only operands are sizes), else the CPU.
at::Device call_device(const std::vector<const at::Tensor*>& inputs,
                       const std::vector<runtime::OutputInfo>& outputs) {
  bool host_data = false;
  for (const at::Tensor* input : inputs) {
    if (input->is_cuda()) return input->device();
    host_data = host_data || (input->dim() > 0 && input->numel() > 0);
  }
  if (!host_data) {
    for (const runtime::OutputInfo& info : outputs) {
      if (info.is_tensor && !info.device.empty()) return at::Device(info.device);
    }
  }
  return at::Device(at::kCPU);
}

class PyCompiledGraph {
 public:
  explicit PyCompiledGraph(std::shared_ptr<runtime::CompiledGraph> core) : core_(std::move(core)) {
    std::vector<bool> mutated(core_->num_inputs(), false);
    bool any = false;
    for (const runtime::OutputInfo& info : core_->outputs()) {
      if (info.mutated_input < 0) continue;
      mutated.at(static_cast<size_t>(info.mutated_input)) = true;
      any = true;
    }
    if (any) overlap_ = std::make_unique<runtime::MutatedInputOverlap>(std::move(mutated));
  }

  // The per-call fast path for torch.compile and luminal.compile: the fixed inputs (see
  // set_fixed_inputs), then the tensor arguments at the positions given to set_call_layout;
  // returns the outputs as a tuple, a list, or the one output itself (see OutputForm).
  py::object call(const py::args& args) const {
    const auto entered = std::chrono::steady_clock::now();
    // The inputs by address, no copies: a copy of an at::Tensor is an atomic reference count
    // update on its TensorImpl, and a decode step passes ~200 tensors (its weights among them).
    // The fixed inputs live in this object, the arguments' tensors in `args`, for the whole call.
    thread_local std::vector<const at::Tensor*> inputs;
    inputs.clear();
    for (const at::Tensor& fixed : fixed_inputs_) inputs.push_back(&fixed);
    if (!argument_structure_.empty()) collect_structured(args, inputs);
    for (const size_t position : call_positions_) {
      PyObject* argument = argument_at(args, position);
      LUMINAL_CHECK(THPVariable_Check(argument), "argument ", position, " is a ", Py_TYPE(argument)->tp_name,
                    ", not a tensor");
      inputs.push_back(&THPVariable_Unpack(argument));
    }
    std::vector<at::Tensor> carriers;
    carriers.reserve(size_positions_.size());  // no reallocation: `inputs` points into it
    for (const size_t position : size_positions_) {
      PyObject* argument = argument_at(args, position);
      LUMINAL_CHECK(PyLong_Check(argument), "argument ", position, " is a ", Py_TYPE(argument)->tp_name,
                    ", not an int");
      int overflow = 0;
      const long long value = PyLong_AsLongLongAndOverflow(argument, &overflow);
      if (overflow != 0) throw CallInEager(str_cat("integer argument ", position, " does not fit 64 bits"));
      inputs.push_back(&carriers.emplace_back(size_carrier(value)));
    }
    host_times_->collect = microseconds_since(entered);
    py::list outputs = run_pointers(inputs);
    py::object result;
    switch (output_form_) {
      case OutputForm::Tuple: result = py::tuple(outputs); break;
      case OutputForm::Single:
        LUMINAL_CHECK(outputs.size() == 1, "the graph returned ", outputs.size(), " outputs, expected one");
        result = outputs[0];
        break;
      case OutputForm::List: result = std::move(outputs); break;
    }
    host_times_->call = microseconds_since(entered);
    return result;
  }

  // Which call arguments are the graph's tensor inputs, whether call() returns a tuple, and which
  // integer arguments follow them as size carriers. `single`: call() returns the one output itself.
  void set_call_layout(std::vector<size_t> positions, bool as_tuple, std::vector<size_t> size_positions,
                       bool single) {
    LUMINAL_CHECK(!(as_tuple && single), "set_call_layout: as_tuple and single exclude each other");
    LUMINAL_CHECK(!single || num_user_outputs() == 1, "set_call_layout: single needs one user output, the graph has ",
                  num_user_outputs());
    call_positions_ = std::move(positions);
    output_form_ = single ? OutputForm::Single : as_tuple ? OutputForm::Tuple : OutputForm::List;
    size_positions_ = std::move(size_positions);
  }

  // The arguments' structure, for call(): 'T' a tensor, '(' ... ')' a tuple, '[' ... ']' a list;
  // the string lists the items of the argument tuple. call() then takes the tensors in that order
  // (after the fixed inputs) and raises a LuminalError when the arguments have another structure.
  // Empty: the call layout's positions instead.
  void set_argument_structure(std::string structure) {
    size_t depth = 0;
    for (const char c : structure) {
      LUMINAL_CHECK(c == 'T' || c == '(' || c == ')' || c == '[' || c == ']', "argument structure '", structure,
                    "' has the character '", c, "'");
      depth += (c == '(' || c == '[');
      if (c == ')' || c == ']') {
        LUMINAL_CHECK(depth > 0, "argument structure '", structure, "' closes more than it opens");
        --depth;
      }
    }
    LUMINAL_CHECK(depth == 0, "argument structure '", structure, "' is not closed");
    argument_structure_ = std::move(structure);
  }

  // Tensors that call() passes as the graph's first inputs on every call (luminal.compile binds a
  // module's parameters and buffers here once). They are held, not copied: call() reads each one's
  // pointer, sizes and strides anew, so `param.data = other` or a `.to()` in place is seen by the
  // next call (and checked by bind like any input).
  void set_fixed_inputs(std::vector<at::Tensor> tensors) {
    LUMINAL_CHECK(tensors.size() <= core_->num_inputs(), "set_fixed_inputs: ", tensors.size(),
                  " tensors for a graph of ", core_->num_inputs(), " inputs");
    fixed_inputs_ = std::move(tensors);
  }

  // Runs the graph; returns the user outputs (tensors and ints) in order. Mutated inputs are
  // updated in place.
  py::list run(const std::vector<at::Tensor>& tensors) const {
    std::vector<const at::Tensor*> inputs;
    inputs.reserve(tensors.size());
    for (const at::Tensor& t : tensors) inputs.push_back(&t);
    return run_pointers(inputs);
  }

  // run() on tensors the caller keeps alive for the call.
  py::list run_pointers(const std::vector<const at::Tensor*>& inputs) const {
    const auto start = std::chrono::steady_clock::now();
    // One set of views per thread, reused: after the first call, converting the inputs allocates
    // nothing (a DLRM passes ~100 tensors per call), and a repeated call of this graph refills,
    // checks for overlaps and binds only what changed. Nothing below re-enters run().
    thread_local BoundCall last;
    const bool repeated = last.graph == memo_id_ && last.views.size() == inputs.size();
    last.graph = 0;  // until every check below has passed
    std::vector<runtime::TensorView>& views = last.views;
    views.resize(inputs.size());
    last.moved.clear();
    bool relaid = !repeated;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (repeated) {
        const ViewChange change = change_of(views[k], *inputs[k]);
        if (change == ViewChange::None) continue;
        relaid = relaid || change == ViewChange::Layout;
        last.moved.push_back(k);
      }
      fill_view(views[k], *inputs[k], k);
    }
    if (overlap_ && (!repeated || !last.moved.empty())) {
      if (const auto overlap = repeated ? overlap_->find_involving(views, last.moved) : overlap_->find(views)) {
        throw InputsOverlap(str_cat("input #", overlap->first, " is updated in place and shares memory with input #",
                                    overlap->second, ": the compiled graph would not see the update through "
                                    "the alias as eager does"));
      }
      if (const auto shared = overlap_->find_self_overlapping(views, repeated ? &last.moved : nullptr)) {
        throw InputsOverlap(str_cat("input #", *shared, " is updated in place and its elements may share memory (",
                                    runtime::describe(views[*shared]), "): eager decides what such a write does"));
      }
    }
    if (relaid) {
      try {
        last.symbols = core_->bind(views);
      } catch (const Error& error) {
        throw CallInEager(str_cat("the call's inputs do not fit the compiled graph: ", error.what()));
      }
    }
    last.graph = memo_id_;
    const runtime::SymbolValues& symbols = last.symbols;

    const auto bound = std::chrono::steady_clock::now();
    const auto& infos = core_->outputs();
    std::vector<at::Tensor> tensors(infos.size());  // the outputs allocated here (in-place ones stay undefined)
    thread_local std::vector<runtime::TensorView> out_views;  // reused like `views`
    out_views.resize(infos.size());
    std::vector<bool> written_in_place(infos.size(), false);
    const at::Device device = call_device(inputs, infos);
    const bool poison_outputs = config()->poison_outputs;
    const auto shapes = core_->output_shapes(symbols);
    std::shared_ptr<const CheckMemory> checks;  // only for graphs with check outputs
    for (size_t k = 0; k < infos.size(); ++k) {
      if (!infos[k].is_tensor) {
        out_views[k] = runtime::TensorView{};
        continue;
      }
      if (infos[k].check) {
        // A captured call's kernels write for as long as the caller replays its graph: into memory
        // of the capture's own pool, not the memory this object reuses (and frees when it dies).
        if (!checks) checks = stream_capturing(device) ? make_check_memory(device) : check_memory(device);
        out_views[k] = checks->views[k];
        continue;
      }
      const std::vector<int64_t>& shape = (*shapes)[k];
      if (infos[k].in_place && writable_in_place(views.at(infos[k].mutated_input), infos[k], shape, device)) {
        out_views[k] = views[infos[k].mutated_input];  // the graph updates the input in its own memory
        written_in_place[k] = true;
        continue;
      }
      tensors[k] = at::empty(shape, at::TensorOptions().dtype(to_scalar_type(infos[k].dtype)).device(device));
      if (poison_outputs) poison(tensors[k]);
      fill_view(out_views[k], tensors[k], k);
    }
    const bool on_cuda = device.is_cuda();
#if LUMINAL_TORCH_CUDA
    runtime::CudaCallContext cuda;
    if (on_cuda) cuda = cuda_context(device);
#else
    runtime::CudaCallContext cuda;
    LUMINAL_CHECK(!on_cuda, "CUDA tensors given, but this luminal was built against a CPU-only torch");
#endif
    // Owning handles of the inputs written back after the run (none where every update is in
    // place): the GIL is released during it, and another thread may replace the fixed inputs.
    std::vector<std::pair<size_t, at::Tensor>> write_back;
    for (size_t k = 0; k < infos.size(); ++k) {
      if (infos[k].mutated_input < 0 || written_in_place[k]) continue;
      write_back.emplace_back(k, *inputs.at(infos[k].mutated_input));
    }
    const auto allocated = std::chrono::steady_clock::now();
    try {
      py::gil_scoped_release no_gil;
      core_->run(views, out_views, symbols, on_cuda ? &cuda : nullptr);
    } catch (const CaptureUnsupported& refused) {
      throw StreamCapture(refused.what());
    }
    const auto ran = std::chrono::steady_clock::now();
    size_t copied = 0;
    for (auto& [k, target] : write_back) {
      target.copy_(tensors[k]);
      copied += tensors[k].nbytes();
    }
    py::list results;
    for (size_t k = 0; k < infos.size(); ++k) {
      if (!infos[k].returned()) continue;
      if (infos[k].is_tensor) {
        results.append(tensors[k]);
      } else {
        results.append(py::int_(core_->int_output(k, symbols)));
      }
    }
    *copy_back_bytes_ = copied;
    host_times_->bind = microseconds_between(start, bound);
    host_times_->outputs = microseconds_between(bound, allocated);
    host_times_->run = microseconds_between(allocated, ran);
    host_times_->write_back = microseconds_since(ran);
    return results;
  }

  std::string ir(bool optimized) const { return core_->ir_text(optimized); }

  py::dict stats() const {
    const runtime::Stats s = core_->stats();
    py::dict d;
    d["ir_nodes"] = s.ir_nodes;
    d["kernels"] = s.kernels;
    d["matmuls"] = s.matmuls;
    d["attentions"] = s.attentions;
    d["inputs"] = s.inputs;
    d["constants"] = s.constants;
    d["engine"] = s.cuda_used ? "cuda" : "cpu";
    d["megakernel"] = s.megakernel;
    d["megakernel_reason"] = s.megakernel_reason;
    d["megakernel_fallbacks"] = s.megakernel_fallbacks;
    // Bytes the last call copied to update mutated inputs: written back after the graph ran, and
    // copied from scatter bases inside it. An in-place update (a KV-cache write) copies neither.
    d["copy_back_bytes"] = copy_back_bytes_->load();
    d["scatter_copy_bytes"] = s.scatter_copy_bytes;
    py::dict host_us;
    host_us["bind"] = host_times_->bind.load();        // the inputs' views, checked against the graph
    host_us["outputs"] = host_times_->outputs.load();  // output tensors allocated
    host_us["run"] = host_times_->run.load();          // the engine's call (CUDA: up to the graph's launch)
    host_us["write_back"] = host_times_->write_back.load();  // mutated inputs copied back, results collected
    // call(), the fast path, in all (run() above among it) and of that the arguments' collection
    host_us["call"] = host_times_->call.load();
    host_us["collect"] = host_times_->collect.load();
#if LUMINAL_HAVE_CUDA
    if (s.cuda_used) {
      host_us["cuda_prepare"] = s.cuda.host_prepare_us;  // of run: instance, checks, pointer updates
      host_us["cuda_launch"] = s.cuda.host_launch_us;    // of run: the graph launch
    }
#endif
    d["host_us"] = host_us;
#if LUMINAL_HAVE_CUDA
    if (s.cuda_used) {
      py::dict c;
      c["kernels"] = s.cuda.kernels;
      c["library_calls"] = s.cuda.library_calls;
      c["graph_nodes"] = s.cuda.graph_nodes;
      c["programmatic_edges"] = s.cuda.programmatic_edges;
      c["grouped_gemvs"] = s.cuda.grouped_gemvs;
      c["grouped_kernels"] = s.cuda.grouped_kernels;
      c["swiglu_pairs"] = s.cuda.swiglu_pairs;
      c["launches_per_call"] = s.cuda.launches_per_call;
      c["staging_copies"] = s.cuda.staging_copies;
      c["host_syncs"] = s.cuda.host_syncs;
      c["megakernel"] = s.cuda.megakernel;
      c["bytes_per_call"] = s.cuda.bytes_per_call;
      c["instances"] = s.cuda.instances;
      c["graph_builds"] = s.cuda.graph_builds;
      c["pointer_updates"] = s.cuda.pointer_updates;
      c["calls"] = s.cuda.calls;
      c["captured_calls"] = s.cuda.captured_calls;  // calls added to a caller's CUDA graph capture
      c["choices"] = s.cuda.choices;
      c["choice_cache_hits"] = s.cuda.choice_cache_hits;
      c["choice_cache_misses"] = s.cuda.choice_cache_misses;
      d["cuda"] = c;
    }
#endif
    return d;
  }

  std::string cuda_source() const { return core_->cuda_source(); }

  std::vector<std::string> input_names() const {
    std::vector<std::string> names;
    for (size_t k = 0; k < core_->num_inputs(); ++k) names.push_back(core_->input(k).name);
    return names;
  }

  size_t num_user_outputs() const {
    size_t n = 0;
    for (const auto& info : core_->outputs()) n += info.returned();
    return n;
  }

 private:
  // The output may be written straight into its mutated input: same dtype, shape and device, and
  // dense row-major memory (run() has already refused calls in which a mutated input overlaps
  // another input's memory).
  static bool writable_in_place(const runtime::TensorView& target, const runtime::OutputInfo& info,
                                const std::vector<int64_t>& shape, const at::Device& device) {
    // The input's view, not its tensor: the view was just filled, the TensorImpl may be out of cache.
    return target.dtype == info.dtype && view_on(target, device) && target.sizes == shape && target.is_contiguous();
  }

  // Appends the tensors of `args` in argument_structure_'s order (see set_argument_structure).
  void collect_structured(const py::args& args, std::vector<const at::Tensor*>& out) const {
    size_t cursor = 0;
    const Py_ssize_t count = PyTuple_GET_SIZE(args.ptr());
    for (Py_ssize_t k = 0; k < count; ++k) {
      if (at_close(cursor)) throw structure_mismatch();  // more arguments than compiled for
      collect_value(PyTuple_GET_ITEM(args.ptr(), k), cursor, out);
    }
    if (cursor != argument_structure_.size()) throw structure_mismatch();  // fewer
  }

  // Walks one value against the structure from `cursor` on (recursion depth: the nesting).
  void collect_value(PyObject* value, size_t& cursor, std::vector<const at::Tensor*>& out) const {
    const std::string& s = argument_structure_;
    if (cursor >= s.size()) throw structure_mismatch();
    const char kind = s[cursor++];
    if (kind == 'T') {
      if (!THPVariable_Check(value)) throw structure_mismatch();
      out.push_back(&THPVariable_Unpack(value));
      return;
    }
    const bool tuple = kind == '(';
    if (tuple ? !PyTuple_CheckExact(value) : !PyList_CheckExact(value)) throw structure_mismatch();
    const Py_ssize_t size = tuple ? PyTuple_GET_SIZE(value) : PyList_GET_SIZE(value);
    for (Py_ssize_t k = 0; k < size; ++k) {
      if (at_close(cursor)) throw structure_mismatch();  // more items than compiled for
      collect_value(tuple ? PyTuple_GET_ITEM(value, k) : PyList_GET_ITEM(value, k), cursor, out);
    }
    if (cursor >= s.size() || s[cursor] != (tuple ? ')' : ']')) throw structure_mismatch();  // fewer items
    ++cursor;
  }

  bool at_close(size_t cursor) const {
    if (cursor >= argument_structure_.size()) return true;
    return argument_structure_[cursor] == ')' || argument_structure_[cursor] == ']';
  }

  Error structure_mismatch() const {
    return Error(str_cat("the call's arguments do not have the structure the module was compiled for (",
                         argument_structure_, ")"));
  }

  std::shared_ptr<runtime::CompiledGraph> core_;
  // Names this graph in a thread's BoundCall (copies of this object share it, and the graph).
  uint64_t memo_id_ = next_memo_id();
  // Graphs that update inputs in place: the per-call check that those share no memory with others.
  std::unique_ptr<runtime::MutatedInputOverlap> overlap_;
  static PyObject* argument_at(const py::args& args, size_t position) {
    LUMINAL_CHECK(position < args.size(), "expected at least ", position + 1, " arguments, got ", args.size());
    return PyTuple_GET_ITEM(args.ptr(), position);
  }

  enum class OutputForm { List, Tuple, Single };
  std::vector<at::Tensor> fixed_inputs_;
  std::string argument_structure_;
  std::vector<size_t> call_positions_;
  std::vector<size_t> size_positions_;
  OutputForm output_form_ = OutputForm::List;
  // The last call's write-back bytes (shared: the object is returned by value).
  std::shared_ptr<std::atomic<size_t>> copy_back_bytes_ = std::make_shared<std::atomic<size_t>>(0);
  // Host time of the last call's parts, microseconds (stats()["host_us"]): what a call costs
  // besides the graph itself.
  struct HostTimes {
    std::atomic<double> bind{0}, outputs{0}, run{0}, write_back{0}, call{0}, collect{0};
  };
  std::shared_ptr<HostTimes> host_times_ = std::make_shared<HostTimes>();
  // The check outputs' memory (runtime::OutputInfo::check): a byte per output and device, allocated
  // at the first call there and reused, since no caller ever sees the values (and a fixed address
  // needs no CUDA-graph parameter update per call). Shared by copies of this object.
  struct CheckMemory {
    at::Tensor bytes;                         // one per graph output (the check outputs use theirs)
    std::vector<runtime::TensorView> views;   // by output position; set for the check outputs
  };
  struct CheckOutputs {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<const CheckMemory>> per_device;  // by at::Device::str()
  };
  std::shared_ptr<CheckOutputs> check_outputs_ = std::make_shared<CheckOutputs>();

  // Held by the caller for the call (its views point into it).
  std::shared_ptr<const CheckMemory> make_check_memory(const at::Device& device) const {
    const auto& infos = core_->outputs();
    auto memory = std::make_shared<CheckMemory>();
    memory->bytes = at::ones({static_cast<int64_t>(infos.size())}, at::TensorOptions().dtype(at::kBool).device(device));
    memory->views.resize(infos.size());
    for (size_t k = 0; k < infos.size(); ++k) {
      if (infos[k].check) memory->views[k] = to_view(memory->bytes.select(0, static_cast<int64_t>(k)), k);
    }
    return memory;
  }

  std::shared_ptr<const CheckMemory> check_memory(const at::Device& device) const {
    const std::lock_guard<std::mutex> lock(check_outputs_->mutex);
    std::shared_ptr<const CheckMemory>& held = check_outputs_->per_device[device.str()];
    if (!held) held = make_check_memory(device);
    return held;
  }
};

// luminal::UnsupportedNode -> luminal._C.LuminalUnsupportedError (a LuminalError) with the
// attributes node, target and reason, so that Python needs no message parsing.
void register_unsupported_node_error(py::module_& m, const py::object& luminal_error) {
  // Lives as long as the module (never freed: the exception type outlives every call).
  static PyObject* const type = PyErr_NewExceptionWithDoc(
      "luminal._C.LuminalUnsupportedError",
      "A node luminal does not compile; attributes: node, target (e.g. 'torch.ops.aten.pow.Tensor_Tensor'), reason.",
      luminal_error.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object("LuminalUnsupportedError", py::handle(type));
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const UnsupportedNode& error) {
      py::object instance = py::reinterpret_borrow<py::object>(type)(error.what());
      instance.attr("node") = error.node();
      instance.attr("target") = error.target();
      instance.attr("reason") = error.reason();
      PyErr_SetObject(type, instance.ptr());
    }
  });
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "luminal core: PT2 archives compiled to a CPU or CUDA program";

  const auto luminal_error = py::register_exception<Error>(m, "LuminalError", PyExc_RuntimeError);
  const auto call_in_eager = py::register_exception<CallInEager>(m, "LuminalCallInEagerError", luminal_error.ptr());
  py::register_exception<InputsOverlap>(m, "LuminalInputsOverlapError", call_in_eager.ptr());
  py::register_exception<LazyInput>(m, "LuminalLazyInputError", call_in_eager.ptr());
  py::register_exception<StreamCapture>(m, "LuminalStreamCaptureError", call_in_eager.ptr());
  register_unsupported_node_error(m, luminal_error);

  py::class_<PyCompiledGraph>(m, "CompiledGraph")
      .def("run", &PyCompiledGraph::run, py::arg("inputs"),
           "Runs the graph on the given tensors; returns the user outputs, writes mutated inputs back.")
      .def("call", &PyCompiledGraph::call, "run() on the tensors at the call layout's positions of the arguments.")
      .def("set_call_layout", &PyCompiledGraph::set_call_layout, py::arg("positions"), py::arg("as_tuple"),
           py::arg("size_positions") = std::vector<size_t>{}, py::arg("single") = false,
           "Which call arguments are the graph's tensor inputs, whether call() returns a tuple, and which integer "
           "arguments follow them as size carriers (an empty [value + 2, 0] tensor each). single: call() returns "
           "the graph's one output itself.")
      .def("set_argument_structure", &PyCompiledGraph::set_argument_structure, py::arg("structure"),
           "The arguments' structure for call(): 'T' a tensor, '(...)' a tuple, '[...]' a list (the items of the "
           "argument tuple); call() takes the tensors in that order. Empty: the call layout's positions.")
      .def("set_fixed_inputs", &PyCompiledGraph::set_fixed_inputs, py::arg("tensors"),
           "Tensors call() passes first on every call (held by reference, read anew per call).")
      .def_static("size_carrier", &size_carrier, py::arg("value"),
                  "The empty [value + 2, 0] tensor that carries an integer argument as a size.")
      .def("ir", &PyCompiledGraph::ir, py::arg("optimized") = true, "The IR as text.")
      .def("stats", &PyCompiledGraph::stats)
      .def("cuda_source", &PyCompiledGraph::cuda_source, "The generated CUDA module (prelude and kernels).")
      .def_property_readonly("input_names", &PyCompiledGraph::input_names)
      .def_property_readonly("num_user_outputs", &PyCompiledGraph::num_user_outputs);

  m.def(
      "compile",
      [](py::bytes archive, const std::vector<std::string>& input_roles, bool megakernel) {
        std::string bytes = archive;  // copies out of the Python object before releasing the GIL
        const runtime::CompileOptions options = compile_options(input_roles, megakernel);
        std::shared_ptr<runtime::CompiledGraph> core;
        {
          py::gil_scoped_release no_gil;
          core = runtime::CompiledGraph::from_archive_bytes(std::move(bytes), options);
        }
        return PyCompiledGraph(std::move(core));
      },
      py::arg("archive"), py::arg("input_roles") = std::vector<std::string>{}, py::arg("megakernel") = true,
      "Compiles a PT2 archive (bytes). input_roles: 'user'/'parameter'/'buffer' per tensor input; megakernel: "
      "run row-local graphs as one CUDA kernel.");

  m.def(
      "refused_nodes",
      [](py::bytes archive, const std::vector<std::string>& input_roles) {
        std::string bytes = archive;
        const runtime::CompileOptions options = compile_options(input_roles, true);
        std::vector<std::tuple<std::string, std::string, std::string>> out;
        {
          py::gil_scoped_release no_gil;
          for (frontend::Refusal& r : runtime::refused_nodes(std::move(bytes), options)) {
            out.emplace_back(std::move(r.node), std::move(r.target), std::move(r.reason));
          }
        }
        return out;
      },
      py::arg("archive"), py::arg("input_roles") = std::vector<std::string>{},
      "Every node of a PT2 archive that luminal does not translate, found in one pass: a list of (node, target, "
      "reason). Raises LuminalError for problems that are no node's (e.g. an unsupported input kind).");

  m.def(
      "load",
      [](const std::string& path, std::optional<int64_t> max_archive_bytes) {
        runtime::CompileOptions options;
        if (max_archive_bytes) {
          LUMINAL_CHECK(*max_archive_bytes > 0, "max_archive_bytes must be a positive number of bytes, got ",
                        *max_archive_bytes);
          options.max_archive_bytes = static_cast<uint64_t>(*max_archive_bytes);
        }
        py::gil_scoped_release no_gil;
        return PyCompiledGraph(runtime::CompiledGraph::from_archive_file(path, options));
      },
      py::arg("path"), py::arg("max_archive_bytes") = py::none(),
      "Compiles a .pt2 file written by torch.export.save (weights taken from the archive). max_archive_bytes: the "
      "most bytes read from it (default LUMINAL_MAX_ARCHIVE_BYTES, else 64 GiB).");

  m.def("supported_targets", [] { return frontend::Registry::instance().targets(); },
        "ATen targets with a translator.");
  m.def(
      "passthrough_targets",
      [] {
        const auto& targets = frontend::passthrough_targets();
        return std::vector<std::string>(targets.begin(), targets.end());
      },
      "Targets accepted without a translator (symbolic-size arithmetic, export-time assertions).");

  m.def(
      "add_cuda_library_dirs",
      [](const std::vector<std::string>& dirs) {
#if LUMINAL_HAVE_CUDA
        cuda::add_library_dirs(dirs);
#endif
      },
      "Directories searched for libnvrtc and libcublasLt (after libraries already loaded).");
  bindings::register_reference_kernel(m);
  m.def("has_cuda_engine", [] { return kHasCudaEngine; }, "Was the CUDA engine built?");
  m.def(
      "clear_kernel_cache",
      [] {
#if LUMINAL_HAVE_CUDA
        cuda::clear_memory_cache();
#endif
      },
      "Forgets compiled CUDA modules held in memory (the disk cache stays).");
  m.def("reload_config", &reload_config,
        "Reads the LUMINAL_* environment variables again (they are read once, at first use; common/config.h).");
  m.def("cache_directory", [] { return cache_root(); },
        "The on-disk cache's root directory (LUMINAL_CACHE_DIR resolved, created and checked), '' when off.");
  m.def("cache_journal_size", [] { return cache_journal_size(); },
        "How many cache entry files this process has used (read as hits or written) so far.");
  m.def(
      "cache_journal_since",
      [](size_t position) {
        std::vector<std::pair<std::string, bool>> out;
        for (CacheJournalEntry& entry : cache_journal_since(position)) {
          out.emplace_back(std::move(entry.path), entry.written);
        }
        return out;
      },
      py::arg("position"),
      "The cache entry files first used after the journal had `position` entries: (absolute path, written) each, "
      "written False for an entry first read as a hit.");
  m.def(
      "take_notices",
      [] {
        std::vector<std::pair<std::string, std::string>> out;
        for (Notice& notice : take_notices()) out.emplace_back(std::move(notice.kind), std::move(notice.message));
        return out;
      },
      "Warnings the core queued since the last call, as (kind, message): kind 'cache' or 'dump'.");
}
