// Tensor-level helpers that emit IR nodes. Translators compose these; every helper validates its
// operands and raises luminal::Error naming shapes and dtypes on misuse.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/check_label.h"
#include "ir/graph.h"

namespace luminal::frontend {

using ir::Expr;
using ir::NodeId;
using ir::Shape;

// A tensor operand or a Python scalar operand of an ATen op. A scalar is a number, or an integer
// known only at run time (a SymInt: `symbolic`, a shape expression).
struct Operand {
  std::optional<NodeId> tensor;
  double scalar = 0.0;
  DType scalar_dtype = DType::F32;  // Bool, I64 or F32/F64 as written in the graph
  Expr symbolic;                    // a SymInt scalar (I64), or null
  // The exact value of an integer or bool number (scalar_dtype I64 or Bool): `scalar` rounds
  // integers beyond 2^53 (x + (2**53 + 1), where(m, x, 2**63 - 1)).
  int64_t integer = 0;

  static Operand of(NodeId id) { return Operand{id, 0.0, DType::F32, nullptr}; }
  // A number of `dtype`: F32/F64, or I64/Bool for a double that is an exact int64 (raises if not).
  static Operand number(double value, DType dtype);
  // An integer (I64) or bool number, exactly.
  static Operand integer_number(int64_t value, DType dtype = DType::I64);
  static Operand symbol(Expr value) { return Operand{std::nullopt, 0.0, DType::I64, std::move(value)}; }
  bool is_integer_number() const { return !tensor && !symbolic && !is_floating(scalar_dtype); }
  // A number equal to 1 (a factor that scales nothing: alpha).
  bool is_one() const { return !tensor && !symbolic && (is_integer_number() ? integer == 1 : scalar == 1.0); }
  // Whether a number lies in [range.min, range.max] (an integer exactly; NaN never does).
  bool within(const IntRange& range) const;
  // The number as written: an integer exactly.
  std::string text() const;

  // The number of a scalar operand whose value the translation itself needs (a step, an
  // exponent): raises for symbolic scalars, which only elementwise arithmetic takes.
  double number(const char* what) const;
};

// torch.promote_types
DType promote_types(DType a, DType b);

class Builder {
 public:
  explicit Builder(ir::Graph& graph) : graph_(graph) {}

  // Every node created from now on records this origin (for messages and the IR printout).
  void set_origin(std::string origin) {
    origin_ = std::move(origin);
    site_.reset();
  }
  // The exported node being translated: sets the origin and names the op in the labels of the
  // run-time checks of every node created from now on (see ir/check_label.h).
  void set_op(const std::string& node_name, const std::string& short_target);
  const std::string& origin() const { return origin_; }

  ir::Graph& graph() { return graph_; }
  const ir::Node& node(NodeId id) const { return graph_.node(id); }
  // By value: a reference into the graph would dangle once the next node is added.
  Shape shape(NodeId id) const { return graph_.node(id).shape; }
  DType dtype(NodeId id) const { return graph_.node(id).dtype; }
  size_t rank(NodeId id) const { return graph_.node(id).rank(); }

  // ---- raw node creation (bodies are simplified against the output shape) ----
  NodeId pointwise(DType dtype, Shape shape, std::vector<NodeId> inputs, Expr body);
  NodeId reduce(DType dtype, Shape shape, std::vector<NodeId> inputs, Expr body, ir::ReduceOp op,
                std::vector<Expr> extents);
  // A convolution: a sum reduce stored in `dtype` whose body stays in float_compute_dtype(dtype)
  // (accumulated wide, rounded once when stored), marked with `params` (see ir::Convolution).
  NodeId convolution(DType dtype, Shape shape, NodeId x, NodeId w, Expr product, std::vector<Expr> extents,
                     ir::Convolution params);
  NodeId matmul(NodeId a, NodeId b);
  // _grouped_mm's MoE form: a[M, K] with rows grouped by int32 `ends` (cumulative, one per group)
  // times b[G, K, N] (a transposed [G, N, K] view is read in place) -> out_dtype[M, N], one node
  // marked ir::Contraction::GroupedRows(TransposedB). Ends are checked at run time.
  NodeId grouped_rows_matmul(NodeId a, NodeId b, NodeId ends, DType out_dtype);

  // Fused attention (ir::NodeKind::Attention, semantics in ir/graph.h): q [B, H, Lq, D],
  // k [B, Hk, Lk, D], v [B, Hk, Lk, Dv], an optional rank-4 mask (dimensions 1 or the scores')
  // -> [B, H, Lq, Dv] in q's dtype. The operands' shapes must already agree structurally.
  NodeId attention(NodeId q, NodeId k, NodeId v, std::optional<NodeId> mask, double scale, bool causal);

  // out = base, then for every j of `domain` (row-major): out[targets(j)] = value(j), or with
  // `accumulate` out[targets(j)] += value(j), the sum rounded once to the base's dtype. `operands`
  // are what value and targets load, as slots 1.. (slot 0 is the base, which they never read);
  // targets are i64 coordinates, bounds-checked here. One ir::NodeKind::Scatter node: work is
  // linear in the elements written.
  NodeId scatter(NodeId base, Shape domain, std::vector<NodeId> operands, std::vector<Expr> targets, Expr value,
                 bool accumulate);

  // Records a run-time check that two shape expressions are equal (checked when inputs are bound).
  void assert_equal(const Expr& a, const Expr& b, const std::string& what);

  // ---- index helpers for bodies ----
  // Loop variables of an output of the given rank: [i0, i1, ...].
  static std::vector<Expr> loop_vars(size_t rank);
  // Load input `slot` (= node x) for an output of `out_shape`, broadcasting x right-aligned.
  Expr broadcast_load(int slot, NodeId x, const Shape& out_shape);

  // ---- tensor ops ----
  // torch.result_type over tensors (by rank) and Python scalars.
  DType result_type(const std::vector<Operand>& operands) const;
  Shape broadcast_shapes(const std::vector<Shape>& shapes);
  // Elementwise op: operands are cast to `compute` (tensors and scalars), broadcast, combined by
  // `combine` (which receives one expression per operand), and the result cast to `out`.
  template <typename Combine>
  NodeId elementwise(const std::vector<Operand>& operands, DType compute, DType out, Combine combine);

  NodeId cast(NodeId x, DType dtype);
  NodeId copy(NodeId x);  // a materializable identity
  NodeId full(const Shape& shape, double value, DType dtype);
  // A tensor of `dtype` filled with a number of the graph (full, fill, scalar_tensor): raises
  // where eager refuses the conversion (see check_storable).
  NodeId full(const Shape& shape, const Operand& value, DType dtype);
  // Raises when eager's checked conversion of the number `value` to `dtype` overflows (eager
  // raises "value cannot be converted to type ... without overflow" when it stores such a number:
  // full, fill, masked_fill, where's and index_fill's scalar_tensor). Unsigned types take
  // negative integers down to -max, wrapped, as c10::checked_convert does.
  void check_storable(const Operand& value, DType dtype, const char* what) const;
  NodeId arange(Expr length, double start, double step, DType dtype);
  NodeId arange(Expr length, const Expr& start, double step, DType dtype);  // an integer (symbolic) start

  NodeId reshape(NodeId x, const Shape& new_shape);
  NodeId permute(NodeId x, const std::vector<int64_t>& dims);
  NodeId transpose(NodeId x, int64_t dim0, int64_t dim1);
  NodeId expand(NodeId x, const Shape& new_shape);
  NodeId unsqueeze(NodeId x, int64_t dim);
  NodeId squeeze(NodeId x, const std::vector<int64_t>& dims);  // only dims of size 1; others kept
  // A per-channel vector [C] shaped [C, 1, ...] to broadcast against a tensor of `rank` whose
  // channels are dim 1 (norm weights, convolution bias).
  NodeId per_channel(NodeId v, size_t rank);
  NodeId slice(NodeId x, int64_t dim, Expr start, Expr end, int64_t step);
  NodeId select(NodeId x, int64_t dim, Expr index);
  NodeId concat(const std::vector<NodeId>& xs, int64_t dim);
  // out = x indexed along `dim` by `index` (any rank): shape x[:dim] + index.shape + x[dim+1:].
  // Negative indices wrap when `wrap_negative`; out-of-range indices raise at run time.
  // `index_input` names the index's argument in failure messages (e.g. "indices").
  NodeId take(NodeId x, int64_t dim, NodeId index, bool wrap_negative, const std::string& index_input = {});
  NodeId reduce_dims(NodeId x, std::vector<int64_t> dims, bool keepdim, ir::ReduceOp op, DType out);

  // Normalizes a possibly negative dim for a tensor of `rank` (rank 0 allows -1 and 0).
  int64_t normalize_dim(int64_t dim, size_t rank) const;

  // Integer index into dim of size `size`: wraps negative values, then bounds-checks. A failure
  // names the op and `input`, the argument the index comes from (e.g. "indices").
  static Expr checked_index(Expr raw, const Expr& size, bool wrap_negative, Expr mask = nullptr,
                            const std::string& input = {});

  // A number or SymInt operand as an expression of `compute` (integers exactly, beyond 2^53 too).
  Expr scalar_expr(const Operand& operand, DType compute) const;

 private:
  // The expression with its checks labelled for the current op (unchanged without one).
  Expr labelled(const Expr& e) const;

  ir::Graph& graph_;
  std::string origin_;
  std::optional<ir::CheckSite> site_;
};

template <typename Combine>
NodeId Builder::elementwise(const std::vector<Operand>& operands, DType compute, DType out, Combine combine) {
  std::vector<Shape> shapes;
  for (const Operand& op : operands) {
    if (op.tensor) shapes.push_back(shape(*op.tensor));
  }
  const Shape out_shape = broadcast_shapes(shapes);
  std::vector<NodeId> inputs;
  std::vector<Expr> values;
  for (const Operand& op : operands) {
    if (op.tensor) {
      const int slot = static_cast<int>(inputs.size());
      inputs.push_back(*op.tensor);
      values.push_back(ir::cast(broadcast_load(slot, *op.tensor, out_shape), compute));
    } else {
      values.push_back(scalar_expr(op, compute));
    }
  }
  Expr body = ir::cast(combine(values), out);
  return pointwise(out, out_shape, std::move(inputs), std::move(body));
}

}  // namespace luminal::frontend
