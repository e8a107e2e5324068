#include "runtime/cuda/swiglu.h"

namespace luminal::runtime::gpu {

namespace {

using ir::Expr;
using ir::ExprOp;

bool is_op(const Expr& e, ExprOp op, DType dtype) { return e->op == op && e->dtype == dtype; }

// A load of `rank` dimensions at [i0, i1, ...], unmasked.
bool reads_own_element(const Expr& e, size_t rank) {
  if (e->op != ExprOp::Load || e->masked || e->load_rank() != rank) return false;
  for (size_t d = 0; d < rank; ++d) {
    if (e->args[d]->op != ExprOp::LoopVar || e->args[d]->index != static_cast<int>(d)) return false;
  }
  return true;
}

// f32(load of the element): the gate's value. Returns its slot, or -1.
int widened_load(const Expr& e, size_t rank) {
  if (!is_op(e, ExprOp::Cast, DType::F32) || !reads_own_element(e->args[0], rank)) return -1;
  return e->args[0]->index;
}

// silu(g) in f32 as the frontend writes it: div(g, add(1, exp(neg(g)))) with g = f32(load).
// Returns the gate's slot, or -1.
int silu_of_load(const Expr& e, size_t rank) {
  if (!is_op(e, ExprOp::Div, DType::F32)) return -1;
  const int slot = widened_load(e->args[0], rank);
  const Expr& sum = e->args[1];
  if (slot < 0 || !is_op(sum, ExprOp::Add, DType::F32)) return -1;
  for (int side = 0; side < 2; ++side) {
    const Expr& one = sum->args[side];
    const Expr& exp = sum->args[1 - side];
    if (!is_op(one, ExprOp::Const, DType::F32) || one->float_value != 1.0) continue;
    if (!is_op(exp, ExprOp::Exp, DType::F32) || !is_op(exp->args[0], ExprOp::Neg, DType::F32)) continue;
    if (ir::expr_equal(exp->args[0]->args[0], e->args[0])) return slot;
  }
  return -1;
}

}  // namespace

std::optional<std::pair<ir::NodeId, ir::NodeId>> swiglu_operands(const ir::Graph& graph, const ir::Node& node) {
  const DType dtype = node.dtype;
  if (node.kind != ir::NodeKind::Pointwise || node.contraction != ir::Contraction::None || !node.body) return {};
  if ((dtype != DType::BF16 && dtype != DType::F16) || !is_op(node.body, ExprOp::Mul, dtype)) return {};
  const size_t rank = node.rank();
  for (int side = 0; side < 2; ++side) {
    const Expr& rounded = node.body->args[side];
    const Expr& up = node.body->args[1 - side];
    if (!is_op(rounded, ExprOp::Cast, dtype) || !reads_own_element(up, rank) || up->dtype != dtype) continue;
    const int gate_slot = silu_of_load(rounded->args[0], rank);
    if (gate_slot < 0) continue;
    const ir::NodeId gate = node.inputs.at(gate_slot), up_node = node.inputs.at(up->index);
    for (const ir::NodeId operand : {gate, up_node}) {
      const ir::Node& n = graph.node(operand);
      if (n.dtype != dtype || n.rank() != rank) return {};
      for (size_t d = 0; d < rank; ++d) {
        if (!ir::expr_equal(n.shape[d], node.shape[d])) return {};
      }
    }
    return std::make_pair(gate, up_node);
  }
  return {};
}

std::optional<SwiGluValues> swiglu_after_products(const CudaProgram& program, const Instance& instance,
                                                  const std::vector<int>& uses, size_t s) {
  const std::vector<schedule::Step>& steps = program.plan.steps;
  const size_t values_step = s + 2;
  if (values_step >= steps.size() || steps[values_step].kind != schedule::StepKind::Kernel) return {};
  const ir::Graph& graph = *program.graph;
  const ir::Node& values = graph.node(steps[values_step].node);
  const auto operands = swiglu_operands(graph, values);
  const ir::NodeId first = steps[s].node, second = steps[s + 1].node;
  if (!operands || program.buffers.placement.at(values.id) != Placement::Arena || uses.at(first) != 1 ||
      uses.at(second) != 1) {
    return {};
  }
  const bool gate_first = operands->first == first && operands->second == second;
  if (!gate_first && !(operands->first == second && operands->second == first)) return {};
  size_t launches = 0;
  for (const Instance::Launch& launch : instance.launches) {
    if (launch.step != values_step) continue;
    if (launch.kernel != program.step_kernels[values_step].kernel) return {};  // it shares a launch
    ++launches;
  }
  const Buffer& stored = instance.buffers.at(values.id);
  const bool layout =
      stored.sizes == instance.buffers.at(first).sizes && stored.strides == contiguous_strides(stored.sizes);
  if (launches != 1 || !layout) return {};
  return SwiGluValues{values_step, gate_first, reinterpret_cast<void*>(stored.ptr)};
}

}  // namespace luminal::runtime::gpu
