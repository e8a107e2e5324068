// Graph-to-graph passes, run in order by optimize().
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace luminal::passes {

struct OptimizeOptions {
  bool inline_pointwise = true;  // fuse pointwise producers into their consumers
  // A producer read from several places is still inlined when its body has at most this many
  // arithmetic operations (views, casts and index math are free).
  int max_recompute_ops = 0;
};

// The standard pipeline: inlining, dead-code elimination, output materialization, verification.
ir::Graph optimize(ir::Graph graph, const OptimizeOptions& options = {});

// Removes nodes that no output depends on (Input nodes always stay: they are the call signature).
ir::Graph eliminate_dead_code(const ir::Graph& graph);

// Substitutes pointwise producers into the bodies of pointwise and reduce consumers.
void inline_pointwise(ir::Graph& graph, const OptimizeOptions& options);

// Makes every tensor output a distinct compute node, so it can be written straight into the
// caller's output tensor (copies are inserted for outputs that are inputs, constants, or repeated).
void materialize_outputs(ir::Graph& graph);

// Number of arithmetic operations in a body (loads, index math and casts excluded).
int arithmetic_op_count(const ir::Expr& body);

// A pointwise node whose body is a single unmasked affine load of its input 0: the output is a
// strided view of that input. index[d] = offset[d] + sum_j coefficients[d][j] * i_j, where d
// runs over the input's dimensions and j over the output's.
struct AffineView {
  ir::NodeId base = -1;
  std::vector<ir::Expr> offset;                     // per input dim
  std::vector<std::vector<ir::Expr>> coefficients;  // [input dim][output dim], shape expressions
};
std::optional<AffineView> as_affine_view(const ir::Graph& graph, ir::NodeId node);

// A pointwise body that selects on an output axis (`where(i_a < c, A, B)`, as concatenation
// produces) splits into pieces over consecutive ranges of that axis, each with the selection
// resolved. Piece k covers axis positions [begin, begin + extent); its body is written in terms
// of a local index (i_a counts from 0 within the piece). Executors run pieces independently.
struct PointwisePiece {
  int axis = -1;  // -1: the whole iteration space (no split)
  ir::Expr begin;
  ir::Expr extent;
  ir::Expr body;
};
std::vector<PointwisePiece> split_pointwise(const ir::Node& node);

}  // namespace luminal::passes
