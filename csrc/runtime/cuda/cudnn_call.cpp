#include "runtime/cuda/cudnn_call.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "runtime/cuda/cudnn_backend.h"
#include "runtime/cuda/timing.h"

namespace luminal::cuda {

#if LUMINAL_HAVE_CUDNN

std::string cudnn_version() { return str_cat(cudnn().cudnnGetVersion()); }

namespace cudnn_backend {

Descriptor::Descriptor(cudnnBackendDescriptorType_t type) {
  check(cudnn().cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
}

Descriptor::~Descriptor() {
  if (!d_) return;
  try {
    cudnn().cudnnBackendDestroyDescriptor(d_);
  } catch (const Error&) {
  }
}

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    Descriptor dropped(std::move(*this));
    d_ = std::exchange(other.d_, nullptr);
  }
  return *this;
}

cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::F64: return CUDNN_DATA_DOUBLE;
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    default: fail("cuDNN operations on ", dtype_name(dtype), " are not supported");
  }
}

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

Descriptor tensor(const TensorSpec& spec) {
  Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const cudnnDataType_t type = cudnn_type(spec.dtype);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1);
  t.set_ints(CUDNN_ATTR_TENSOR_DIMENSIONS, spec.sizes);
  t.set_ints(CUDNN_ATTR_TENSOR_STRIDES, spec.strides);
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &spec.uid, 1);
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &spec.alignment, 1);
  const bool yes = true;
  if (spec.is_virtual) t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &yes, 1);
  if (spec.by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &yes, 1);
  t.finalize("cudnnBackendFinalize(tensor)");
  return t;
}

Descriptor operation_graph(const std::vector<const Descriptor*>& ops, cudnnHandle_t handle) {
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const Descriptor* op : ops) raw.push_back(op->get());
  Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(), static_cast<int64_t>(raw.size()));
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1);
  graph.finalize("cudnnBackendFinalize(operation graph)");
  return graph;
}

namespace {

bool acceptable_numerics(const cudnnBackendDescriptor_t engine_config, const Numerics& numerics,
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
  const bool wide = numerics.dtype == DType::F32 || numerics.dtype == DType::F64;
  for (int64_t i = 0; i < std::min<int64_t>(count, CUDNN_NUMERICAL_NOTE_TYPE_COUNT); ++i) {
    switch (notes[i]) {
      // Half-precision accumulation, or float32 inputs rounded to less (TF32 unless allowed).
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: return false;
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        if (wide) return false;
        break;
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
        if (numerics.dtype == DType::F32 && !numerics.allow_tf32) return false;
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
}  // namespace cudnn_backend

using cudnn_backend::Descriptor;

void CudnnCall::Plans::add_candidates(const cudnn_backend::Numerics& numerics, size_t max_candidates,
                                      std::optional<int64_t> only_engine, const std::string& what) {
  constexpr int64_t kMaxWorkspace = int64_t{1} << 30;
  const Descriptor& graph = keep.back();
  std::vector<int64_t> seen;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    if (candidates.size() >= max_candidates) break;
    for (Descriptor& config : cudnn_backend::engine_configs(graph, mode)) {
      if (candidates.size() >= max_candidates) break;
      int64_t engine = -1;
      if (!cudnn_backend::acceptable_numerics(config.get(), numerics, engine)) continue;
      if (only_engine && engine != *only_engine) continue;
      if (std::find(seen.begin(), seen.end(), engine) != seen.end()) continue;
      Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &slot->handle, 1);
      plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
      if (!plan.try_finalize()) continue;  // this engine does not take the problem
      int64_t workspace = 0, got = 0;
      check(cudnn().cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                             1, &got, &workspace),
            "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)");
      if (workspace < 0 || workspace > kMaxWorkspace) continue;
      seen.push_back(engine);
      candidates.push_back(Candidate{std::move(config), std::move(plan), workspace, engine});
    }
  }
  LUMINAL_CHECK(!candidates.empty(), "cuDNN (version ", cudnn().cudnnGetVersion(), ") has no engine ",
                only_engine ? str_cat(*only_engine, " ") : "", "with the required numerics for the ", what);
}

CudnnCall::CudnnCall(std::string description, int alignment)
    : plans_(std::make_unique<Plans>()), description_(std::move(description)), alignment_(alignment) {
  cudnn();  // raises when the library is missing
  plans_->slot = &cudnn_backend::handle_for_current_device();
}

CudnnCall::~CudnnCall() = default;

void CudnnCall::run(const std::vector<const void*>& operands, void* out, void* workspace, CUstream stream) const {
  const Plans::Candidate& chosen = plans_->candidates.at(plans_->chosen);
  LUMINAL_CHECK(operands.size() == plans_->operand_uids.size(), "internal error: ", operands.size(),
                " operands for the cuDNN ", description_, ", which takes ", plans_->operand_uids.size());
  std::vector<int64_t> uids = plans_->operand_uids;
  std::vector<void*> pointers;
  for (const void* operand : operands) pointers.push_back(const_cast<void*>(operand));
  uids.push_back(plans_->out_uid);
  pointers.push_back(out);
  for (const auto& [uid, value] : plans_->host_floats) {
    uids.push_back(uid);
    pointers.push_back(const_cast<float*>(&value));  // cuDNN copies by-value scalars when it enqueues
  }
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), static_cast<int64_t>(uids.size()));
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(),
           static_cast<int64_t>(pointers.size()));
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace, 1);
  pack.finalize("cudnnBackendFinalize(variant pack)");
  std::lock_guard<std::mutex> lock(plans_->slot->mutex);
  check(cudnn().cudnnSetStream(plans_->slot->handle, reinterpret_cast<cudaStream_t>(stream)), "cudnnSetStream");
  const cudnnStatus_t status = cudnn().cudnnBackendExecute(plans_->slot->handle, chosen.plan.get(), pack.get());
  if (status != CUDNN_STATUS_SUCCESS) {
    fail("cuDNN error ", static_cast<int>(status), " (", cudnn().cudnnGetErrorString(status),
         ") in cudnnBackendExecute for the ", description_, " on engine ", chosen.engine);
  }
}

float CudnnCall::select_fastest(const std::vector<const void*>& operands, void* out, void* workspace, CUstream stream,
                                size_t& syncs) {
  const FastestCandidate fastest = time_candidates(
      plans_->candidates.size(), stream, syncs, [&](size_t i) { plans_->chosen = i; },
      [&] { run(operands, out, workspace, stream); });
  LUMINAL_CHECK(fastest.index.has_value(), "every cuDNN engine failed to run the ", description_, ": ",
                fastest.last_failure);
  plans_->chosen = *fastest.index;
  return fastest.ms;
}

std::string CudnnCall::chosen_name() const { return str_cat("cuDNN engine ", chosen_engine()); }

int64_t CudnnCall::chosen_engine() const { return plans_->candidates.at(plans_->chosen).engine; }

#else  // no cuDNN headers at build time

std::string cudnn_version() { fail("this build of luminal has no cuDNN support"); }

struct CudnnCall::Plans {};

CudnnCall::CudnnCall(std::string description, int alignment)
    : plans_(std::make_unique<Plans>()), description_(std::move(description)), alignment_(alignment) {
  fail("this build of luminal has no cuDNN support (its headers were not found at build time)");
}
CudnnCall::~CudnnCall() = default;
void CudnnCall::run(const std::vector<const void*>&, void*, void*, CUstream) const {
  fail("this build of luminal has no cuDNN support");
}
float CudnnCall::select_fastest(const std::vector<const void*>&, void*, void*, CUstream, size_t&) {
  fail("this build of luminal has no cuDNN support");
}
std::string CudnnCall::chosen_name() const { return "none"; }
int64_t CudnnCall::chosen_engine() const { return -1; }

#endif

}  // namespace luminal::cuda
