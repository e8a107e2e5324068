// Test helpers: build small graphs with the frontend Builder and run them on the CPU executor.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "frontend/builder.h"
#include "passes/passes.h"
#include "runtime/cpu/executor.h"
#include "runtime/symbols.h"

namespace luminal::testing {

// A host tensor that owns its bytes, filled from doubles.
struct Host {
  DType dtype = DType::F32;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> bytes;

  template <typename T>
  static Host of(DType dtype, std::vector<int64_t> sizes, const std::vector<T>& values) {
    Host h;
    h.dtype = dtype;
    h.sizes = std::move(sizes);
    h.bytes.resize(values.size() * dtype_size(dtype));
    std::memcpy(h.bytes.data(), values.data(), h.bytes.size());
    return h;
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
  runtime::TensorView view() {
    runtime::TensorView v;
    v.data = bytes.data();
    v.dtype = dtype;
    v.sizes = sizes;
    v.strides = runtime::contiguous_strides(sizes);
    return v;
  }
};

// Runs `graph` on the CPU reference executor and returns every output (poisoned before the run,
// so unwritten elements show); `copied_bytes`: where to put the bytes copied from scatter bases.
inline std::vector<Host> run_on_cpu(std::shared_ptr<const ir::Graph> graph, std::vector<Host> inputs,
                                    size_t* copied_bytes = nullptr) {
  runtime::cpu::Executor executor(graph);
  std::vector<runtime::TensorView> views;
  for (Host& h : inputs) views.push_back(h.view());
  const runtime::SymbolValues symbols = runtime::bind_inputs(*graph, views);
  std::vector<Host> outputs(graph->outputs.size());
  std::vector<runtime::TensorView> out_views;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const ir::Node& node = graph->node(graph->outputs[k].node);
    outputs[k].dtype = node.dtype;
    outputs[k].sizes = runtime::evaluate(node.shape, symbols);
    int64_t n = 1;
    for (int64_t s : outputs[k].sizes) n *= s;
    outputs[k].bytes.assign(static_cast<size_t>(n) * dtype_size(node.dtype), 0xFF);  // poison
    out_views.push_back(outputs[k].view());
  }
  const size_t copied = executor.run(views, out_views, symbols);
  if (copied_bytes) *copied_bytes = copied;
  return outputs;
}

class GraphFixture {
 public:
  GraphFixture() : builder_(graph_) { builder_.set_origin("test"); }

  frontend::Builder& b() { return builder_; }
  ir::Graph& graph() { return graph_; }

  ir::NodeId input(DType dtype, ir::Shape shape) {
    ir::Node node;
    node.kind = ir::NodeKind::Input;
    node.dtype = dtype;
    node.shape = std::move(shape);
    node.input_position = static_cast<int>(graph_.inputs.size());
    node.name = "in" + std::to_string(node.input_position);
    const ir::NodeId id = graph_.add(std::move(node));
    graph_.inputs.push_back(id);
    for (const ir::Expr& dim : graph_.node(id).shape) {
      if (dim->op == ir::ExprOp::Symbol) graph_.symbols.emplace(dim->symbol, ir::SymbolInfo{dim->symbol, 1, {}});
    }
    return id;
  }

  void output(ir::NodeId id) {
    ir::GraphOutput out;
    out.node = id;
    out.name = "out" + std::to_string(graph_.outputs.size());
    graph_.outputs.push_back(out);
  }

  // Optimizes, runs on the given inputs and returns every output.
  std::vector<Host> run(std::vector<Host> inputs, const passes::OptimizeOptions& options = {}) {
    return run_on_cpu(std::make_shared<const ir::Graph>(passes::optimize(graph_, options)), std::move(inputs),
                      &copied_bytes_);
  }

  // Bytes the last run() copied from scatter bases.
  size_t copied_bytes() const { return copied_bytes_; }

 private:
  ir::Graph graph_;
  frontend::Builder builder_;
  size_t copied_bytes_ = 0;
};

}  // namespace luminal::testing
