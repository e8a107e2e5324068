#include "pt2/parse.h"

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error.h"

namespace luminal::pt2 {
namespace {

using json = nlohmann::json;

// Untrusted input: bound the recursion through nested graphs / argument maps so that a malicious
// document cannot overflow the stack.
constexpr int kMaxPathDepth = 400;

// Location of a JSON value as a chain of links living on the parsers' stack frames: extending it
// costs nothing and the text is rendered only for an error. A Path is passed down to callees and
// never stored beyond the call that received it, so its parent always outlives it.
class Path {
 public:
  // The root names a document ("models/model.json") or, for parse_tensor_meta, is itself a path
  // prefix that the steps continue ("config[\"w\"].tensor_meta").
  enum class Root { Document, Prefix };
  explicit Path(std::string_view root, Root kind = Root::Document)
      : text_(root), root_is_prefix_(kind == Root::Prefix) {}

  Path field(std::string_view key) const { return Path(this, Step::Field, key, 0); }
  Path index(size_t i) const { return Path(this, Step::Index, {}, i); }
  Path entry(std::string_view key) const { return Path(this, Step::Entry, key, 0); }
  int depth() const { return depth_; }

  // "models/model.json: graph_module.graph.nodes[3].inputs[1].arg"
  std::string str() const {
    std::vector<const Path*> chain;
    for (const Path* p = this; p != nullptr; p = p->parent_) chain.push_back(p);
    std::string steps;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) (*it)->append_step(steps);
    const Path& root = *chain.back();
    if (steps.empty()) return std::string(root.text_);
    if (root.text_.empty()) return steps;
    if (!root.root_is_prefix_) return str_cat(root.text_, ": ", steps);
    return str_cat(root.text_, steps.front() == '[' ? "" : ".", steps);
  }

 private:
  enum class Step { Root, Field, Index, Entry };

  Path(const Path* parent, Step step, std::string_view text, size_t index)
      : parent_(parent), step_(step), text_(text), index_(index), depth_(parent->depth_ + 1) {}

  void append_step(std::string& out) const {
    switch (step_) {
      case Step::Root: return;
      case Step::Field:
        if (!out.empty()) out += '.';
        out += text_;
        return;
      case Step::Index: out += str_cat("[", index_, "]"); return;
      case Step::Entry: out += str_cat("[\"", text_, "\"]"); return;
    }
  }

  const Path* parent_ = nullptr;
  Step step_ = Step::Root;
  std::string_view text_;
  size_t index_ = 0;
  int depth_ = 0;
  bool root_is_prefix_ = false;
};

template <typename... Parts>
[[noreturn]] void fail_at(const Path& path, const Parts&... parts) {
  fail(path.str(), ": ", parts...);
}

std::string describe(const json& j) {
  constexpr size_t kExcerpt = 40;
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return str_cat("object with ", j.size(), " key(s)");
    case json::value_t::array: return "array";
    case json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case json::value_t::number_integer: return str_cat("integer ", j.get<int64_t>());
    case json::value_t::number_unsigned: return str_cat("integer ", j.get<uint64_t>());
    case json::value_t::number_float: return str_cat("number ", j.get<double>());
    case json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      return str_cat("string \"", s.substr(0, kExcerpt), s.size() > kExcerpt ? "...\"" : "\"");
    }
    default: return "an unsupported JSON value";
  }
}

[[noreturn]] void fail_type(const json& j, const Path& path, std::string_view expected) {
  fail_at(path, "expected ", expected, ", got ", describe(j));
}

// Serializes a value of an unknown union tag for the error message of whoever asks for it.
// dump() recurses, so very deep values are summarized instead (checked without recursion).
std::string bounded_dump(const json& j) {
  constexpr size_t kMaxDumpDepth = 200;
  std::vector<std::pair<const json*, size_t>> stack{{&j, 0}};
  while (!stack.empty()) {
    const auto [value, depth] = stack.back();
    stack.pop_back();
    if (depth > kMaxDumpDepth) return "<deeply nested value>";
    if (value->is_structured()) {
      for (const json& child : *value) stack.emplace_back(&child, depth + 1);
    }
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// ---------------------------------------------------------------------------------------------
// Primitive readers
// ---------------------------------------------------------------------------------------------

const json& required(const json& object, std::string_view key, const Path& path) {
  if (!object.is_object()) fail_type(object, path, "an object");
  const auto it = object.find(key);
  if (it == object.end()) fail_at(path, "missing required key \"", key, "\"");
  return *it;
}

// nullptr when the key is absent or null (how the writer spells "None").
const json* optional(const json& object, std::string_view key, const Path& path) {
  if (!object.is_object()) fail_type(object, path, "an object");
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

int64_t parse_int(const json& j, const Path& path) {
  if (j.is_number_unsigned()) {
    const uint64_t value = j.get<uint64_t>();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail_at(path, "integer ", value, " is out of the int64 range");
    }
    return static_cast<int64_t>(value);
  }
  if (j.is_number_integer()) return j.get<int64_t>();
  fail_type(j, path, "an integer");
}

// Enum codes (ScalarType, Layout, MemoryFormat, ArgumentKind) and version numbers.
int parse_small_int(const json& j, const Path& path) {
  const int64_t value = parse_int(j, path);
  if (value < INT_MIN || value > INT_MAX) fail_at(path, "integer ", value, " is out of range");
  return static_cast<int>(value);
}

// Python's json writes non-finite floats as these strings (allow_nan=False).
double parse_float(const json& j, const Path& path) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "Infinity" || s == "+Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  fail_type(j, path, "a number (or \"Infinity\", \"-Infinity\", \"NaN\")");
}

bool parse_bool(const json& j, const Path& path) {
  if (!j.is_boolean()) fail_type(j, path, "a boolean");
  return j.get<bool>();
}

std::string parse_string(const json& j, const Path& path) {
  if (!j.is_string()) fail_type(j, path, "a string");
  return j.get<std::string>();
}

template <typename ParseElement>
auto parse_list(const json& j, const Path& path, ParseElement parse_element) {
  using T = std::decay_t<decltype(parse_element(j, path))>;
  if (!j.is_array()) fail_type(j, path, "an array");
  std::vector<T> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) out.push_back(parse_element(j[i], path.index(i)));
  return out;
}

template <typename ParseValue>
auto parse_map(const json& j, const Path& path, ParseValue parse_value) {
  using T = std::decay_t<decltype(parse_value(j, path))>;
  if (!j.is_object()) fail_type(j, path, "an object");
  std::map<std::string, T> out;
  for (const auto& [key, value] : j.get_ref<const json::object_t&>()) {
    out.emplace(key, parse_value(value, path.entry(key)));
  }
  return out;
}

// Parses `key` with `parse_value` when present and non-null; otherwise returns `fallback`.
template <typename T, typename ParseValue>
T parse_or(const json& object, std::string_view key, const Path& path, ParseValue parse_value,
           T fallback) {
  const json* value = optional(object, key, path);
  return value != nullptr ? T(parse_value(*value, path.field(key))) : fallback;
}

// A schema union is an object with exactly one key, the tag.
struct UnionValue {
  const std::string& tag;
  const json& value;
};

UnionValue parse_union(const json& j, const Path& path) {
  if (!j.is_object() || j.size() != 1) fail_type(j, path, "an object with one key");
  const auto& only = *j.get_ref<const json::object_t&>().begin();
  return UnionValue{only.first, only.second};
}

[[noreturn]] void fail_tag(const UnionValue& u, const Path& path, std::string_view expected) {
  fail_at(path, "unknown union tag \"", u.tag, "\", expected one of ", expected);
}

// ---------------------------------------------------------------------------------------------
// Symbolic values and tensor metadata
// ---------------------------------------------------------------------------------------------

SymExprHint parse_sym_expr_hint(const json& j, const Path& path) {
  const UnionValue u = parse_union(j, path);
  const Path at = path.field(u.tag);
  SymExprHint hint;
  if (u.tag == "as_int") {
    hint.as_int = parse_int(u.value, at);
  } else if (u.tag == "as_float") {
    hint.as_float = parse_float(u.value, at);
  } else if (u.tag == "as_bool") {
    hint.as_bool = parse_bool(u.value, at);
  } else {
    fail_tag(u, path, "as_int, as_float, as_bool");
  }
  return hint;
}

SymExpr parse_sym_expr(const json& j, const Path& path) {
  SymExpr expr;
  expr.expr_str = parse_string(required(j, "expr_str", path), path.field("expr_str"));
  if (const json* hint = optional(j, "hint", path)) {
    expr.hint = parse_sym_expr_hint(*hint, path.field("hint"));
  }
  return expr;
}

SymInt parse_sym_int(const json& j, const Path& path) {
  const UnionValue u = parse_union(j, path);
  if (u.tag == "as_int") return SymInt{parse_int(u.value, path.field(u.tag))};
  if (u.tag == "as_expr") return SymInt{parse_sym_expr(u.value, path.field(u.tag))};
  fail_tag(u, path, "as_int, as_expr");
}

SymFloat parse_sym_float(const json& j, const Path& path) {
  const UnionValue u = parse_union(j, path);
  if (u.tag == "as_float") return SymFloat{parse_float(u.value, path.field(u.tag))};
  if (u.tag == "as_expr") return SymFloat{parse_sym_expr(u.value, path.field(u.tag))};
  fail_tag(u, path, "as_float, as_expr");
}

SymBool parse_sym_bool(const json& j, const Path& path) {
  const UnionValue u = parse_union(j, path);
  if (u.tag == "as_bool") return SymBool{parse_bool(u.value, path.field(u.tag))};
  if (u.tag == "as_expr") return SymBool{parse_sym_expr(u.value, path.field(u.tag))};
  fail_tag(u, path, "as_bool, as_expr");
}

Device parse_device(const json& j, const Path& path) {
  Device device;
  device.type = parse_string(required(j, "type", path), path.field("type"));
  if (const json* index = optional(j, "index", path)) {
    device.index = parse_int(*index, path.field("index"));
  }
  return device;
}

TensorMeta parse_tensor_meta_at(const json& j, const Path& path) {
  TensorMeta meta;
  meta.dtype = parse_small_int(required(j, "dtype", path), path.field("dtype"));
  meta.sizes = parse_list(required(j, "sizes", path), path.field("sizes"), parse_sym_int);
  meta.requires_grad = parse_bool(required(j, "requires_grad", path), path.field("requires_grad"));
  meta.device = parse_device(required(j, "device", path), path.field("device"));
  meta.strides = parse_list(required(j, "strides", path), path.field("strides"), parse_sym_int);
  meta.storage_offset =
      parse_sym_int(required(j, "storage_offset", path), path.field("storage_offset"));
  meta.layout = parse_small_int(required(j, "layout", path), path.field("layout"));
  return meta;
}

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

Graph parse_graph(const json& j, const Path& path);
Argument parse_argument(const json& j, const Path& path);

TensorArgument parse_tensor_argument(const json& j, const Path& path) {
  return TensorArgument{parse_string(required(j, "name", path), path.field("name"))};
}

TokenArgument parse_token_argument(const json& j, const Path& path) {
  return TokenArgument{parse_string(required(j, "name", path), path.field("name"))};
}

CustomObjArgument parse_custom_obj_argument(const json& j, const Path& path) {
  CustomObjArgument obj;
  obj.name = parse_string(required(j, "name", path), path.field("name"));
  obj.class_fqn = parse_string(required(j, "class_fqn", path), path.field("class_fqn"));
  return obj;
}

SymIntArgument parse_sym_int_argument(const json& j, const Path& path) {
  const UnionValue u = parse_union(j, path);
  if (u.tag == "as_name") return SymIntArgument{parse_string(u.value, path.field(u.tag))};
  if (u.tag == "as_int") return SymIntArgument{parse_int(u.value, path.field(u.tag))};
  fail_tag(u, path, "as_name, as_int");
}

SymFloatArgument parse_sym_float_argument(const json& j, const Path& path) {
  const UnionValue u = parse_union(j, path);
  if (u.tag == "as_name") return SymFloatArgument{parse_string(u.value, path.field(u.tag))};
  if (u.tag == "as_float") return SymFloatArgument{parse_float(u.value, path.field(u.tag))};
  fail_tag(u, path, "as_name, as_float");
}

SymBoolArgument parse_sym_bool_argument(const json& j, const Path& path) {
  const UnionValue u = parse_union(j, path);
  if (u.tag == "as_name") return SymBoolArgument{parse_string(u.value, path.field(u.tag))};
  if (u.tag == "as_bool") return SymBoolArgument{parse_bool(u.value, path.field(u.tag))};
  fail_tag(u, path, "as_name, as_bool");
}

OptionalTensorArgument parse_optional_tensor_argument(const json& j, const Path& path) {
  const UnionValue u = parse_union(j, path);
  if (u.tag == "as_none") return OptionalTensorArgument{};
  if (u.tag == "as_tensor") {
    return OptionalTensorArgument{parse_tensor_argument(u.value, path.field(u.tag))};
  }
  fail_tag(u, path, "as_tensor, as_none");
}

GraphArgument parse_graph_argument(const json& j, const Path& path) {
  GraphArgument arg;
  arg.name = parse_string(required(j, "name", path), path.field("name"));
  arg.graph =
      std::make_shared<const Graph>(parse_graph(required(j, "graph", path), path.field("graph")));
  return arg;
}

ComplexValue parse_complex(const json& j, const Path& path) {
  ComplexValue value;
  value.real = parse_float(required(j, "real", path), path.field("real"));
  value.imag = parse_float(required(j, "imag", path), path.field("imag"));
  return value;
}

std::vector<TensorArgument> parse_tensor_list(const json& j, const Path& path) {
  return parse_list(j, path, parse_tensor_argument);
}
std::vector<int64_t> parse_int_list(const json& j, const Path& path) {
  return parse_list(j, path, parse_int);
}
std::vector<double> parse_float_list(const json& j, const Path& path) {
  return parse_list(j, path, parse_float);
}

Argument::Payload parse_argument_payload(Argument::Kind kind, const json& v, const Path& at) {
  using Kind = Argument::Kind;
  switch (kind) {
    case Kind::None: return std::monostate{};  // the value (true) carries no information
    case Kind::Tensor: return parse_tensor_argument(v, at);
    case Kind::Tensors: return parse_tensor_list(v, at);
    case Kind::Int:
    case Kind::ScalarType:
    case Kind::MemoryFormat:
    case Kind::Layout: return parse_int(v, at);
    case Kind::Ints: return parse_int_list(v, at);
    case Kind::Float: return parse_float(v, at);
    case Kind::Floats: return parse_float_list(v, at);
    case Kind::String:
    case Kind::Operator: return parse_string(v, at);
    case Kind::Strings: return parse_list(v, at, parse_string);
    case Kind::SymInt: return parse_sym_int_argument(v, at);
    case Kind::SymInts: return parse_list(v, at, parse_sym_int_argument);
    case Kind::Device: return parse_device(v, at);
    case Kind::Bool: return parse_bool(v, at);
    case Kind::Bools: return parse_list(v, at, parse_bool);
    case Kind::SymBool: return parse_sym_bool_argument(v, at);
    case Kind::SymBools: return parse_list(v, at, parse_sym_bool_argument);
    case Kind::OptionalTensors: return parse_list(v, at, parse_optional_tensor_argument);
    case Kind::Graph: return parse_graph_argument(v, at);
    case Kind::CustomObj: return parse_custom_obj_argument(v, at);
    case Kind::SymFloat: return parse_sym_float_argument(v, at);
    case Kind::SymFloats: return parse_list(v, at, parse_sym_float_argument);
    case Kind::OptionalTensor: return parse_optional_tensor_argument(v, at);
    case Kind::Complex: return parse_complex(v, at);
    case Kind::NestedTensors: return parse_list(v, at, parse_tensor_list);
    case Kind::IntLists: return parse_list(v, at, parse_int_list);
    case Kind::FloatLists: return parse_list(v, at, parse_float_list);
    case Kind::StringToArgument:
      return std::make_shared<const Argument::StringToArgumentMap>(
          parse_map(v, at, parse_argument));
    case Kind::Token:
    case Kind::Unknown: break;  // never produced by kind_from_tag
  }
  fail_at(at, "internal error: no parser for argument kind ", Argument::kind_tag(kind));
}

Argument parse_argument(const json& j, const Path& path) {
  if (path.depth() > kMaxPathDepth) fail_at(path, "arguments nested too deeply");
  const UnionValue u = parse_union(j, path);
  const std::optional<Argument::Kind> kind = Argument::kind_from_tag(u.tag);
  if (!kind) return Argument::unknown(u.tag, bounded_dump(u.value));
  return Argument(*kind, parse_argument_payload(*kind, u.value, path.field(u.tag)));
}

NamedArgument parse_named_argument(const json& j, const Path& path) {
  NamedArgument named;
  named.name = parse_string(required(j, "name", path), path.field("name"));
  named.arg = parse_argument(required(j, "arg", path), path.field("arg"));
  named.kind = parse_or(j, "kind", path, parse_small_int, 0);
  return named;
}

// ---------------------------------------------------------------------------------------------
// Graph
// ---------------------------------------------------------------------------------------------

// Metadata values are strings; anything else is kept as its JSON text rather than rejected,
// since no consumer depends on it.
std::string parse_metadata_value(const json& j, const Path&) {
  return j.is_string() ? j.get<std::string>() : bounded_dump(j);
}

Node parse_node(const json& j, const Path& path) {
  Node node;
  node.target = parse_string(required(j, "target", path), path.field("target"));
  node.inputs = parse_list(required(j, "inputs", path), path.field("inputs"), parse_named_argument);
  node.outputs = parse_list(required(j, "outputs", path), path.field("outputs"), parse_argument);
  if (const json* metadata = optional(j, "metadata", path)) {
    node.metadata = parse_map(*metadata, path.field("metadata"), parse_metadata_value);
  }
  if (const json* name = optional(j, "name", path)) {
    node.name = parse_string(*name, path.field("name"));
  }
  if (const json* flag = optional(j, "is_hop_single_tensor_return", path)) {
    node.is_hop_single_tensor_return = parse_bool(*flag, path.field("is_hop_single_tensor_return"));
  }
  return node;
}

template <typename ParseValue>
auto parse_optional_map(const json& object, std::string_view key, const Path& path,
                        ParseValue parse_value) {
  using Map = decltype(parse_map(object, path, parse_value));
  const json* value = optional(object, key, path);
  return value != nullptr ? parse_map(*value, path.field(key), parse_value) : Map{};
}

Graph parse_graph(const json& j, const Path& path) {
  if (path.depth() > kMaxPathDepth) fail_at(path, "graphs nested too deeply");
  Graph graph;
  graph.inputs = parse_list(required(j, "inputs", path), path.field("inputs"), parse_argument);
  graph.outputs = parse_list(required(j, "outputs", path), path.field("outputs"), parse_argument);
  graph.nodes = parse_list(required(j, "nodes", path), path.field("nodes"), parse_node);
  graph.tensor_values = parse_optional_map(j, "tensor_values", path, parse_tensor_meta_at);
  graph.sym_int_values = parse_optional_map(j, "sym_int_values", path, parse_sym_int);
  graph.sym_bool_values = parse_optional_map(j, "sym_bool_values", path, parse_sym_bool);
  graph.sym_float_values = parse_optional_map(j, "sym_float_values", path, parse_sym_float);
  graph.custom_obj_values =
      parse_optional_map(j, "custom_obj_values", path, parse_custom_obj_argument);
  graph.is_single_tensor_return = parse_or(j, "is_single_tensor_return", path, parse_bool, false);
  return graph;
}

// ---------------------------------------------------------------------------------------------
// Signature
// ---------------------------------------------------------------------------------------------

std::string parse_string_field(const json& j, std::string_view key, const Path& path) {
  return parse_string(required(j, key, path), path.field(key));
}

Argument tensor_arg_field(const json& j, const Path& path) {
  return Argument(Argument::Kind::Tensor,
                  parse_tensor_argument(required(j, "arg", path), path.field("arg")));
}

Argument token_arg_field(const json& j, const Path& path) {
  return Argument(Argument::Kind::Token,
                  parse_token_argument(required(j, "arg", path), path.field("arg")));
}

ConstantValue parse_constant_value(const json& j, const Path& path) {
  const UnionValue u = parse_union(j, path);
  const Path at = path.field(u.tag);
  if (u.tag == "as_none") return ConstantValue{std::monostate{}};
  if (u.tag == "as_int") return ConstantValue{parse_int(u.value, at)};
  if (u.tag == "as_float") return ConstantValue{parse_float(u.value, at)};
  if (u.tag == "as_string") return ConstantValue{parse_string(u.value, at)};
  if (u.tag == "as_bool") return ConstantValue{parse_bool(u.value, at)};
  fail_tag(u, path, "as_none, as_int, as_float, as_string, as_bool");
}

Argument constant_as_argument(const ConstantValue& constant) {
  using Kind = Argument::Kind;
  return std::visit(
      [](const auto& v) -> Argument {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return Argument::none();
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return Argument(Kind::Int, v);
        } else if constexpr (std::is_same_v<T, double>) {
          return Argument(Kind::Float, v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return Argument(Kind::String, v);
        } else {
          static_assert(std::is_same_v<T, bool>);
          return Argument(Kind::Bool, v);
        }
      },
      constant.value);
}

InputSpec parse_input_spec(const json& j, const Path& path) {
  using Kind = InputSpec::Kind;
  const UnionValue u = parse_union(j, path);
  const json& v = u.value;
  const Path at = path.field(u.tag);
  InputSpec spec;
  if (u.tag == "user_input") {
    spec.kind = Kind::UserInput;
    spec.arg = parse_argument(required(v, "arg", at), at.field("arg"));
  } else if (u.tag == "parameter") {
    spec.kind = Kind::Parameter;
    spec.arg = tensor_arg_field(v, at);
    spec.target = parse_string_field(v, "parameter_name", at);
  } else if (u.tag == "buffer") {
    spec.kind = Kind::Buffer;
    spec.arg = tensor_arg_field(v, at);
    spec.target = parse_string_field(v, "buffer_name", at);
    spec.persistent = parse_or(v, "persistent", at, parse_bool, true);
  } else if (u.tag == "tensor_constant") {
    spec.kind = Kind::TensorConstant;
    spec.arg = tensor_arg_field(v, at);
    spec.target = parse_string_field(v, "tensor_constant_name", at);
  } else if (u.tag == "custom_obj") {
    spec.kind = Kind::CustomObj;
    spec.arg = Argument(Argument::Kind::CustomObj,
                        parse_custom_obj_argument(required(v, "arg", at), at.field("arg")));
    spec.target = parse_string_field(v, "custom_obj_name", at);
  } else if (u.tag == "token") {
    spec.kind = Kind::Token;
    spec.arg = token_arg_field(v, at);
  } else if (u.tag == "constant_input") {
    spec.kind = Kind::ConstantInput;
    spec.target = parse_string_field(v, "name", at);
    spec.constant_value = parse_constant_value(required(v, "value", at), at.field("value"));
    spec.arg = constant_as_argument(*spec.constant_value);
  } else {
    spec.kind = Kind::Unknown;
    spec.unknown_tag = u.tag;
    spec.arg = Argument::unknown(u.tag, bounded_dump(v));
  }
  return spec;
}

OutputSpec parse_output_spec(const json& j, const Path& path) {
  using Kind = OutputSpec::Kind;
  const UnionValue u = parse_union(j, path);
  const json& v = u.value;
  const Path at = path.field(u.tag);
  OutputSpec spec;
  // Every variant but user_output, token and unknown: a TensorArgument plus an optional name.
  const auto tensor_spec = [&](Kind kind, const char* target_key) {
    spec.kind = kind;
    spec.arg = tensor_arg_field(v, at);
    if (target_key != nullptr) spec.target = parse_string_field(v, target_key, at);
  };
  if (u.tag == "user_output") {
    spec.kind = Kind::UserOutput;
    spec.arg = parse_argument(required(v, "arg", at), at.field("arg"));
  } else if (u.tag == "loss_output") {
    tensor_spec(Kind::LossOutput, nullptr);
  } else if (u.tag == "buffer_mutation") {
    tensor_spec(Kind::BufferMutation, "buffer_name");
  } else if (u.tag == "gradient_to_parameter") {
    tensor_spec(Kind::GradientToParameter, "parameter_name");
  } else if (u.tag == "gradient_to_user_input") {
    tensor_spec(Kind::GradientToUserInput, "user_input_name");
  } else if (u.tag == "user_input_mutation") {
    tensor_spec(Kind::UserInputMutation, "user_input_name");
  } else if (u.tag == "parameter_mutation") {
    tensor_spec(Kind::ParameterMutation, "parameter_name");
  } else if (u.tag == "token") {
    spec.kind = Kind::Token;
    spec.arg = token_arg_field(v, at);
  } else {
    spec.kind = Kind::Unknown;
    spec.unknown_tag = u.tag;
    spec.arg = Argument::unknown(u.tag, bounded_dump(v));
  }
  return spec;
}

GraphSignature parse_signature(const json& j, const Path& path) {
  GraphSignature signature;
  signature.input_specs =
      parse_list(required(j, "input_specs", path), path.field("input_specs"), parse_input_spec);
  signature.output_specs =
      parse_list(required(j, "output_specs", path), path.field("output_specs"), parse_output_spec);
  return signature;
}

// ---------------------------------------------------------------------------------------------
// Program
// ---------------------------------------------------------------------------------------------

// Magnitudes above this stand for +-int_oo (older writers may print it as a huge number).
constexpr int64_t kUnboundedMagnitude = int64_t{1} << 62;

std::optional<int64_t> parse_range_bound(const json* j, const Path& path) {
  if (j == nullptr) return std::nullopt;
  if (j->is_number_unsigned()) {
    const uint64_t value = j->get<uint64_t>();
    if (value > static_cast<uint64_t>(kUnboundedMagnitude)) return std::nullopt;
    return static_cast<int64_t>(value);
  }
  if (j->is_number_integer()) {
    const int64_t value = j->get<int64_t>();
    if (value > kUnboundedMagnitude || value < -kUnboundedMagnitude) return std::nullopt;
    return value;
  }
  if (j->is_number_float() || j->is_string()) {
    const double value = parse_float(*j, path);
    if (std::isnan(value)) fail_at(path, "range bound is NaN");
    if (std::fabs(value) > static_cast<double>(kUnboundedMagnitude)) return std::nullopt;
    if (value != std::floor(value)) fail_at(path, "expected an integer range bound, got ", value);
    return static_cast<int64_t>(value);
  }
  fail_type(*j, path, "an integer or null");
}

RangeConstraint parse_range_constraint(const json& j, const Path& path) {
  RangeConstraint range;
  range.min_val = parse_range_bound(optional(j, "min_val", path), path.field("min_val"));
  range.max_val = parse_range_bound(optional(j, "max_val", path), path.field("max_val"));
  return range;
}

SchemaVersion parse_schema_version(const json& j, const Path& path) {
  SchemaVersion version;
  version.major = parse_small_int(required(j, "major", path), path.field("major"));
  version.minor = parse_small_int(required(j, "minor", path), path.field("minor"));
  return version;
}

ModuleCallSignature parse_module_call_signature(const json& j, const Path& path) {
  ModuleCallSignature signature;
  signature.inputs = parse_list(required(j, "inputs", path), path.field("inputs"), parse_argument);
  signature.outputs =
      parse_list(required(j, "outputs", path), path.field("outputs"), parse_argument);
  signature.in_spec = parse_string_field(j, "in_spec", path);
  signature.out_spec = parse_string_field(j, "out_spec", path);
  if (const json* names = optional(j, "forward_arg_names", path)) {
    signature.forward_arg_names = parse_list(*names, path.field("forward_arg_names"), parse_string);
  }
  return signature;
}

ModuleCallEntry parse_module_call_entry(const json& j, const Path& path) {
  ModuleCallEntry entry;
  entry.fqn = parse_string_field(j, "fqn", path);
  if (const json* signature = optional(j, "signature", path)) {
    entry.signature = parse_module_call_signature(*signature, path.field("signature"));
  }
  return entry;
}

GraphModule parse_graph_module(const json& j, const Path& path) {
  GraphModule module;
  module.graph = parse_graph(required(j, "graph", path), path.field("graph"));
  module.signature = parse_signature(required(j, "signature", path), path.field("signature"));
  if (const json* calls = optional(j, "module_call_graph", path)) {
    module.module_call_graph =
        parse_list(*calls, path.field("module_call_graph"), parse_module_call_entry);
  }
  module.metadata = parse_optional_map(j, "metadata", path, parse_metadata_value);
  return module;
}

bool is_supported_schema_major(int major) { return major == 8 || major == 9; }

// Checked before anything else: a document of another major version may have any shape, and the
// version is the useful part of the error.
SchemaVersion check_schema_version(const json& j, const Path& path) {
  const SchemaVersion version =
      parse_schema_version(required(j, "schema_version", path), path.field("schema_version"));
  if (!is_supported_schema_major(version.major)) {
    const json* torch_version = optional(j, "torch_version", path);
    fail_at(path, "unsupported exported-program schema version ", version.major, ".", version.minor,
            " (written by torch ",
            torch_version != nullptr && torch_version->is_string()
                ? torch_version->get<std::string>()
                : std::string("of unknown version"),
            "); this reader supports schema 8.x, written by torch 2.6 to 2.15");
  }
  return version;
}

ExportedProgram parse_program(const json& j, const Path& path) {
  ExportedProgram program;
  program.schema_version = check_schema_version(j, path);
  program.graph_module =
      parse_graph_module(required(j, "graph_module", path), path.field("graph_module"));
  program.opset_version = parse_optional_map(j, "opset_version", path, parse_int);
  program.range_constraints =
      parse_optional_map(j, "range_constraints", path, parse_range_constraint);
  if (const json* verifiers = optional(j, "verifiers", path)) {
    program.verifiers = parse_list(*verifiers, path.field("verifiers"), parse_string);
  }
  program.torch_version = parse_or(j, "torch_version", path, parse_string, program.torch_version);
  if (const json* guards = optional(j, "guards_code", path)) {
    program.guards_code = parse_list(*guards, path.field("guards_code"), parse_string);
  }
  return program;
}

PayloadMeta parse_payload_meta(const json& j, const Path& path) {
  PayloadMeta meta;
  meta.path_name = parse_string_field(j, "path_name", path);
  meta.is_param = parse_or(j, "is_param", path, parse_bool, false);
  meta.use_pickle = parse_or(j, "use_pickle", path, parse_bool, false);
  if (const json* tensor_meta = optional(j, "tensor_meta", path)) {
    meta.tensor_meta = parse_tensor_meta_at(*tensor_meta, path.field("tensor_meta"));
  }
  return meta;
}

// ---------------------------------------------------------------------------------------------
// Entry points: no nlohmann exception may escape.
// ---------------------------------------------------------------------------------------------

// nlohmann's DOM builder, counting values as they arrive (see kDefaultMaxJsonValues), so that a
// hostile document stops at the limit instead of after its whole DOM is built. (nlohmann's
// parser_callback_t would do the counting too, but its DOM builder rescans the parent container at
// every object end: quadratic time on an array of objects.)
class CountingDomBuilder {
 public:
  struct TooManyValues {};
  using Dom = nlohmann::detail::json_sax_dom_parser<json>;

  CountingDomBuilder(json& result, size_t max_values) : dom_(result, /*allow_exceptions_=*/true), max_(max_values) {}

  bool null() { return count() && dom_.null(); }
  bool boolean(bool value) { return count() && dom_.boolean(value); }
  bool number_integer(json::number_integer_t value) { return count() && dom_.number_integer(value); }
  bool number_unsigned(json::number_unsigned_t value) { return count() && dom_.number_unsigned(value); }
  bool number_float(json::number_float_t value, const json::string_t& text) {
    return count() && dom_.number_float(value, text);
  }
  bool string(json::string_t& value) { return count() && dom_.string(value); }
  bool binary(json::binary_t& value) { return count() && dom_.binary(value); }
  bool start_object(std::size_t size) { return count() && dom_.start_object(size); }
  bool key(json::string_t& value) { return count() && dom_.key(value); }
  bool end_object() { return dom_.end_object(); }
  bool start_array(std::size_t size) { return count() && dom_.start_array(size); }
  bool end_array() { return dom_.end_array(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& error) {
    return dom_.parse_error(position, token, error);  // throws `error`
  }

 private:
  bool count() {
    if (++values_ > max_) throw TooManyValues{};
    return true;
  }

  Dom dom_;
  size_t values_ = 0;
  const size_t max_;
};

json parse_json_text(std::string_view text, std::string_view source, size_t max_json_values) {
  json result;
  CountingDomBuilder builder(result, max_json_values);
  try {
    if (!json::sax_parse(text.begin(), text.end(), &builder)) fail(source, ": invalid JSON");
    return result;
  } catch (const CountingDomBuilder::TooManyValues&) {
    fail(source, ": the JSON document holds more than ", max_json_values, " values (keys included); the limit follows ",
         "LUMINAL_MAX_ARCHIVE_JSON_BYTES (one value per 32 bytes)");
  } catch (const json::exception& e) {
    fail(source, ": invalid JSON: ", e.what());
  }
}

template <typename Body>
auto guard_json(std::string_view source, Body body) {
  try {
    return body();
  } catch (const json::exception& e) {
    fail(source, ": unexpected JSON value: ", e.what());
  }
}

}  // namespace

nlohmann::json parse_json_document(std::string_view json_text, std::string_view source, size_t max_json_values) {
  return parse_json_text(json_text, source, max_json_values);
}

ExportedProgram parse_exported_program(std::string_view json_text, std::string_view source,
                                       size_t max_json_values) {
  const json doc = parse_json_text(json_text, source, max_json_values);
  return guard_json(source, [&] { return parse_program(doc, Path(source)); });
}

TensorMeta parse_tensor_meta(const nlohmann::json& j, const std::string& where) {
  return guard_json(where,
                    [&] { return parse_tensor_meta_at(j, Path(where, Path::Root::Prefix)); });
}

std::map<std::string, PayloadMeta> parse_payload_config(std::string_view json_text,
                                                        std::string_view source,
                                                        size_t max_json_values) {
  const json doc = parse_json_text(json_text, source, max_json_values);
  return guard_json(source, [&] {
    const Path path(source);
    return parse_map(required(doc, "config", path), path.field("config"), parse_payload_meta);
  });
}

}  // namespace luminal::pt2
