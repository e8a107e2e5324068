#include "frontend/translate.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <set>

#include "common/checked.h"
#include "common/error.h"
#include "ir/simplify.h"
#include "pt2/dtype_codes.h"
#include "pt2/sympy.h"

namespace luminal::frontend {

// Targets that carry no computation for us: shape bookkeeping and export-time assertions.
const std::set<std::string>& passthrough_targets() {
  static const std::set<std::string> targets = {
      "torch.ops.aten.sym_size.int",
      "torch.ops.aten.sym_stride.int",
      "torch.ops.aten.sym_numel.default",
      "torch.ops.aten.sym_storage_offset.default",
      "torch.ops.aten._assert_tensor_metadata.default",
      "torch.ops.aten._assert_scalar.default",
      "torch.ops.aten.sym_constrain_range_for_size.default",
      "torch.ops.aten.sym_constrain_range.default",
      "_operator.add",
      "_operator.sub",
      "_operator.mul",
      "_operator.floordiv",
      "_operator.mod",
      "_operator.pow",
      "_operator.neg",
      "_operator.eq",
      "_operator.ne",
      "_operator.ge",
      "_operator.gt",
      "_operator.le",
      "_operator.lt",
      "_operator.and_",
      "_operator.or_",
      "torch.sym_max",
      "torch.sym_min",
      "torch.sym_not",
      "torch.sym_float",
      "torch.sym_int",
      "math.ceil",
      "math.floor",
      "math.trunc",
  };
  return targets;
}

namespace {

std::string node_name(const pt2::Node& node) {
  if (node.name) return *node.name;
  for (const pt2::Argument& out : node.outputs) {
    if (out.is_tensor()) return out.as_tensor().name;
  }
  return "<unnamed>";
}

// Last frame of the user's stack trace, e.g. `File "model.py", line 20, in forward`.
std::string source_location(const pt2::Node& node) {
  const auto it = node.metadata.find("stack_trace");
  if (it == node.metadata.end() || it->second.empty()) return "";
  const std::string& trace = it->second;
  const size_t pos = trace.rfind("File \"");
  if (pos == std::string::npos) return "";
  size_t end = trace.find('\n', pos);
  std::string frame = trace.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  // Include the source line itself when present.
  if (end != std::string::npos) {
    size_t next = trace.find('\n', end + 1);
    std::string code = trace.substr(end + 1, next == std::string::npos ? std::string::npos : next - end - 1);
    const size_t first = code.find_first_not_of(' ');
    if (first != std::string::npos) frame += ": " + code.substr(first);
  }
  return frame;
}

Expr sympy_node_to_expr(const pt2::SympyExpr& e);

// A float-valued step of a shape expression as num / den, den a positive constant. torch writes
// such steps where a size comes from float arithmetic, e.g. arange(start, end) with float bounds:
// CeilToInt(FloatTrueDiv(Add(ToFloat(a), Mul(-1, ToFloat(b))), Float('1.0'))). Their integer
// results are exact in integer arithmetic.
struct RationalExpr {
  Expr num;
  int64_t den = 1;
};

// Largest denominator kept exact (a Float constant is a binary fraction; products multiply them).
constexpr int64_t kMaxDenominator = int64_t{1} << 40;

RationalExpr rational(Expr num, int64_t den) {
  LUMINAL_CHECK(den != 0, "division by zero in a symbolic shape expression");
  LUMINAL_CHECK(den > -kMaxDenominator && den < kMaxDenominator, "symbolic shape expression with denominator ", den,
                " is not supported");
  if (den < 0) {
    num = ir::sub(ir::int_const(0), num);
    den = -den;
  }
  if (const auto constant = ir::as_int_const(num)) {  // a constant fraction in lowest terms
    const int64_t divisor = std::gcd(*constant, den);
    return {ir::int_const(*constant / divisor), den / divisor};
  }
  return {std::move(num), den};
}

// a * b for denominators below kMaxDenominator, refused (not wrapped) when the product is not.
int64_t denominator_product(int64_t a, int64_t b) {
  LUMINAL_CHECK(b == 0 || std::abs(a) < kMaxDenominator / std::abs(b),
                "symbolic shape expression with a denominator beyond ", kMaxDenominator, " is not supported");
  return a * b;
}

// Float('0.5', precision=53): the parser keeps the literal as a Symbol node's name.
RationalExpr float_constant(const pt2::SympyExpr& e) {
  LUMINAL_CHECK(e.args.size() == 1 && e.args[0].kind == pt2::SympyExpr::Kind::Symbol, "malformed ", pt2::to_string(e));
  const double value = std::stod(e.args[0].name);
  LUMINAL_CHECK(std::isfinite(value), "non-finite constant ", e.args[0].name, " in a symbolic shape expression");
  int64_t den = 1;
  while (std::floor(value * static_cast<double>(den)) != value * static_cast<double>(den)) {
    LUMINAL_CHECK(den < kMaxDenominator, "constant ", e.args[0].name, " in a symbolic shape expression is not a "
                  "binary fraction luminal keeps exact");
    den *= 2;
  }
  const double num = value * static_cast<double>(den);
  LUMINAL_CHECK(std::fabs(num) < 9.0e15, "constant ", e.args[0].name, " in a symbolic shape expression is too large");
  return rational(ir::int_const(static_cast<int64_t>(num)), den);
}

RationalExpr sympy_rational(const pt2::SympyExpr& e) {
  using Kind = pt2::SympyExpr::Kind;
  if (e.kind != Kind::Call) return {sympy_node_to_expr(e), 1};
  const std::string& f = e.name;
  if (f == "Float") return float_constant(e);
  if (f == "ToFloat" && e.args.size() == 1) return sympy_rational(e.args[0]);
  if ((f == "Add" || f == "Mul") && !e.args.empty()) {
    RationalExpr out = sympy_rational(e.args[0]);
    for (size_t i = 1; i < e.args.size(); ++i) {
      const RationalExpr next = sympy_rational(e.args[i]);
      const int64_t den = denominator_product(out.den, next.den);
      out = f == "Add" ? rational(ir::add(ir::mul(out.num, ir::int_const(next.den)),
                                          ir::mul(next.num, ir::int_const(out.den))),
                                  den)
                       : rational(ir::mul(out.num, next.num), den);
    }
    return out;
  }
  if ((f == "FloatTrueDiv" || f == "IntTrueDiv") && e.args.size() == 2) {
    const RationalExpr a = sympy_rational(e.args[0]), b = sympy_rational(e.args[1]);
    const auto divisor = ir::as_int_const(b.num);
    LUMINAL_CHECK(divisor.has_value(), "division by a symbolic value in shape expression ", pt2::to_string(e),
                  " is not supported");
    return rational(ir::mul(a.num, ir::int_const(b.den)), denominator_product(a.den, *divisor));  // (an/ad)/(bn/bd)
  }
  return {sympy_node_to_expr(e), 1};
}

Expr sympy_node_to_expr(const pt2::SympyExpr& e) {
  using Kind = pt2::SympyExpr::Kind;
  if (e.kind == Kind::Integer) return ir::int_const(e.value);
  if (e.kind == Kind::Symbol) return ir::symbol(e.name);
  if ((e.name == "CeilToInt" || e.name == "FloorToInt" || e.name == "TruncToInt") && e.args.size() == 1) {
    const RationalExpr r = sympy_rational(e.args[0]);
    if (r.den == 1) return r.num;
    const Expr den = ir::int_const(r.den);  // positive: floor division rounds toward -inf
    const Expr floor = ir::floordiv(r.num, den), ceil = ir::floordiv(ir::add(r.num, ir::int_const(r.den - 1)), den);
    if (e.name == "FloorToInt") return floor;
    if (e.name == "CeilToInt") return ceil;
    // Toward zero: the floor of a non-negative value, the ceiling of a negative one (exactly one
    // of the two terms is non-zero, whatever the sign).
    return ir::add(ir::max(floor, ir::int_const(0)), ir::min(ceil, ir::int_const(0)));
  }
  if (e.name == "ToFloat" || e.name == "Float" || e.name == "FloatTrueDiv") {  // an integer-valued float
    const RationalExpr r = sympy_rational(e);
    LUMINAL_CHECK(r.den == 1, "shape expression ", pt2::to_string(e), " is not an integer");
    return r.num;
  }
  std::vector<Expr> args;
  for (const pt2::SympyExpr& a : e.args) args.push_back(sympy_node_to_expr(a));
  auto fold = [&](Expr (*op)(Expr, Expr)) {
    LUMINAL_CHECK(!args.empty(), "sympy ", e.name, " without arguments");
    Expr out = args[0];
    for (size_t i = 1; i < args.size(); ++i) out = op(out, args[i]);
    return out;
  };
  const std::string& f = e.name;
  if (f == "Add") return fold(&ir::add);
  if (f == "Mul") return fold(&ir::mul);
  if (f == "Max") return fold(&ir::max);
  if (f == "Min") return fold(&ir::min);
  if ((f == "FloorDiv" || f == "CleanDiv" || f == "IntTrueDiv") && args.size() == 2) {
    return ir::floordiv(args[0], args[1]);
  }
  if ((f == "Mod" || f == "PythonMod") && args.size() == 2) return ir::mod(args[0], args[1]);
  if (f == "Pow" && args.size() == 2) {
    const auto exponent = ir::as_int_const(args[1]);
    LUMINAL_CHECK(exponent && *exponent >= 0 && *exponent <= 8, "unsupported symbolic power ", pt2::to_string(e));
    Expr out = ir::int_const(1);
    for (int64_t i = 0; i < *exponent; ++i) out = ir::mul(out, args[0]);
    return out;
  }
  fail("unsupported symbolic shape expression ", pt2::to_string(e));
}

}  // namespace

Expr sympy_to_expr(const std::string& expr_str) {
  try {
    return sympy_node_to_expr(pt2::parse_sympy(expr_str));
  } catch (const Error& error) {
    fail("cannot use shape expression '", expr_str, "': ", error.what());
  }
}

std::optional<int64_t> example_value(const pt2::SymInt& value) {
  if (value.is_int()) return value.as_int();
  const auto& hint = value.as_expr().hint;
  return hint && hint->as_int ? hint->as_int : std::nullopt;
}

std::string short_target(const std::string& target) {
  const std::string prefix = "torch.ops.";
  return target.rfind(prefix, 0) == 0 ? target.substr(prefix.size()) : target;
}

// ------------------------------------------------------------------------------------------------
// Registry
// ------------------------------------------------------------------------------------------------
const Registry& Registry::instance() {
  static const Registry registry = [] {
    Registry r;
    register_linalg_ops(r);
    register_shape_ops(r);
    register_elementwise_ops(r);
    register_index_ops(r);
    register_embedding_ops(r);
    register_constructor_ops(r);
    register_reduction_ops(r);
    register_window_ops(r);
    register_activation_ops(r);
    register_math_ops(r);
    register_sorting_ops(r);
    register_misc_core_ops(r);
    register_attention_ops(r);
    register_complex_ops(r);
    return r;
  }();
  return registry;
}

void Registry::add(const std::string& target, TranslatorFn fn) {
  LUMINAL_CHECK(translators_.emplace(target, std::move(fn)).second, "translator for ", target, " registered twice");
}

const TranslatorFn* Registry::find(const std::string& target) const {
  const auto it = translators_.find(target);
  return it == translators_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::targets() const {
  std::vector<std::string> out;
  for (const auto& entry : translators_) out.push_back(entry.first);
  return out;
}

// ------------------------------------------------------------------------------------------------
// Context
// ------------------------------------------------------------------------------------------------
Context::Context(const pt2::ExportedProgram& program, ir::Graph& graph)
    : program_(program), graph_(graph), builder_(graph) {}

void Context::arg_error(const pt2::Node& node, std::string_view name, const std::string& message) const {
  fail("argument '", name, "': ", message);
}

const pt2::Argument* Context::find_arg(const pt2::Node& node, std::string_view name) const {
  const pt2::NamedArgument* named = node.find_input(name);
  return named ? &named->arg : nullptr;
}

NodeId Context::tensor(const pt2::Node& node, std::string_view name) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) arg_error(node, name, "a tensor is required");
  if (arg->kind() != pt2::Argument::Kind::Tensor) arg_error(node, name, str_cat("expected a tensor, got ", arg->tag()));
  return value(arg->as_tensor().name);
}

std::optional<NodeId> Context::optional_tensor(const pt2::Node& node, std::string_view name) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) return std::nullopt;
  if (arg->kind() == pt2::Argument::Kind::OptionalTensor) {
    const auto& t = arg->as_optional_tensor().tensor;
    return t ? std::optional<NodeId>(value(t->name)) : std::nullopt;
  }
  if (arg->kind() != pt2::Argument::Kind::Tensor) arg_error(node, name, str_cat("expected a tensor, got ", arg->tag()));
  return value(arg->as_tensor().name);
}

std::vector<NodeId> Context::tensors(const pt2::Node& node, std::string_view name) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->kind() != pt2::Argument::Kind::Tensors) arg_error(node, name, "a list of tensors is required");
  std::vector<NodeId> out;
  for (const pt2::TensorArgument& t : arg->as_tensors()) out.push_back(value(t.name));
  return out;
}

std::vector<std::optional<NodeId>> Context::optional_tensors(const pt2::Node& node, std::string_view name) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg) arg_error(node, name, "a list of optional tensors is required");
  std::vector<std::optional<NodeId>> out;
  if (arg->kind() == pt2::Argument::Kind::Tensors) {
    for (const pt2::TensorArgument& t : arg->as_tensors()) out.push_back(value(t.name));
    return out;
  }
  if (arg->kind() != pt2::Argument::Kind::OptionalTensors) {
    arg_error(node, name, str_cat("expected a list of optional tensors, got ", arg->tag()));
  }
  for (const pt2::OptionalTensorArgument& t : arg->as_optional_tensors()) {
    out.push_back(t.tensor ? std::optional<NodeId>(value(t.tensor->name)) : std::nullopt);
  }
  return out;
}

int64_t Context::int_arg(const pt2::Node& node, std::string_view name, std::optional<int64_t> fallback) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) {
    if (fallback) return *fallback;
    arg_error(node, name, "an integer is required");
  }
  switch (arg->kind()) {
    case pt2::Argument::Kind::Int: return arg->as_int();
    case pt2::Argument::Kind::Bool: return arg->as_bool() ? 1 : 0;
    case pt2::Argument::Kind::SymInt: {
      const Expr e = symint_arg(node, name).value();
      if (auto c = ir::as_int_const(e)) return *c;
      arg_error(node, name, str_cat("expected a constant integer, got the symbolic value ", ir::to_string(e)));
    }
    default: arg_error(node, name, str_cat("expected an integer, got ", arg->tag()));
  }
}

double Context::float_arg(const pt2::Node& node, std::string_view name, std::optional<double> fallback) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) {
    if (fallback) return *fallback;
    arg_error(node, name, "a number is required");
  }
  switch (arg->kind()) {
    case pt2::Argument::Kind::Float: return arg->as_float();
    case pt2::Argument::Kind::Int: return static_cast<double>(arg->as_int());
    case pt2::Argument::Kind::Bool: return arg->as_bool() ? 1.0 : 0.0;
    default: arg_error(node, name, str_cat("expected a number, got ", arg->tag()));
  }
}

bool Context::bool_arg(const pt2::Node& node, std::string_view name, std::optional<bool> fallback) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) {
    if (fallback) return *fallback;
    arg_error(node, name, "a bool is required");
  }
  if (arg->kind() == pt2::Argument::Kind::Bool) return arg->as_bool();
  if (arg->kind() == pt2::Argument::Kind::Int) return arg->as_int() != 0;
  arg_error(node, name, str_cat("expected a bool, got ", arg->tag()));
}

std::optional<std::string> Context::string_arg(const pt2::Node& node, std::string_view name) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) return std::nullopt;
  if (arg->kind() != pt2::Argument::Kind::String) arg_error(node, name, str_cat("expected a string, got ", arg->tag()));
  return arg->as_string();
}

std::vector<int64_t> Context::ints_arg(const pt2::Node& node, std::string_view name,
                                       std::optional<std::vector<int64_t>> fallback) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) {
    if (fallback) return *fallback;
    arg_error(node, name, "a list of integers is required");
  }
  if (arg->kind() == pt2::Argument::Kind::Ints) return arg->as_ints();
  if (arg->kind() == pt2::Argument::Kind::Int) return {arg->as_int()};
  std::vector<int64_t> out;
  for (const Expr& e : symints_arg(node, name)) {
    const auto c = ir::as_int_const(e);
    if (!c) arg_error(node, name, str_cat("expected constant integers, got the symbolic value ", ir::to_string(e)));
    out.push_back(*c);
  }
  return out;
}

std::optional<Expr> Context::symint_arg(const pt2::Node& node, std::string_view name) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) return std::nullopt;
  switch (arg->kind()) {
    case pt2::Argument::Kind::Int: return ir::int_const(arg->as_int());
    case pt2::Argument::Kind::SymInt: {
      const pt2::SymIntArgument& s = arg->as_sym_int();
      if (s.is_name()) return sym_value(std::get<std::string>(s.value));
      return ir::int_const(std::get<int64_t>(s.value));
    }
    default: arg_error(node, name, str_cat("expected an integer, got ", arg->tag()));
  }
}

std::vector<Expr> Context::symints_arg(const pt2::Node& node, std::string_view name) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) arg_error(node, name, "a list of integers is required");
  std::vector<Expr> out;
  switch (arg->kind()) {
    case pt2::Argument::Kind::Ints:
      for (int64_t v : arg->as_ints()) out.push_back(ir::int_const(v));
      return out;
    case pt2::Argument::Kind::Int: return {ir::int_const(arg->as_int())};
    case pt2::Argument::Kind::SymInts:
      for (const pt2::SymIntArgument& s : arg->as_sym_ints()) {
        out.push_back(s.is_name() ? sym_value(std::get<std::string>(s.value))
                                  : ir::int_const(std::get<int64_t>(s.value)));
      }
      return out;
    case pt2::Argument::Kind::SymInt: return {symint_arg(node, name).value()};
    default: arg_error(node, name, str_cat("expected a list of integers, got ", arg->tag()));
  }
}

Operand Context::operand(const pt2::Node& node, std::string_view name) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) arg_error(node, name, "a tensor or number is required");
  switch (arg->kind()) {
    case pt2::Argument::Kind::Tensor: return Operand::of(value(arg->as_tensor().name));
    case pt2::Argument::Kind::Float: return Operand::number(arg->as_float(), DType::F64);
    case pt2::Argument::Kind::Int: return Operand::integer_number(arg->as_int());
    case pt2::Argument::Kind::Bool: return Operand::integer_number(arg->as_bool() ? 1 : 0, DType::Bool);
    case pt2::Argument::Kind::SymInt: {
      const Expr e = symint_arg(node, name).value();
      if (const auto c = ir::as_int_const(e)) return Operand::integer_number(*c);
      return Operand::symbol(e);
    }
    default: arg_error(node, name, str_cat("expected a tensor or number, got ", arg->tag()));
  }
}

std::optional<DType> Context::dtype_arg(const pt2::Node& node, std::string_view name) const {
  const pt2::Argument* arg = find_arg(node, name);
  if (!arg || arg->is_none()) return std::nullopt;
  if (arg->kind() != pt2::Argument::Kind::ScalarType) arg_error(node, name, str_cat("expected a dtype, got ", arg->tag()));
  const auto dtype = dtype_from_serde_code(arg->as_scalar_type());
  if (!dtype) arg_error(node, name, str_cat("unsupported dtype ", serde_code_name(arg->as_scalar_type())));
  return dtype;
}

const pt2::TensorMeta& Context::meta(const std::string& tensor_name) const {
  const auto& values = pt2_graph().tensor_values;
  const auto it = values.find(tensor_name);
  LUMINAL_CHECK(it != values.end(), "no metadata for tensor '", tensor_name, "'");
  return it->second;
}

DType Context::meta_dtype(const std::string& tensor_name) const {
  const int code = meta(tensor_name).dtype;
  const auto dtype = dtype_from_serde_code(code);
  LUMINAL_CHECK(dtype.has_value(), "tensor '", tensor_name, "' has unsupported dtype ", serde_code_name(code));
  return *dtype;
}

Shape Context::meta_shape(const std::string& tensor_name) const {
  Shape shape;
  for (const pt2::SymInt& size : meta(tensor_name).sizes) {
    shape.push_back(size.is_int() ? ir::int_const(size.as_int()) : sympy_to_expr(size.as_expr().expr_str));
  }
  return shape;
}

namespace {

const std::string& output_name(const pt2::Node& node, size_t output) {
  // Ops returning Tensor[] (split_with_sizes, unbind, ...) have one output holding a list.
  if (node.outputs.size() == 1 && node.outputs[0].kind() == pt2::Argument::Kind::Tensors) {
    const std::vector<pt2::TensorArgument>& list = node.outputs[0].as_tensors();
    LUMINAL_CHECK(output < list.size(), "node has ", list.size(), " outputs in its list, not ", output + 1);
    return list[output].name;
  }
  LUMINAL_CHECK(output < node.outputs.size(), "node has no output ", output);
  const pt2::Argument& out = node.outputs[output];
  LUMINAL_CHECK(out.is_tensor(), "output ", output, " is not a tensor (", out.tag(), ")");
  return out.as_tensor().name;
}

}  // namespace

DType Context::out_dtype(const pt2::Node& node, size_t output) const { return meta_dtype(output_name(node, output)); }

Shape Context::out_shape(const pt2::Node& node, size_t output) const { return meta_shape(output_name(node, output)); }

void Context::set_output(const pt2::Node& node, size_t output, NodeId id) {
  const std::string& name = output_name(node, output);
  const ir::Node& produced = graph_.node(id);
  const ValueType expected = value_type(name);  // a complex value is its pair
  const char* pairs = expected.complex_pairs ? " pairs" : "";
  LUMINAL_CHECK(produced.dtype == expected.dtype, "internal error: produced ", ir::node_signature(produced),
                " for '", name, "' but export metadata says ", dtype_name(expected.dtype), pairs);
  LUMINAL_CHECK(expected.shape.size() == produced.rank(), "internal error: produced ", ir::node_signature(produced),
                " for '", name, "' but export metadata says rank ", expected.shape.size(), " ",
                ir::shape_to_string(expected.shape));
  for (size_t d = 0; d < expected.shape.size(); ++d) {
    builder_.assert_equal(produced.shape[d], expected.shape[d], str_cat("dimension ", d, " of '", name, "'"));
  }
  adopt_constant_sizes(id, expected.shape);
  bind_value(name, id);
}

// Where the export knows a computed dimension's size and luminal's expression for it does not
// simplify to that number (a slice x[..., -1:] of a symbolic length: max(0, n - max(0, n - 1)),
// which is 1 for every n >= 1), the node takes the export's number: later operators then see what
// eager sees (that 1 broadcasts against any size). set_output asserted the two equal, and the
// graph checks that assertion at every call before it runs.
void Context::adopt_constant_sizes(NodeId id, const Shape& expected) {
  ir::Node& produced = graph_.node(id);
  if (!produced.is_compute()) return;  // an input's dimensions name the symbols that calls bind
  for (size_t d = 0; d < expected.size(); ++d) {
    if (ir::as_int_const(expected[d]) && !ir::as_int_const(produced.shape[d])) produced.shape[d] = expected[d];
  }
}

NodeId Context::value(const std::string& tensor_name) const {
  const auto it = values_.find(tensor_name);
  LUMINAL_CHECK(it != values_.end(), "tensor '", tensor_name,
                "' is not available (an output luminal does not compute, or an unsupported input kind)");
  return it->second;
}

void Context::bind_value(const std::string& tensor_name, NodeId id) { values_[tensor_name] = id; }

Expr Context::sym_value(const std::string& name) const {
  const auto& sym_ints = pt2_graph().sym_int_values;
  const auto it = sym_ints.find(name);
  LUMINAL_CHECK(it != sym_ints.end(), "unknown symbolic integer '", name, "'");
  if (it->second.is_int()) return ir::int_const(it->second.as_int());
  return sympy_to_expr(it->second.as_expr().expr_str);
}

// ------------------------------------------------------------------------------------------------
// Driver
// ------------------------------------------------------------------------------------------------
namespace {

class GraphBuilder {
 public:
  GraphBuilder(const pt2::Package& package, const TranslateOptions& options)
      : package_(package), options_(options), context_(package.program, graph_) {}

  ir::Graph run() {
    check_supported();
    add_symbols();
    add_inputs();
    for (const pt2::Node& node : pt2_graph().nodes) translate_node(node);
    add_outputs();
    graph_.verify();
    return std::move(graph_);
  }

  // Translates every node, recording the ones luminal does not translate instead of stopping.
  std::vector<Refusal> find_refusals() {
    add_symbols();
    add_inputs();
    std::vector<Refusal> refusals;
    for (const pt2::Node& node : pt2_graph().nodes) {
      if (passthrough_targets().count(node.target)) continue;
      try {
        if (!Registry::instance().find(node.target)) {
          refusals.push_back({node_name(node), node.target, "no luminal translator for this operator"});
        } else {
          translate_node(node);
          continue;
        }
      } catch (const UnsupportedNode& refused) {
        refusals.push_back({refused.node(), refused.target(), refused.reason()});
      }
      bind_stand_ins(node);
    }
    refuse_complex_results(refusals);
    return refusals;
  }

 private:
  const pt2::Graph& pt2_graph() const { return package_.program.graph_module.graph; }

  bool is_complex_tensor(const std::string& name) const { return frontend::is_complex_tensor(pt2_graph(), name); }

  // A graph's results are real tensors: the producer of a complex result is refused (it runs in
  // eager, which hands the partition before it the real values it reads).
  void refuse_complex_results(std::vector<Refusal>& refusals) const {
    for (const pt2::Argument& out : pt2_graph().outputs) {
      if (!out.is_tensor() || !is_complex_tensor(out.as_tensor().name)) continue;
      for (const pt2::Node& node : pt2_graph().nodes) {
        const bool produces = std::any_of(node.outputs.begin(), node.outputs.end(), [&](const pt2::Argument& a) {
          return a.is_tensor() && a.as_tensor().name == out.as_tensor().name;
        });
        const bool listed = std::any_of(refusals.begin(), refusals.end(),
                                        [&](const Refusal& r) { return r.node == node_name(node); });
        if (produces && !listed) refusals.push_back({node_name(node), node.target, kComplexResult});
      }
    }
  }

  static constexpr const char* kComplexResult = "its complex result leaves the graph: luminal returns real tensors";

  // Reports every unsupported operator at once, with the nodes that use it.
  void check_supported() const {
    std::map<std::string, std::vector<std::string>> missing;
    for (const pt2::Node& node : pt2_graph().nodes) {
      if (passthrough_targets().count(node.target) || Registry::instance().find(node.target)) continue;
      missing[node.target].push_back(node_name(node));
    }
    if (missing.empty()) return;
    std::string message = str_cat("luminal cannot compile this graph: ", missing.size(),
                                  " unsupported operator", missing.size() > 1 ? "s" : "", ":");
    for (const auto& [target, nodes] : missing) {
      message += str_cat("\n  ", short_target(target), " (node", nodes.size() > 1 ? "s" : "", " ");
      for (size_t i = 0; i < nodes.size(); ++i) message += (i ? ", " : "") + nodes[i];
      message += ")";
    }
    // Typed by the first such node; the message names them all (find_refusals lists them).
    const auto& [first_target, first_nodes] = *missing.begin();
    throw UnsupportedNode(first_nodes.front(), first_target, "no luminal translator for this operator", message);
  }

  // A refused node's tensor outputs become inputs of the export metadata's dtype and shape, so
  // that the nodes reading them can still be translated (and refused for reasons of their own).
  // An output whose dtype luminal lacks stays unbound: its readers are refused for that.
  void bind_stand_ins(const pt2::Node& node) {
    for (const pt2::Argument& output : node.outputs) {
      if (output.is_tensor()) {
        bind_stand_in(output.as_tensor().name);
      } else if (output.kind() == pt2::Argument::Kind::Tensors) {
        for (const pt2::TensorArgument& tensor : output.as_tensors()) bind_stand_in(tensor.name);
      }
    }
  }

  void bind_stand_in(const std::string& name) {
    if (!pt2_graph().tensor_values.count(name)) return;
    try {
      Context::ValueType type = context_.value_type(name);
      ir::Node node;
      node.kind = ir::NodeKind::Input;
      node.dtype = type.dtype;
      node.shape = std::move(type.shape);
      node.complex_pairs = type.complex_pairs;
      node.name = name;
      node.origin = str_cat(name, " (stand-in for a refused node)");
      context_.bind_value(name, graph_.add(std::move(node)));  // not a call input: never run
    } catch (const Error&) {
      // unsupported dtype or shape expression: left unbound (see above)
    }
  }

  void add_symbols() {
    for (const auto& [name, range] : package_.program.range_constraints) {
      ir::SymbolInfo info{name, std::max<int64_t>(range.min_val.value_or(1), 1), range.max_val};
      graph_.symbols[name] = info;
    }
    // Symbols that appear in shapes without a range constraint are sizes: at least 1.
    for (const auto& [tensor, meta] : pt2_graph().tensor_values) {
      for (const pt2::SymInt& size : meta.sizes) {
        if (size.is_int()) continue;
        std::vector<std::string> names;
        ir::collect_symbols(sympy_to_expr(size.as_expr().expr_str), names);
        for (const std::string& name : names) graph_.symbols.emplace(name, ir::SymbolInfo{name, 1, std::nullopt});
      }
    }
  }

  void add_inputs() {
    const auto& specs = package_.program.graph_module.signature.input_specs;
    for (const pt2::InputSpec& spec : specs) {
      using Kind = pt2::InputSpec::Kind;
      switch (spec.kind) {
        case Kind::UserInput: add_user_input(spec); break;
        case Kind::Parameter:
        case Kind::Buffer: add_weight(spec); break;
        case Kind::TensorConstant: add_constant(spec); break;
        case Kind::ConstantInput: break;  // a non-tensor constant: nothing to bind
        default:
          fail("unsupported graph input kind for '", spec.arg.tag(), "' (", spec.target,
               "): custom objects and tokens are not supported");
      }
    }
  }

  ir::NodeId add_input_node(const std::string& name, ir::InputRole role) {
    Context::ValueType type = context_.value_type(name);
    ir::Node node;
    node.kind = ir::NodeKind::Input;
    node.dtype = type.dtype;
    node.shape = std::move(type.shape);
    node.complex_pairs = type.complex_pairs;
    node.name = name;
    node.role = role;
    node.input_position = static_cast<int>(graph_.inputs.size());
    node.origin = name;
    const ir::NodeId id = graph_.add(std::move(node));
    graph_.inputs.push_back(id);
    context_.bind_value(name, id);
    return id;
  }

  void add_user_input(const pt2::InputSpec& spec) {
    LUMINAL_CHECK(spec.arg.is_tensor(), "graph input of kind ", spec.arg.tag(),
                  " is not supported: luminal takes tensor inputs (symbolic integers are derived from shapes)");
    const size_t position = graph_.inputs.size();
    const ir::InputRole role =
        position < options_.input_roles.size() ? options_.input_roles[position] : ir::InputRole::User;
    add_input_node(spec.arg.as_tensor().name, role);
  }

  // Parameters and persistent buffers live in the weights, non-persistent buffers in the constants.
  void add_weight(const pt2::InputSpec& spec) {
    const std::string& name = spec.arg.as_tensor().name;
    const pt2::TensorPayload* payload = find_payload(package_.weights, spec.target);
    if (!payload) payload = find_payload(package_.constants, spec.target);
    LUMINAL_CHECK(payload != nullptr, "the archive holds no data for ",
                  spec.kind == pt2::InputSpec::Kind::Parameter ? "parameter" : "buffer", " '", spec.target,
                  "' (graph input '", name, "')");
    add_constant_node(name, spec.target, *payload);
  }

  static const pt2::TensorPayload* find_payload(const std::map<std::string, pt2::TensorPayload>& payloads,
                                                const std::string& fqn) {
    const auto it = payloads.find(fqn);
    return it == payloads.end() ? nullptr : &it->second;
  }

  void add_constant(const pt2::InputSpec& spec) {
    const std::string& name = spec.arg.as_tensor().name;
    const auto it = package_.constants.find(spec.target);
    LUMINAL_CHECK(it != package_.constants.end(), "the archive holds no data for tensor constant '", spec.target,
                  "' (graph input '", name, "')");
    add_constant_node(name, spec.target, it->second);
  }

  void add_constant_node(const std::string& name, const std::string& fqn, const pt2::TensorPayload& payload) {
    LUMINAL_CHECK(payload.meta.tensor_meta.has_value(), "constant '", fqn, "' has no tensor metadata");
    const pt2::TensorMeta& meta = *payload.meta.tensor_meta;
    auto data = std::make_shared<ir::ConstantData>();
    const std::optional<DType> pair = complex_pair_dtype(meta.dtype);
    const auto dtype = pair ? pair : dtype_from_serde_code(meta.dtype);
    LUMINAL_CHECK(dtype.has_value(), "constant '", fqn, "' has unsupported dtype ", serde_code_name(meta.dtype));
    data->dtype = *dtype;
    for (const pt2::SymInt& s : meta.sizes) data->sizes.push_back(s.as_int());
    for (const pt2::SymInt& s : meta.strides) data->strides.push_back(s.as_int());
    data->storage_offset = meta.storage_offset.as_int();
    data->bytes = payload.bytes;
    const std::string who = str_cat("constant '", fqn, "'");
    if (pair) complex_constant_as_pairs(*data, who);
    // The executors read the payload through this view: it must lie inside the payload's bytes.
    const int64_t reach = strided_storage_elements(data->sizes, data->strides, data->storage_offset, who);
    const size_t needed = byte_count(reach, data->dtype, who);
    LUMINAL_CHECK(needed <= data->bytes->size(), who, ": its view (", dtype_name(data->dtype), ", sizes ",
                  int_list(data->sizes), ", strides ", int_list(data->strides),
                  ", storage_offset ", data->storage_offset, ") reaches ", needed, " bytes of a ", data->bytes->size(),
                  "-byte payload");
    ir::Node node;
    node.kind = ir::NodeKind::Constant;
    node.dtype = data->dtype;
    for (int64_t size : data->sizes) node.shape.push_back(ir::int_const(size));
    node.constant = std::move(data);
    node.name = fqn;
    node.origin = name;
    context_.bind_value(name, graph_.add(std::move(node)));
  }

  void translate_node(const pt2::Node& node) {
    if (passthrough_targets().count(node.target)) return;
    const bool complex = touches_complex(pt2_graph(), node);
    const TranslatorFn* fn = complex ? complex_translator(node.target) : Registry::instance().find(node.target);
    if (!fn) {
      throw UnsupportedNode(node_name(node), node.target, kComplexOnly,
                            str_cat("cannot translate node ", node_name(node), " (", short_target(node.target),
                                    "): ", kComplexOnly));
    }
    context_.builder().set_op(node_name(node), short_target(node.target));
    const std::string origin = context_.builder().origin();
    try {
      (*fn)(context_, node);
    } catch (const std::exception& error) {  // luminal::Error, or a translator's bug (std::out_of_range, ...)
      std::string inputs;
      for (const pt2::NamedArgument& input : node.inputs) {
        if (!input.arg.is_tensor()) continue;
        const std::string& name = input.arg.as_tensor().name;
        const auto& values = pt2_graph().tensor_values;
        if (!values.count(name)) continue;
        std::string signature;
        try {
          signature = str_cat(dtype_short_name(context_.meta_dtype(name)), ir::shape_to_string(context_.meta_shape(name)));
        } catch (const Error&) {
          signature = "?";
        }
        inputs += str_cat(inputs.empty() ? "" : ", ", input.name, "=", signature);
      }
      const std::string location = source_location(node);
      throw UnsupportedNode(node_name(node), node.target, error.what(),
                            str_cat("cannot translate node ", origin, inputs.empty() ? "" : " with inputs ", inputs,
                                    location.empty() ? "" : "\n  at " + location, "\n  ", error.what()));
    }
  }

  static constexpr const char* kComplexOnly =
      "it reads or produces a complex tensor, which luminal computes only in polar, view_as_complex, "
      "view_as_real, mul, view, reshape, unsqueeze, slice, select and clone";

  void add_outputs() {
    const auto& specs = package_.program.graph_module.signature.output_specs;
    const auto& outputs = pt2_graph().outputs;
    LUMINAL_CHECK(specs.size() == outputs.size(), "graph has ", outputs.size(), " outputs but ", specs.size(),
                  " output specs");
    for (size_t i = 0; i < specs.size(); ++i) {
      const pt2::OutputSpec& spec = specs[i];
      ir::GraphOutput out;
      using Kind = pt2::OutputSpec::Kind;
      if (spec.kind == Kind::UserInputMutation) {
        out.mutated_input = input_position(spec.target);
      } else if (spec.kind != Kind::UserOutput) {
        fail("unsupported graph output kind for output ", i, " (", spec.target,
             "): only user outputs and user-input mutations are supported");
      }
      bind_output_value(outputs[i], out);
      graph_.outputs.push_back(out);
    }
    for (const NodeId check : context_.checks()) {
      ir::GraphOutput out;
      out.node = check;
      out.check = true;
      out.name = graph_.node(check).origin;
      graph_.outputs.push_back(out);
    }
  }

  int input_position(const std::string& name) const {
    for (ir::NodeId id : graph_.inputs) {
      if (graph_.node(id).name == name) return graph_.node(id).input_position;
    }
    fail("mutated input '", name, "' is not a graph input");
  }

  void bind_output_value(const pt2::Argument& arg, ir::GraphOutput& out) {
    switch (arg.kind()) {
      case pt2::Argument::Kind::Tensor: {
        out.kind = ir::GraphOutput::Kind::Tensor;
        out.name = arg.as_tensor().name;
        LUMINAL_CHECK(!is_complex_tensor(out.name), "graph output '", out.name, "': ", kComplexResult);
        out.node = context_.value(out.name);
        const auto meta = pt2_graph().tensor_values.find(out.name);
        if (meta != pt2_graph().tensor_values.end()) {
          const pt2::Device& device = meta->second.device;
          out.device = device.index ? str_cat(device.type, ":", *device.index) : device.type;
        }
        return;
      }
      case pt2::Argument::Kind::SymInt: {
        const pt2::SymIntArgument& s = arg.as_sym_int();
        out.kind = ir::GraphOutput::Kind::Int;
        out.name = s.is_name() ? std::get<std::string>(s.value) : "int";
        out.value = s.is_name() ? context_.sym_value(std::get<std::string>(s.value))
                                : ir::int_const(std::get<int64_t>(s.value));
        return;
      }
      case pt2::Argument::Kind::Int:
        out.kind = ir::GraphOutput::Kind::Int;
        out.name = "int";
        out.value = ir::int_const(arg.as_int());
        return;
      default: fail("unsupported graph output of kind ", arg.tag());
    }
  }

  const pt2::Package& package_;
  const TranslateOptions& options_;
  ir::Graph graph_;
  Context context_;
};

}  // namespace

ir::Graph translate(const pt2::Package& package, const TranslateOptions& options) {
  return GraphBuilder(package, options).run();
}

std::vector<Refusal> find_refusals(const pt2::Package& package, const TranslateOptions& options) {
  return GraphBuilder(package, options).find_refusals();
}

}  // namespace luminal::frontend
