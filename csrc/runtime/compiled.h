// A compiled graph: PT2 bytes in, a runnable program out. This is the core's public entry point;
// the Python binding layer only converts tensors and allocates outputs.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "frontend/translate.h"
#include "ir/graph.h"
#include "passes/passes.h"
#include "runtime/cpu/executor.h"
#include "runtime/symbols.h"
#include "runtime/tensor.h"

#if LUMINAL_HAVE_CUDA
#include "runtime/cuda/executor.h"
#endif

namespace luminal::runtime {

struct CompileOptions {
  std::vector<ir::InputRole> input_roles;  // by call position; missing: user input
  passes::OptimizeOptions optimize;
  // Generate the CUDA module and compile it with NVRTC for this arch (e.g. "sm_90") at compile
  // time, without running it: catches code generation errors on machines with no GPU.
  std::string check_cuda_arch;
  // Row-local graphs (DLRM and the like) that the matcher accepts have a megakernel candidate: one
  // CUDA kernel per call. Calls with contiguous inputs run it or the general path, whichever
  // measures faster at the binding's first call (remembered in the choice cache; LUMINAL_SEARCH=0:
  // the megakernel, by rule).
  bool megakernel = true;
  // Tests: the CPU engine executes the megakernel's IR graph instead of the general one, so that
  // the row pipeline's transformations are checked against eager without a GPU.
  bool cpu_runs_row_graph = false;
  // The most bytes read from the archive (pt2::ReadLimits::archive_bytes); unset: the default or
  // LUMINAL_MAX_ARCHIVE_BYTES.
  std::optional<uint64_t> max_archive_bytes;
};

// What a CUDA call needs besides the tensors (stream, device, TF32, allocator); opaque when the
// core is built without CUDA.
#if LUMINAL_HAVE_CUDA
using CudaCallContext = gpu::CallContext;
#else
struct CudaCallContext {};
#endif

struct OutputInfo {
  bool is_tensor = true;
  DType dtype = DType::F32;
  int mutated_input = -1;  // >= 0: write this output back into call input k
  // Computed for its run-time checks only (ir::GraphOutput::check): allocated and written like any
  // output, never returned. Check outputs follow all the others.
  bool check = false;
  // The output is a scatter into that input, which nothing else reads: when the caller passes the
  // input's own (contiguous, unaliased) memory as this output, the update happens in place and
  // needs no write-back.
  bool in_place = false;
  std::string name;
  std::string device;  // the export's device for this output ("cpu", "cuda:0", or empty)

  bool returned() const { return mutated_input < 0 && !check; }  // one of the caller's results
};

struct Stats {
  size_t ir_nodes = 0;   // after optimization
  size_t kernels = 0;    // CPU compute steps per call
  size_t matmuls = 0;
  size_t attentions = 0;  // fused attention nodes (ir::NodeKind::Attention)
  size_t inputs = 0;
  size_t constants = 0;
  bool cuda_used = false;
  bool megakernel = false;        // the graph has a megakernel candidate (see passes/row_plan.h)
  std::string megakernel_reason;  // the matcher's summary, or the check that failed
  size_t megakernel_fallbacks = 0;  // CUDA calls that took the general path (non-contiguous inputs)
  size_t scatter_copy_bytes = 0;    // bytes of scatter bases copied by the last call (0: all in place)
#if LUMINAL_HAVE_CUDA
  gpu::Stats cuda;
#endif
};

// The nodes of a PT2 archive (held in memory) that luminal does not translate, all found in one
// pass (see frontend::find_refusals).
std::vector<frontend::Refusal> refused_nodes(std::string archive_bytes, const CompileOptions& options = {});

class CompiledGraph {
 public:
  // Parses a PT2 archive held in memory (weights, if any, become constants).
  static std::shared_ptr<CompiledGraph> from_archive_bytes(std::string bytes, const CompileOptions& options = {});
  static std::shared_ptr<CompiledGraph> from_archive_file(const std::string& path, const CompileOptions& options = {});

  size_t num_inputs() const { return graph_->inputs.size(); }
  const ir::Node& input(size_t k) const { return graph_->node(graph_->inputs[k]); }
  const std::vector<OutputInfo>& outputs() const { return outputs_; }

  // Binds the call's inputs: checks them and solves the shape symbols. Inputs with the dtypes,
  // sizes and strides of the last call that bound get that call's symbols without re-checking.
  SymbolValues bind(const std::vector<TensorView>& inputs) const;
  std::vector<int64_t> output_shape(size_t k, const SymbolValues& symbols) const;
  // Every output's shape (integer outputs: empty), each checked as output_shape does; calls with
  // the last call's symbols reuse its shapes (a decode step asks for the same ones every token).
  std::shared_ptr<const std::vector<std::vector<int64_t>>> output_shapes(const SymbolValues& symbols) const;
  int64_t int_output(size_t k, const SymbolValues& symbols) const;
  // `outputs` has one view per output (integer outputs: an empty view). With a CUDA call context
  // the graph runs on the CUDA engine (inputs and outputs on that device), else on the CPU.
  void run(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
           const SymbolValues& symbols, const CudaCallContext* cuda = nullptr) const;
  // CUDA: builds the program that calls with contiguous inputs take, loads its module and uploads
  // the constants (weights) on the context's device now instead of at the first call.
  void prepare_cuda(const CudaCallContext& cuda) const;
  // CUDA: waits for the calls launched so far and raises the device-side errors they recorded.
  void finish_cuda() const;
  // The generated CUDA module (empty when CUDA is unavailable in this build).
  std::string cuda_source() const;

  std::string ir_text(bool optimized = true) const;
  const ir::Graph& graph() const { return *graph_; }
  Stats stats() const;

 private:
  CompiledGraph(ir::Graph translated, const CompileOptions& options);
  // Per output: an elementwise update of its input (a cache's step counter) that every graph that
  // may run computes after everything else (passes::input_updates_written_last): it is written
  // into the input's memory, like a scatter that updates its base in place.
  std::vector<bool> elementwise_updates_in_place() const;

  std::string translated_text_;
  // The largest tensor of the translated graph whose size is known (before fusion: what eager
  // would allocate), for the CPU engine's check against this machine's memory.
  size_t largest_static_tensor_bytes_ = 0;
  std::string largest_static_tensor_;
  std::shared_ptr<const ir::Graph> graph_;
  // The row-kernel candidate: when the megakernel option is on and the matcher accepted the
  // graph, its row-local graph (passes/row_plan.h) and batch extent. CUDA calls with contiguous
  // inputs run it as one kernel (schedule::plan_row_kernel_steps); other calls the general plan.
  struct RowCandidate {
    std::shared_ptr<const ir::Graph> graph;
    ir::Expr rows;
  };
  std::optional<RowCandidate> row_;
  std::string megakernel_reason_;
  std::vector<bool> input_read_;
  std::vector<OutputInfo> outputs_;
  // The layouts bind() last accepted and what they bound: binding is a pure function of each
  // input's dtype, sizes and strides, and repeated calls repeat them (per-call host time).
  struct InputLayout {
    DType dtype = DType::F32;
    std::vector<int64_t> sizes, strides;
  };
  mutable std::mutex bind_mutex_;
  mutable std::optional<SymbolValues> shapes_symbols_;  // what the cached output shapes were evaluated for
  mutable std::shared_ptr<const std::vector<std::vector<int64_t>>> shapes_;
  mutable std::vector<InputLayout> bound_layouts_;
  mutable SymbolValues bound_symbols_;
  mutable bool bound_ = false;
  std::unique_ptr<cpu::Executor> cpu_;
#if LUMINAL_HAVE_CUDA
  enum CudaCandidate : size_t { kGeneral = 0, kRowKernel = 1 };
  // The candidate's executor; its program (plan and generated code) is built at first use.
  gpu::Executor& cuda_executor(CudaCandidate candidate) const;
  mutable std::mutex cuda_mutex_;
  mutable std::unique_ptr<gpu::Executor> cuda_[2];  // per CudaCandidate
  mutable size_t megakernel_fallbacks_ = 0;         // calls with non-contiguous inputs
  mutable CudaCandidate last_candidate_ = kGeneral;  // the last CUDA call's (stats)

  // The megakernel or the general path for a call with contiguous inputs: measured at the first
  // call of each binding (symbols, TF32 settings) unless the choice cache has it; by rule (the
  // megakernel) under LUMINAL_SEARCH=0, for graphs that update inputs in place (timing runs them
  // more than once) and for calls being captured into a CUDA graph.
  CudaCandidate choose_row_or_general(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                                      const SymbolValues& symbols, const CudaCallContext& context) const;
  CudaCandidate measure_row_or_general(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                                       const SymbolValues& symbols, const CudaCallContext& context,
                                       const std::string& key, std::string& record) const;
  struct RowDecision {
    CudaCandidate candidate = kRowKernel;
    std::string record;  // "megakernel or general path: ..." (stats' choices)
  };
  mutable std::mutex row_choice_mutex_;  // taken before cuda_mutex_ and the executors' own
  // A call's binding as far as the choice goes (per-call lookup: no text is built).
  struct RowBinding {
    int device = 0;
    bool allow_tf32 = false, allow_tf32_convolution = false;
    SymbolValues symbols;
    bool operator<(const RowBinding& other) const {
      return std::tie(device, allow_tf32, allow_tf32_convolution, symbols) <
             std::tie(other.device, other.allow_tf32, other.allow_tf32_convolution, other.symbols);
    }
  };
  mutable std::map<RowBinding, RowDecision> row_decisions_;
  mutable std::map<RowBinding, RowDecision>::iterator last_decision_ = row_decisions_.end();  // the last call's
  mutable std::string row_choice_record_;  // the last call's
  mutable size_t row_choice_hits_ = 0, row_choice_misses_ = 0, row_choice_syncs_ = 0;
#endif
  mutable std::atomic<size_t> cpu_scatter_copy_bytes_{0};  // the last CPU call's
};

}  // namespace luminal::runtime
