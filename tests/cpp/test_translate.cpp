// Translation refusals: a node luminal does not translate raises the typed UnsupportedNode, and
// find_refusals reports every such node in one pass (a refused node's outputs become stand-ins, so
// the nodes after it are still checked).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "frontend/translate.h"
#include "pt2/archive.h"
#include "pt2/parse.h"

namespace luminal::frontend {
namespace {

using json = nlohmann::json;

constexpr int kSerdeInt64 = 5;  // torch.export's ScalarType code for torch.int64

json int64_meta(int64_t size) {
  return {{"dtype", kSerdeInt64},
          {"sizes", json::array({{{"as_int", size}}})},
          {"requires_grad", false},
          {"device", {{"type", "cpu"}, {"index", nullptr}}},
          {"strides", json::array({{{"as_int", 1}}})},
          {"storage_offset", {{"as_int", 0}}},
          {"layout", 7}};
}

using Inputs = std::vector<std::pair<std::string, std::string>>;  // (argument name, tensor name)

json call(const std::string& name, const std::string& target, const Inputs& inputs) {
  json node = {{"target", target},
               {"inputs", json::array()},
               {"outputs", json::array({{{"as_tensor", {{"name", name}}}}})},
               {"metadata", json::object()},
               {"is_hop_single_tensor_return", nullptr},
               {"name", name}};
  for (const auto& [argument, tensor] : inputs) {
    node["inputs"].push_back({{"name", argument}, {"arg", {{"as_tensor", {{"name", tensor}}}}}, {"kind", 1}});
  }
  return node;
}

// x (int64 [4]) -> pow(x, x) [refused: integer pow with a tensor exponent] -> mystery [no
// translator] -> neg [translated, on the stand-in] -> pow(neg, x) [refused] -> output.
pt2::Package package_with_refusals() {
  json program = json::parse(R"({
    "graph_module": {
      "graph": {"inputs": [{"as_tensor": {"name": "x"}}], "outputs": [{"as_tensor": {"name": "last"}}],
                "nodes": [], "tensor_values": {}, "sym_int_values": {}, "sym_bool_values": {},
                "is_single_tensor_return": false, "custom_obj_values": {}, "sym_float_values": {}},
      "signature": {"input_specs": [{"user_input": {"arg": {"as_tensor": {"name": "x"}}}}],
                    "output_specs": [{"user_output": {"arg": {"as_tensor": {"name": "last"}}}}]},
      "module_call_graph": [], "metadata": {}, "treespec_namedtuple_fields": {}
    },
    "opset_version": {"aten": 10}, "range_constraints": {}, "schema_version": {"major": 8, "minor": 20},
    "verifiers": ["ATEN"], "torch_version": "2.15.0", "guards_code": []
  })");
  json& graph = program["graph_module"]["graph"];
  graph["nodes"] = json::array({
      call("first", "torch.ops.aten.pow.Tensor_Tensor", {{"self", "x"}, {"exponent", "x"}}),
      call("mystery", "torch.ops.mylib.mystery.default", {{"x", "first"}}),
      call("negated", "torch.ops.aten.neg.default", {{"self", "mystery"}}),
      call("last", "torch.ops.aten.pow.Tensor_Tensor", {{"self", "negated"}, {"exponent", "x"}}),
  });
  for (const char* name : {"x", "first", "mystery", "negated", "last"}) graph["tensor_values"][name] = int64_meta(4);
  pt2::Package package;
  package.program = pt2::parse_exported_program(program.dump());
  return package;
}

TEST(Translate, EveryRefusalIsFoundInOnePass) {
  const std::vector<Refusal> refusals = find_refusals(package_with_refusals());
  ASSERT_EQ(refusals.size(), 3u);
  EXPECT_EQ(refusals[0].node, "first");
  EXPECT_EQ(refusals[0].target, "torch.ops.aten.pow.Tensor_Tensor");
  EXPECT_NE(refusals[0].reason.find("tensor exponent"), std::string::npos) << refusals[0].reason;
  EXPECT_EQ(refusals[1].node, "mystery");
  EXPECT_EQ(refusals[1].reason, "no luminal translator for this operator");
  EXPECT_EQ(refusals[2].node, "last");  // after a stand-in and a translated node
  EXPECT_EQ(refusals[2].target, "torch.ops.aten.pow.Tensor_Tensor");
}

TEST(Translate, RefusalIsATypedError) {
  // A graph without the operator that has no translator: the translator's refusal is raised.
  pt2::Package package = package_with_refusals();
  auto& nodes = package.program.graph_module.graph.nodes;
  nodes.erase(nodes.begin() + 1, nodes.end());
  try {
    translate(package);
    FAIL() << "translate accepted a refused node";
  } catch (const UnsupportedNode& error) {
    EXPECT_EQ(error.node(), "first");
    EXPECT_EQ(error.target(), "torch.ops.aten.pow.Tensor_Tensor");
    EXPECT_NE(error.reason().find("tensor exponent"), std::string::npos) << error.reason();
    EXPECT_NE(std::string(error.what()).find("cannot translate node first (aten.pow.Tensor_Tensor)"),
              std::string::npos)
        << error.what();
  }
}

TEST(Translate, MissingTranslatorIsATypedErrorNamingEveryOperator) {
  try {
    translate(package_with_refusals());
    FAIL() << "translate accepted an operator without a translator";
  } catch (const UnsupportedNode& error) {
    EXPECT_EQ(error.node(), "mystery");
    EXPECT_EQ(error.target(), "torch.ops.mylib.mystery.default");
    EXPECT_NE(std::string(error.what()).find("mylib.mystery.default (node mystery)"), std::string::npos)
        << error.what();
  }
}

// Shape expressions with float steps (torch writes them for arange with float bounds and for
// interpolate's scale factors under dynamic shapes) convert to exact integer arithmetic.
TEST(SympyToExpr, FloatStepsOfIntegerSizes) {
  const std::string s0 = "Symbol('s0', positive=True, integer=True)";
  const Expr x = ir::symbol("s0");
  // arange(-2.0 * n, 2.0 * n): ceil((2n - (-2n)) / 1.0) = 4n
  EXPECT_TRUE(ir::expr_equal(
      sympy_to_expr("CeilToInt(FloatTrueDiv(Add(Mul(Integer(-1), ToFloat(Mul(Integer(-1), Integer(2), " + s0 +
                    "))), ToFloat(Mul(Integer(2), " + s0 + "))), Float('1.0', precision=53)))"),
      ir::mul(ir::int_const(4), x)));
  // arange(0, -n, -1.0): ceil(-n / -1.0) = n
  EXPECT_TRUE(ir::expr_equal(
      sympy_to_expr("CeilToInt(FloatTrueDiv(ToFloat(Mul(Integer(-1), " + s0 + ")), Float('-1.0', precision=53)))"), x));
  // interpolate(scale_factor=0.5): floor(n * 0.5) = n // 2; ceil(n / 4.0) = (n + 3) // 4
  EXPECT_TRUE(ir::expr_equal(sympy_to_expr("FloorToInt(Mul(Float('0.5', precision=53), ToFloat(" + s0 + ")))"),
                             ir::floordiv(x, ir::int_const(2))));
  EXPECT_TRUE(ir::expr_equal(sympy_to_expr("CeilToInt(FloatTrueDiv(ToFloat(" + s0 + "), Float('4.0', precision=53)))"),
                             ir::floordiv(ir::add(x, ir::int_const(3)), ir::int_const(4))));
  // floor(n * 1.5) = (3n) // 2
  EXPECT_TRUE(ir::expr_equal(sympy_to_expr("FloorToInt(Mul(Float('1.5', precision=53), ToFloat(" + s0 + ")))"),
                             ir::floordiv(ir::mul(ir::int_const(3), x), ir::int_const(2))));
  // interpolate's output size: trunc(n * 0.5)
  EXPECT_TRUE(ir::expr_equal(sympy_to_expr("TruncToInt(Mul(Float('0.5', precision=53), ToFloat(" + s0 + ")))"),
                             sympy_to_expr("TruncToInt(Mul(Float('0.5', precision=53), ToFloat(" + s0 + ")))")));
  EXPECT_EQ(ir::as_int_const(sympy_to_expr("TruncToInt(Float('-2.75', precision=53))")), -2);
  EXPECT_EQ(ir::as_int_const(sympy_to_expr("TruncToInt(Float('2.75', precision=53))")), 2);
  EXPECT_EQ(ir::as_int_const(sympy_to_expr("CeilToInt(Float('2.25', precision=53))")), 3);
  EXPECT_EQ(ir::as_int_const(sympy_to_expr("FloorToInt(Float('-2.25', precision=53))")), -3);
}

TEST(SympyToExpr, RefusesWhatItCannotKeepExact) {
  const std::string s0 = "Symbol('s0', positive=True, integer=True)";
  // A symbolic divisor, a non-integer used as a size, and a decimal that is no binary fraction.
  EXPECT_THROW(sympy_to_expr("CeilToInt(FloatTrueDiv(Integer(5), ToFloat(" + s0 + ")))"), Error);
  EXPECT_THROW(sympy_to_expr("FloatTrueDiv(ToFloat(" + s0 + "), Float('2.0', precision=53))"), Error);
  EXPECT_THROW(sympy_to_expr("FloorToInt(Mul(Float('0.1', precision=53), ToFloat(" + s0 + ")))"), Error);
}

}  // namespace
}  // namespace luminal::frontend
