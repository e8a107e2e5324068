// The generated GEMV (codegen/gemv.h) as candidates of a matmul's measured choice: a cuda::Matmul
// with at most codegen::kGemvMaxRows rows times these next to cuBLASLt's algorithms, and runs the
// winner (runtime/cuda/cublaslt.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/gemv.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/standalone_kernel.h"

namespace luminal::cuda {

// Whether the generated GEMV computes this problem (dtype, row count, batch count within a grid's
// y extent). Any operand layout is read by strides; vectorized() says whether the fast loop runs.
bool generated_gemv_applies(const MatmulShape& shape);

// True when both operands are k-contiguous with 16-byte aligned rows and K is a whole number of
// 16-byte vectors: the kernel's vector loop runs (else every element is read by its strides).
bool gemv_vectorizable(const MatmulShape& shape, const MatrixOperand& a, const MatrixOperand& b);

class GeneratedGemv {
 public:
  GeneratedGemv(const MatmulShape& shape, const MatrixOperand& a, const MatrixOperand& b,
                const MatmulEpilogue& epilogue);
  ~GeneratedGemv();
  GeneratedGemv(const GeneratedGemv&) = delete;
  GeneratedGemv& operator=(const GeneratedGemv&) = delete;

  const std::vector<codegen::GemvConfig>& configs() const { return configs_; }
  bool vectorized() const { return vector_; }
  const MatmulShape& shape() const { return shape_; }
  const MatrixOperand& a() const { return a_; }
  const MatrixOperand& b() const { return b_; }
  bool has_epilogue() const { return epilogue_.bias != nullptr; }
  // The module's source hash, for choice keys (a changed kernel is measured again).
  std::string source_key() const;
  // The position of the configuration `name` names (codegen::GemvConfig::name()), or -1.
  int find(const std::string& name) const;
  // The configuration by rule, for LUMINAL_GEMV=generated: split K where the outputs alone give
  // too few warps to keep the memory busy, else a warp per output (two with more rows).
  size_t rule_choice() const;
  // Enqueues configuration `index` on `stream` (the current context's device). Compiles and loads
  // the module on first use (NVRTC's caches apply).
  void run(size_t index, void* out, CUstream stream) const;
  // Configuration `index` as a CUDA graph kernel node's parameters (arguments in `slots`). With
  // `early_weights` the kernel requests its first weights before it waits for the kernels ahead
  // of it (a programmatic edge lets it start early): only for weights nothing in the graph writes.
  CUDA_KERNEL_NODE_PARAMS node_params(size_t index, void* out, bool early_weights, KernelArgumentSlots& slots) const;
  // Configuration `index`'s grouped entry point (codegen::GemvConfig::group_kernel_name()), and its
  // paired one (pair_kernel_name(), where codegen::pair_supported).
  StandaloneKernel& group_kernel(size_t index) const;
  StandaloneKernel& pair_kernel(size_t index) const;

 private:
  struct Launch {
    LaunchShape shape;
    std::vector<KernelArgument> arguments;
    CUdevice device = 0;  // the current context's
  };
  Launch launch_of(size_t index, void* out, bool early_weights) const;

  MatmulShape shape_;
  MatrixOperand a_, b_;
  MatmulEpilogue epilogue_;
  bool vector_ = false;
  std::vector<codegen::GemvConfig> configs_;
  std::string source_;
  std::vector<StandaloneKernel*> kernels_;  // owned by a process-wide registry (the CUDA graphs
                                            // that captured a launch keep using its module)
};

// A member of a grouped launch: a product that runs as the generated GEMV, the configuration it
// chose and its output.
struct GemvGroupMember {
  const GeneratedGemv* gemv = nullptr;
  size_t config = 0;
  void* out = nullptr;
};

// Whether `other` may join `group` (not empty) in one launch (codegen/gemv.cuh: lm_gemv_group):
// the same dtype, rows and K as the group's first member, one batch, the same a (pointer and
// strides), vector loads, no epilogue, and an output that overlaps neither a nor any member's
// output. (Whether anything writes the weights is the caller's to check: the members run in any
// order.)
bool gemv_groupable(const std::vector<GemvGroupMember>& group, const GemvGroupMember& other);

// The grouped launch of `members` (2 to codegen::kGemvMaxGroup, each groupable with those before it)
// as a CUDA graph kernel node's parameters: the configuration that the member with the most outputs
// chose runs them all, each member's weights read as they would be alone.
CUDA_KERNEL_NODE_PARAMS grouped_gemv_node(const std::vector<GemvGroupMember>& members, bool early_weights,
                                          KernelArgumentSlots& slots);

// A SwiGLU's gate and up products as one paired launch (codegen/gemv.cuh, PAIR) that stores
// round(round(silu(gate)) * up) into `out` (laid out as the products' outputs, [rows, n]) instead
// of the two products: when they are groupable, of one shape and weight layout, and the gate's
// configuration has a paired entry point (codegen::pair_supported), which then runs. Else nullopt.
std::optional<CUDA_KERNEL_NODE_PARAMS> paired_swiglu_node(const GemvGroupMember& gate, const GemvGroupMember& up,
                                                          void* out, bool early_weights, KernelArgumentSlots& slots);

}  // namespace luminal::cuda
