// Complex tensors as pairs: a complex64 (complex128) tensor of shape S is an f32 (f64) tensor of
// shape S + [2], its real part at index 0 of the last dimension and its imaginary part at 1 (the
// interleaved layout torch stores complex numbers in, so view_as_real and view_as_complex are the
// value itself). This covers rotary embeddings written with complex numbers (torch.polar,
// view_as_complex, a complex product, view_as_real: Meta's Llama reference code, DeepSeek-V2).
//
// Only the translators below see complex values: a node that reads or produces one is translated by
// complex_translator(target), and any other target is refused (it runs in eager), so no real-valued
// translator ever computes on a pair as if it were a real tensor. A complex graph input or constant
// is bound as its pairs (ir::Node::complex_pairs; bindings/module.cpp views the tensor's memory as
// view_as_real does). Results stay real: a complex result that leaves the graph is refused at its
// producer (translate.cpp).
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>

#include "common/checked.h"
#include "frontend/translate.h"
#include "ir/simplify.h"
#include "pt2/dtype_codes.h"

namespace luminal::frontend {

using ir::Expr;
using ir::NodeId;

namespace {

constexpr int kComplexFloat = 10;   // torch/_export/serde/schema.py ScalarType.COMPLEXFLOAT
constexpr int kComplexDouble = 11;  // COMPLEXDOUBLE (COMPLEXHALF, 9, has no pair type here)

const std::string& tensor_name(const pt2::Node& node, size_t output) {
  LUMINAL_CHECK(output < node.outputs.size() && node.outputs[output].is_tensor(), "expected a tensor output");
  return node.outputs[output].as_tensor().name;
}

// The pair dtype of a complex output, refusing complex32.
DType out_pair_dtype(const Context& ctx, const pt2::Node& node) {
  const std::string& name = tensor_name(node, 0);
  const std::optional<DType> pair = complex_pair_dtype(ctx.tensor_meta(name).dtype);
  LUMINAL_CHECK(pair.has_value(), "output '", name, "' is ", serde_code_name(ctx.tensor_meta(name).dtype),
                ": only complex64 and complex128 are computed (as pairs of f32 or f64)");
  return *pair;
}

// Whether the tensor argument `name` of `node` is complex (a pair here).
bool complex_arg(const Context& ctx, const pt2::Node& node, std::string_view name) {
  const pt2::Argument* arg = ctx.find_arg(node, name);
  return arg && arg->is_tensor() && complex_pair_dtype(ctx.tensor_meta(arg->as_tensor().name).dtype).has_value();
}

// The complex shape of a pair (its shape without the last dimension of 2).
Shape complex_shape(Builder& b, NodeId pair) {
  Shape shape = b.shape(pair);
  LUMINAL_CHECK(!shape.empty() && ir::as_int_const(shape.back()) == 2, "internal error: ",
                ir::node_signature(b.node(pair)), " is not a complex pair");
  shape.pop_back();
  return shape;
}

// Part `part` (0 real, 1 imaginary) of the pair in `slot`, broadcast to the complex shape `out`:
// Builder::broadcast_load against the pair-shaped output, its pair coordinate fixed to `part`.
Expr pair_part(Builder& b, int slot, NodeId pair, const Shape& out, int part) {
  complex_shape(b, pair);  // checks that it is a pair
  Shape pair_out = out;
  pair_out.push_back(ir::int_const(2));
  const Expr load = b.broadcast_load(slot, pair, pair_out);
  std::vector<Expr> index(load->args.begin(), load->args.end());
  index.back() = ir::int_const(part);
  return ir::load(slot, b.dtype(pair), std::move(index));
}

// The pair node of complex shape `shape` whose element is `real` at pair index 0, `imag` at 1.
NodeId make_pair(Builder& b, DType dtype, const Shape& shape, std::vector<NodeId> inputs, Expr real, Expr imag) {
  Shape pair_shape = shape;
  pair_shape.push_back(ir::int_const(2));
  const Expr is_real = ir::eq(ir::loop_var(static_cast<int>(shape.size())), ir::int_const(0));
  return b.pointwise(dtype, pair_shape, std::move(inputs), ir::where(is_real, std::move(real), std::move(imag)));
}

// polar(abs, angle) = abs * cos(angle) + i abs * sin(angle), as c10::polar computes it.
void polar(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType dtype = out_pair_dtype(ctx, node);
  const NodeId abs = ctx.tensor(node, "abs"), angle = ctx.tensor(node, "angle");
  LUMINAL_CHECK(b.dtype(abs) == dtype && b.dtype(angle) == dtype, "abs and angle must be ", dtype_name(dtype));
  const Shape shape = ctx.meta_shape(tensor_name(node, 0));
  const Expr r = b.broadcast_load(0, abs, shape), theta = b.broadcast_load(1, angle, shape);
  ctx.set_output(node, make_pair(b, dtype, shape, {abs, angle}, ir::mul(r, ir::unary(ir::ExprOp::Cos, theta)),
                                 ir::mul(r, ir::unary(ir::ExprOp::Sin, theta))));
}

// view_as_complex(x [..., 2]) and view_as_real(z): the pair is the value itself.
void view_as_complex(Context& ctx, const pt2::Node& node) {
  const NodeId x = ctx.tensor(node, "self");
  LUMINAL_CHECK(ctx.builder().dtype(x) == out_pair_dtype(ctx, node), "view_as_complex of ",
                ir::node_signature(ctx.builder().node(x)));
  ctx.set_output(node, x);
}

void view_as_real(Context& ctx, const pt2::Node& node) {
  LUMINAL_CHECK(complex_arg(ctx, node, "self"), "view_as_real of a real tensor");
  ctx.set_output(node, ctx.tensor(node, "self"));
}

// A complex operand's parts, a real operand (tensor or number) as the real part with imaginary 0.
struct Parts {
  Expr real, imag;  // imag null: a real operand
};

Parts operand_parts(Context& ctx, const pt2::Node& node, std::string_view name, DType dtype, const Shape& shape,
                    std::vector<NodeId>& inputs) {
  Builder& b = ctx.builder();
  const Operand operand = ctx.operand(node, name);
  if (!operand.tensor) {
    LUMINAL_CHECK(!operand.symbolic, "a symbolic scalar times a complex tensor");
    return {ir::float_const(operand.number("a complex product's scalar"), dtype), nullptr};
  }
  const NodeId x = *operand.tensor;
  const int slot = static_cast<int>(inputs.size());
  inputs.push_back(x);
  if (complex_arg(ctx, node, name)) {
    LUMINAL_CHECK(b.dtype(x) == dtype, "a complex product of complex", dtype == DType::F32 ? "64" : "128",
                  " and ", ir::node_signature(b.node(x)), " pairs");
    return {pair_part(b, slot, x, shape, 0), pair_part(b, slot, x, shape, 1)};
  }
  LUMINAL_CHECK(b.dtype(x) == dtype, "a complex product with a real ", dtype_name(b.dtype(x)), " tensor: only ",
                dtype_name(dtype), " keeps the result's type");
  return {b.broadcast_load(slot, x, shape), nullptr};
}

// (a + bi)(c + di) = (ac - bd) + (ad + bc)i, c10::complex's operator* order; a real factor scales
// both parts.
void mul(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType dtype = out_pair_dtype(ctx, node);
  const Shape shape = ctx.meta_shape(tensor_name(node, 0));
  std::vector<NodeId> inputs;
  const Parts x = operand_parts(ctx, node, "self", dtype, shape, inputs);
  const Parts y = operand_parts(ctx, node, "other", dtype, shape, inputs);
  Expr real, imag;
  if (x.imag && y.imag) {
    real = ir::sub(ir::mul(x.real, y.real), ir::mul(x.imag, y.imag));
    imag = ir::add(ir::mul(x.real, y.imag), ir::mul(x.imag, y.real));
  } else {
    const Parts& z = x.imag ? x : y;
    const Expr& r = x.imag ? y.real : x.real;
    LUMINAL_CHECK(z.imag, "internal error: a complex product of two real operands");
    real = x.imag ? ir::mul(z.real, r) : ir::mul(r, z.real);
    imag = x.imag ? ir::mul(z.imag, r) : ir::mul(r, z.imag);
  }
  ctx.set_output(node, make_pair(b, dtype, shape, std::move(inputs), std::move(real), std::move(imag)));
}

// Shape ops: the complex dimensions are the pair's leading ones, so a view or reshape to complex
// shape S is a reshape of the pair to S + [2], and unsqueeze's dimension counts in the complex rank.
void reshape_to_output(Context& ctx, const pt2::Node& node) {
  Shape shape = ctx.meta_shape(tensor_name(node, 0));
  shape.push_back(ir::int_const(2));
  ctx.set_output(node, ctx.builder().reshape(ctx.tensor(node, "self"), shape));
}

void unsqueeze(Context& ctx, const pt2::Node& node) {
  const NodeId z = ctx.tensor(node, "self");
  const int64_t rank = static_cast<int64_t>(complex_shape(ctx.builder(), z).size());
  int64_t dim = ctx.int_arg(node, "dim");
  if (dim < 0) dim += rank + 1;
  LUMINAL_CHECK(dim >= 0 && dim <= rank, "unsqueeze dimension out of range for a complex tensor of rank ", rank);
  ctx.set_output(node, ctx.builder().unsqueeze(z, dim));
}

// A dimension argument of an op on a complex tensor (negative: from the end of the complex shape).
int64_t complex_dim(Context& ctx, const pt2::Node& node, NodeId z, std::optional<int64_t> fallback = {}) {
  const int64_t rank = static_cast<int64_t>(complex_shape(ctx.builder(), z).size());
  int64_t dim = ctx.int_arg(node, "dim", fallback);
  if (dim < 0) dim += rank;
  LUMINAL_CHECK(dim >= 0 && dim < rank, "dimension ", ctx.int_arg(node, "dim", fallback),
                " out of range for a complex tensor of rank ", rank);
  return dim;
}

// slice and select of complex dimensions (freqs_cis[start:end] in Meta's Llama): the pair's.
void slice(Context& ctx, const pt2::Node& node) {
  const NodeId z = ctx.tensor(node, "self");
  slice_along(ctx, node, z, complex_dim(ctx, node, z, 0));
}

void select(Context& ctx, const pt2::Node& node) {
  const NodeId z = ctx.tensor(node, "self");
  ctx.set_output(node, ctx.builder().select(z, complex_dim(ctx, node, z), ctx.symint_arg(node, "index").value()));
}

void same_value(Context& ctx, const pt2::Node& node) { ctx.set_output(node, ctx.tensor(node, "self")); }

const std::map<std::string, TranslatorFn>& complex_translators() {
  static const std::map<std::string, TranslatorFn> translators = {
      {"torch.ops.aten.polar.default", polar},
      {"torch.ops.aten.view_as_complex.default", view_as_complex},
      {"torch.ops.aten.view_as_real.default", view_as_real},
      {"torch.ops.aten.mul.Tensor", mul},
      {"torch.ops.aten.mul.Scalar", mul},
      {"torch.ops.aten.view.default", reshape_to_output},
      {"torch.ops.aten._unsafe_view.default", reshape_to_output},
      {"torch.ops.aten.reshape.default", reshape_to_output},
      {"torch.ops.aten.unsqueeze.default", unsqueeze},
      {"torch.ops.aten.slice.Tensor", slice},
      {"torch.ops.aten.select.int", select},
      {"torch.ops.aten.clone.default", same_value},
      {"torch.ops.aten.alias.default", same_value},
  };
  return translators;
}

}  // namespace

std::optional<DType> complex_pair_dtype(int serde_code) {
  switch (serde_code) {
    case kComplexFloat: return DType::F32;
    case kComplexDouble: return DType::F64;
    default: return std::nullopt;
  }
}

Context::ValueType Context::value_type(const std::string& tensor_name) const {
  const std::optional<DType> pair = complex_pair_dtype(meta(tensor_name).dtype);
  ValueType type{pair.value_or(DType::F32), meta_shape(tensor_name), pair.has_value()};
  if (pair) {
    type.shape.push_back(ir::int_const(2));
  } else {
    type.dtype = meta_dtype(tensor_name);
  }
  return type;
}

void complex_constant_as_pairs(ir::ConstantData& data, const std::string& who) {
  complex_layout_as_pairs(data.sizes, data.strides, who);
  data.storage_offset = checked_mul(data.storage_offset, int64_t{2}, who);
}

bool is_complex_code(int serde_code) { return serde_code >= 9 && serde_code <= kComplexDouble; }

bool is_complex_tensor(const pt2::Graph& graph, const std::string& name) {
  const auto it = graph.tensor_values.find(name);
  return it != graph.tensor_values.end() && is_complex_code(it->second.dtype);
}

bool touches_complex(const pt2::Graph& graph, const pt2::Node& node) {
  const auto complex = [&](const std::string& name) { return is_complex_tensor(graph, name); };
  const auto any_complex = [&](const pt2::Argument& arg) {
    switch (arg.kind()) {
      case pt2::Argument::Kind::Tensor: return complex(arg.as_tensor().name);
      case pt2::Argument::Kind::Tensors:
        return std::any_of(arg.as_tensors().begin(), arg.as_tensors().end(),
                           [&](const pt2::TensorArgument& t) { return complex(t.name); });
      case pt2::Argument::Kind::OptionalTensor: {
        const std::optional<pt2::TensorArgument>& t = arg.as_optional_tensor().tensor;
        return t.has_value() && complex(t->name);
      }
      case pt2::Argument::Kind::OptionalTensors:
        return std::any_of(arg.as_optional_tensors().begin(), arg.as_optional_tensors().end(),
                           [&](const pt2::OptionalTensorArgument& t) { return t.tensor && complex(t.tensor->name); });
      default: return false;
    }
  };
  return std::any_of(node.inputs.begin(), node.inputs.end(),
                     [&](const pt2::NamedArgument& input) { return any_complex(input.arg); }) ||
         std::any_of(node.outputs.begin(), node.outputs.end(), any_complex);
}

const TranslatorFn* complex_translator(const std::string& target) {
  const auto& translators = complex_translators();
  const auto it = translators.find(target);
  return it == translators.end() ? nullptr : &it->second;
}

void register_complex_ops(Registry& registry) {
  // Ops that exist only for complex values; the others dispatch here when a value is complex.
  for (const char* target : {"torch.ops.aten.polar.default", "torch.ops.aten.view_as_complex.default",
                             "torch.ops.aten.view_as_real.default"}) {
    registry.add(target, *complex_translator(target));
  }
}

}  // namespace luminal::frontend
