// A compiled graph: PT2 bytes in, a runnable program out. This is the core's public entry point;
// the Python binding layer only converts tensors and allocates outputs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "frontend/translate.h"
#include "ir/graph.h"
#include "passes/passes.h"
#include "runtime/cpu/executor.h"
#include "runtime/symbols.h"
#include "runtime/tensor.h"

namespace luminal::runtime {

struct CompileOptions {
  std::vector<ir::InputRole> input_roles;  // by call position; missing: user input
  passes::OptimizeOptions optimize;
};

struct OutputInfo {
  bool is_tensor = true;
  DType dtype = DType::F32;
  int mutated_input = -1;  // >= 0: write this output back into call input k
  std::string name;
};

struct Stats {
  size_t ir_nodes = 0;         // after optimization
  size_t kernels = 0;          // compute steps per call
  size_t matmuls = 0;
  size_t inputs = 0;
  size_t constants = 0;
};

class CompiledGraph {
 public:
  // Parses a PT2 archive held in memory (weights, if any, become constants).
  static std::shared_ptr<CompiledGraph> from_archive_bytes(std::string bytes, const CompileOptions& options = {});
  static std::shared_ptr<CompiledGraph> from_archive_file(const std::string& path, const CompileOptions& options = {});

  size_t num_inputs() const { return graph_->inputs.size(); }
  const ir::Node& input(size_t k) const { return graph_->node(graph_->inputs[k]); }
  const std::vector<OutputInfo>& outputs() const { return outputs_; }

  // Binds the call's inputs: checks them and solves the shape symbols.
  SymbolValues bind(const std::vector<TensorView>& inputs) const;
  std::vector<int64_t> output_shape(size_t k, const SymbolValues& symbols) const;
  int64_t int_output(size_t k, const SymbolValues& symbols) const;
  // `outputs` has one view per output (integer outputs: an empty view).
  void run(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
           const SymbolValues& symbols) const;

  std::string ir_text(bool optimized = true) const;
  const ir::Graph& graph() const { return *graph_; }
  Stats stats() const;

 private:
  CompiledGraph(ir::Graph translated, const CompileOptions& options);

  std::string translated_text_;
  std::shared_ptr<const ir::Graph> graph_;
  std::vector<OutputInfo> outputs_;
  std::unique_ptr<cpu::Executor> cpu_;
};

}  // namespace luminal::runtime
