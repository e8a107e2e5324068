#include "runtime/cuda/cudnn_conv.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "common/error.h"
#include "runtime/cuda/timing.h"

namespace luminal::cuda {

namespace {

std::string ints(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += str_cat(i ? ", " : "", values[i]);
  return text + "]";
}

}  // namespace

std::string describe(const ConvolutionProblem& p) {
  return str_cat("convolution of ", dtype_name(p.dtype), " x ", ints(p.x_sizes), " (strides ", ints(p.x_strides),
                 ") by w ", ints(p.w_sizes), " (strides ", ints(p.w_strides), ") -> ", dtype_name(p.dtype), " ",
                 ints(p.y_sizes), ", stride ", ints(p.stride), ", padding ", ints(p.padding), ", dilation ",
                 ints(p.dilation), ", pointers aligned to ", p.alignment, " bytes");
}

#if LUMINAL_HAVE_CUDNN

std::string cudnn_version() { return str_cat(cudnn().cudnnGetVersion()); }

namespace {

// A backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    check(cudnn().cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~Descriptor() {
    if (!d_) return;
    try {
      cudnn().cudnnBackendDestroyDescriptor(d_);
    } catch (const Error&) {
    }
  }
  Descriptor(Descriptor&& other) noexcept : d_(std::exchange(other.d_, nullptr)) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor& operator=(Descriptor&& other) noexcept {
    if (this != &other) {
      Descriptor dropped(std::move(*this));
      d_ = std::exchange(other.d_, nullptr);
    }
    return *this;
  }

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

cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::F64: return CUDNN_DATA_DOUBLE;
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    default: fail("cuDNN convolution on ", dtype_name(dtype), " is not supported");
  }
}

// One handle per device, for the process's lifetime (cuDNN handles belong to the device current
// when they are created). Calls on a handle are serialized: cudnnSetStream then execute.
struct HandleSlot {
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
};

HandleSlot& handle_for_current_device() {
  static std::mutex registry_mutex;
  static std::map<CUdevice, std::unique_ptr<HandleSlot>> slots;
  CUdevice device = 0;
  LUMINAL_CU(driver().cuCtxGetDevice(&device));
  std::lock_guard<std::mutex> lock(registry_mutex);
  std::unique_ptr<HandleSlot>& slot = slots[device];
  if (!slot) {
    auto created = std::make_unique<HandleSlot>();
    check(cudnn().cudnnCreate(&created->handle), "cudnnCreate");
    slot = std::move(created);
  }
  return *slot;
}

constexpr int64_t kX = 1, kW = 2, kY = 3;

Descriptor tensor(int64_t uid, DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                  int64_t alignment, bool is_virtual) {
  Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const cudnnDataType_t type = cudnn_type(dtype);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1);
  t.set_ints(CUDNN_ATTR_TENSOR_DIMENSIONS, sizes);
  t.set_ints(CUDNN_ATTR_TENSOR_STRIDES, strides);
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1);
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment, 1);
  if (is_virtual) {
    const bool yes = true;
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &yes, 1);
  }
  t.finalize("cudnnBackendFinalize(tensor)");
  return t;
}

bool acceptable_numerics(const cudnnBackendDescriptor_t engine_config, const ConvolutionProblem& problem,
                         int64_t& global_index) {
  const CudnnApi& api = cudnn();
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t got = 0;
  check(api.cudnnBackendGetAttribute(engine_config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &got, &raw),
        "cudnnBackendGetAttribute(ENGINECFG_ENGINE)");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  check(api.cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes),
        "cudnnBackendGetAttribute(ENGINE_NUMERICAL_NOTE)");
  check(api.cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &global_index),
        "cudnnBackendGetAttribute(ENGINE_GLOBAL_INDEX)");
  for (int64_t i = 0; i < std::min<int64_t>(count, CUDNN_NUMERICAL_NOTE_TYPE_COUNT); ++i) {
    switch (notes[i]) {
      // Half-precision accumulation, or float32 inputs rounded to less (TF32 unless allowed).
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: return false;
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        if (problem.dtype == DType::F32 || problem.dtype == DType::F64) return false;
        break;
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
        if (problem.dtype == DType::F32 && !problem.allow_tf32) return false;
        break;
      default: break;
    }
  }
  return true;
}

// The engine configurations cuDNN's heuristics rank for `graph` (empty when it has none).
std::vector<Descriptor> engine_configs(const Descriptor& graph, cudnnBackendHeurMode_t mode) {
  const CudnnApi& api = cudnn();
  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode, 1);
  if (!heuristics.try_finalize()) return {};
  int64_t count = 0;
  if (api.cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                   &count, nullptr) != CUDNN_STATUS_SUCCESS ||
      count <= 0) {
    return {};
  }
  count = std::min<int64_t>(count, 64);
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t got = 0;
  check(api.cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     count, &got, raw.data()),
        "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
  configs.erase(configs.begin() + std::clamp<int64_t>(got, 0, count), configs.end());
  return configs;
}

}  // namespace

struct CudnnConvolution::Plans {
  struct Candidate {
    Descriptor config;
    Descriptor plan;
    int64_t workspace = 0;
    int64_t engine = -1;
  };
  HandleSlot* slot = nullptr;
  std::vector<Descriptor> keep;  // tensors, operations and the graph the plans were made from
  std::vector<Candidate> candidates;
  size_t chosen = 0;
};

namespace {

// conv(x, w) -> y, all of one dtype, accumulated in float32 (float64 for float64). Returns the
// descriptors to keep, the operation graph last.
std::vector<Descriptor> operation_graph(const ConvolutionProblem& p, cudnnHandle_t handle) {
  std::vector<Descriptor> keep;
  const int64_t alignment = p.alignment;
  keep.push_back(tensor(kX, p.dtype, p.x_sizes, p.x_strides, alignment, false));
  keep.push_back(tensor(kW, p.dtype, p.w_sizes, p.w_strides, alignment, false));
  keep.push_back(tensor(kY, p.dtype, p.y_sizes, p.y_strides, alignment, false));
  const Descriptor& x = keep[0];
  const Descriptor& w = keep[1];
  const Descriptor& y = keep[2];

  Descriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = p.dtype == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute, 1);
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode, 1);
  const int64_t spatial = static_cast<int64_t>(p.stride.size());
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial, 1);
  conv.set_ints(CUDNN_ATTR_CONVOLUTION_DILATIONS, p.dilation);
  conv.set_ints(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, p.stride);
  conv.set_ints(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, p.padding);
  conv.set_ints(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, p.padding);
  conv.finalize("cudnnBackendFinalize(convolution)");

  Descriptor op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
  if (p.dtype == DType::F64) {
    const double alpha = 1.0, beta = 0.0;
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_DOUBLE, &alpha, 1);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_DOUBLE, &beta, 1);
  } else {
    const float alpha = 1.0f, beta = 0.0f;
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &alpha, 1);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &beta, 1);
  }
  op.finalize("cudnnBackendFinalize(convolution forward)");
  std::vector<cudnnBackendDescriptor_t> ops{op.get()};
  keep.push_back(std::move(conv));
  keep.push_back(std::move(op));

  Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), static_cast<int64_t>(ops.size()));
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1);
  graph.finalize("cudnnBackendFinalize(operation graph)");
  keep.push_back(std::move(graph));
  return keep;
}

// Execution plans for the acceptable engines of `graph`, heuristics' order first, then fallbacks.
void add_candidates(CudnnConvolution::Plans& plans, const ConvolutionProblem& problem, const Descriptor& graph,
                    size_t max_candidates, std::optional<int64_t> only_engine) {
  constexpr int64_t kMaxWorkspace = int64_t{1} << 30;
  std::vector<int64_t> seen;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    for (Descriptor& config : engine_configs(graph, mode)) {
      if (plans.candidates.size() >= max_candidates) return;
      int64_t engine = -1;
      if (!acceptable_numerics(config.get(), problem, engine)) continue;
      if (only_engine && engine != *only_engine) continue;
      if (std::find(seen.begin(), seen.end(), engine) != seen.end()) continue;
      Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &plans.slot->handle, 1);
      plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
      if (!plan.try_finalize()) continue;  // this engine does not take the problem
      int64_t workspace = 0, got = 0;
      check(cudnn().cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                             1, &got, &workspace),
            "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)");
      if (workspace < 0 || workspace > kMaxWorkspace) continue;
      seen.push_back(engine);
      plans.candidates.push_back(CudnnConvolution::Plans::Candidate{std::move(config), std::move(plan), workspace, engine});
    }
  }
}

}  // namespace

CudnnConvolution::CudnnConvolution(const ConvolutionProblem& problem, size_t max_candidates,
                                   std::optional<int64_t> only_engine)
    : plans_(std::make_unique<Plans>()), problem_(problem) {
  const size_t rank = problem.stride.size() + 2;
  LUMINAL_CHECK(problem.stride.size() >= 2 && problem.x_sizes.size() == rank && problem.w_sizes.size() == rank &&
                    problem.y_sizes.size() == rank && problem.x_strides.size() == rank &&
                    problem.w_strides.size() == rank && problem.y_strides.size() == rank,
                "internal error: malformed ", describe(problem));
  cudnn();  // raises when the library is missing
  plans_->slot = &handle_for_current_device();
  std::vector<Descriptor> keep = operation_graph(problem, plans_->slot->handle);
  add_candidates(*plans_, problem, keep.back(), max_candidates, only_engine);
  for (Descriptor& d : keep) plans_->keep.push_back(std::move(d));
  LUMINAL_CHECK(!plans_->candidates.empty(), "cuDNN (version ", cudnn().cudnnGetVersion(), ") has no engine ",
                only_engine ? str_cat(*only_engine, " ") : "", "with the required numerics for the ",
                describe(problem));
  for (const Plans::Candidate& c : plans_->candidates) {
    workspace_bytes_ = std::max(workspace_bytes_, static_cast<size_t>(c.workspace));
  }
}

CudnnConvolution::~CudnnConvolution() = default;

void CudnnConvolution::run(const void* x, const void* w, void* y, void* workspace, CUstream stream) const {
  const Plans::Candidate& chosen = plans_->candidates.at(plans_->chosen);
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const int64_t uids[] = {kX, kW, kY};
  void* pointers[] = {const_cast<void*>(x), const_cast<void*>(w), y};
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids, 3);
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers, 3);
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace, 1);
  pack.finalize("cudnnBackendFinalize(variant pack)");
  std::lock_guard<std::mutex> lock(plans_->slot->mutex);
  check(cudnn().cudnnSetStream(plans_->slot->handle, reinterpret_cast<cudaStream_t>(stream)), "cudnnSetStream");
  const cudnnStatus_t status = cudnn().cudnnBackendExecute(plans_->slot->handle, chosen.plan.get(), pack.get());
  if (status != CUDNN_STATUS_SUCCESS) {
    fail("cuDNN error ", static_cast<int>(status), " (", cudnn().cudnnGetErrorString(status),
         ") in cudnnBackendExecute for the ", describe(problem_), " on engine ", chosen.engine);
  }
}

float CudnnConvolution::select_fastest(const void* x, const void* w, void* y, void* workspace, CUstream stream,
                                       size_t& syncs) {
  const FastestCandidate fastest = time_candidates(
      plans_->candidates.size(), stream, syncs, [&](size_t i) { plans_->chosen = i; },
      [&] { run(x, w, y, workspace, stream); });
  LUMINAL_CHECK(fastest.index.has_value(), "every cuDNN engine failed to run the ", describe(problem_), ": ",
                fastest.last_failure);
  plans_->chosen = *fastest.index;
  return fastest.ms;
}

std::string CudnnConvolution::chosen_name() const { return str_cat("cuDNN engine ", chosen_engine()); }

int64_t CudnnConvolution::chosen_engine() const { return plans_->candidates.at(plans_->chosen).engine; }

#else  // no cuDNN headers at build time

std::string cudnn_version() { fail("this build of luminal has no cuDNN support"); }

struct CudnnConvolution::Plans {};

CudnnConvolution::CudnnConvolution(const ConvolutionProblem& problem, size_t, std::optional<int64_t>)
    : plans_(std::make_unique<Plans>()), problem_(problem) {
  fail("this build of luminal has no cuDNN support (its headers were not found at build time)");
}
CudnnConvolution::~CudnnConvolution() = default;
void CudnnConvolution::run(const void*, const void*, void*, void*, CUstream) const {
  fail("this build of luminal has no cuDNN support");
}
float CudnnConvolution::select_fastest(const void*, const void*, void*, void*, CUstream, size_t&) {
  fail("this build of luminal has no cuDNN support");
}
std::string CudnnConvolution::chosen_name() const { return "none"; }
int64_t CudnnConvolution::chosen_engine() const { return -1; }

#endif

}  // namespace luminal::cuda
