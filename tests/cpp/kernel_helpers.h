// Test helpers for schedules and code generation: small IR nodes built by hand and the operand
// descriptions the CUDA executor would pass with them.
#pragma once

#include <vector>

#include "graph_helpers.h"
#include "schedule/kernel_schedule.h"

namespace luminal::testing {

// What a node's kernel sees of its inputs: every operand contiguous (or `layout` for all).
inline std::vector<schedule::OperandInfo> operands_of(const ir::Graph& graph, ir::NodeId id,
                                                      schedule::Layout layout = schedule::Layout::Contiguous) {
  std::vector<schedule::OperandInfo> operands;
  for (ir::NodeId input : graph.node(id).inputs) {
    schedule::OperandInfo info;
    info.dtype = graph.node(input).dtype;
    info.shape = graph.node(input).shape;
    info.layout = layout;
    operands.push_back(info);
  }
  return operands;
}

// out[b, i, j] = sum_r x[b, i, r] * x[b, j, r] over r < inner: pairwise dot products of the rows of
// x[batch, rows, inner] (DLRM's interaction), one fold per output element.
inline ir::NodeId pairwise_dots(GraphFixture& f, DType dtype, int64_t batch, int64_t rows, int64_t inner) {
  using ir::int_const;
  const ir::NodeId x = f.input(dtype, {int_const(batch), int_const(rows), int_const(inner)});
  const ir::Expr b = ir::loop_var(0), i = ir::loop_var(1), j = ir::loop_var(2), r = ir::reduce_var(0);
  const ir::Expr product = ir::mul(ir::load(0, dtype, {b, i, r}), ir::load(0, dtype, {b, j, r}));
  return f.b().pointwise(dtype, {int_const(batch), int_const(rows), int_const(rows)}, {x},
                         ir::fold(ir::ReduceOp::Sum, 0, int_const(inner), product));
}

// out[i] = sum_r x[i, r] (reduce_axis 1) or out[j] = sum_r x[r, j] (reduce_axis 0), as a Reduce node.
inline ir::NodeId sum_over(GraphFixture& f, DType dtype, int64_t rows, int64_t cols, int reduce_axis) {
  using ir::int_const;
  const ir::NodeId x = f.input(dtype, {int_const(rows), int_const(cols)});
  const ir::Expr i = ir::loop_var(0), r = ir::reduce_var(0);
  const ir::Expr body = reduce_axis == 1 ? ir::load(0, dtype, {i, r}) : ir::load(0, dtype, {r, i});
  const int64_t kept = reduce_axis == 1 ? rows : cols, reduced = reduce_axis == 1 ? cols : rows;
  return f.b().reduce(dtype, {int_const(kept)}, {x}, body, ir::ReduceOp::Sum, {int_const(reduced)});
}

// A 1-D convolution (stride 1, no padding, one group) of x[batch, channels, length] by
// w[filters, channels, kernel], built as the frontend builds one: stored in `dtype`, its product
// summed in float_compute_dtype(dtype) (ir::Convolution).
inline ir::NodeId conv1d(GraphFixture& f, DType dtype, int64_t batch, int64_t channels, int64_t filters, int64_t length,
                         int64_t kernel) {
  using ir::int_const;
  const ir::NodeId x = f.input(dtype, {int_const(batch), int_const(channels), int_const(length)});
  const ir::NodeId w = f.input(dtype, {int_const(filters), int_const(channels), int_const(kernel)});
  const DType acc = float_compute_dtype(dtype);
  const ir::Expr c = ir::reduce_var(0), r = ir::reduce_var(1);
  const ir::Expr product =
      ir::mul(ir::cast(ir::load(0, dtype, {ir::loop_var(0), c, ir::add(ir::loop_var(2), r)}), acc),
              ir::cast(ir::load(1, dtype, {ir::loop_var(1), c, r}), acc));
  const ir::Shape out{int_const(batch), int_const(filters), int_const(length - kernel + 1)};
  return f.b().convolution(dtype, out, x, w, product, {int_const(channels), int_const(kernel)},
                           ir::Convolution{{1}, {0}, {1}, 1, nullptr});
}

}  // namespace luminal::testing
