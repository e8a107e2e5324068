// The CPU reference executor: runs every node of an optimized graph with the expression
// interpreter (pointwise and reduce nodes) and a reference GEMM (matmul nodes).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "passes/passes.h"
#include "runtime/cpu/interpreter.h"
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
  enum class Placement { Input, Constant, Computed, VirtualView };

  // A pointwise node runs as one or more pieces over boxes of its iteration space.
  struct Piece {
    int axis = -1;  // -1: the whole space
    ir::Expr begin, extent;
    std::unique_ptr<Program> program;
  };

  struct NodePlan {
    Placement placement = Placement::Computed;
    int output = -1;  // graph output index written by this node
    std::vector<Piece> pieces;         // pointwise
    std::unique_ptr<Program> body;     // reduce
    std::unique_ptr<Program> extents;  // ragged reductions: the per-element extent
    std::optional<passes::AffineView> view;
    ir::NodeId last_use = -1;  // last node that reads this one (intermediates are freed after it)
  };

  struct Buffer;
  class Run;

  std::shared_ptr<const ir::Graph> graph_;
  std::vector<NodePlan> plans_;
};

}  // namespace luminal::runtime::cpu
