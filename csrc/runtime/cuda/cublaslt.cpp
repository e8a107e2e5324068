#include "runtime/cuda/cublaslt.h"

#include <algorithm>
#include <vector>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "common/checked.h"
#include "common/error.h"
#include "runtime/cuda/gemv.h"
#include "runtime/cuda/timing.h"

namespace luminal::cuda {

namespace {

// One cuBLASLt handle per process (cuBLASLt handles are not tied to a device or stream).
cublasLtHandle_t handle() {
  static std::once_flag once;
  static cublasLtHandle_t h = nullptr;
  std::call_once(once, [] { check(cublaslt().cublasLtCreate(&h), "cublasLtCreate"); });
  return h;
}

int alignment_of(const void* pointer) { return pointer_alignment(reinterpret_cast<uintptr_t>(pointer)); }

cudaDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDA_R_32F;
    case DType::F64: return CUDA_R_64F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: fail("cuBLASLt matmul on ", dtype_name(dtype), " is not supported");
  }
}

// An operand as a column-major matrix with an op: cuBLASLt's native view of row-major data.
struct ColumnMajor {
  cublasOperation_t op;
  uint64_t rows, cols;  // of the stored (pre-op) matrix
  int64_t ld;
};

// out (row-major m x n) is column-major n x m, so out^T = b^T a^T: A' = b^T (n x k), B' = a^T
// (k x m). A row-major [r, c] view with col_stride 1 is stored column-major c x r (ld row_stride),
// so op N yields its transpose; with row_stride 1 it is column-major r x c (ld col_stride) and op T
// yields the transpose. Other layouts (overlapping rows, broadcast dims) are not BLAS-compatible.
std::optional<ColumnMajor> transposed(const MatrixOperand& x, int64_t rows, int64_t cols) {
  if (x.col_stride == 1 && (rows == 1 || x.row_stride >= cols)) {
    return ColumnMajor{CUBLAS_OP_N, static_cast<uint64_t>(cols), static_cast<uint64_t>(rows),
                       std::max<int64_t>(x.row_stride, cols)};
  }
  if (x.row_stride == 1 && (cols == 1 || x.col_stride >= rows)) {
    return ColumnMajor{CUBLAS_OP_T, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                       std::max<int64_t>(x.col_stride, rows)};
  }
  return std::nullopt;
}

}  // namespace

bool blas_compatible(const MatrixOperand& x, int64_t rows, int64_t cols) { return transposed(x, rows, cols).has_value(); }

void fold_shared_batch(MatmulShape& shape, MatrixOperand& a, const MatrixOperand& b) {
  if (shape.batch <= 1 || b.batch_stride != 0 || a.col_stride != 1 || a.row_stride < shape.k) return;
  if (a.batch_stride != checked_mul(shape.m, a.row_stride, "a matmul's rows")) return;
  shape.m = checked_mul(shape.m, shape.batch, "a matmul's rows");
  shape.batch = 1;
  a.batch_stride = 0;
}

struct Matmul::Descriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  std::vector<cublasLtMatmulAlgo_t> candidates;
  size_t chosen = 0;
  double alpha_d = 1.0, beta_d = 0.0;
  float alpha_f = 1.0f, beta_f = 0.0f;
  bool double_scale = false;

  ~Descriptors() {
    const CublasLtApi& api = cublaslt();
    if (preference) api.cublasLtMatmulPreferenceDestroy(preference);
    if (c) api.cublasLtMatrixLayoutDestroy(c);
    if (b) api.cublasLtMatrixLayoutDestroy(b);
    if (a) api.cublasLtMatrixLayoutDestroy(a);
    if (matmul) api.cublasLtMatmulDescDestroy(matmul);
  }
};

Matmul::Matmul(const MatmulShape& shape, const MatrixOperand& a, const MatrixOperand& b, const MatmulEpilogue& epilogue,
               bool with_generated)
    : d_(std::make_unique<Descriptors>()), shape_(shape), a_(a), b_(b), epilogue_(epilogue) {
  if (with_generated && generated_gemv_applies(shape)) gemv_ = std::make_unique<GeneratedGemv>(shape, a, b, epilogue);
  const std::optional<ColumnMajor> ta = transposed(b, shape.k, shape.n);  // b^T
  const std::optional<ColumnMajor> tb = transposed(a, shape.m, shape.k);  // a^T
  LUMINAL_CHECK(ta && tb, "internal error: matmul operand layout is not BLAS-compatible");
  const ColumnMajor& ca = *ta;
  const ColumnMajor& cb = *tb;
  const CublasLtApi& api = cublaslt();
  const cudaDataType_t type = data_type(shape.dtype);
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  if (shape.dtype == DType::F64) {
    compute = CUBLAS_COMPUTE_64F;
    scale = CUDA_R_64F;
    d_->double_scale = true;
  } else if (shape.dtype == DType::F32 && shape.allow_tf32) {
    compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  }
  // Column-major problem: D' (n x m) = op(A') (n x k) * op(B') (k x m), A' from b, B' from a.
  check(api.cublasLtMatmulDescCreate(&d_->matmul, compute, scale), "cublasLtMatmulDescCreate");
  check(api.cublasLtMatmulDescSetAttribute(d_->matmul, CUBLASLT_MATMUL_DESC_TRANSA, &ca.op, sizeof ca.op),
        "cublasLtMatmulDescSetAttribute(TRANSA)");
  check(api.cublasLtMatmulDescSetAttribute(d_->matmul, CUBLASLT_MATMUL_DESC_TRANSB, &cb.op, sizeof cb.op),
        "cublasLtMatmulDescSetAttribute(TRANSB)");
  if (epilogue.bias) {
    // Column-major D' is n x m: the bias runs along its rows, i.e. one value per output column n.
    const cublasLtEpilogue_t kind = epilogue.relu        ? CUBLASLT_EPILOGUE_RELU_BIAS
                                    : epilogue.gelu_tanh ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                         : CUBLASLT_EPILOGUE_BIAS;
    check(api.cublasLtMatmulDescSetAttribute(d_->matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, &kind, sizeof kind),
          "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    check(api.cublasLtMatmulDescSetAttribute(d_->matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &epilogue.bias,
                                             sizeof epilogue.bias),
          "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  check(api.cublasLtMatrixLayoutCreate(&d_->a, type, ca.rows, ca.cols, ca.ld), "cublasLtMatrixLayoutCreate(A)");
  check(api.cublasLtMatrixLayoutCreate(&d_->b, type, cb.rows, cb.cols, cb.ld), "cublasLtMatrixLayoutCreate(B)");
  check(api.cublasLtMatrixLayoutCreate(&d_->c, type, static_cast<uint64_t>(shape.n), static_cast<uint64_t>(shape.m),
                                       shape.n),
        "cublasLtMatrixLayoutCreate(C)");
  if (shape.batch > 1) {
    const int32_t count = static_cast<int32_t>(shape.batch);
    const int64_t strides[3] = {b.batch_stride, a.batch_stride, shape.m * shape.n};
    cublasLtMatrixLayout_t layouts[3] = {d_->a, d_->b, d_->c};
    for (int i = 0; i < 3; ++i) {
      check(api.cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
            "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
      check(api.cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                                 sizeof strides[i]),
            "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
    }
  }
  check(api.cublasLtMatmulPreferenceCreate(&d_->preference), "cublasLtMatmulPreferenceCreate");
  const uint64_t max_workspace = 32ull << 20;
  check(api.cublasLtMatmulPreferenceSetAttribute(d_->preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &max_workspace, sizeof max_workspace),
        "cublasLtMatmulPreferenceSetAttribute");
  // Without these, cuBLASLt assumes 256-byte aligned operands and may pick kernels that reject a
  // view at an odd offset (CUBLAS_STATUS_INVALID_VALUE at launch). Output and bias are arena memory.
  const uint32_t align_a = static_cast<uint32_t>(alignment_of(b.data)), align_b = static_cast<uint32_t>(alignment_of(a.data));
  check(api.cublasLtMatmulPreferenceSetAttribute(d_->preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                 sizeof align_a),
        "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_A)");
  check(api.cublasLtMatmulPreferenceSetAttribute(d_->preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                 sizeof align_b),
        "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_B)");
  constexpr int kCandidates = 32;  // split-K and small-tile variants rank low but win on skinny shapes
  cublasLtMatmulHeuristicResult_t results[kCandidates]{};
  int found = 0;
  check(api.cublasLtMatmulAlgoGetHeuristic(handle(), d_->matmul, d_->a, d_->b, d_->c, d_->c, d_->preference,
                                           kCandidates, results, &found),
        "cublasLtMatmulAlgoGetHeuristic");
  LUMINAL_CHECK(found > 0, "cuBLASLt has no algorithm for ", dtype_name(shape.dtype), " matmul [", shape.batch, ", ",
                shape.m, ", ", shape.k, "] @ [", shape.k, ", ", shape.n, "]");
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    d_->candidates.push_back(results[i].algo);
    workspace_bytes_ = std::max(workspace_bytes_, results[i].workspaceSize);
  }
  LUMINAL_CHECK(!d_->candidates.empty(), "cuBLASLt's algorithms all failed for ", describe(nullptr));
}

size_t Matmul::candidate_count() const { return d_->candidates.size() + (gemv_ ? gemv_->configs().size() : 0); }

void Matmul::choose_generated_by_rule() {
  LUMINAL_CHECK(gemv_, "internal error: the generated GEMV is no candidate of ", describe(nullptr));
  d_->chosen = d_->candidates.size() + gemv_->rule_choice();
}

bool Matmul::chosen_is_generated() const { return d_->chosen >= d_->candidates.size(); }

namespace {
constexpr const char* kGeneratedPrefix = "generated gemv ";
}  // namespace

std::string Matmul::chosen_name() const { return chosen_is_generated() ? chosen_algorithm() : "cublasLt"; }

float Matmul::select_fastest(void* out, void* workspace, CUstream stream, size_t& syncs, const L2Flush* flush) {
  const FastestCandidate fastest = time_candidates(
      candidate_count(), stream, syncs, [&](size_t i) { d_->chosen = i; }, [&] { run(out, workspace, stream); },
      flush);
  LUMINAL_CHECK(fastest.index.has_value(), "every cuBLASLt algorithm failed to run ", describe(out), ": ",
                fastest.last_failure);
  d_->chosen = *fastest.index;
  return fastest.ms;
}

size_t Matmul::chosen() const { return d_->chosen; }

namespace {

// An algorithm by its configuration (id, tile, split-K, reduction, swizzle, custom option,
// stages, inner and cluster shapes): what identifies it across processes. Its raw bytes do not:
// two processes may get different bytes from the heuristic for the same configuration, so a
// stored choice compared by bytes was measured again on every warm compile.
std::string algorithm_text(const cublasLtMatmulAlgo_t& algorithm) {
  static constexpr struct {
    cublasLtMatmulAlgoConfigAttributes_t attribute;
    const char* name;
  } kFields[] = {{CUBLASLT_ALGO_CONFIG_ID, "id"},
                 {CUBLASLT_ALGO_CONFIG_TILE_ID, "tile"},
                 {CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "splitk"},
                 {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, "reduction"},
                 {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, "swizzle"},
                 {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, "custom"},
                 {CUBLASLT_ALGO_CONFIG_STAGES_ID, "stages"},
                 {CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, "inner"},
                 {CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, "cluster"}};
  std::string text;
  for (const auto& field : kFields) {
    uint64_t value = 0;  // every attribute is an integer of at most 8 bytes (little-endian)
    size_t written = 0;
    const cublasStatus_t status =
        cublaslt().cublasLtMatmulAlgoConfigGetAttribute(&algorithm, field.attribute, &value, sizeof value, &written);
    if (status != CUBLAS_STATUS_SUCCESS || written > sizeof value) continue;  // not known to this version
    text += str_cat(text.empty() ? "" : " ", field.name, "=", value);
  }
  return text;
}

}  // namespace

std::string Matmul::chosen_algorithm() const {
  if (chosen_is_generated()) {
    return kGeneratedPrefix + gemv_->configs().at(d_->chosen - d_->candidates.size()).name();
  }
  return algorithm_text(d_->candidates.at(d_->chosen));
}

bool Matmul::choose_algorithm(const std::string& algorithm) {
  if (algorithm.rfind(kGeneratedPrefix, 0) == 0) {
    const int config = gemv_ ? gemv_->find(algorithm.substr(std::string(kGeneratedPrefix).size())) : -1;
    if (config < 0) return false;
    d_->chosen = d_->candidates.size() + static_cast<size_t>(config);
    return true;
  }
  for (size_t i = 0; i < d_->candidates.size(); ++i) {
    if (algorithm_text(d_->candidates[i]) != algorithm) continue;
    d_->chosen = i;
    return true;
  }
  return false;
}

Matmul::~Matmul() = default;

std::optional<CUDA_KERNEL_NODE_PARAMS> Matmul::generated_node(void* out, bool early_weights,
                                                              KernelArgumentSlots& slots) const {
  if (!chosen_is_generated()) return std::nullopt;
  return gemv_->node_params(d_->chosen - d_->candidates.size(), out, early_weights, slots);
}

const GeneratedGemv* Matmul::chosen_gemv(size_t& config) const {
  if (!chosen_is_generated()) return nullptr;
  config = d_->chosen - d_->candidates.size();
  return gemv_.get();
}

void Matmul::run(void* out, void* workspace, CUstream stream) const {
  if (chosen_is_generated()) {
    gemv_->run(d_->chosen - d_->candidates.size(), out, stream);
    return;
  }
  const void* alpha = d_->double_scale ? static_cast<const void*>(&d_->alpha_d) : &d_->alpha_f;
  const void* beta = d_->double_scale ? static_cast<const void*>(&d_->beta_d) : &d_->beta_f;
  const cublasStatus_t status =
      cublaslt().cublasLtMatmul(handle(), d_->matmul, alpha, b_.data, d_->a, a_.data, d_->b, beta, out, d_->c, out,
                                d_->c, &d_->candidates[d_->chosen], workspace, workspace_bytes_, stream);
  if (status != CUBLAS_STATUS_SUCCESS) {
    fail("cuBLASLt error ", static_cast<int>(status), " in cublasLtMatmul for ", describe(out));
  }
}

namespace {

std::string describe_operand(const char* name, const MatrixOperand& x) {
  return str_cat(name, " strides [", x.batch_stride, ", ", x.row_stride, ", ", x.col_stride, "] aligned to ",
                 alignment_of(x.data), " bytes");
}

}  // namespace

std::string Matmul::choice_key(const void* out) const {
  const char* epilogue = !epilogue_.bias         ? "none"
                         : epilogue_.relu        ? "bias+relu"
                         : epilogue_.gelu_tanh   ? "bias+gelu"
                                                 : "bias";
  return str_cat("cuBLASLt ", cublaslt().cublasLtGetVersion(), " ", describe(out), ", epilogue ", epilogue,
                 epilogue_.bias ? str_cat(" (bias aligned to ", alignment_of(epilogue_.bias), " bytes)") : "",
                 shape_.allow_tf32 ? ", TF32 allowed" : "",
                 gemv_ ? str_cat(", or the generated GEMV ", gemv_->source_key()) : "");
}

std::string Matmul::describe(const void* out) const {
  std::string text = str_cat(dtype_name(shape_.dtype), " matmul [", shape_.batch, ", ", shape_.m, ", ", shape_.k,
                             "] @ [", shape_.batch, ", ", shape_.k, ", ", shape_.n, "] (",
                             describe_operand("a", a_), "; ", describe_operand("b", b_));
  if (out) text += str_cat("; out aligned to ", alignment_of(out), " bytes");
  return text + ")";
}

}  // namespace luminal::cuda
