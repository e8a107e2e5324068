// Row-local graphs: the megakernel matcher.
//
// A graph is row-local when every computed tensor has the same leading (batch) dimension and
// every computed tensor is read by its consumers only at the consumer's own row. Graph inputs and
// constants may be read anywhere (gathers, embedding tables, weights). Such a graph runs as one
// kernel in which each thread computes whole rows, keeping every intermediate row in registers:
// DLRM (MLPs, embedding bags of any kind, dot interaction, concatenation) is the leading example.
//
// The matcher works on the IR, after its own pass pipeline (every matmul becomes a reduction,
// single-use reductions become folds, reductions become pointwise nodes with fold bodies), and
// is conservative: anything it cannot prove row-local or small enough is declined with a reason
// that names the node and the failed check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace luminal::passes {

struct RowLimits {
  int64_t max_row_elements = 256;     // per node (registers)
  int64_t max_total_elements = 1024;  // over all intermediate rows
  int64_t max_work = 32768;           // unrolled element computations times their static fold lengths
};

struct RowPlan {
  bool accepted = false;
  std::string reason;   // accepted: a summary; declined: the failed check
  ir::Graph graph;      // accepted: pointwise nodes only, each row-local over `rows`
  ir::Expr rows;        // the batch extent (a shape expression)
  int64_t work = 0;     // estimated per-row work (see RowLimits::max_work)
};

RowPlan plan_row_kernel(const ir::Graph& translated, const RowLimits& limits = {});

// The body of each element of a row-kernel node's row (row-major over dimensions 1..): loop
// variables 1.. replaced by the element's index, simplified, and loads of constants at constant
// positions replaced by their values (e.g. DLRM's interaction pair indices). Only i0 stays free.
std::vector<ir::Expr> specialize_row_elements(const ir::Graph& graph, const ir::Node& node);

// A reduction as a pointwise node whose body folds over the reduction axes.
ir::Node reduce_as_pointwise(const ir::Node& reduce);

}  // namespace luminal::passes
