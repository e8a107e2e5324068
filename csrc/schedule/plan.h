// The plan of steps: what an executor runs for a graph, in order, decided once and held as data.
//
// Both executors follow the same plan. A step computes one node: a generated kernel (pointwise or
// reduce), a scatter (a copy of its base, then the scattered writes), a library matmul (cuBLASLt
// on CUDA, the reference GEMM on the CPU), or the row kernel (the whole row-local graph of
// passes/row_plan.h as one kernel: the megakernel is this plan choice, not an executor mode).
// A pointwise node that is an affine view read only by matmuls is no step: the matmul reads its
// base by strides (View). Inputs and constants are no steps either.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "schedule/kernel_schedule.h"

namespace luminal::schedule {

enum class StepKind {
  Kernel,         // a generated kernel computes the node
  Scatter,        // the base is copied into the output (unless they share memory), then scattered into
  LibraryMatmul,  // a matmul by the library (cuBLASLt; the CPU's reference GEMM)
  RowKernel,      // the whole row-local graph as one kernel (node: its first tensor output)
  Convolution,    // a convolution (ir::Convolution): the library's (cuDNN) or the generated kernel of
                  // its body, whichever measures faster on the device; the CPU runs the body
};

struct Step {
  StepKind kind = StepKind::Kernel;
  ir::NodeId node = -1;
  // The generated kernel's schedule (Kernel, Scatter, RowKernel) and the scatter's base copy's,
  // once schedule_kernels decided them: code generation renders exactly these.
  std::optional<KernelSchedule> schedule;
  std::optional<KernelSchedule> copy_schedule;

  Step() = default;
  Step(StepKind step_kind, ir::NodeId step_node, std::optional<KernelSchedule> kernel_schedule = std::nullopt)
      : kind(step_kind), node(step_node), schedule(std::move(kernel_schedule)) {}
};

struct Plan {
  std::vector<Step> steps;
  std::vector<ir::NodeId> views;  // affine views read by strides, never materialized (node order)
  ir::Expr rows;                  // the row kernel's batch extent; null for a node-by-node plan

  bool is_row_kernel() const { return rows != nullptr; }
};

// Node by node: every compute node is a step in graph order, except views only matmuls and
// attention read.
// `stable_library_operands` (CUDA: library calls are captured into the call's CUDA graph with
// fixed addresses): a view whose base is memory that changes per call (a user input or a graph
// output, the caller's) is materialized instead, so that the staging copies of
// passes/stage_library_operands.h actually copy and a new input pointer needs no rebuild.
Plan plan_steps(const ir::Graph& graph, bool stable_library_operands = false);

// One row kernel for a row-local graph (passes/row_plan.h) with batch extent `rows`, scheduled.
Plan plan_row_kernel_steps(const ir::Graph& graph, ir::Expr rows);

// The operand layouts a generated kernel of `node` sees (graph inputs strided, constants with
// fixed strides, everything else contiguous): what the schedule rules and codegen need.
std::vector<OperandInfo> kernel_operands(const ir::Graph& graph, const ir::Node& node);

// Decides the schedule of every generated kernel of a node-by-node plan with today's rules
// (choose_schedule); a measured search may replace them before code generation.
void schedule_kernels(Plan& plan, const ir::Graph& graph);

// Sets key_rows and value_rows of the plan's attention schedules where it is proven, in the
// graph and the plan's order, that
//   - the key (value) operand is a scatter whose coordinate along the key axis is always a value of
//     a graph input of at most kMaxEarlyRows i64 elements (its target there is check_index of a
//     load of that input, plus loop variables that range over one value), and
//   - the graph updates that input in place (state passed again on every call: its pointer stays,
//     where a fresh index tensor per call would cost a parameter update per attention and call),
//   - no step up to the attention's own writes that input (the caches' step counters move on at the
//     step's end), and
//   - the scatter writes onto a graph input's memory (a cache) that no other step up to the
//     attention writes.
// Every kernel lets the next one launch before it waits (lm_kernel_entry), so when an attention's
// blocks start, any kernel ahead of it may still be running; the only one that writes the cache is
// its scatter (another write there fails the last condition; a scatter's base copy, where memory
// planning needs one, is a launch of its own with plain edges, complete before any later kernel
// starts). Rows outside those inputs' values are therefore final before the wait.
void mark_early_attention_rows(Plan& plan, const ir::Graph& graph);

}  // namespace luminal::schedule
