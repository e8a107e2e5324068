// ATen → IR translation.
//
// A translator is registered per full ATen target string ("torch.ops.aten.addmm.default"); each
// op family lives in its own file and registers itself through its register_*_ops function, which
// Registry::instance() (translate.cpp) calls. Translators read their
// arguments through Context, build IR through Builder, and bind every tensor they produce with
// Context::set_output, which cross-checks dtype and shape against the export metadata.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/builder.h"
#include "ir/graph.h"
#include "pt2/archive.h"
#include "pt2/schema.h"

namespace luminal::frontend {

struct TranslateOptions {
  // Roles of the call's tensor inputs, by position (parameters and buffers are still bound by
  // pointer at call time, but later stages may treat them as weights). Missing entries: user.
  std::vector<ir::InputRole> input_roles;
};

// Translates the exported program of a PT2 package into a verified IR graph. A node without a
// translator, or whose translator refuses it, raises luminal::UnsupportedNode.
ir::Graph translate(const pt2::Package& package, const TranslateOptions& options = {});

// A node luminal does not translate, and why.
struct Refusal {
  std::string node;    // the exported node's name
  std::string target;  // its full target, e.g. "torch.ops.aten.pow.Tensor_Tensor"
  std::string reason;
};

// Every node of the program that luminal does not translate, in graph order, found in one pass: a
// refused node's outputs are replaced by stand-in inputs built from the export metadata, so that
// translation goes on and also checks the nodes after it. Raises luminal::Error only for problems
// that are not a node's (e.g. an unsupported input kind).
std::vector<Refusal> find_refusals(const pt2::Package& package, const TranslateOptions& options = {});

class Context;
using TranslatorFn = std::function<void(Context&, const pt2::Node&)>;

class Registry {
 public:
  static const Registry& instance();
  void add(const std::string& target, TranslatorFn fn);
  const TranslatorFn* find(const std::string& target) const;
  std::vector<std::string> targets() const;

 private:
  std::map<std::string, TranslatorFn> translators_;
};

// Short form of a target for messages: "torch.ops.aten.addmm.default" -> "aten.addmm.default".
std::string short_target(const std::string& target);

// Targets accepted without a translator: symbolic-size arithmetic and export-time assertions.
const std::set<std::string>& passthrough_targets();

// Shape expressions from export metadata (sympy strings) -> IR.
Expr sympy_to_expr(const std::string& expr_str);

// The value the export recorded for a size or stride: the number, or a symbolic one's example
// value (its hint); none where the export recorded no integer hint.
std::optional<int64_t> example_value(const pt2::SymInt& value);

class Context {
 public:
  Context(const pt2::ExportedProgram& program, ir::Graph& graph);

  Builder& builder() { return builder_; }
  const pt2::Graph& pt2_graph() const { return program_.graph_module.graph; }

  // ---- arguments, by schema name; `fallback` is the schema default when the argument is absent
  const pt2::Argument* find_arg(const pt2::Node& node, std::string_view name) const;
  NodeId tensor(const pt2::Node& node, std::string_view name) const;
  std::optional<NodeId> optional_tensor(const pt2::Node& node, std::string_view name) const;
  std::vector<NodeId> tensors(const pt2::Node& node, std::string_view name) const;
  std::vector<std::optional<NodeId>> optional_tensors(const pt2::Node& node, std::string_view name) const;
  int64_t int_arg(const pt2::Node& node, std::string_view name, std::optional<int64_t> fallback = {}) const;
  double float_arg(const pt2::Node& node, std::string_view name, std::optional<double> fallback = {}) const;
  bool bool_arg(const pt2::Node& node, std::string_view name, std::optional<bool> fallback = {}) const;
  std::optional<std::string> string_arg(const pt2::Node& node, std::string_view name) const;
  std::vector<int64_t> ints_arg(const pt2::Node& node, std::string_view name,
                                std::optional<std::vector<int64_t>> fallback = {}) const;
  // An int or SymInt argument as a shape expression (nullopt when absent or None).
  std::optional<Expr> symint_arg(const pt2::Node& node, std::string_view name) const;
  std::vector<Expr> symints_arg(const pt2::Node& node, std::string_view name) const;
  // A Scalar argument (int/float/bool) or a tensor.
  Operand operand(const pt2::Node& node, std::string_view name) const;
  std::optional<DType> dtype_arg(const pt2::Node& node, std::string_view name) const;

  // ---- outputs
  DType out_dtype(const pt2::Node& node, size_t output = 0) const;
  Shape out_shape(const pt2::Node& node, size_t output = 0) const;
  void set_output(const pt2::Node& node, size_t output, NodeId value);
  void set_output(const pt2::Node& node, NodeId value) { set_output(node, 0, value); }

  // ---- values
  NodeId value(const std::string& tensor_name) const;
  void bind_value(const std::string& tensor_name, NodeId id);
  // Keeps `check` (a 0-d bool node whose definition holds run-time checks) computed although
  // nothing reads it: it becomes a check output of the graph (ir::GraphOutput::check).
  void add_check(NodeId check) { checks_.push_back(check); }
  const std::vector<NodeId>& checks() const { return checks_; }
  Expr sym_value(const std::string& name) const;
  Shape meta_shape(const std::string& tensor_name) const;
  DType meta_dtype(const std::string& tensor_name) const;
  // Export metadata of a tensor value (sizes, strides, storage offset).
  const pt2::TensorMeta& tensor_meta(const std::string& tensor_name) const { return meta(tensor_name); }
  // The IR type of tensor `tensor_name`: its export metadata's dtype and shape, or, for a complex64
  // (complex128) tensor, its pairs' (f32 or f64, the shape with a last dimension of 2).
  struct ValueType {
    DType dtype = DType::F32;
    Shape shape;
    bool complex_pairs = false;
  };
  ValueType value_type(const std::string& tensor_name) const;
  // Whether the tensor argument `name` of `node` lives on a CUDA device in eager, for ops whose
  // eager kernels compute differently per device.
  bool on_cuda(const pt2::Node& node, std::string_view name) const {
    return tensor_meta(find_arg(node, name)->as_tensor().name).device.type == "cuda";
  }

 private:
  const pt2::TensorMeta& meta(const std::string& tensor_name) const;
  void adopt_constant_sizes(NodeId id, const Shape& expected);
  [[noreturn]] void arg_error(const pt2::Node& node, std::string_view name, const std::string& message) const;

  const pt2::ExportedProgram& program_;
  ir::Graph& graph_;
  Builder builder_;
  std::map<std::string, NodeId> values_;
  std::vector<NodeId> checks_;
};

// Family registration (one per file under frontend/).
void register_linalg_ops(Registry& registry);
void register_shape_ops(Registry& registry);
void register_elementwise_ops(Registry& registry);
void register_index_ops(Registry& registry);
void register_embedding_ops(Registry& registry);
void register_constructor_ops(Registry& registry);
void register_reduction_ops(Registry& registry);
void register_window_ops(Registry& registry);
void register_activation_ops(Registry& registry);
void register_math_ops(Registry& registry);
void register_sorting_ops(Registry& registry);
void register_misc_core_ops(Registry& registry);
void register_attention_ops(Registry& registry);
void register_complex_ops(Registry& registry);

// Complex values (complex.cpp): a complex64 (complex128) tensor is translated as an f32 (f64) pair
// tensor with a last dimension of 2, and only by complex_translator's targets (null: refused).
std::optional<DType> complex_pair_dtype(int serde_code);  // COMPLEXFLOAT -> F32, COMPLEXDOUBLE -> F64
bool is_complex_code(int serde_code);                      // any complex type, complex32 included
const TranslatorFn* complex_translator(const std::string& target);
bool is_complex_tensor(const pt2::Graph& graph, const std::string& tensor_name);
bool touches_complex(const pt2::Graph& graph, const pt2::Node& node);  // reads or produces a complex tensor
// A complex constant's view as its real pairs: strides and offset in real elements, a last
// dimension of 2 (its payload's bytes are the interleaved pairs already).
void complex_constant_as_pairs(ir::ConstantData& data, const std::string& who);
// aten.slice.Tensor's start, end and step applied along `dim` of x (the node's output): shape.cpp's
// translator, and complex.cpp's with the dimension counted in the complex shape.
void slice_along(Context& ctx, const pt2::Node& node, NodeId x, int64_t dim);

}  // namespace luminal::frontend
