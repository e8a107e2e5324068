// The CPU reference executor: runs the steps of an optimized graph's plan (schedule/plan.h) with
// the expression interpreter (pointwise, reduce and scatter nodes) and a reference GEMM (matmul
// nodes), intermediates in one arena per call laid out by the shared memory planner.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "passes/passes.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/memory_plan.h"
#include "schedule/plan.h"
#include "runtime/symbols.h"
#include "runtime/tensor.h"

namespace luminal::runtime::cpu {

class Executor {
 public:
  explicit Executor(std::shared_ptr<const ir::Graph> graph);

  // `outputs` has one entry per graph output (in order); tensor outputs must be contiguous views
  // of caller-allocated memory with the evaluated output shapes. Integer outputs are ignored. An
  // output of a scatter may be its base input's own memory (the update is then made in place).
  // Returns the bytes copied from scatter bases (zero when every scatter ran in place).
  size_t run(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
             const SymbolValues& symbols) const;

  // Nodes computed per call (virtual views and inputs excluded).
  size_t kernel_count() const;

 private:
  // A pointwise node runs as one or more pieces over boxes of its iteration space.
  struct Piece {
    int axis = -1;  // -1: the whole space
    ir::Expr begin, extent;
    std::unique_ptr<Program> program;
  };

  // The programs that compute one node.
  struct NodePlan {
    std::vector<Piece> pieces;         // pointwise
    std::unique_ptr<Program> body;     // reduce, scatter
    std::unique_ptr<Program> extents;  // ragged reductions: the per-element extent
    std::optional<passes::AffineView> view;  // views of the plan: read by strides
  };

  struct Buffer;
  class Run;

  void compile_node(const ir::Node& node, NodePlan& plan) const;

  std::shared_ptr<const ir::Graph> graph_;
  schedule::Plan plan_;  // the steps (schedule/plan.h), shared with the CUDA engine
  BufferPlan buffers_;   // placement and lifetimes (runtime/memory_plan.h)
  std::vector<NodePlan> plans_;  // per node
};

}  // namespace luminal::runtime::cpu
