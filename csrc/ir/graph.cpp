#include "ir/graph.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <unordered_set>

#include "common/checked.h"
#include "common/error.h"

namespace luminal::ir {

std::vector<int64_t> logical_order(const std::vector<int64_t>& stored, const std::vector<int>& order) {
  if (order.empty()) return stored;
  LUMINAL_CHECK(order.size() == stored.size(), "internal error: a layout order of rank ", order.size(),
                " for a tensor of rank ", stored.size());
  std::vector<int64_t> logical(stored.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) logical.at(order[k]) = stored[k];
  return logical;
}

const char* node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::Input: return "input";
    case NodeKind::Constant: return "constant";
    case NodeKind::Pointwise: return "pointwise";
    case NodeKind::Reduce: return "reduce";
    case NodeKind::MatMul: return "matmul";
    case NodeKind::Scatter: return "scatter";
    case NodeKind::Attention: return "attention";
  }
  return "?";
}

DType scatter_compute_dtype(DType dtype) {
  if (dtype == DType::F16 || dtype == DType::BF16) return DType::F32;
  return is_floating(dtype) ? dtype : DType::I64;
}

const char* input_role_name(InputRole role) {
  switch (role) {
    case InputRole::User: return "user";
    case InputRole::Parameter: return "parameter";
    case InputRole::Buffer: return "buffer";
  }
  return "?";
}

namespace {

// The constant dimensions of a space: each must be >= 0 and their product must fit in int64 (the
// symbolic ones are checked once evaluated, at each call). Sizes come from archives, which may be
// hostile: a wrapped product would later become a too-small allocation.
void check_constant_dims(const Node& node, const Shape& space, const char* what, std::vector<int64_t>& dims) {
  for (const Expr& dim : space) {
    if (dim && dim->op == ExprOp::Const) dims.push_back(dim->int_value);
  }
  const std::string who = str_cat("node '", node.origin.empty() ? node.name : node.origin, "' ", what);
  element_count(dims, who);
}

void check_static_sizes(const Node& node) {
  std::vector<int64_t> dims;
  check_constant_dims(node, node.shape, "shape", dims);
  // The size in bytes only when every dimension is known: a symbolic one may be 0.
  if (dims.size() == node.shape.size()) {
    feasible_tensor_bytes(dims, node.dtype, str_cat("node '", node.origin.empty() ? node.name : node.origin, "'"));
  }
  // A reduction iterates its output times its extents; a scatter its domain. Loop counters are int64.
  check_constant_dims(node, node.reduce_extents, "reduction space (output and extents)", dims);
  dims.clear();
  check_constant_dims(node, node.scatter_domain, "scatter domain", dims);
}

}  // namespace

NodeId Graph::add(Node node) {
  const NodeId id = static_cast<NodeId>(nodes_.size());
  for (NodeId input : node.inputs) {
    LUMINAL_CHECK(input >= 0 && input < id, "graph: node '", node.origin, "' reads missing node %", input);
  }
  check_static_sizes(node);
  node.id = id;
  nodes_.push_back(std::move(node));
  return id;
}

const Node& Graph::node(NodeId id) const {
  LUMINAL_CHECK(id >= 0 && static_cast<size_t>(id) < nodes_.size(), "graph: no node %", id);
  return nodes_[id];
}

Node& Graph::node(NodeId id) {
  LUMINAL_CHECK(id >= 0 && static_cast<size_t>(id) < nodes_.size(), "graph: no node %", id);
  return nodes_[id];
}

std::vector<std::vector<NodeId>> Graph::users() const {
  std::vector<std::vector<NodeId>> out(nodes_.size());
  for (const Node& n : nodes_) {
    std::unordered_set<NodeId> seen;
    for (NodeId input : n.inputs) {
      if (seen.insert(input).second) out[input].push_back(n.id);
    }
  }
  return out;
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> counts(nodes_.size(), 0);
  for (const Node& n : nodes_) {
    for (NodeId input : n.inputs) ++counts[input];
  }
  for (const GraphOutput& out : outputs) {
    if (out.kind == GraphOutput::Kind::Tensor) ++counts[out.node];
  }
  return counts;
}

std::string shape_to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += ir::to_string(shape[i]);
  }
  return out + "]";
}

std::string node_signature(const Node& node) {
  return str_cat(dtype_short_name(node.dtype), shape_to_string(node.shape));
}

// ------------------------------------------------------------------------------------------------
// Verification
// ------------------------------------------------------------------------------------------------
namespace {

class BodyVerifier {
 public:
  BodyVerifier(const Graph& graph, const Node& node) : graph_(graph), node_(node) {}

  void check(const Expr& e) { check(e, {}); }

 private:
  // `bound`: fold variables in scope. A node is checked once per scope it appears in.
  void check(const Expr& e, const std::vector<int>& bound) {
    std::string key = std::to_string(reinterpret_cast<uintptr_t>(e.get()));
    for (int v : bound) key += "," + std::to_string(v);
    if (!visited_.insert(key).second) return;
    const ExprNode& n = *e;
    if (n.op == ExprOp::Fold) {
      expect(!is_node_reduce_var(n.index) && std::find(bound.begin(), bound.end(), n.index) == bound.end(),
             str_cat("fold variable r", n.index, " is already bound"));
      expect(n.args[0]->dtype == DType::I64, "fold extent must be i64");
      check(n.args[0], bound);
      std::vector<int> inner = bound;
      inner.push_back(n.index);
      check(n.args[1], inner);
      expect(n.dtype == n.args[1]->dtype, "fold dtype differs from its body");
      return;
    }
    for (const Expr& arg : e->args) check(arg, bound);
    switch (n.op) {
      case ExprOp::LoopVar:
        expect(n.index >= 0 && static_cast<size_t>(n.index) < node_.loop_rank(),
               str_cat("loop variable i", n.index, " out of range for rank ", node_.loop_rank()));
        break;
      case ExprOp::ReduceVar:
        expect(is_node_reduce_var(n.index) || std::find(bound.begin(), bound.end(), n.index) != bound.end(),
               str_cat("reduce variable r", n.index, " is not bound here"));
        break;
      case ExprOp::Symbol:
        expect(graph_.symbols.count(n.symbol) > 0, str_cat("unknown symbol '", n.symbol, "'"));
        break;
      case ExprOp::Load: {
        expect(n.index >= 0 && static_cast<size_t>(n.index) < node_.inputs.size(),
               str_cat("load from missing input slot ", n.index));
        expect(node_.kind != NodeKind::Scatter || n.index != 0, "a scatter reads its base");
        const Node& source = graph_.node(node_.inputs[n.index]);
        expect(n.load_rank() == source.rank(),
               str_cat("load", n.index, " has ", n.load_rank(), " indices but input ", node_signature(source),
                       " has rank ", source.rank()));
        expect(n.dtype == source.dtype,
               str_cat("load", n.index, " dtype ", dtype_short_name(n.dtype), " differs from input ",
                       node_signature(source)));
        break;
      }
      case ExprOp::Const:
      case ExprOp::Where:
      case ExprOp::Cast:
      case ExprOp::CheckIndex:
      case ExprOp::Fold:
        LUMINAL_SCALAR_OP_CASES break;
    }
  }

  bool is_node_reduce_var(int v) const {
    return node_.kind == NodeKind::Reduce && v >= 0 && static_cast<size_t>(v) < node_.reduce_extents.size();
  }

  void expect(bool ok, const std::string& message) const {
    if (!ok) fail("IR verification failed at %", node_.id, " (", node_.origin, "): ", message);
  }

  const Graph& graph_;
  const Node& node_;
  std::unordered_set<std::string> visited_;
};

void verify_shape(const Graph& graph, const Node& node) {
  for (const Expr& dim : node.shape) {
    LUMINAL_CHECK(dim && is_shape_expr(dim), "IR verification failed at %", node.id, " (", node.origin,
                  "): dimension ", ir::to_string(dim), " is not a shape expression");
    std::vector<std::string> names;
    collect_symbols(dim, names);
    for (const std::string& name : names) {
      LUMINAL_CHECK(graph.symbols.count(name), "IR verification failed at %", node.id, ": unknown symbol '",
                    name, "' in shape");
    }
  }
}

void verify_matmul(const Graph& graph, const Node& node) {
  auto where = [&] { return str_cat("IR verification failed at %", node.id, " (", node.origin, "): "); };
  const size_t expected_inputs = node.epilogue == MatMulEpilogue::None ? 2 : 3;
  LUMINAL_CHECK(node.inputs.size() == expected_inputs, where(), "matmul needs ", expected_inputs, " inputs");
  if (expected_inputs == 3) {
    const Node& bias = graph.node(node.inputs[2]);
    LUMINAL_CHECK(bias.rank() == 1 && bias.dtype == node.dtype && expr_equal(bias.shape[0], node.shape.back()), where(),
                  "matmul bias ", node_signature(bias), " does not match ", node_signature(node));
  }
  const Node& a = graph.node(node.inputs[0]);
  const Node& b = graph.node(node.inputs[1]);
  const size_t rank = node.rank();
  LUMINAL_CHECK((rank == 2 || rank == 3) && a.rank() == rank && b.rank() == rank, where(),
                "matmul operands must both be rank 2 or both rank 3, got ", node_signature(a), " and ",
                node_signature(b));
  LUMINAL_CHECK(is_floating(node.dtype) && a.dtype == node.dtype && b.dtype == node.dtype, where(),
                "matmul operands must share one floating dtype, got ", node_signature(a), " and ",
                node_signature(b));
  LUMINAL_CHECK(expr_equal(a.shape[rank - 1], b.shape[rank - 2]), where(), "inner dimensions differ: ",
                node_signature(a), " @ ", node_signature(b));
  LUMINAL_CHECK(expr_equal(node.shape[rank - 2], a.shape[rank - 2]) &&
                    expr_equal(node.shape[rank - 1], b.shape[rank - 1]),
                where(), "output shape ", node_signature(node), " does not match operands");
  if (rank == 3) {
    LUMINAL_CHECK(expr_equal(a.shape[0], b.shape[0]) && expr_equal(node.shape[0], a.shape[0]), where(),
                  "batch dimensions differ: ", node_signature(a), " @ ", node_signature(b));
  }
}

void verify_scatter(const Graph& graph, const Node& node) {
  auto where = [&] { return str_cat("IR verification failed at %", node.id, " (", node.origin, "): "); };
  LUMINAL_CHECK(!node.inputs.empty() && node.body && node.scatter_targets.size() == node.rank(), where(),
                "a scatter needs a base, a body and one target per output dimension");
  const Node& base = graph.node(node.inputs[0]);
  LUMINAL_CHECK(base.dtype == node.dtype && base.rank() == node.rank(), where(), "scatter base ",
                node_signature(base), " differs from ", node_signature(node));
  for (size_t d = 0; d < node.rank(); ++d) {
    LUMINAL_CHECK(expr_equal(base.shape[d], node.shape[d]), where(), "scatter base ", node_signature(base),
                  " differs from ", node_signature(node));
  }
  const DType value = node.scatter_accumulate ? scatter_compute_dtype(node.dtype) : node.dtype;
  LUMINAL_CHECK(node.body->dtype == value, where(), "scatter body dtype ", dtype_short_name(node.body->dtype),
                " (expected ", dtype_short_name(value), ")");
  for (const Expr& dim : node.scatter_domain) {
    LUMINAL_CHECK(dim && is_shape_expr(dim), where(), "scatter domain ", ir::to_string(dim), " is not a shape");
  }
  BodyVerifier verifier(graph, node);
  verifier.check(node.body);
  for (const Expr& target : node.scatter_targets) {
    LUMINAL_CHECK(target && target->dtype == DType::I64, where(), "scatter targets must be i64");
    verifier.check(target);
  }
}

// Whether a mask dimension broadcasts to `target`: statically 1, or equal to it.
bool broadcasts_to(const Expr& dim, const Expr& target) {
  const auto n = as_int_const(dim);
  return (n && *n == 1) || expr_equal(dim, target);
}

void verify_attention(const Graph& graph, const Node& node) {
  auto where = [&] { return str_cat("IR verification failed at %", node.id, " (", node.origin, "): "); };
  LUMINAL_CHECK(node.inputs.size() == 3 || node.inputs.size() == 4, where(),
                "attention needs q, k, v and an optional mask, got ", node.inputs.size(), " inputs");
  const Node& q = graph.node(node.inputs[0]);
  const Node& k = graph.node(node.inputs[1]);
  const Node& v = graph.node(node.inputs[2]);
  const std::string operands = str_cat("q ", node_signature(q), ", k ", node_signature(k), ", v ", node_signature(v));
  LUMINAL_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4 && node.rank() == 4, where(),
                "attention operands must be rank 4, got ", operands, " -> ", node_signature(node));
  LUMINAL_CHECK(is_floating(node.dtype) && q.dtype == node.dtype && k.dtype == node.dtype && v.dtype == node.dtype,
                where(), "attention operands must share the output's floating dtype, got ", operands, " -> ",
                node_signature(node));
  const auto heads = as_int_const(q.shape[1]);
  const auto kv_heads = as_int_const(k.shape[1]);
  const bool grouped = heads && kv_heads && *kv_heads > 0 && *heads % *kv_heads == 0;
  LUMINAL_CHECK(grouped || expr_equal(q.shape[1], k.shape[1]), where(),
                "query heads must be a multiple of the key/value heads, got ", operands);
  LUMINAL_CHECK(expr_equal(q.shape[0], k.shape[0]) && expr_equal(q.shape[0], v.shape[0]) &&
                    expr_equal(k.shape[1], v.shape[1]) && expr_equal(k.shape[2], v.shape[2]) &&
                    expr_equal(q.shape[3], k.shape[3]),
                where(), "attention shapes do not agree: ", operands);
  LUMINAL_CHECK(expr_equal(node.shape[0], q.shape[0]) && expr_equal(node.shape[1], q.shape[1]) &&
                    expr_equal(node.shape[2], q.shape[2]) && expr_equal(node.shape[3], v.shape[3]),
                where(), "attention output ", node_signature(node), " does not match ", operands);
  LUMINAL_CHECK(std::isfinite(node.attention_scale), where(), "attention scale ", node.attention_scale,
                " is not finite");
  if (node.inputs.size() == 4) {
    const Node& mask = graph.node(node.inputs[3]);
    const Shape scores{q.shape[0], q.shape[1], q.shape[2], k.shape[2]};
    bool broadcasts = mask.rank() == 4;
    for (size_t d = 0; broadcasts && d < 4; ++d) broadcasts = broadcasts_to(mask.shape[d], scores[d]);
    LUMINAL_CHECK(broadcasts && (mask.dtype == DType::Bool || is_floating(mask.dtype)), where(), "attention mask ",
                  node_signature(mask), " must be bool or floating and broadcast to the scores ",
                  shape_to_string(scores));
  }
}

void verify_grouped_rows(const Graph& graph, const Node& node) {
  auto where = [&] { return str_cat("IR verification failed at %", node.id, " (", node.origin, "): "); };
  LUMINAL_CHECK(node.kind == NodeKind::Pointwise && node.inputs.size() == 3 && node.rank() == 2, where(),
                "a grouped-rows contraction is a rank-2 pointwise node with 3 inputs");
  const Node& a = graph.node(node.inputs[0]);
  const Node& b = graph.node(node.inputs[1]);
  const Node& ends = graph.node(node.inputs[2]);
  LUMINAL_CHECK(a.rank() == 2 && b.rank() == 3 && ends.rank() == 1 && ends.dtype == DType::I32 && a.dtype == b.dtype &&
                    is_floating(a.dtype) && is_floating(node.dtype),
                where(), "grouped-rows operands ", node_signature(a), ", ", node_signature(b), ", ",
                node_signature(ends));
  const bool transposed = node.contraction == Contraction::GroupedRowsTransposedB;
  const Expr& b_inner = b.shape[transposed ? 2 : 1];
  const Expr& b_columns = b.shape[transposed ? 1 : 2];
  LUMINAL_CHECK(expr_equal(a.shape[1], b_inner) && expr_equal(b.shape[0], ends.shape[0]) &&
                    expr_equal(node.shape[0], a.shape[0]) && expr_equal(node.shape[1], b_columns),
                where(), "grouped-rows shapes do not agree: ", node_signature(node), " from ", node_signature(a),
                ", ", node_signature(b), ", ", node_signature(ends));
}

std::string ints_to_string(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += str_cat(i ? ", " : "", values[i]);
  return text + "]";
}

std::string order_to_string(const std::vector<int>& order) {
  return ints_to_string(std::vector<int64_t>(order.begin(), order.end()));
}

std::string convolution_to_string(const Convolution& conv) {
  std::string text = str_cat("stride ", ints_to_string(conv.stride), ", padding ", ints_to_string(conv.padding),
                             ", dilation ", ints_to_string(conv.dilation), ", groups ", conv.groups);
  if (!conv.x_order.empty()) text += str_cat(", x stored ", order_to_string(conv.x_order));
  if (!conv.w_order.empty()) text += str_cat(", w stored ", order_to_string(conv.w_order));
  if (!conv.y_order.empty()) text += str_cat(", stored ", order_to_string(conv.y_order));
  return text;
}

bool is_permutation_of_rank(const std::vector<int>& order, size_t rank) {
  if (order.empty()) return true;
  if (order.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int d : order) {
    if (d < 0 || static_cast<size_t>(d) >= rank || seen[d]) return false;
    seen[d] = true;
  }
  return true;
}

void verify_convolution(const Graph& graph, const Node& node) {
  auto where = [&] { return str_cat("IR verification failed at %", node.id, " (", node.origin, "): "); };
  const Convolution& conv = *node.convolution;
  LUMINAL_CHECK(node.kind == NodeKind::Reduce && node.inputs.size() == 2 && node.reduce_op == ReduceOp::Sum, where(),
                "a convolution is a sum reduction of two inputs");
  LUMINAL_CHECK(node.body == conv.body, where(),
                "the body of a convolution changed after the frontend built it (a pass must leave it whole)");
  const Node& x = graph.node(node.inputs[0]);
  const Node& w = graph.node(node.inputs[1]);
  const size_t spatial = conv.stride.size();
  LUMINAL_CHECK(spatial >= 1 && conv.padding.size() == spatial && conv.dilation.size() == spatial &&
                    x.rank() == spatial + 2 && w.rank() == spatial + 2 && node.rank() == spatial + 2 &&
                    node.reduce_extents.size() == spatial + 1 && conv.groups >= 1,
                where(), "convolution ranks: ", node_signature(x), " * ", node_signature(w), " -> ",
                node_signature(node), " over ", spatial, " spatial dims");
  LUMINAL_CHECK(is_floating(x.dtype) && x.dtype == w.dtype && node.dtype == x.dtype &&
                    node.body->dtype == float_compute_dtype(x.dtype),
                where(), "convolution dtypes: ", node_signature(x), " * ", node_signature(w), " -> ",
                node_signature(node), " with a ", dtype_short_name(node.body->dtype),
                " body (the input's dtype, summed in its compute dtype)");
  LUMINAL_CHECK(is_permutation_of_rank(conv.x_order, x.rank()) && is_permutation_of_rank(conv.w_order, w.rank()) &&
                    is_permutation_of_rank(conv.y_order, node.rank()),
                where(), "convolution layouts: x stored ", order_to_string(conv.x_order), ", w stored ",
                order_to_string(conv.w_order), ", output stored ", order_to_string(conv.y_order), " for rank ",
                node.rank());
  for (size_t k = 0; k < spatial; ++k) {
    LUMINAL_CHECK(conv.stride[k] >= 1 && conv.dilation[k] >= 1 && conv.padding[k] >= 0, where(),
                  "convolution stride, dilation and padding of spatial dim ", k);
  }
}

}  // namespace

void Graph::verify() const {
  for (const Node& node : nodes_) {
    verify_shape(*this, node);
    const auto where = [&] { return str_cat("IR verification failed at %", node.id, " (", node.origin, "): "); };
    switch (node.kind) {
      case NodeKind::Input:
        LUMINAL_CHECK(node.input_position >= 0 && static_cast<size_t>(node.input_position) < inputs.size() &&
                          inputs[node.input_position] == node.id,
                      where(), "input position ", node.input_position, " is not registered");
        break;
      case NodeKind::Constant:
        LUMINAL_CHECK(node.constant != nullptr, where(), "constant without data");
        LUMINAL_CHECK(node.constant->sizes.size() == node.rank() && node.constant->dtype == node.dtype, where(),
                      "constant data does not match ", node_signature(node));
        break;
      case NodeKind::Pointwise:
      case NodeKind::Reduce: {
        LUMINAL_CHECK(node.body != nullptr, where(), "missing body");
        // A convolution sums its compute dtype and rounds once, when stored (see ir::Convolution).
        const bool convolution_body =
            node.kind == NodeKind::Reduce && node.convolution && node.body->dtype == float_compute_dtype(node.dtype);
        LUMINAL_CHECK(node.body->dtype == node.dtype || convolution_body, where(), "body dtype ",
                      dtype_short_name(node.body->dtype), " differs from node dtype ", dtype_short_name(node.dtype));
        BodyVerifier verifier(*this, node);
        verifier.check(node.body);
        if (node.contraction != Contraction::None) verify_grouped_rows(*this, node);
        if (node.convolution) verify_convolution(*this, node);
        if (node.kind == NodeKind::Reduce) {
          LUMINAL_CHECK(!node.reduce_extents.empty(), where(), "reduce without reduction extents");
          for (const Expr& extent : node.reduce_extents) {
            LUMINAL_CHECK(extent && extent->dtype == DType::I64, where(), "reduction extent must be i64");
            LUMINAL_CHECK(!contains_op(extent, ExprOp::ReduceVar), where(), "extent depends on a reduce variable");
            verifier.check(extent);
          }
          const bool ragged = !is_shape_expr(node.reduce_extents[0]);
          LUMINAL_CHECK(!ragged || node.reduce_extents.size() == 1, where(),
                        "ragged reductions must have exactly one reduction dimension");
        }
        break;
      }
      case NodeKind::MatMul: verify_matmul(*this, node); break;
      case NodeKind::Scatter: verify_scatter(*this, node); break;
      case NodeKind::Attention: verify_attention(*this, node); break;
    }
  }
  for (size_t position = 0; position < inputs.size(); ++position) {
    const Node& n = node(inputs[position]);
    LUMINAL_CHECK(n.kind == NodeKind::Input && n.input_position == static_cast<int>(position),
                  "IR verification failed: call input ", position, " is not an input node");
  }
  for (const GraphOutput& out : outputs) {
    if (out.kind == GraphOutput::Kind::Tensor) {
      node(out.node);  // throws when missing
    } else {
      LUMINAL_CHECK(out.value && is_shape_expr(out.value), "IR verification failed: integer output '", out.name,
                    "' is not a shape expression");
    }
    LUMINAL_CHECK(out.mutated_input < static_cast<int>(inputs.size()), "IR verification failed: output '",
                  out.name, "' mutates missing input ", out.mutated_input);
    if (out.check) {
      const Node& checked = node(out.node);
      LUMINAL_CHECK(out.kind == GraphOutput::Kind::Tensor && out.mutated_input < 0 && checked.dtype == DType::Bool &&
                        checked.rank() == 0,
                    "IR verification failed: check output '", out.name, "' is not a 0-d bool");
    }
  }
  bool checks_began = false;  // check outputs come last: the caller's outputs keep their positions
  for (const GraphOutput& out : outputs) {
    LUMINAL_CHECK(out.check || !checks_began, "IR verification failed: output '", out.name,
                  "' follows a check output");
    checks_began = checks_began || out.check;
  }
}

// ------------------------------------------------------------------------------------------------
// Printing
// ------------------------------------------------------------------------------------------------
std::string Graph::to_string() const {
  std::ostringstream out;
  if (!symbols.empty()) {
    out << "symbols:";
    for (const auto& [name, info] : symbols) {
      out << " " << name << " in [" << info.min << ", " << (info.max ? std::to_string(*info.max) : "inf") << "]";
    }
    out << "\n";
  }
  for (const Node& n : nodes_) {
    out << "%" << n.id << ": " << node_signature(n) << " = ";
    switch (n.kind) {
      case NodeKind::Input:
        out << "input " << input_role_name(n.role) << " #" << n.input_position << " \"" << n.name << "\"";
        if (n.complex_pairs) out << " (complex, as pairs)";
        break;
      case NodeKind::Constant: out << "constant \"" << n.name << "\""; break;
      case NodeKind::Pointwise:
      case NodeKind::Reduce:
      case NodeKind::MatMul: {
        out << node_kind_name(n.kind);
        if (n.kind == NodeKind::Reduce) out << "." << reduce_op_name(n.reduce_op);
        out << "(";
        for (size_t i = 0; i < n.inputs.size(); ++i) out << (i ? ", %" : "%") << n.inputs[i];
        out << ")";
        if (n.kind == NodeKind::Reduce) {
          out << " over [";
          for (size_t i = 0; i < n.reduce_extents.size(); ++i) {
            out << (i ? ", " : "") << "r" << i << " < " << ir::to_string(n.reduce_extents[i]);
          }
          out << "]";
        }
        if (n.body) out << " { " << ir::to_string(n.body) << " }";
        if (n.epilogue == MatMulEpilogue::Bias) out << " + bias";
        if (n.epilogue == MatMulEpilogue::BiasRelu) out << " + bias, relu";
        if (n.epilogue == MatMulEpilogue::BiasGeluTanh) out << " + bias, gelu_tanh";
        if (n.contraction == Contraction::GroupedRows) out << "  [grouped-rows matmul]";
        if (n.contraction == Contraction::GroupedRowsTransposedB) out << "  [grouped-rows matmul, b transposed]";
        if (n.convolution) out << "  [convolution " << convolution_to_string(*n.convolution) << "]";
        break;
      }
      case NodeKind::Scatter: {
        out << "scatter(";
        for (size_t i = 0; i < n.inputs.size(); ++i) out << (i ? ", %" : "%") << n.inputs[i];
        out << ") over " << shape_to_string(n.scatter_domain) << " {";
        for (size_t d = 0; d < n.scatter_targets.size(); ++d) out << (d ? ", " : " [") << ir::to_string(n.scatter_targets[d]);
        out << (n.scatter_targets.empty() ? " [" : "") << "] " << (n.scatter_accumulate ? "+= " : "= ")
            << ir::to_string(n.body) << " }";
        break;
      }
      case NodeKind::Attention: {
        out << "attention(q %" << n.inputs[0] << ", k %" << n.inputs[1] << ", v %" << n.inputs[2];
        if (n.inputs.size() > 3) out << ", mask %" << n.inputs[3];
        std::ostringstream scale;
        scale.precision(17);  // round-trips the double
        scale << n.attention_scale;
        out << ") scale " << scale.str() << (n.attention_causal ? " causal" : "");
        break;
      }
    }
    if (!n.origin.empty() && n.kind != NodeKind::Input) out << "  # " << n.origin;
    out << "\n";
  }
  out << "return";
  for (size_t i = 0; i < outputs.size(); ++i) {
    const GraphOutput& o = outputs[i];
    out << (i ? ", " : " ");
    if (o.kind == GraphOutput::Kind::Tensor) {
      out << "%" << o.node;
    } else {
      out << ir::to_string(o.value);
    }
    if (o.mutated_input >= 0) out << " (writes input #" << o.mutated_input << ")";
    if (o.check) out << " (check)";
  }
  out << "\n";
  return out.str();
}

}  // namespace luminal::ir
