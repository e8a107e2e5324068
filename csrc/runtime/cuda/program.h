// A CUDA program: a graph, its plan of steps and the generated code, ready for an Executor.
//
// build_cuda_program only renders code: each kernel step's schedule, decided in the plan
// (schedule::schedule_kernels, or the row-kernel plan's), through codegen::render_kernel /
// render_row_kernel. It needs no GPU: the executor instantiates the program per shape binding;
// check_codegen compiles its module with NVRTC.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda_codegen.h"
#include "ir/graph.h"
#include "runtime/memory_plan.h"
#include "schedule/plan.h"

namespace luminal::runtime::gpu {

// The kernels of one step (indices into CudaProgram::kernels; -1: none).
struct StepKernels {
  int kernel = -1;       // the step's kernel (library matmuls have none)
  int copy_kernel = -1;  // scatters: copies the base into the output first (skipped when they share memory)
};

// A kernel's run-time check label with the origin of the node it belongs to (the device error
// record names the index of one).
struct CheckLabel {
  std::string label;
  std::string origin;
};

// Consecutive steps whose kernels may share one launch (codegen::render_kernel_group): `steps`
// steps from `first_step` on, run by kernel `kernel`. The instance takes it where each step has
// its one launch and their memory does not overlap; otherwise each launches alone.
struct KernelGroup {
  size_t first_step = 0;
  size_t steps = 0;
  int kernel = -1;
};

// At most this many kernels share a launch (and at most kMaxGroupParamBytes of parameters: the
// classic kernel parameter limit).
constexpr size_t kMaxGroupMembers = 16;
constexpr size_t kMaxGroupParamBytes = 4096;

struct CudaProgram {
  std::shared_ptr<const ir::Graph> graph;
  schedule::Plan plan;
  BufferPlan buffers;                    // placement and lifetimes (shape-independent)
  std::vector<codegen::Kernel> kernels;  // in module order
  std::vector<StepKernels> step_kernels;  // per step
  std::vector<KernelGroup> kernel_groups;  // in step order, disjoint
  // Every kernel's check labels, in kernel order; check_base[k]: the first index of kernel k's.
  std::vector<CheckLabel> check_labels;
  std::vector<int64_t> check_base;
  std::string module_source;  // the prelude, every kernel, and the error export kernel
  size_t staging_copies = 0;  // copies passes::stage_library_operands added to the graph
};

// The name of the kernel every replay ends with: it copies the device error record to pinned host
// memory and clears it.
constexpr const char* kExportErrorsKernelName = "lm_export_errors";
constexpr const char* kTrapErrorsKernelName = "lm_trap_errors";

// `graph` is what runs: for a node-by-node plan, after passes::stage_library_operands. Every
// kernel step of `plan` must carry its schedule.
CudaProgram build_cuda_program(std::shared_ptr<const ir::Graph> graph, schedule::Plan plan, size_t staging_copies = 0);

// The general (node-by-node) program of an optimized graph: library operands staged
// (passes::stage_library_operands), planned with stable library operands, code generated.
CudaProgram build_general_cuda_program(const ir::Graph& graph);

}  // namespace luminal::runtime::gpu
