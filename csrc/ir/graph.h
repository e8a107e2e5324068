// The graph IR: a small set of node kinds whose compute is described by scalar expressions.
//
//   Input      a tensor passed by the caller (user input, parameter or buffer), bound by pointer
//   Constant   a tensor whose bytes are known at compile time (lifted constants, archive weights)
//   Pointwise  out[i...] = body(i...)            (elementwise, views, gathers, concat, iota, ...)
//   Reduce     out[i...] = combine over r of body(i..., r...)   (extents may vary per element;
//              the body has the node's dtype, except a convolution's: see Convolution below)
//   MatMul     out[b, m, n] = sum_k A[b, m, k] * B[b, k, n]     (library call or reference loop)
//   Scatter    out = base, then out[targets(j)] = body(j) (or +=) for every j of a domain: index_put,
//              index_copy, index_add. Work is linear in the elements written, and an executor may
//              write into the base's memory (a KV cache updated in place).
//   Attention  out[b, h, i, :] = softmax(scale * q[b, h, i] . k[b, g, j] + mask[b, h, i, j]) @ v[b, g, j, :]
//              over keys j (fused scaled-dot-product attention; see attention_semantics below).
//
// Node ids are positions in the node list and every node's inputs have smaller ids, so the list
// order is a topological order.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace luminal::ir {

using NodeId = int32_t;
using Shape = std::vector<Expr>;  // one i64 shape expression (symbols and constants) per dimension

enum class NodeKind : uint8_t { Input, Constant, Pointwise, Reduce, MatMul, Scatter, Attention };
// Attention semantics. Inputs {q [B, H, Lq, D], k [B, Hk, Lk, D], v [B, Hk, Lk, Dv]} and optionally
// a rank-4 mask whose dimensions are 1 or equal to [B, H, Lq, Lk] (broadcast). H is a multiple of
// Hk (grouped-query attention): query head h reads kv head g = h / (H / Hk). q, k, v share one
// floating dtype, the output's; it is [B, H, Lq, Dv]. Scores s[j] = scale * (q[i] . k[j]) are
// computed in f32 (f64 for f64 inputs); a bool mask drops keys where it is false, a float mask
// (any floating dtype) is added to the scores; `attention_causal` drops keys j > i (top-left
// aligned, as torch's fused kernels). out[i] = sum_j softmax(s)[j] * v[j], rounded once to the
// output dtype; a row whose keys are all dropped (or whose scores are all -inf) is 0, never NaN.
enum class InputRole : uint8_t { User, Parameter, Buffer };
// What a matmul applies to its result: out = act(a @ b + bias[n]) (bias is input 2).
enum class MatMulEpilogue : uint8_t { None, Bias, BiasRelu, BiasGeluTanh };
// A pointwise node that is a contraction the CUDA engine runs as a tiled kernel; its body still
// defines every element (the CPU interpreter evaluates it). Passes leave such nodes whole.
//   GroupedRows: inputs {a [M, K], b [G, K, N], ends int32 [G]}, out [M, N] (float dtypes):
//   row m belongs to the group g with ends[g-1] <= m < ends[g] (ends[-1] = 0) and is
//   a[m, :] @ b[g]; rows at or past ends[G-1] are 0. Ends must be non-decreasing and <= M
//   (checked at run time).
//   GroupedRowsTransposedB: the same with b stored as [G, N, K] (a transposed weight, read in place).
enum class Contraction : uint8_t { None, GroupedRows, GroupedRowsTransposedB };

// A reduce node that is a convolution (the frontend's aten.convolution): its body still defines
// every element (the CPU interpreter and the generated CUDA kernel evaluate it); a library (cuDNN)
// may compute it instead from these parameters. Inputs {x [N, C, spatial...], w [K, C / groups,
// kernel...]}, out [N, K, spatial...] in x's dtype, cross-correlation:
//   out[n, k, o...] = sum over (c, r...) of x[n, g * C/groups + c, o * stride + r * dilation - padding]
//                     * w[k, c, r...]   (g = k / (K / groups); positions outside x read 0)
// The node's dtype is its storage, x's dtype; its body (the product summed) has
// float_compute_dtype of it (f32 for f16/bf16): the sum accumulates in f32 and is rounded once, when
// stored, as eager's half-precision convolutions do. This is the only reduce whose body dtype may
// differ from its node dtype (verify() allows it for convolutions alone).
// `body` is the body the frontend built: passes leave the node whole (only passes::assign_layouts
// permutes its dimensions, rebuilding body and parameters together), and verify() checks that the
// node's body is still that one, so a library never computes something the body no longer says.
//
// Layouts (passes::assign_layouts): a convolution may read x and w and store its output with their
// dimensions permuted, e.g. channels-last. `x_order` / `w_order` / `y_order` list, per stored dimension, the
// logical dimension it holds (stored dim k is logical dim order[k]); empty means the logical
// order. The node's shape and loop variables and its loads of inputs 0 and 1 are then in the stored
// order (the body says so: it still defines every element), and a library gets the logical
// [N, C, spatial...] sizes with the strides these orders give (channels-last for [0, 2, 3, 1]).
struct Convolution {
  std::vector<int64_t> stride, padding, dilation;  // one per spatial dim
  int64_t groups = 1;
  Expr body;
  // Stored dim k holds logical dim order[k]; empty: the logical order. w_order is that of input 1
  // (a channels-last copy of the weight that assign_layouts adds).
  std::vector<int> x_order, w_order, y_order;
};
// Sizes or strides of a tensor stored in `order` (see Convolution) in its logical dim order.
std::vector<int64_t> logical_order(const std::vector<int64_t>& stored, const std::vector<int>& order);

const char* node_kind_name(NodeKind kind);
// The dtype a scatter's accumulated values have: f32 for f16/bf16 (rounded once after the add), i64
// for integer and bool types (wrapping, or a logical or for bool), the dtype itself otherwise.
DType scatter_compute_dtype(DType dtype);
const char* input_role_name(InputRole role);

// A host copy of a tensor known at compile time: raw storage bytes plus a strided view of them.
struct ConstantData {
  DType dtype = DType::F32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in elements
  int64_t storage_offset = 0;    // in elements
  // The whole storage, shared by every view of it (aliased weights): never copied per view.
  std::shared_ptr<const std::string> bytes;
};

struct Node {
  NodeId id = -1;
  NodeKind kind = NodeKind::Pointwise;
  DType dtype = DType::F32;
  Shape shape;
  std::vector<NodeId> inputs;  // tensors read by `body` (Load slot k reads inputs[k]) or by MatMul

  MatMulEpilogue epilogue = MatMulEpilogue::None;  // MatMul
  Contraction contraction = Contraction::None;     // Pointwise

  Expr body;                          // Pointwise, Reduce
  ReduceOp reduce_op = ReduceOp::Sum;  // Reduce
  std::vector<Expr> reduce_extents;   // Reduce: one per ReduceVar; may use LoopVars and Loads
  std::shared_ptr<const Convolution> convolution;  // Reduce: a convolution a library may compute

  // Input
  std::string name;
  InputRole role = InputRole::User;
  int input_position = -1;  // index in the call's tensor argument list
  // A complex64 (complex128) tensor bound as its f32 (f64) pairs: the node's shape is the complex
  // shape with a last dimension of 2 (frontend/complex.cpp), and binding takes complex tensors only.
  bool complex_pairs = false;

  std::shared_ptr<const ConstantData> constant;  // Constant

  // Scatter: inputs[0] is the base (the node's dtype and shape). For every element j of `domain`,
  // in row-major order, out[targets[0](j), ..., targets[rank-1](j)] is assigned body(j), or, with
  // `accumulate`, becomes round(out + body(j)): the body then has the compute dtype
  // (scatter_compute_dtype) and the sum is rounded once, as eager's index_add/index_put do. Loop
  // variables index the domain; body and targets load inputs 1.. only (never the base, whose
  // memory the output may share) and targets are bounds-checked i64 coordinates. Duplicate
  // targets: the last write wins on the CPU; on CUDA an assignment's winner is unspecified, as in
  // eager.
  Shape scatter_domain;
  std::vector<Expr> scatter_targets;
  bool scatter_accumulate = false;

  // Attention (see the semantics above the enum).
  double attention_scale = 1.0;
  bool attention_causal = false;

  std::string origin;  // e.g. "addmm_1 (aten.addmm.default)": where the node came from

  size_t rank() const { return shape.size(); }
  bool is_compute() const {
    return kind == NodeKind::Pointwise || kind == NodeKind::Reduce || kind == NodeKind::MatMul ||
           kind == NodeKind::Scatter || kind == NodeKind::Attention;
  }
  // Compute nodes that read their operands whole (a library call or a dedicated kernel), with no
  // body to inline producers into: matmuls and attention. (A scatter's values and indices are
  // bodies over its domain; only its base is read whole, as the output's memory.)
  bool reads_operands_whole() const { return kind == NodeKind::MatMul || kind == NodeKind::Attention; }
  // The space the node's loop variables index (the domain for scatters), and its rank.
  const Shape& loop_shape() const { return kind == NodeKind::Scatter ? scatter_domain : shape; }
  size_t loop_rank() const { return loop_shape().size(); }
};

struct GraphOutput {
  enum class Kind { Tensor, Int };
  Kind kind = Kind::Tensor;
  NodeId node = -1;  // Tensor
  Expr value;        // Int: a shape expression over symbols
  // >= 0: the output is the new value of call input `mutated_input` (an in-place update that the
  // caller must write back) rather than a user-visible output.
  int mutated_input = -1;
  // A 0-d bool computed only for the run-time checks in its definition (an `_assert_async`, which
  // eager checks where it stands): never returned to the caller, listed after the other outputs.
  bool check = false;
  std::string name;
  std::string device;  // where the export put this tensor ("cpu", "cuda:0"); used when there are no inputs
};

// A run-time check that two shape expressions agree (e.g. broadcast or reshape compatibility
// that could not be proven at compile time). Checked when inputs are bound.
struct ShapeAssertion {
  Expr lhs;
  Expr rhs;
  std::string what;
};

struct SymbolInfo {
  std::string name;
  int64_t min = 1;
  std::optional<int64_t> max;
};

class Graph {
 public:
  NodeId add(Node node);  // assigns the id; inputs must already exist
  const Node& node(NodeId id) const;
  Node& node(NodeId id);
  const std::vector<Node>& nodes() const { return nodes_; }
  size_t size() const { return nodes_.size(); }

  std::vector<NodeId> inputs;  // Input nodes, indexed by call position
  std::vector<GraphOutput> outputs;
  std::map<std::string, SymbolInfo> symbols;
  std::vector<ShapeAssertion> shape_assertions;

  // users[n] = nodes that read n (each listed once).
  std::vector<std::vector<NodeId>> users() const;
  // How many times each node is used: by other nodes' inputs and by graph outputs.
  std::vector<int> use_counts() const;

  // Raises luminal::Error describing the first violated invariant.
  void verify() const;
  std::string to_string() const;

 private:
  std::vector<Node> nodes_;
};

std::string shape_to_string(const Shape& shape);
std::string node_signature(const Node& node);  // "f32[s0, 16]"

}  // namespace luminal::ir
