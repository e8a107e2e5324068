// Typed mirror of the exported-program JSON written by torch.export.save (schema 8.x), following
// torch/_export/serde/schema.py. Unions become std::variant; JSON keys this reader does not know
// are ignored by the parser, and missing optional keys take the schema defaults.
//
// Enum-valued fields (ScalarType, Layout, MemoryFormat) keep the raw serde integer codes; map
// ScalarType codes with luminal::dtype_from_serde_code (pt2/dtype_codes.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/error.h"

namespace luminal::pt2 {

// Serde codes of schema.py's Layout and MemoryFormat enums that consumers commonly test for.
inline constexpr int kLayoutStrided = 7;
inline constexpr int kMemoryFormatContiguous = 1;

// ---------------------------------------------------------------------------------------------
// Symbolic values
// ---------------------------------------------------------------------------------------------

struct SymExprHint {  // union: exactly one is set
  std::optional<int64_t> as_int;
  std::optional<double> as_float;
  std::optional<bool> as_bool;
};

struct SymExpr {
  std::string expr_str;  // sympy srepr string; parse with parse_sympy (pt2/sympy.h)
  std::optional<SymExprHint> hint;
};

struct SymInt {
  std::variant<int64_t, SymExpr> value;

  bool is_int() const { return std::holds_alternative<int64_t>(value); }
  int64_t as_int() const {  // throws if symbolic
    if (const auto* expr = std::get_if<SymExpr>(&value)) {
      fail("expected a concrete integer, got the symbolic expression ", expr->expr_str);
    }
    return std::get<int64_t>(value);
  }
  const SymExpr& as_expr() const {  // throws if concrete
    if (is_int())
      fail("expected a symbolic expression, got the integer ", std::get<int64_t>(value));
    return std::get<SymExpr>(value);
  }
};

struct SymFloat {
  std::variant<double, SymExpr> value;
};

struct SymBool {
  std::variant<bool, SymExpr> value;
};

// ---------------------------------------------------------------------------------------------
// Tensor metadata and argument payloads
// ---------------------------------------------------------------------------------------------

struct Device {
  std::string type;  // "cpu", "cuda", ...
  std::optional<int64_t> index;
};

struct TensorMeta {
  int dtype = 0;  // raw serde ScalarType code
  std::vector<SymInt> sizes;
  bool requires_grad = false;
  Device device;
  std::vector<SymInt> strides;
  SymInt storage_offset;
  int layout = kLayoutStrided;  // raw serde Layout code
};

struct TensorArgument {
  std::string name;
};

struct TokenArgument {
  std::string name;
};

// Unions of a graph value name and a literal (literals appear in mixed lists such as [s0, 1]).
struct SymIntArgument {
  std::variant<std::string /*as_name*/, int64_t /*as_int*/> value;
  bool is_name() const { return std::holds_alternative<std::string>(value); }
};
struct SymFloatArgument {
  std::variant<std::string /*as_name*/, double /*as_float*/> value;
  bool is_name() const { return std::holds_alternative<std::string>(value); }
};
struct SymBoolArgument {
  std::variant<std::string /*as_name*/, bool /*as_bool*/> value;
  bool is_name() const { return std::holds_alternative<std::string>(value); }
};

struct OptionalTensorArgument {
  std::optional<TensorArgument> tensor;  // nullopt: as_none
};

struct CustomObjArgument {
  std::string name;
  std::string class_fqn;
};

struct ComplexValue {
  double real = 0;
  double imag = 0;
};

struct Graph;

struct GraphArgument {  // subgraph of a higher-order op
  std::string name;
  std::shared_ptr<const Graph> graph;
};

// An Argument union tag this reader does not know (written by a newer torch). It is kept so that
// the error happens only if a consumer actually needs the value.
struct UnknownArgument {
  std::string tag;
  std::string raw_json;
};

// ---------------------------------------------------------------------------------------------
// Argument: the schema's Argument union
// ---------------------------------------------------------------------------------------------

struct Argument {
  // One kind per schema union tag (kind_tag gives the tag), plus Token (only in graph signatures,
  // never in the Argument union itself) and Unknown.
  // clang-format off
  enum class Kind {
    None, Tensor, Tensors, Int, Ints, Float, Floats, String, Strings, SymInt, SymInts, ScalarType,
    MemoryFormat, Layout, Device, Bool, Bools, SymBool, SymBools, OptionalTensors, Graph, CustomObj,
    Operator, SymFloat, SymFloats, OptionalTensor, Complex, NestedTensors, IntLists, FloatLists,
    StringToArgument, Token, Unknown
  };
  // clang-format on
  using StringToArgumentMap = std::map<std::string, Argument>;
  // Int, ScalarType, MemoryFormat and Layout share int64_t; String and Operator share std::string.
  using Payload =
      std::variant<std::monostate, TensorArgument, std::vector<TensorArgument>, int64_t,
                   std::vector<int64_t>, double, std::vector<double>, std::string,
                   std::vector<std::string>, SymIntArgument, std::vector<SymIntArgument>,
                   pt2::Device, bool, std::vector<bool>, SymBoolArgument,
                   std::vector<SymBoolArgument>, std::vector<OptionalTensorArgument>, GraphArgument,
                   CustomObjArgument, SymFloatArgument, std::vector<SymFloatArgument>,
                   OptionalTensorArgument, ComplexValue, std::vector<std::vector<TensorArgument>>,
                   std::vector<std::vector<int64_t>>, std::vector<std::vector<double>>,
                   std::shared_ptr<const StringToArgumentMap>, TokenArgument, UnknownArgument>;

  Argument() = default;  // as_none
  // Throws luminal::Error when the payload's type does not fit the kind.
  Argument(Kind kind, Payload payload) : kind_(kind), payload_(std::move(payload)) {
    if (!payload_fits(kind_, payload_)) {
      fail("Argument: payload type (variant index ", payload_.index(), ") does not fit kind ",
           kind_tag(kind_));
    }
  }
  static Argument none() { return Argument(); }
  static Argument tensor(std::string name) {
    return Argument(Kind::Tensor, TensorArgument{std::move(name)});
  }
  static Argument unknown(std::string tag, std::string raw_json) {
    return Argument(Kind::Unknown, UnknownArgument{std::move(tag), std::move(raw_json)});
  }

  Kind kind() const { return kind_; }
  // "as_tensor", ... ; the tag as written for Unknown; "token" for Token.
  std::string_view tag() const {
    if (kind_ == Kind::Unknown) return std::get<UnknownArgument>(payload_).tag;
    return kind_tag(kind_);
  }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  const Payload& payload() const { return payload_; }

  // Typed accessors: each throws luminal::Error naming both kinds when the kind differs.
  const TensorArgument& as_tensor() const { return get<TensorArgument>(Kind::Tensor); }
  const std::vector<TensorArgument>& as_tensors() const {
    return get<std::vector<TensorArgument>>(Kind::Tensors);
  }
  int64_t as_int() const { return get<int64_t>(Kind::Int); }
  const std::vector<int64_t>& as_ints() const { return get<std::vector<int64_t>>(Kind::Ints); }
  double as_float() const { return get<double>(Kind::Float); }
  const std::vector<double>& as_floats() const { return get<std::vector<double>>(Kind::Floats); }
  const std::string& as_string() const { return get<std::string>(Kind::String); }
  const std::vector<std::string>& as_strings() const {
    return get<std::vector<std::string>>(Kind::Strings);
  }
  const SymIntArgument& as_sym_int() const { return get<SymIntArgument>(Kind::SymInt); }
  const std::vector<SymIntArgument>& as_sym_ints() const {
    return get<std::vector<SymIntArgument>>(Kind::SymInts);
  }
  int as_scalar_type() const { return static_cast<int>(get<int64_t>(Kind::ScalarType)); }
  int as_memory_format() const { return static_cast<int>(get<int64_t>(Kind::MemoryFormat)); }
  int as_layout() const { return static_cast<int>(get<int64_t>(Kind::Layout)); }
  const pt2::Device& as_device() const { return get<pt2::Device>(Kind::Device); }
  bool as_bool() const { return get<bool>(Kind::Bool); }
  const std::vector<bool>& as_bools() const { return get<std::vector<bool>>(Kind::Bools); }
  const SymBoolArgument& as_sym_bool() const { return get<SymBoolArgument>(Kind::SymBool); }
  const std::vector<SymBoolArgument>& as_sym_bools() const {
    return get<std::vector<SymBoolArgument>>(Kind::SymBools);
  }
  const std::vector<OptionalTensorArgument>& as_optional_tensors() const {
    return get<std::vector<OptionalTensorArgument>>(Kind::OptionalTensors);
  }
  const GraphArgument& as_graph() const { return get<GraphArgument>(Kind::Graph); }
  const CustomObjArgument& as_custom_obj() const { return get<CustomObjArgument>(Kind::CustomObj); }
  const std::string& as_operator() const { return get<std::string>(Kind::Operator); }
  const SymFloatArgument& as_sym_float() const { return get<SymFloatArgument>(Kind::SymFloat); }
  const std::vector<SymFloatArgument>& as_sym_floats() const {
    return get<std::vector<SymFloatArgument>>(Kind::SymFloats);
  }
  const OptionalTensorArgument& as_optional_tensor() const {
    return get<OptionalTensorArgument>(Kind::OptionalTensor);
  }
  const ComplexValue& as_complex() const { return get<ComplexValue>(Kind::Complex); }
  const std::vector<std::vector<TensorArgument>>& as_nested_tensors() const {
    return get<std::vector<std::vector<TensorArgument>>>(Kind::NestedTensors);
  }
  const std::vector<std::vector<int64_t>>& as_int_lists() const {
    return get<std::vector<std::vector<int64_t>>>(Kind::IntLists);
  }
  const std::vector<std::vector<double>>& as_float_lists() const {
    return get<std::vector<std::vector<double>>>(Kind::FloatLists);
  }
  const StringToArgumentMap& as_string_to_argument() const {
    return *get<std::shared_ptr<const StringToArgumentMap>>(Kind::StringToArgument);
  }
  const TokenArgument& as_token() const { return get<TokenArgument>(Kind::Token); }
  const UnknownArgument& as_unknown() const { return get<UnknownArgument>(Kind::Unknown); }

  // The JSON union tag of a kind ("as_tensor", ...); "token" / "unknown" for the two extra kinds.
  static std::string_view kind_tag(Kind kind) {
    switch (kind) {
      case Kind::None: return "as_none";
      case Kind::Tensor: return "as_tensor";
      case Kind::Tensors: return "as_tensors";
      case Kind::Int: return "as_int";
      case Kind::Ints: return "as_ints";
      case Kind::Float: return "as_float";
      case Kind::Floats: return "as_floats";
      case Kind::String: return "as_string";
      case Kind::Strings: return "as_strings";
      case Kind::SymInt: return "as_sym_int";
      case Kind::SymInts: return "as_sym_ints";
      case Kind::ScalarType: return "as_scalar_type";
      case Kind::MemoryFormat: return "as_memory_format";
      case Kind::Layout: return "as_layout";
      case Kind::Device: return "as_device";
      case Kind::Bool: return "as_bool";
      case Kind::Bools: return "as_bools";
      case Kind::SymBool: return "as_sym_bool";
      case Kind::SymBools: return "as_sym_bools";
      case Kind::OptionalTensors: return "as_optional_tensors";
      case Kind::Graph: return "as_graph";
      case Kind::CustomObj: return "as_custom_obj";
      case Kind::Operator: return "as_operator";
      case Kind::SymFloat: return "as_sym_float";
      case Kind::SymFloats: return "as_sym_floats";
      case Kind::OptionalTensor: return "as_optional_tensor";
      case Kind::Complex: return "as_complex";
      case Kind::NestedTensors: return "as_nested_tensors";
      case Kind::IntLists: return "as_int_lists";
      case Kind::FloatLists: return "as_float_lists";
      case Kind::StringToArgument: return "as_string_to_argument";
      case Kind::Token: return "token";
      case Kind::Unknown: return "unknown";
    }
    return "invalid";
  }

  // The kind of a JSON union tag; nullopt for tags this reader does not know.
  static std::optional<Kind> kind_from_tag(std::string_view tag) {
    for (int k = 0; k < static_cast<int>(Kind::Token); ++k) {
      if (kind_tag(static_cast<Kind>(k)) == tag) return static_cast<Kind>(k);
    }
    return std::nullopt;
  }

 private:
  template <typename T>
  const T& get(Kind expected) const {
    if (kind_ != expected) fail_kind(expected);
    return std::get<T>(payload_);  // the constructor guarantees the alternative
  }

  [[noreturn]] void fail_kind(Kind expected) const {
    if (kind_ == Kind::Unknown) {
      const UnknownArgument& unknown = std::get<UnknownArgument>(payload_);
      constexpr size_t kExcerpt = 120;
      fail("unsupported argument kind '", unknown.tag,
           "' (not in the PT2 schema this reader knows;", " written by a newer torch?) where ",
           kind_tag(expected), " was expected; value: ", unknown.raw_json.substr(0, kExcerpt),
           unknown.raw_json.size() > kExcerpt ? "..." : "");
    }
    fail("expected an ", kind_tag(expected), " argument, got ", tag());
  }

  static bool payload_fits(Kind kind, const Payload& p) {
    using std::holds_alternative;
    switch (kind) {
      case Kind::None: return holds_alternative<std::monostate>(p);
      case Kind::Tensor: return holds_alternative<TensorArgument>(p);
      case Kind::Tensors: return holds_alternative<std::vector<TensorArgument>>(p);
      case Kind::Int:
      case Kind::ScalarType:
      case Kind::MemoryFormat:
      case Kind::Layout: return holds_alternative<int64_t>(p);
      case Kind::Ints: return holds_alternative<std::vector<int64_t>>(p);
      case Kind::Float: return holds_alternative<double>(p);
      case Kind::Floats: return holds_alternative<std::vector<double>>(p);
      case Kind::String:
      case Kind::Operator: return holds_alternative<std::string>(p);
      case Kind::Strings: return holds_alternative<std::vector<std::string>>(p);
      case Kind::SymInt: return holds_alternative<SymIntArgument>(p);
      case Kind::SymInts: return holds_alternative<std::vector<SymIntArgument>>(p);
      case Kind::Device: return holds_alternative<pt2::Device>(p);
      case Kind::Bool: return holds_alternative<bool>(p);
      case Kind::Bools: return holds_alternative<std::vector<bool>>(p);
      case Kind::SymBool: return holds_alternative<SymBoolArgument>(p);
      case Kind::SymBools: return holds_alternative<std::vector<SymBoolArgument>>(p);
      case Kind::OptionalTensors: return holds_alternative<std::vector<OptionalTensorArgument>>(p);
      case Kind::Graph:
        return holds_alternative<GraphArgument>(p) && std::get<GraphArgument>(p).graph != nullptr;
      case Kind::CustomObj: return holds_alternative<CustomObjArgument>(p);
      case Kind::SymFloat: return holds_alternative<SymFloatArgument>(p);
      case Kind::SymFloats: return holds_alternative<std::vector<SymFloatArgument>>(p);
      case Kind::OptionalTensor: return holds_alternative<OptionalTensorArgument>(p);
      case Kind::Complex: return holds_alternative<ComplexValue>(p);
      case Kind::NestedTensors:
        return holds_alternative<std::vector<std::vector<TensorArgument>>>(p);
      case Kind::IntLists: return holds_alternative<std::vector<std::vector<int64_t>>>(p);
      case Kind::FloatLists: return holds_alternative<std::vector<std::vector<double>>>(p);
      case Kind::StringToArgument: {
        const auto* map = std::get_if<std::shared_ptr<const StringToArgumentMap>>(&p);
        return map != nullptr && *map != nullptr;
      }
      case Kind::Token: return holds_alternative<TokenArgument>(p);
      case Kind::Unknown: return holds_alternative<UnknownArgument>(p);
    }
    return false;
  }

  Kind kind_ = Kind::None;
  Payload payload_;
};

// ---------------------------------------------------------------------------------------------
// Graph
// ---------------------------------------------------------------------------------------------

struct NamedArgument {
  std::string name;  // argument name in the operator schema
  Argument arg;
  int kind = 0;  // ArgumentKind: 0 unknown, 1 positional, 2 keyword
};

struct Node {
  std::string target;  // e.g. "torch.ops.aten.addmm.default"
  std::vector<NamedArgument> inputs;
  std::vector<Argument> outputs;
  std::map<std::string, std::string> metadata;
  std::optional<std::string> name;
  std::optional<bool> is_hop_single_tensor_return;

  const NamedArgument* find_input(std::string_view input_name) const {
    for (const NamedArgument& input : inputs) {
      if (input.name == input_name) return &input;
    }
    return nullptr;
  }
};

struct Graph {
  std::vector<Argument> inputs;
  std::vector<Argument> outputs;
  std::vector<Node> nodes;
  std::map<std::string, TensorMeta> tensor_values;
  std::map<std::string, SymInt> sym_int_values;
  std::map<std::string, SymBool> sym_bool_values;
  std::map<std::string, SymFloat> sym_float_values;
  std::map<std::string, CustomObjArgument> custom_obj_values;
  bool is_single_tensor_return = false;
};

// ---------------------------------------------------------------------------------------------
// Signature
// ---------------------------------------------------------------------------------------------

struct ConstantValue {  // union as_none / as_int / as_float / as_string / as_bool
  std::variant<std::monostate, int64_t, double, std::string, bool> value;
  bool is_none() const { return std::holds_alternative<std::monostate>(value); }
};

struct InputSpec {
  enum class Kind {
    UserInput,
    Parameter,
    Buffer,
    TensorConstant,
    CustomObj,
    Token,
    ConstantInput,
    Unknown
  };
  Kind kind = Kind::Unknown;
  // UserInput: the Argument union as written (as_tensor, as_sym_int, ...). Parameter, Buffer,
  // TensorConstant: an as_tensor Argument. CustomObj: as_custom_obj. Token: a Token argument.
  // ConstantInput: the value as an Argument (as_none/as_int/as_float/as_string/as_bool).
  // Unknown: an Unknown argument holding the raw JSON of the spec.
  Argument arg;
  // parameter_name / buffer_name / tensor_constant_name / custom_obj_name / constant_input name.
  std::string target;
  bool persistent = true;                       // Buffer only
  std::optional<ConstantValue> constant_value;  // ConstantInput only
  std::string unknown_tag;                      // Unknown only
};

struct OutputSpec {
  enum class Kind {
    UserOutput,
    LossOutput,
    BufferMutation,
    GradientToParameter,
    GradientToUserInput,
    UserInputMutation,
    Token,
    ParameterMutation,
    Unknown
  };
  Kind kind = Kind::Unknown;
  // UserOutput: the Argument union as written; Token: a Token argument; Unknown: an Unknown
  // argument with the raw JSON; all others: an as_tensor Argument.
  Argument arg;
  std::string target;  // buffer_name / parameter_name / user_input_name
  std::string unknown_tag;
};

struct GraphSignature {
  std::vector<InputSpec> input_specs;
  std::vector<OutputSpec> output_specs;
};

// ---------------------------------------------------------------------------------------------
// Program
// ---------------------------------------------------------------------------------------------

struct RangeConstraint {
  // nullopt: unbounded (JSON null, +-inf, or a magnitude above 2^62 standing for int_oo).
  std::optional<int64_t> min_val;
  std::optional<int64_t> max_val;
};

struct SchemaVersion {
  int major = 0;
  int minor = 0;
};

struct ModuleCallSignature {
  std::vector<Argument> inputs;
  std::vector<Argument> outputs;
  std::string in_spec;   // pytree treespec (JSON string)
  std::string out_spec;  // pytree treespec (JSON string)
  std::optional<std::vector<std::string>> forward_arg_names;
};

struct ModuleCallEntry {
  std::string fqn;
  std::optional<ModuleCallSignature> signature;
};

struct GraphModule {
  Graph graph;
  GraphSignature signature;
  std::vector<ModuleCallEntry> module_call_graph;
  std::map<std::string, std::string> metadata;
};

struct ExportedProgram {
  GraphModule graph_module;
  std::map<std::string, int64_t> opset_version;
  std::map<std::string, RangeConstraint> range_constraints;
  SchemaVersion schema_version;
  std::vector<std::string> verifiers;
  std::string torch_version = "<=2.4";
  std::vector<std::string> guards_code;
};

// Entry of a payload config (data/weights/<model>_weights_config.json, data/constants/...).
struct PayloadMeta {
  std::string path_name;  // file name inside the weights/constants directory, e.g. "weight_0"
  bool is_param = false;
  bool use_pickle = false;
  std::optional<TensorMeta> tensor_meta;  // absent for custom objects
};

}  // namespace luminal::pt2
