// The plan of steps: what an executor runs for a graph, in order, decided once and held as data.
//
// Both executors follow the same plan. A step computes one node: a generated kernel (pointwise or
// reduce), a scatter (a copy of its base, then the scattered writes), a library matmul (cuBLASLt
// on CUDA, the reference GEMM on the CPU), or the row kernel (the whole row-local graph of
// passes/row_plan.h as one kernel: the megakernel is this plan choice, not an executor mode).
// A pointwise node that is an affine view read only by matmuls is no step: the matmul reads its
// base by strides (View). Inputs and constants are no steps either.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace luminal::schedule {

enum class StepKind {
  Kernel,         // a generated kernel computes the node
  Scatter,        // the base is copied into the output (unless they share memory), then scattered into
  LibraryMatmul,  // a matmul by the library (cuBLASLt; the CPU's reference GEMM)
  RowKernel,      // the whole row-local graph as one kernel (node: its first tensor output)
};

struct Step {
  StepKind kind = StepKind::Kernel;
  ir::NodeId node = -1;
};

struct Plan {
  std::vector<Step> steps;
  std::vector<ir::NodeId> views;  // affine views read by strides, never materialized (node order)
  ir::Expr rows;                  // the row kernel's batch extent; null for a node-by-node plan

  bool is_row_kernel() const { return rows != nullptr; }
};

// Node by node: every compute node is a step in graph order, except views only matmuls read.
// `stable_library_operands` (CUDA: library calls are captured into the call's CUDA graph with
// fixed addresses): a view whose base is memory that changes per call (a user input or a graph
// output, the caller's) is materialized instead, so that the staging copies of
// passes/stage_library_operands.h actually copy and a new input pointer needs no rebuild.
Plan plan_steps(const ir::Graph& graph, bool stable_library_operands = false);

// One row kernel for a row-local graph (passes/row_plan.h) with batch extent `rows`.
Plan plan_row_kernel_steps(const ir::Graph& graph, ir::Expr rows);

}  // namespace luminal::schedule
