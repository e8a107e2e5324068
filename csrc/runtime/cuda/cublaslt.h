// Matrix products on cuBLASLt: row-major strided operands, optional batch, f32/f64/f16/bf16. A
// product of at most codegen::kGemvMaxRows rows (f32/f16/bf16) may also run as the generated GEMV
// (runtime/cuda/gemv.h): its configurations are further candidates of the same measured choice.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/dtype.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/timing.h"

namespace luminal::cuda {

class GeneratedGemv;
struct KernelArgumentSlots;

// A row-major view [batch, rows, cols]: one of row_stride/col_stride must be 1.
struct MatrixOperand {
  const void* data = nullptr;
  int64_t batch_stride = 0, row_stride = 0, col_stride = 0;
};

struct MatmulShape {
  DType dtype = DType::F32;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool allow_tf32 = false;
};

// out = act(a @ b + bias[n]) in cuBLASLt's epilogue (bias: n contiguous elements of the dtype).
struct MatmulEpilogue {
  const void* bias = nullptr;  // nullptr: no epilogue
  bool relu = false;
  bool gelu_tanh = false;  // cuBLASLt's GELU is the tanh approximation
};

// True when cuBLASLt can read a [rows, cols] operand in this layout without a copy.
bool blas_compatible(const MatrixOperand& operand, int64_t rows, int64_t cols);

// A batch whose every entry multiplies the same b (batch stride 0), with a's batches one after the
// other (rows of a common stride, batch stride = m rows), is one product of batch * m rows: `shape`
// and `a` become that product (out, [batch, m, n] contiguous, is the same memory). cuBLASLt then
// tiles one tall matrix instead of `batch` short ones (ViT's [32, 197, 768] @ [768, 2304]: a
// 197-row batch entry leaves most of a 128- or 256-row tile empty). Otherwise unchanged.
void fold_shared_batch(MatmulShape& shape, MatrixOperand& a, const MatrixOperand& b);

// A prepared out[b] = a[b] @ b[b] (out contiguous [batch, m, n]), enqueued with run().
// Candidates: cuBLASLt's algorithms, then (`with_generated`, where the generated GEMV takes the
// problem) the generated GEMV's configurations.
class Matmul {
 public:
  Matmul(const MatmulShape& shape, const MatrixOperand& a, const MatrixOperand& b, const MatmulEpilogue& epilogue = {},
         bool with_generated = false);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // The largest workspace any candidate algorithm needs.
  size_t workspace_bytes() const { return workspace_bytes_; }
  // The candidates: cuBLASLt's algorithms, best ranked first, then the generated GEMV's
  // configurations; the first is chosen until one of these calls chooses another.
  size_t candidate_count() const;
  // Whether the generated GEMV is among the candidates, and its choice by rule (LUMINAL_GEMV).
  bool has_generated() const { return gemv_ != nullptr; }
  void choose_generated_by_rule();
  // Times every candidate algorithm on this stream and keeps the fastest. Returns its time per run
  // in milliseconds; adds the host waits it cost to `syncs`. With `flush`, each run is timed with
  // a cold L2 cache (time_candidates).
  float select_fastest(void* out, void* workspace, CUstream stream, size_t& syncs, const L2Flush* flush);
  // The chosen candidate's position and its algorithm as text (cuBLASLt documents the algorithm
  // structure as serializable for reuse with the same library version).
  size_t chosen() const;
  std::string chosen_algorithm() const;
  // Chooses the candidate whose algorithm is `algorithm` (chosen_algorithm() of an earlier
  // instance); false, choosing nothing, when no candidate has it.
  // "generated gemv <configuration>" names one of the generated GEMV's.
  bool choose_algorithm(const std::string& algorithm);
  // Whether the chosen candidate is the generated GEMV's.
  bool chosen_is_generated() const;
  // What runs, for profiles: "cublasLt" or "generated gemv n1 k1 w4 u4".
  std::string chosen_name() const;
  // The problem as a key for measured choices: everything the candidates and their speed depend
  // on (dtype, shapes, strides, alignments of every pointer, epilogue, TF32, cuBLASLt's version,
  // the generated GEMV's source when it is a candidate).
  std::string choice_key(const void* out) const;
  void run(void* out, void* workspace, CUstream stream) const;
  // When the chosen candidate is the generated GEMV: run()'s launch as a CUDA graph kernel node's
  // parameters (arguments in `slots`; `early_weights`: GeneratedGemv::node_params).
  std::optional<CUDA_KERNEL_NODE_PARAMS> generated_node(void* out, bool early_weights, KernelArgumentSlots& slots) const;
  // When the chosen candidate is the generated GEMV: it, and the configuration chosen (else null).
  const GeneratedGemv* chosen_gemv(size_t& config) const;

 private:
  struct Descriptors;
  // The problem in words, for error messages: dtype, shapes, strides and pointer alignment.
  std::string describe(const void* out) const;

  std::unique_ptr<Descriptors> d_;
  MatmulShape shape_;
  MatrixOperand a_, b_;
  MatmulEpilogue epilogue_;
  size_t workspace_bytes_ = 0;
  std::unique_ptr<GeneratedGemv> gemv_;  // null: cuBLASLt only
};

}  // namespace luminal::cuda
