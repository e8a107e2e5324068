#include "frontend/builder.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"
#include "ir/poly.h"
#include "ir/simplify.h"

namespace luminal::frontend {

using ir::ExprOp;
using ir::NodeKind;

namespace {

constexpr int64_t kHugeBound = int64_t{1} << 62;  // ATen's "to the end" sentinels are >= this

int category(DType dtype) {
  if (dtype == DType::Bool) return 0;
  if (is_integral(dtype)) return 1;
  return 2;
}

ir::IndexRanges ranges_for(const Shape& shape) { return ir::IndexRanges{shape, {}}; }

Expr simplify_shape(const Expr& e) { return ir::simplify(e, ir::IndexRanges{}); }

bool is_one(const Expr& dim) { return dim->is_int_const(1); }

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_floating(a) || is_floating(b)) {
    if (!is_floating(a)) return b;
    if (!is_floating(b)) return a;
    if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  // Both integral. uint8 mixed with a signed type needs a signed type wider than 8 bits.
  if (a == DType::U8 || b == DType::U8) {
    const DType other = a == DType::U8 ? b : a;
    return other == DType::I8 ? DType::I16 : other;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

// ------------------------------------------------------------------------------------------------
// Node creation
// ------------------------------------------------------------------------------------------------
void Builder::set_op(const std::string& node_name, const std::string& short_target) {
  origin_ = str_cat(node_name, " (", short_target, ")");
  site_ = ir::CheckSite{node_name, short_target};
}

Expr Builder::labelled(const Expr& e) const { return site_ && e ? ir::bind_check_labels(e, *site_) : e; }

NodeId Builder::pointwise(DType dtype, Shape shape, std::vector<NodeId> inputs, Expr body) {
  LUMINAL_CHECK(body != nullptr, origin_, ": pointwise without body");
  body = ir::cast(std::move(body), dtype);
  ir::Node node;
  node.kind = NodeKind::Pointwise;
  node.dtype = dtype;
  for (Expr& dim : shape) dim = simplify_shape(dim);
  node.body = labelled(ir::simplify(body, ranges_for(shape)));
  node.shape = std::move(shape);
  node.inputs = std::move(inputs);
  node.origin = origin_;
  return graph_.add(std::move(node));
}

NodeId Builder::reduce(DType dtype, Shape shape, std::vector<NodeId> inputs, Expr body, ir::ReduceOp op,
                       std::vector<Expr> extents) {
  LUMINAL_CHECK(body != nullptr && !extents.empty(), origin_, ": reduce without body or extents");
  for (Expr& dim : shape) dim = simplify_shape(dim);
  ir::IndexRanges ranges = ranges_for(shape);
  for (Expr& extent : extents) {
    extent = labelled(ir::simplify(extent, ranges));
    ranges.reduce_extents.push_back(ir::is_shape_expr(extent) ? extent : nullptr);
  }
  ir::Node node;
  node.kind = NodeKind::Reduce;
  node.dtype = dtype;
  node.body = labelled(ir::simplify(ir::cast(std::move(body), dtype), ranges));
  node.shape = std::move(shape);
  node.inputs = std::move(inputs);
  node.reduce_op = op;
  node.reduce_extents = std::move(extents);
  node.origin = origin_;
  return graph_.add(std::move(node));
}

NodeId Builder::convolution(DType dtype, Shape shape, NodeId x, NodeId w, Expr product, std::vector<Expr> extents,
                            ir::Convolution params) {
  const DType acc = float_compute_dtype(dtype);
  LUMINAL_CHECK(this->dtype(x) == dtype && this->dtype(w) == dtype, origin_, ": a ", dtype_name(dtype),
                " convolution of ", ir::node_signature(node(x)), " by ", ir::node_signature(node(w)),
                " (input, weight and output share one dtype)");
  LUMINAL_CHECK(product != nullptr && product->dtype == acc, origin_, ": a convolution of ", dtype_name(dtype),
                " sums a ", dtype_name(acc), " product");
  const NodeId id = reduce(acc, std::move(shape), {x, w}, std::move(product), ir::ReduceOp::Sum, std::move(extents));
  ir::Node& node = graph_.node(id);
  node.dtype = dtype;  // the storage; the body stays in `acc` (rounded once when stored)
  params.body = node.body;
  node.convolution = std::make_shared<const ir::Convolution>(std::move(params));
  return id;
}

NodeId Builder::scatter(NodeId base, Shape domain, std::vector<NodeId> operands, std::vector<Expr> targets, Expr value,
                        bool accumulate) {
  const Shape out_shape = shape(base);
  LUMINAL_CHECK(targets.size() == out_shape.size(), origin_, ": scatter into ", ir::node_signature(node(base)),
                " needs ", out_shape.size(), " target coordinates, got ", targets.size());
  LUMINAL_CHECK(value != nullptr, origin_, ": scatter without a value");
  for (Expr& dim : domain) dim = simplify_shape(dim);
  const ir::IndexRanges ranges = ranges_for(domain);
  ir::Node n;
  n.kind = NodeKind::Scatter;
  n.dtype = dtype(base);
  n.shape = out_shape;
  n.inputs.push_back(base);
  n.inputs.insert(n.inputs.end(), operands.begin(), operands.end());
  for (size_t d = 0; d < targets.size(); ++d) {
    Expr coordinate = ir::check_index(ir::cast(targets[d], DType::I64), out_shape[d]);
    n.scatter_targets.push_back(labelled(ir::simplify(coordinate, ranges)));
  }
  const DType value_dtype = accumulate ? ir::scatter_compute_dtype(n.dtype) : n.dtype;
  n.body = labelled(ir::simplify(ir::cast(std::move(value), value_dtype), ranges));
  n.scatter_domain = std::move(domain);
  n.scatter_accumulate = accumulate;
  n.origin = origin_;
  return graph_.add(std::move(n));
}

NodeId Builder::attention(NodeId q, NodeId k, NodeId v, std::optional<NodeId> mask, double scale, bool causal) {
  ir::Node node;
  node.kind = NodeKind::Attention;
  node.dtype = dtype(q);
  const Shape qs = shape(q);
  node.shape = {qs.at(0), qs.at(1), qs.at(2), shape(v).at(3)};
  node.inputs = {q, k, v};
  if (mask) node.inputs.push_back(*mask);
  node.attention_scale = scale;
  node.attention_causal = causal;
  node.origin = origin_;
  return graph_.add(std::move(node));
}

NodeId Builder::matmul(NodeId a, NodeId b) {
  const Shape& sa = shape(a);
  const Shape& sb = shape(b);
  LUMINAL_CHECK(sa.size() == sb.size() && (sa.size() == 2 || sa.size() == 3), origin_,
                ": matmul needs two rank-2 or two rank-3 operands, got ", ir::node_signature(node(a)), " and ",
                ir::node_signature(node(b)));
  LUMINAL_CHECK(dtype(a) == dtype(b) && is_floating(dtype(a)), origin_,
                ": matmul operands must share a floating dtype, got ", ir::node_signature(node(a)), " and ",
                ir::node_signature(node(b)));
  const size_t rank = sa.size();
  assert_equal(sa[rank - 1], sb[rank - 2], "matmul inner dimensions");
  if (rank == 3) assert_equal(sa[0], sb[0], "matmul batch dimensions");
  // Use one spelling of equal dimensions so the verifier's structural checks hold.
  NodeId b_aligned = b;
  if (!ir::expr_equal(sa[rank - 1], sb[rank - 2]) || (rank == 3 && !ir::expr_equal(sa[0], sb[0]))) {
    Shape aligned = sb;
    aligned[rank - 2] = sa[rank - 1];
    if (rank == 3) aligned[0] = sa[0];
    b_aligned = pointwise(dtype(b), aligned, {b}, ir::load(0, dtype(b), loop_vars(rank)));
  }
  ir::Node node;
  node.kind = NodeKind::MatMul;
  node.dtype = dtype(a);
  node.shape = sa;
  node.shape[rank - 1] = sb[rank - 1];
  node.inputs = {a, b_aligned};
  node.origin = origin_;
  return graph_.add(std::move(node));
}

// The MoE form, a[M, K] rows grouped by `ends` times b[G, K, N]: one node that the CUDA engine runs
// as a tiled grouped GEMM (ir::Contraction::GroupedRows). Its body defines each element for the
// CPU: the group of row i0 counts the ends <= i0, each end checked to be within [previous end, M].
NodeId Builder::grouped_rows_matmul(NodeId a, NodeId mat2, NodeId ends, DType out_dtype) {
  LUMINAL_CHECK(rank(a) == 2 && rank(mat2) == 3 && rank(ends) == 1 && dtype(ends) == DType::I32 &&
                    dtype(a) == dtype(mat2) && is_floating(dtype(a)) && is_floating(out_dtype),
                origin_, ": grouped matmul needs float a[M, K], b[G, K, N] and int32 ends[G], got ",
                ir::node_signature(node(a)), ", ", ir::node_signature(node(mat2)), ", ", ir::node_signature(node(ends)));
  const Shape sa = shape(a), sb = shape(mat2);
  const Expr i0 = ir::loop_var(0), i1 = ir::loop_var(1), i2 = ir::loop_var(2);
  // A transposed [G, N, K] weight (MoE weights are stored so) is read in place, not copied.
  const ir::Node& view = node(mat2);
  const bool transposed = view.kind == ir::NodeKind::Pointwise && view.contraction == ir::Contraction::None &&
                          view.inputs.size() == 1 && ir::expr_equal(view.body, ir::load(0, view.dtype, {i0, i2, i1}));
  const NodeId weight = transposed ? view.inputs[0] : mat2;
  assert_equal(sa[1], sb[1], "_grouped_mm inner dimensions");
  assert_equal(shape(ends)[0], sb[0], "_grouped_mm offs length and groups of mat2");
  const DType in = dtype(a), acc = DType::F32;
  const Expr rows = sa[0], groups = sb[0];
  constexpr int kInner = 0, kGroup = 1;  // fold variables
  const Expr j = ir::reduce_var(kGroup);
  const Expr previous = ir::cast(ir::load(2, DType::I32, {ir::sub(j, ir::int_const(1))}, ir::ge(j, ir::int_const(1))), DType::I64);
  const Expr end = ir::cast(ir::load(2, DType::I32, {j}), DType::I64);
  const Expr checked_end =
      ir::add(ir::check_index(ir::sub(end, previous), ir::add(ir::sub(rows, previous), ir::int_const(1))), previous);
  const Expr group = ir::fold(ir::ReduceOp::Sum, kGroup, groups,
                              ir::cast(ir::binary(ir::ExprOp::Le, checked_end, i0), DType::I64));
  const Expr in_group = ir::lt(group, groups);
  const Expr k = ir::reduce_var(kInner);
  const Expr g = ir::where(in_group, group, ir::int_const(0));
  const std::vector<Expr> weight_index = transposed ? std::vector<Expr>{g, i1, k} : std::vector<Expr>{g, k, i1};
  const Expr product = ir::mul(ir::cast(ir::load(0, in, {i0, k}, in_group), acc),
                               ir::cast(ir::load(1, in, weight_index, in_group), acc));
  const Expr body = ir::cast(ir::fold(ir::ReduceOp::Sum, kInner, sa[1], product), out_dtype);
  const NodeId out = pointwise(out_dtype, {rows, sb[2]}, {a, weight, ends}, body);
  graph_.node(out).contraction =
      transposed ? ir::Contraction::GroupedRowsTransposedB : ir::Contraction::GroupedRows;
  return out;
}

void Builder::assert_equal(const Expr& a, const Expr& b, const std::string& what) {
  const Expr lhs = simplify_shape(a), rhs = simplify_shape(b);
  if (ir::expr_equal(lhs, rhs)) return;
  const auto ca = ir::as_int_const(lhs), cb = ir::as_int_const(rhs);
  LUMINAL_CHECK(!(ca && cb), origin_, ": ", what, " differ: ", *ca, " vs ", *cb);
  graph_.shape_assertions.push_back({lhs, rhs, str_cat(origin_, ": ", what)});
}

// ------------------------------------------------------------------------------------------------
// Index helpers
// ------------------------------------------------------------------------------------------------
std::vector<Expr> Builder::loop_vars(size_t rank) {
  std::vector<Expr> vars;
  for (size_t i = 0; i < rank; ++i) vars.push_back(ir::loop_var(static_cast<int>(i)));
  return vars;
}

Expr Builder::broadcast_load(int slot, NodeId x, const Shape& out_shape) {
  const Shape& in = shape(x);
  LUMINAL_CHECK(in.size() <= out_shape.size(), origin_, ": cannot broadcast ", ir::node_signature(node(x)),
                " to ", ir::shape_to_string(out_shape));
  const size_t offset = out_shape.size() - in.size();
  std::vector<Expr> index;
  for (size_t d = 0; d < in.size(); ++d) {
    const Expr& out_dim = out_shape[d + offset];
    if (is_one(in[d]) && !is_one(out_dim)) {
      index.push_back(ir::int_const(0));
    } else {
      assert_equal(in[d], out_dim, "broadcast dimensions");
      index.push_back(ir::loop_var(static_cast<int>(d + offset)));
    }
  }
  return ir::load(slot, dtype(x), std::move(index));
}

Shape Builder::broadcast_shapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, ir::int_const(1));
  for (size_t d = 0; d < rank; ++d) {
    for (const Shape& s : shapes) {
      if (d + s.size() < rank) continue;
      const Expr& dim = s[d + s.size() - rank];
      if (is_one(dim)) continue;
      if (is_one(out[d])) {
        out[d] = dim;
      } else {
        assert_equal(out[d], dim, "broadcast dimensions");
      }
    }
  }
  return out;
}

DType Builder::result_type(const std::vector<Operand>& operands) const {
  std::optional<DType> dim_result, zero_result, scalar_result;
  auto update = [](std::optional<DType>& state, DType dtype) {
    state = state ? promote_types(*state, dtype) : dtype;
  };
  for (const Operand& op : operands) {
    if (op.tensor) {
      update(rank(*op.tensor) > 0 ? dim_result : zero_result, dtype(*op.tensor));
    } else {
      // Python floats participate as the default dtype (float32).
      update(scalar_result, is_floating(op.scalar_dtype) ? DType::F32 : op.scalar_dtype);
    }
  }
  auto combine = [](std::optional<DType> higher, std::optional<DType> lower) -> std::optional<DType> {
    if (!higher) return lower;
    if (!lower) return higher;
    if (category(*higher) >= category(*lower)) return higher;
    return promote_types(*higher, *lower);
  };
  const std::optional<DType> result = combine(dim_result, combine(zero_result, scalar_result));
  LUMINAL_CHECK(result.has_value(), origin_, ": result_type of no operands");
  return *result;
}

namespace {

// A double that is an integer inside int64's range (the cast is then defined).
std::optional<int64_t> exact_int64(double value) {
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (!(value >= -kTwoTo63 && value < kTwoTo63) || value != std::trunc(value)) return std::nullopt;
  return static_cast<int64_t>(value);
}

}  // namespace

Operand Operand::number(double value, DType dtype) {
  Operand operand{std::nullopt, value, dtype, nullptr};
  if (!is_floating(dtype)) {
    const std::optional<int64_t> exact = exact_int64(value);
    LUMINAL_CHECK(exact.has_value(), "the integer number ", value, " is not an int64");
    operand.integer = *exact;
  }
  return operand;
}

Operand Operand::integer_number(int64_t value, DType dtype) {
  LUMINAL_CHECK(!is_floating(dtype), "integer_number of dtype ", dtype_name(dtype));
  Operand operand{std::nullopt, static_cast<double>(value), dtype, nullptr};
  operand.integer = dtype == DType::Bool ? (value != 0) : value;
  return operand;
}

bool Operand::within(const IntRange& range) const {
  if (is_integer_number()) return integer >= range.min && integer <= range.max;
  return scalar >= static_cast<double>(range.min) && scalar <= static_cast<double>(range.max);
}

std::string Operand::text() const { return is_integer_number() ? str_cat(integer) : str_cat(scalar); }

double Operand::number(const char* what) const {
  LUMINAL_CHECK(!tensor, what, " must be a number, not a tensor");
  LUMINAL_CHECK(!symbolic, what, " must be a number known at compile time, got the symbolic ",
                ir::to_string(symbolic));
  return scalar;
}

Expr Builder::scalar_expr(const Operand& operand, DType compute) const {
  if (operand.symbolic) return ir::cast(operand.symbolic, compute);
  if (is_floating(compute)) return ir::float_const(operand.scalar, compute);
  if (compute == DType::Bool) return ir::bool_const(operand.is_integer_number() ? operand.integer != 0 : operand.scalar != 0.0);
  if (operand.is_integer_number()) return ir::int_const(operand.integer, compute);  // exact, beyond 2^53 too
  const std::optional<int64_t> exact = exact_int64(operand.scalar);
  LUMINAL_CHECK(exact.has_value(), origin_, ": scalar ", operand.scalar, " cannot be used as ", dtype_name(compute));
  return ir::int_const(*exact, compute);
}

void Builder::check_storable(const Operand& value, DType dtype, const char* what) const {
  if (value.tensor || value.symbolic || is_floating(dtype) || dtype == DType::Bool) return;
  const IntRange range = int_range(dtype);
  // c10::checked_convert lets an unsigned type take a negative integer down to -max (wrapped).
  const bool unsigned_wraps = value.is_integer_number() && range.min == 0;
  LUMINAL_CHECK(value.within(unsigned_wraps ? IntRange{-range.max, range.max} : range), origin_, ": ", what, " ",
                value.text(), " cannot be converted to ", dtype_name(dtype), " without overflow (eager raises)");
}

NodeId Builder::full(const Shape& shape, const Operand& value, DType dtype) {
  LUMINAL_CHECK(!value.tensor && !value.symbolic, origin_, ": full needs a number");
  check_storable(value, dtype, "the fill value");
  return pointwise(dtype, shape, {}, scalar_expr(value, dtype));
}

Expr Builder::checked_index(Expr raw, const Expr& size, bool wrap_negative, Expr mask, const std::string& input) {
  Expr value = ir::cast(std::move(raw), DType::I64);
  if (wrap_negative) value = ir::where(ir::lt(value, ir::int_const(0)), ir::add(value, size), value);
  return ir::check_index(value, size, std::move(mask), ir::index_check_label(input, wrap_negative));
}

int64_t Builder::normalize_dim(int64_t dim, size_t rank) const {
  const int64_t r = std::max<int64_t>(static_cast<int64_t>(rank), 1);
  LUMINAL_CHECK(dim >= -r && dim < r, origin_, ": dimension ", dim, " out of range for rank ", rank);
  return dim < 0 ? dim + r : dim;
}

// ------------------------------------------------------------------------------------------------
// Tensor ops
// ------------------------------------------------------------------------------------------------
NodeId Builder::cast(NodeId x, DType target) {
  if (dtype(x) == target) return x;
  return pointwise(target, shape(x), {x}, ir::cast(ir::load(0, dtype(x), loop_vars(rank(x))), target));
}

NodeId Builder::copy(NodeId x) {
  return pointwise(dtype(x), shape(x), {x}, ir::load(0, dtype(x), loop_vars(rank(x))));
}

NodeId Builder::full(const Shape& shape, double value, DType dtype) {
  return pointwise(dtype, shape, {}, ir::scalar_const(value, dtype));
}

NodeId Builder::arange(Expr length, double start, double step, DType dtype) {
  Expr value;
  if (is_floating(dtype)) {
    // torch computes float ranges in double and rounds once.
    value = ir::add(ir::float_const(start, DType::F64),
                    ir::mul(ir::cast(ir::loop_var(0), DType::F64), ir::float_const(step, DType::F64)));
  } else {
    const std::optional<int64_t> first = exact_int64(start), stride = exact_int64(step);
    LUMINAL_CHECK(first && stride, origin_, ": integer arange with fractional start/step");
    value = ir::add(ir::int_const(*first), ir::mul(ir::loop_var(0), ir::int_const(*stride)));
  }
  return pointwise(dtype, {std::move(length)}, {}, ir::cast(value, dtype));
}

NodeId Builder::arange(Expr length, const Expr& start, double step, DType dtype) {
  LUMINAL_CHECK(start->dtype == DType::I64, origin_, ": arange's symbolic start must be an integer expression");
  Expr value;
  if (is_floating(dtype)) {  // in double, rounded once, as torch computes float ranges
    value = ir::add(ir::cast(start, DType::F64),
                    ir::mul(ir::cast(ir::loop_var(0), DType::F64), ir::float_const(step, DType::F64)));
  } else {
    const std::optional<int64_t> stride = exact_int64(step);
    LUMINAL_CHECK(stride, origin_, ": integer arange with fractional step");
    value = ir::add(start, ir::mul(ir::loop_var(0), ir::int_const(*stride)));
  }
  return pointwise(dtype, {std::move(length)}, {}, ir::cast(value, dtype));
}

NodeId Builder::reshape(NodeId x, const Shape& new_shape) {
  const Shape& old = shape(x);
  assert_equal(ir::product(old), ir::product(new_shape), "reshape element counts");
  // Linear position in the output, then unravelled over the input's dimensions.
  Expr linear = ir::int_const(0);
  for (size_t j = 0; j < new_shape.size(); ++j) {
    linear = ir::add(ir::mul(linear, new_shape[j]), ir::loop_var(static_cast<int>(j)));
  }
  // Dividing by one dimension at a time keeps every step simple for the range simplifier.
  std::vector<Expr> index(old.size());
  Expr remaining = linear;
  for (size_t d = old.size(); d-- > 0;) {
    index[d] = d == 0 ? remaining : ir::mod(remaining, old[d]);
    remaining = ir::floordiv(remaining, old[d]);
  }
  return pointwise(dtype(x), new_shape, {x}, ir::load(0, dtype(x), std::move(index)));
}

NodeId Builder::permute(NodeId x, const std::vector<int64_t>& dims) {
  const size_t r = rank(x);
  LUMINAL_CHECK(dims.size() == r, origin_, ": permute of rank ", r, " with ", dims.size(), " dims");
  std::vector<Expr> index(r);
  Shape out(r);
  std::vector<bool> used(r, false);
  for (size_t j = 0; j < r; ++j) {
    const int64_t d = normalize_dim(dims[j], r);
    LUMINAL_CHECK(!used[d], origin_, ": permute repeats dimension ", d);
    used[d] = true;
    out[j] = shape(x)[d];
    index[d] = ir::loop_var(static_cast<int>(j));
  }
  return pointwise(dtype(x), out, {x}, ir::load(0, dtype(x), std::move(index)));
}

NodeId Builder::transpose(NodeId x, int64_t dim0, int64_t dim1) {
  const size_t r = rank(x);
  std::vector<int64_t> dims(r);
  std::iota(dims.begin(), dims.end(), 0);
  if (r > 0) std::swap(dims[normalize_dim(dim0, r)], dims[normalize_dim(dim1, r)]);
  return permute(x, dims);
}

NodeId Builder::expand(NodeId x, const Shape& new_shape) {
  const Shape& old = shape(x);
  LUMINAL_CHECK(new_shape.size() >= old.size(), origin_, ": cannot expand ", ir::node_signature(node(x)), " to ",
                ir::shape_to_string(new_shape));
  const size_t offset = new_shape.size() - old.size();
  Shape out = new_shape;
  for (size_t d = 0; d < old.size(); ++d) {
    if (ir::as_int_const(new_shape[d + offset]) == -1) out[d + offset] = old[d];
  }
  for (size_t d = 0; d < offset; ++d) {
    LUMINAL_CHECK(ir::as_int_const(out[d]) != -1, origin_, ": expand uses -1 for a new leading dimension");
  }
  return pointwise(dtype(x), out, {x}, broadcast_load(0, x, out));
}

NodeId Builder::per_channel(NodeId v, size_t rank) {
  Shape shape = this->shape(v);
  for (size_t d = 2; d < rank; ++d) shape.push_back(ir::int_const(1));
  return reshape(v, shape);
}

NodeId Builder::unsqueeze(NodeId x, int64_t dim) {
  const size_t r = rank(x);
  const int64_t d = normalize_dim(dim, r + 1);
  Shape out = shape(x);
  out.insert(out.begin() + d, ir::int_const(1));
  std::vector<Expr> index;
  for (size_t j = 0; j < r + 1; ++j) {
    if (static_cast<int64_t>(j) != d) index.push_back(ir::loop_var(static_cast<int>(j)));
  }
  return pointwise(dtype(x), out, {x}, ir::load(0, dtype(x), std::move(index)));
}

NodeId Builder::squeeze(NodeId x, const std::vector<int64_t>& dims) {
  const size_t r = rank(x);
  std::vector<bool> drop(r, false);
  for (int64_t dim : dims) {
    if (r == 0) continue;
    const int64_t d = normalize_dim(dim, r);
    drop[d] = is_one(shape(x)[d]);
  }
  Shape out;
  std::vector<Expr> index;
  for (size_t d = 0; d < r; ++d) {
    if (drop[d]) {
      index.push_back(ir::int_const(0));
    } else {
      index.push_back(ir::loop_var(static_cast<int>(out.size())));
      out.push_back(shape(x)[d]);
    }
  }
  if (out.size() == r) return x;
  return pointwise(dtype(x), out, {x}, ir::load(0, dtype(x), std::move(index)));
}

NodeId Builder::slice(NodeId x, int64_t dim, Expr start, Expr end, int64_t step) {
  const size_t r = rank(x);
  const int64_t d = normalize_dim(dim, r);
  LUMINAL_CHECK(step > 0, origin_, ": slice step must be positive, got ", step);
  const Expr size = shape(x)[d];
  // Python slice semantics: negative bounds count from the end, then clamp to [0, size]. A
  // symbolic bound may be negative too (x[:, -n:] with n a size): its sign decides, proven when
  // it can be, otherwise chosen at run time by min/max arithmetic.
  auto normalize = [&](const Expr& bound) -> Expr {
    if (auto c = ir::as_int_const(bound)) {
      if (*c >= kHugeBound) return size;
      if (*c <= -kHugeBound) return ir::int_const(0);
      if (*c < 0) return simplify_shape(ir::max(ir::add(size, ir::int_const(*c)), ir::int_const(0)));
      return simplify_shape(ir::min(bound, size));
    }
    const Expr zero = ir::int_const(0), one = ir::int_const(1);
    const Expr from_start = ir::min(ir::max(bound, zero), size), from_end = ir::max(ir::add(size, bound), zero);
    if (ir::prove_less_equal(zero, bound, {})) return simplify_shape(ir::min(bound, size));
    if (ir::prove_less_equal(bound, ir::int_const(-1), {})) return simplify_shape(from_end);
    const Expr negative = ir::min(ir::max(ir::sub(zero, bound), zero), one);  // 1 when bound < 0, else 0
    return simplify_shape(ir::add(from_start, ir::mul(negative, ir::max(ir::add(size, ir::min(bound, zero)), zero))));
  };
  const Expr s = normalize(start);
  const Expr e = normalize(end);
  const Expr length = simplify_shape(
      ir::max(ir::floordiv(ir::add(ir::sub(e, s), ir::int_const(step - 1)), ir::int_const(step)), ir::int_const(0)));
  Shape out = shape(x);
  out[d] = length;
  std::vector<Expr> index = loop_vars(r);
  index[d] = ir::add(s, ir::mul(ir::loop_var(static_cast<int>(d)), ir::int_const(step)));
  if (ir::expr_equal(length, size) && step == 1 && s->is_int_const(0)) return x;
  return pointwise(dtype(x), out, {x}, ir::load(0, dtype(x), std::move(index)));
}

NodeId Builder::select(NodeId x, int64_t dim, Expr index_value) {
  const size_t r = rank(x);
  const int64_t d = normalize_dim(dim, r);
  const Expr size = shape(x)[d];
  Expr position = index_value;
  if (auto c = ir::as_int_const(index_value); c && *c < 0) position = simplify_shape(ir::add(size, index_value));
  Shape out;
  std::vector<Expr> index;
  for (size_t j = 0; j < r; ++j) {
    if (static_cast<int64_t>(j) == d) {
      index.push_back(ir::check_index(position, size));
    } else {
      index.push_back(ir::loop_var(static_cast<int>(out.size())));
      out.push_back(shape(x)[j]);
    }
  }
  return pointwise(dtype(x), out, {x}, ir::load(0, dtype(x), std::move(index)));
}

NodeId Builder::concat(const std::vector<NodeId>& xs, int64_t dim) {
  // torch.cat skips legacy empty 1-D tensors of shape [0].
  std::vector<NodeId> parts;
  for (NodeId x : xs) {
    if (rank(x) == 1 && shape(x)[0]->is_int_const(0)) continue;
    parts.push_back(x);
  }
  LUMINAL_CHECK(!parts.empty(), origin_, ": cat of only empty tensors");
  const size_t r = rank(parts[0]);
  const int64_t d = normalize_dim(dim, r);
  DType out_dtype = dtype(parts[0]);
  for (NodeId x : parts) out_dtype = promote_types(out_dtype, dtype(x));
  Shape out = shape(parts[0]);
  std::vector<Expr> offsets;
  Expr total = ir::int_const(0);
  for (NodeId x : parts) {
    LUMINAL_CHECK(rank(x) == r, origin_, ": cat of tensors with ranks ", r, " and ", rank(x));
    for (size_t j = 0; j < r; ++j) {
      if (static_cast<int64_t>(j) != d) assert_equal(shape(x)[j], out[j], "cat dimensions");
    }
    offsets.push_back(total);
    total = ir::add(total, shape(x)[d]);
  }
  out[d] = total;
  if (parts.size() == 1) return cast(parts[0], out_dtype);
  // Select the part by position along `d`; each load is masked so that no lane reads outside
  // its part (the CPU interpreter evaluates every branch).
  const Expr position = ir::loop_var(static_cast<int>(d));
  Expr body;
  for (size_t k = parts.size(); k-- > 0;) {
    std::vector<Expr> index = loop_vars(r);
    index[d] = ir::sub(position, offsets[k]);
    const Expr end = ir::add(offsets[k], shape(parts[k])[d]);
    const Expr inside = ir::logical_and(ir::ge(position, offsets[k]), ir::lt(position, end));
    Expr value = ir::cast(ir::load(static_cast<int>(k), dtype(parts[k]), index, inside), out_dtype);
    body = body ? ir::where(ir::lt(position, end), value, body) : value;
  }
  return pointwise(out_dtype, out, parts, body);
}

NodeId Builder::take(NodeId x, int64_t dim, NodeId index_tensor, bool wrap_negative, const std::string& index_input) {
  const size_t r = rank(x);
  const int64_t d = normalize_dim(dim, r);
  const DType index_dtype = dtype(index_tensor);
  LUMINAL_CHECK(index_dtype == DType::I64 || index_dtype == DType::I32, origin_,
                ": index tensor must be int64 or int32, got ", dtype_name(index_dtype));
  const size_t index_rank = rank(index_tensor);
  Shape out;
  for (int64_t j = 0; j < d; ++j) out.push_back(shape(x)[j]);
  for (const Expr& dim_size : shape(index_tensor)) out.push_back(dim_size);
  for (size_t j = d + 1; j < r; ++j) out.push_back(shape(x)[j]);

  std::vector<Expr> index_of_index;
  for (size_t j = 0; j < index_rank; ++j) index_of_index.push_back(ir::loop_var(static_cast<int>(d + j)));
  const Expr raw = ir::load(1, index_dtype, std::move(index_of_index));
  std::vector<Expr> index;
  for (int64_t j = 0; j < d; ++j) index.push_back(ir::loop_var(static_cast<int>(j)));
  index.push_back(checked_index(raw, shape(x)[d], wrap_negative, nullptr, index_input));
  for (size_t j = d + 1; j < r; ++j) index.push_back(ir::loop_var(static_cast<int>(j - 1 + index_rank)));
  return pointwise(dtype(x), out, {x, index_tensor}, ir::load(0, dtype(x), std::move(index)));
}

NodeId Builder::reduce_dims(NodeId x, std::vector<int64_t> dims, bool keepdim, ir::ReduceOp op, DType out_dtype) {
  const size_t r = rank(x);
  if (dims.empty()) {  // reduce over everything
    dims.resize(r);
    std::iota(dims.begin(), dims.end(), 0);
  }
  std::vector<bool> reduced(r, false);
  for (int64_t dim : dims) {
    if (r > 0) reduced[normalize_dim(dim, r)] = true;
  }
  Shape out;
  std::vector<Expr> extents;
  std::vector<Expr> index;
  for (size_t d = 0; d < r; ++d) {
    if (reduced[d]) {
      index.push_back(ir::reduce_var(static_cast<int>(extents.size())));
      extents.push_back(shape(x)[d]);
      if (keepdim) out.push_back(ir::int_const(1));
    } else {
      index.push_back(ir::loop_var(static_cast<int>(out.size())));
      out.push_back(shape(x)[d]);
    }
  }
  if (extents.empty()) extents.push_back(ir::int_const(1));  // rank 0: a single element
  Expr body = ir::cast(ir::load(0, dtype(x), std::move(index)), out_dtype);
  return reduce(out_dtype, out, {x}, body, op, extents);
}

}  // namespace luminal::frontend
