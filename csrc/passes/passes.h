// Graph-to-graph passes, run in order by optimize().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace luminal::passes {

struct OptimizeOptions {
  bool inline_pointwise = true;  // fuse pointwise producers into their consumers
  bool inline_reductions = true;  // fuse reductions into pointwise consumers (as folds)
  bool lower_small_matmuls = true;  // matmuls with short K or few columns become reductions
  bool fuse_matmul_epilogues = true;  // bias (+ ReLU) after a matmul runs inside the matmul
  bool lower_all_matmuls = false;  // every f32/f64 matmul becomes a reduction (the row kernel's pipeline)
  // Limits for the two above: a reduction is inlined when its (static) length is at most this;
  // a matmul becomes a reduction when K <= small_matmul_k or N <= small_matmul_n.
  int64_t max_inlined_reduction = 4096;
  int64_t small_matmul_k = 32;
  int64_t small_matmul_k_max_n = 64;  // short-K matmuls wider than this stay on the library
  int64_t small_matmul_n = 4;
  // A producer read from several places is still inlined when its body has at most this many
  // arithmetic operations (views, casts and index math are free).
  int max_recompute_ops = 0;
  // A table of at most this many elements (static) computed from the model's state and integer
  // inputs alone (a RoPE table's angles, from the inverse frequencies and the positions) is also
  // inlined into each reader that evaluates each of its elements once (recompute factor 1: the
  // cosine and sine tables), however many read it: its kernel would cost a launch for a few
  // elements. Readers that broadcast it (the RoPE of every head reading the cosines) keep reading
  // it: recomputing a cosine per head cost more than the launch saved (H200, one process).
  int64_t max_table_elements = 4096;
  // A single-use producer is inlined only if each of its elements is recomputed at most this many
  // times (its load does not index some consumer axes: a broadcast).
  int64_t max_recompute_factor = 4;
  // A producer whose body already holds this many arithmetic operations stays a kernel of its own:
  // fusing a chain of n elementwise ops into one body re-simplifies it n times (quadratic compile
  // time and memory for long chains, which a hostile archive can declare).
  int max_fused_ops = 256;
  // Store intermediates in the dimension order their readers read them in (assign_layouts).
  bool assign_layouts = true;
};

// Reductions over a single element (every reduce extent the constant 1: a batched matmul with
// K = 1 that lower_small_matmuls made a sum, such as a RoPE table's angles) become pointwise nodes
// of their body at r = 0, cast to their dtype (what inlining them into a reader computes).
void pointwise_unit_reductions(ir::Graph& graph);

// The standard pipeline: inlining, dead-code elimination, common subexpressions merged, output
// materialization, layouts, verification.
ir::Graph optimize(ir::Graph graph, const OptimizeOptions& options = {});

// For the CUDA engine's node kernels (schedule::Mapping::WarpPerRow): a pointwise producer holding
// folds (a LayerNorm's mean or variance, a softmax's max or sum) that a pointwise consumer reads
// once per row, the same value along the consumer's innermost axis, is inlined into it, so that
// one kernel computes the row's folds once and then the row. Not for the CPU interpreter, which
// would recompute such folds for every element.
ir::Graph fuse_row_broadcasts(ir::Graph graph, const OptimizeOptions& options = {});

// Stores intermediates in the dimension order their readers read them in, when that is a
// permutation of their logical dims (e.g. channels-last around convolutions whose outputs are read
// across channels): a moved node is computed in the permuted order and its readers read it through
// the inverse permutation, inlined into their indices; a moved convolution reads x and stores its
// output in that order (ir::Convolution's orders). Outputs, inputs and tensors read whole (by a
// matmul, a scatter, attention, a contraction or as a convolution's weight) never move.
ir::Graph assign_layouts(const ir::Graph& graph);

// Removes nodes that no output depends on (Input nodes always stay: they are the call signature).
ir::Graph eliminate_dead_code(const ir::Graph& graph);

// Readers of a pointwise or reduce node that repeats an earlier one (the same definition over the
// same inputs) read the earlier one instead; the repeat is left unread (eliminate_dead_code drops
// it). A graph output keeps its node.
void eliminate_common_subexpressions(ir::Graph& graph);

// Grouped-query attention whose keys and values were expanded to the query heads (a node reading
// head floordiv(h, group) of a [B, Hk, L, D] tensor, for both, with one group) reads the
// unexpanded tensors instead: attention's own kv-head mapping (h / (H / Hk)) is the same, and the
// expanded copies (the whole cache, `group` times, in a decode step) are no longer written.
void read_grouped_heads_in_place(ir::Graph& graph);

// Substitutes pointwise producers into the bodies of pointwise and reduce consumers.
void inline_pointwise(ir::Graph& graph, const OptimizeOptions& options);

// Turns matmuls with a static short inner dimension (and few columns) or very few output columns
// into sum reductions (f32/f64) or inline folds summed in f32 (f16/bf16), which fuse with their
// producers and consumers (cuBLASLt keeps the large ones).
void lower_small_matmuls(ir::Graph& graph, const OptimizeOptions& options);

// Inlines a reduction read at one place by a pointwise consumer as a fold inside the consumer's
// body (no broadcast: every element of the reduction is computed once).
void inline_reductions(ir::Graph& graph, const OptimizeOptions& options);

// relu?(bias[n] + (a @ b)[m, n]) becomes one matmul with a bias/ReLU epilogue (cuBLASLt runs it in
// its epilogue; the CPU adds it after the product).
void fuse_matmul_epilogues(ir::Graph& graph);

// Makes every tensor output a distinct compute node, so it can be written straight into the
// caller's output tensor (copies are inserted for outputs that are inputs, constants, or repeated).
void materialize_outputs(ir::Graph& graph);

// Outputs that update an input element by element (see input_updates.cpp): a pointwise node of
// the input's dtype and shape, read by no node and written to no other output, that reads the
// input only at the element it writes and reads no input another output updates. Per output.
std::vector<bool> elementwise_input_updates(const ir::Graph& graph);

// The graph with the nodes of elementwise input updates moved behind every other node (in their
// order): then they may write into the inputs' memory, after every read of the old values.
ir::Graph defer_input_updates(const ir::Graph& graph);

// Per output: an elementwise input update that may be written into its input's memory in this
// graph, because no other kind of compute node follows the first such update. All false when
// one does (a later pass reordered the graph): the caller then copies the new values back.
std::vector<bool> input_updates_written_last(const ir::Graph& graph);

// A pointwise node of `dtype` and `shape` that reads its one input (node `source_id`) at
// [i<index_vars[0]>, i<index_vars[1]>, ...]: a copy when index_vars is 0, 1, ..., else the input
// with its dimensions permuted. `origin` names it in messages and profiles.
ir::Node permuted_read(DType dtype, ir::Shape shape, ir::NodeId source_id, const std::vector<int>& index_vars,
                       std::string origin);

// A pointwise node copying `source` (node `source_id`) element by element; `why` is its origin.
ir::Node identity_copy(const ir::Node& source, ir::NodeId source_id, const std::string& why);

// Number of arithmetic operations in a body (loads, index math and casts excluded).
int arithmetic_op_count(const ir::Expr& body);

// A pointwise node whose body is a single unmasked affine load of its input 0: the output is a
// strided view of that input. index[d] = offset[d] + sum_j coefficients[d][j] * i_j, where d
// runs over the input's dimensions and j over the output's.
struct AffineView {
  ir::NodeId base = -1;
  std::vector<ir::Expr> offset;                     // per input dim
  std::vector<std::vector<ir::Expr>> coefficients;  // [input dim][output dim], shape expressions
  // A reshape merging dimensions (quotient and remainder indices): affine only in the flat offset
  // of a row-major base, held by the innermost dimension (the others are 0). Readers check that
  // the base's strides are row-major (require_row_major_base) before they use it.
  bool flattened = false;
};
// Raises luminal::Error (internal) when a flattened view's base does not have row-major strides.
void require_row_major_base(const AffineView& view, const std::vector<int64_t>& base_sizes,
                            const std::vector<int64_t>& base_strides);
std::optional<AffineView> as_affine_view(const ir::Graph& graph, ir::NodeId node);
// The node whose memory `node` reads if it is an affine view (as_affine_view's base), else itself.
ir::NodeId affine_view_base(const ir::Graph& graph, ir::NodeId node);

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
