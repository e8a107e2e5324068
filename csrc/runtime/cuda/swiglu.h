// A SwiGLU's values computed by its gate and up products (codegen/gemv.cuh, PAIR): an MLP's
// silu(gate) * up, the one kernel between its gate/up products and its down product, is stored by
// one paired GEMV launch that computes both products' outputs in the same block.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "runtime/cuda/instance.h"
#include "runtime/cuda/program.h"

namespace luminal::runtime::gpu {

// The gate and up nodes when `node` stores a SwiGLU's values, f16 or bf16, from two tensors of its
// shape and dtype read element for element: mul(dtype(div(f32(g), add(1, exp(neg(f32(g)))))), u)
// (either operand order of the mul and of the add), the steps the GEMV's lm_gemv_glu repeats.
std::optional<std::pair<ir::NodeId, ir::NodeId>> swiglu_operands(const ir::Graph& graph, const ir::Node& node);

// The step after the products of steps s and s + 1 of `program`, when it stores their SwiGLU
// (swiglu_operands, either product the gate), nothing else reads the products, and it is a kernel of
// its own launch writing contiguous arena memory of the products' shape; then a paired launch may
// store its values instead. `uses`: the graph's use counts (outputs included).
struct SwiGluValues {
  size_t step = 0;
  bool gate_first = true;  // step s computes the gate
  void* out = nullptr;     // the values' memory
};
std::optional<SwiGluValues> swiglu_after_products(const CudaProgram& program, const Instance& instance,
                                                  const std::vector<int>& uses, size_t s);

}  // namespace luminal::runtime::gpu
