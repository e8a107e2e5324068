// Tests of the PT2 reader: sympy strings, exported-program JSON, zip archive and package loading.
// Fixture archives come from tests/fixtures/make_fixtures.py (real torch.export.save output);
// malformed inputs are built here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "pt2/archive.h"
#include "error_helpers.h"
#include "zip_helpers.h"
#include "pt2/parse.h"
#include "pt2/schema.h"
#include "pt2/sympy.h"

namespace luminal::pt2 {
namespace {

using json = nlohmann::json;
using Kind = Argument::Kind;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

using testing::error_of;

std::string fixture_path(const std::string& name) {
  return std::string(LUMINAL_FIXTURE_DIR) + "/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

json read_expected(const std::string& fixture) {
  return json::parse(read_file(fixture_path(fixture + ".expected.json")));
}

// Entries are stored, as torch's writer stores them (the reader refuses compressed entries).
std::string make_zip(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::tuple<std::string, std::string, bool>> stored;
  for (const auto& [name, data] : files) stored.emplace_back(name, data, false);
  return testing::make_zip(stored);
}

json tensor_meta_json(const std::vector<int64_t>& sizes, int dtype = 7) {
  json meta = {{"dtype", dtype},
               {"sizes", json::array()},
               {"requires_grad", false},
               {"device", {{"type", "cpu"}, {"index", nullptr}}},
               {"strides", json::array()},
               {"storage_offset", {{"as_int", 0}}},
               {"layout", 7}};
  int64_t stride = 1;
  std::vector<int64_t> strides(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    meta["sizes"].push_back({{"as_int", sizes[d]}});
    meta["strides"].push_back({{"as_int", strides[d]}});
  }
  return meta;
}

// y = relu(x), as torch 2.15 writes it (trimmed).
json minimal_program() {
  json program = json::parse(R"({
    "graph_module": {
      "graph": {
        "inputs": [{"as_tensor": {"name": "x"}}],
        "outputs": [{"as_tensor": {"name": "y"}}],
        "nodes": [{
          "target": "torch.ops.aten.relu.default",
          "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "x"}}, "kind": 1}],
          "outputs": [{"as_tensor": {"name": "y"}}],
          "metadata": {"stack_trace": "here"},
          "is_hop_single_tensor_return": null,
          "name": "y"
        }],
        "tensor_values": {},
        "sym_int_values": {},
        "sym_bool_values": {},
        "is_single_tensor_return": false,
        "custom_obj_values": {},
        "sym_float_values": {}
      },
      "signature": {
        "input_specs": [{"user_input": {"arg": {"as_tensor": {"name": "x"}}}}],
        "output_specs": [{"user_output": {"arg": {"as_tensor": {"name": "y"}}}}]
      },
      "module_call_graph": [{"fqn": "", "signature": {"inputs": [], "outputs": [],
          "in_spec": "[]", "out_spec": "[]", "forward_arg_names": ["x"]}}],
      "metadata": {},
      "treespec_namedtuple_fields": {}
    },
    "opset_version": {"aten": 10},
    "range_constraints": {},
    "schema_version": {"major": 8, "minor": 20},
    "verifiers": ["ATEN"],
    "torch_version": "2.15.0",
    "guards_code": []
  })");
  program["graph_module"]["graph"]["tensor_values"]["x"] = tensor_meta_json({2, 3});
  program["graph_module"]["graph"]["tensor_values"]["y"] = tensor_meta_json({2, 3});
  return program;
}

ExportedProgram parse(const json& program) { return parse_exported_program(program.dump()); }

json& first_node(json& program) { return program["graph_module"]["graph"]["nodes"][0]; }

// Parses `arg_json` as the Argument of an extra input of the minimal program's node.
Argument parse_arg(const std::string& arg_json) {
  json program = minimal_program();
  first_node(program)["inputs"].push_back(
      {{"name", "extra"}, {"arg", json::parse(arg_json)}, {"kind", 2}});
  ExportedProgram parsed = parse(program);
  return parsed.graph_module.graph.nodes.at(0).inputs.at(1).arg;
}

// A valid in-memory PT2 archive: the minimal program plus one weight "w" (float32 [2]).
std::vector<std::pair<std::string, std::string>> package_files(
    const std::string& root = "archive") {
  const json weights_config = {{"config",
                                {{"w",
                                  {{"path_name", "weight_0"},
                                   {"is_param", true},
                                   {"use_pickle", false},
                                   {"tensor_meta", tensor_meta_json({2})}}}}}};
  const float w[2] = {1.5f, -2.0f};
  return {
      {root + "/archive_format", "pt2"},
      {root + "/archive_version", "0"},
      {root + "/models/model.json", minimal_program().dump()},
      {root + "/data/weights/model_weights_config.json", weights_config.dump()},
      {root + "/data/weights/weight_0", std::string(reinterpret_cast<const char*>(w), sizeof w)},
      {root + "/data/constants/model_constants_config.json", R"({"config": {}})"}};
}

void set_file(std::vector<std::pair<std::string, std::string>>& files, const std::string& name,
              std::string data) {
  for (auto& [file_name, file_data] : files) {
    if (file_name == name) {
      file_data = std::move(data);
      return;
    }
  }
  files.emplace_back(name, std::move(data));
}

void remove_file(std::vector<std::pair<std::string, std::string>>& files, const std::string& name) {
  for (auto it = files.begin(); it != files.end(); ++it) {
    if (it->first == name) {
      files.erase(it);
      return;
    }
  }
}

Package load_files(const std::vector<std::pair<std::string, std::string>>& files,
                   const LoadOptions& options = {}) {
  const Archive archive = Archive::from_buffer(make_zip(files));
  return load_package(archive, options);
}

// Elements of a float32 payload in row-major order of its strided view.
std::vector<double> strided_floats(const TensorPayload& payload) {
  const TensorMeta& meta = payload.meta.tensor_meta.value();
  EXPECT_EQ(meta.dtype, 7);
  std::vector<int64_t> sizes;
  int64_t numel = 1;
  for (const SymInt& s : meta.sizes) {
    sizes.push_back(s.as_int());
    numel *= s.as_int();
  }
  std::vector<double> out;
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t n = 0; n < numel; ++n) {
    int64_t element = meta.storage_offset.as_int();
    for (size_t d = 0; d < sizes.size(); ++d) element += index[d] * meta.strides[d].as_int();
    float value = 0;
    std::memcpy(&value, payload.bytes->data() + element * sizeof(float), sizeof value);
    out.push_back(value);
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

std::vector<int64_t> concrete(const std::vector<SymInt>& values) {
  std::vector<int64_t> out;
  for (const SymInt& v : values) out.push_back(v.as_int());
  return out;
}

// ---------------------------------------------------------------------------------------------
// sympy
// ---------------------------------------------------------------------------------------------

TEST(Sympy, ParsesSymbolAndIgnoresKeywords) {
  const SympyExpr e = parse_sympy("Symbol('s77', positive=True, integer=True)");
  EXPECT_EQ(e.kind, SympyExpr::Kind::Symbol);
  EXPECT_EQ(e.name, "s77");
  EXPECT_TRUE(e.args.empty());
  EXPECT_EQ(parse_sympy("Symbol(\"u0\", integer=True)"), SympyExpr::symbol("u0"));
}

TEST(Sympy, ParsesNestedArithmetic) {
  const SympyExpr e =
      parse_sympy("Add(Mul(Integer(2), Symbol('s0', positive=True, integer=True)), Integer(1))");
  ASSERT_EQ(e.kind, SympyExpr::Kind::Call);
  EXPECT_EQ(e.name, "Add");
  ASSERT_EQ(e.args.size(), 2u);
  const SympyExpr& mul = e.args[0];
  EXPECT_EQ(mul.name, "Mul");
  ASSERT_EQ(mul.args.size(), 2u);
  EXPECT_EQ(mul.args[0], SympyExpr::integer(2));
  EXPECT_EQ(mul.args[1], SympyExpr::symbol("s0"));
  EXPECT_EQ(e.args[1], SympyExpr::integer(1));
  EXPECT_EQ(to_string(e), "Add(Mul(2, s0), 1)");
}

TEST(Sympy, ParsesFloorDivModAndFriends) {
  const SympyExpr e = parse_sympy(
      "Max(Integer(4), FloorDiv(Mod(Symbol('s0', integer=True), Integer(3)), Integer(2)), "
      "Pow(Symbol('s1', integer=True), Integer(2)), CeilToInt(Symbol('s2')))");
  EXPECT_EQ(to_string(e), "Max(4, FloorDiv(Mod(s0, 3), 2), Pow(s1, 2), CeilToInt(s2))");
  ASSERT_EQ(e.args.size(), 4u);
  EXPECT_EQ(e.args[1].name, "FloorDiv");
  EXPECT_EQ(e.args[1].args[0].name, "Mod");
  EXPECT_EQ(e.args[1].args[0].args[1].value, 3);
}

TEST(Sympy, ParsesNegativeAndBareIntegers) {
  EXPECT_EQ(parse_sympy("Integer(-5)"), SympyExpr::integer(-5));
  EXPECT_EQ(parse_sympy("-7"), SympyExpr::integer(-7));
  EXPECT_EQ(parse_sympy("42"), SympyExpr::integer(42));
  EXPECT_EQ(parse_sympy("Integer(-9223372036854775808)"),
            SympyExpr::integer(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(parse_sympy("Integer(9223372036854775807)"),
            SympyExpr::integer(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(to_string(parse_sympy("Add(Symbol('s0'), -3)")), "Add(s0, -3)");
  EXPECT_EQ(to_string(parse_sympy("Rational(1, 2)")), "Rational(1, 2)");
}

TEST(Sympy, ParsesNamedIntegersAndConstants) {
  EXPECT_EQ(parse_sympy("One"), SympyExpr::integer(1));
  EXPECT_EQ(parse_sympy("One()"), SympyExpr::integer(1));
  EXPECT_EQ(parse_sympy("Zero"), SympyExpr::integer(0));
  EXPECT_EQ(parse_sympy("NegativeOne()"), SympyExpr::integer(-1));
  EXPECT_EQ(parse_sympy("Half"), SympyExpr::call("Half"));
  EXPECT_EQ(parse_sympy("int_oo"), SympyExpr::call("int_oo"));
  EXPECT_EQ(parse_sympy("oo"), SympyExpr::call("oo"));
  // sympy's srepr(-int_oo) is "-int_oo".
  EXPECT_EQ(parse_sympy("-int_oo"),
            SympyExpr::call("Mul", {SympyExpr::integer(-1), SympyExpr::call("int_oo")}));
  EXPECT_EQ(to_string(parse_sympy("-int_oo")), "Mul(-1, int_oo)");
}

TEST(Sympy, KeepsUnsupportedFunctionsAsCalls) {
  const SympyExpr rational = parse_sympy("Mul(Rational(1, 2), Symbol('s0'))");
  EXPECT_EQ(rational.args[0],
            SympyExpr::call("Rational", {SympyExpr::integer(1), SympyExpr::integer(2)}));
  const SympyExpr flt = parse_sympy("Float('1.5', precision=53)");
  EXPECT_EQ(flt.kind, SympyExpr::Kind::Call);
  EXPECT_EQ(flt.name, "Float");
  ASSERT_EQ(flt.args.size(), 1u);  // the keyword is dropped
  EXPECT_EQ(parse_sympy("Equality(Symbol('s0'), Integer(3))").name, "Equality");
}

TEST(Sympy, AcceptsBareIdentifiersAndWhitespace) {
  EXPECT_EQ(parse_sympy("s0"), SympyExpr::symbol("s0"));
  EXPECT_EQ(parse_sympy("  u_12 \n"), SympyExpr::symbol("u_12"));
  EXPECT_EQ(to_string(parse_sympy(" Mul ( Integer( 2 ) ,s0 )  ")), "Mul(2, s0)");
  EXPECT_EQ(to_string(parse_sympy("f()")), "f()");
}

TEST(Sympy, RejectsGarbageWithPosition) {
  for (const std::string bad :
       {"", "   ", "Mul(", "Mul(2,,3)", "Mul(2 3)", "2 3", "Symbol(2)", "Symbol('s0', 's1')",
        "Integer(s0)", "Integer()", "Symbol('s0", "Integer(99999999999999999999)", "1.5", "Mul(2)$",
        "s0 + 1", "(s0)", "Add(s0,)", "One(2)", "*"}) {
    const std::string message = error_of([&] { parse_sympy(bad); });
    EXPECT_CONTAINS(message, "offset");
    EXPECT_CONTAINS(message, "sympy expression");
  }
  EXPECT_CONTAINS(error_of([] { parse_sympy("Mul(2, s0"); }), "expected ',' or ')' at offset 9");
  EXPECT_CONTAINS(error_of([] { parse_sympy("Integer(99999999999999999999)"); }),
                  "out of int64 range");
}

TEST(Sympy, RejectsDeepNestingWithoutCrashing) {
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += "Mul(";
  EXPECT_CONTAINS(error_of([&] { parse_sympy(deep); }), "nested too deeply");
}

// ---------------------------------------------------------------------------------------------
// Exported-program JSON
// ---------------------------------------------------------------------------------------------

TEST(Parse, MinimalProgram) {
  const ExportedProgram p = parse(minimal_program());
  EXPECT_EQ(p.schema_version.major, 8);
  EXPECT_EQ(p.schema_version.minor, 20);
  EXPECT_EQ(p.torch_version, "2.15.0");
  EXPECT_EQ(p.verifiers, std::vector<std::string>{"ATEN"});
  EXPECT_EQ(p.opset_version.at("aten"), 10);
  const Graph& g = p.graph_module.graph;
  ASSERT_EQ(g.nodes.size(), 1u);
  const Node& node = g.nodes[0];
  EXPECT_EQ(node.target, "torch.ops.aten.relu.default");
  EXPECT_EQ(node.name, std::optional<std::string>("y"));
  EXPECT_FALSE(node.is_hop_single_tensor_return.has_value());
  EXPECT_EQ(node.metadata.at("stack_trace"), "here");
  ASSERT_NE(node.find_input("self"), nullptr);
  EXPECT_EQ(node.find_input("self")->arg.as_tensor().name, "x");
  EXPECT_EQ(node.find_input("self")->kind, 1);
  EXPECT_EQ(node.find_input("missing"), nullptr);
  EXPECT_EQ(node.outputs.at(0).as_tensor().name, "y");
  const TensorMeta& x = g.tensor_values.at("x");
  EXPECT_EQ(x.dtype, 7);
  EXPECT_EQ(concrete(x.sizes), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(concrete(x.strides), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(x.storage_offset.as_int(), 0);
  EXPECT_EQ(x.layout, kLayoutStrided);
  EXPECT_EQ(x.device.type, "cpu");
  EXPECT_FALSE(x.device.index.has_value());
  ASSERT_EQ(p.graph_module.module_call_graph.size(), 1u);
  EXPECT_EQ(p.graph_module.module_call_graph[0].signature->forward_arg_names,
            std::optional<std::vector<std::string>>(std::vector<std::string>{"x"}));
  ASSERT_EQ(p.graph_module.signature.input_specs.size(), 1u);
  EXPECT_EQ(p.graph_module.signature.input_specs[0].kind, InputSpec::Kind::UserInput);
  EXPECT_EQ(p.graph_module.signature.output_specs[0].kind, OutputSpec::Kind::UserOutput);
}

TEST(Parse, SyntaxErrorIsAnError) {
  EXPECT_CONTAINS(error_of([] { parse_exported_program("{\"graph_module\": "); }),
                  "models/model.json: invalid JSON");
  EXPECT_CONTAINS(error_of([] { parse_exported_program(""); }), "invalid JSON");
  EXPECT_CONTAINS(error_of([] { parse_exported_program("[1, 2]", "m.json"); }),
                  "m.json: expected an object");
}

TEST(Parse, WrongTypesNameThePath) {
  json program = minimal_program();
  program["graph_module"]["graph"]["nodes"] = json::object();
  EXPECT_CONTAINS(error_of([&] { parse(program); }),
                  "models/model.json: graph_module.graph.nodes: expected an array, got object");

  program = minimal_program();
  first_node(program)["inputs"][0]["arg"] = json::array();
  EXPECT_CONTAINS(error_of([&] { parse(program); }),
                  "models/model.json: graph_module.graph.nodes[0].inputs[0].arg: expected an "
                  "object with one key, got array");

  program = minimal_program();
  program["graph_module"]["graph"]["tensor_values"]["x"]["dtype"] = "float32";
  EXPECT_CONTAINS(error_of([&] { parse(program); }),
                  "graph_module.graph.tensor_values[\"x\"].dtype: expected an integer, got string");

  program = minimal_program();
  program["graph_module"]["graph"]["tensor_values"]["x"]["sizes"][1] = {{"as_int", 2.5}};
  EXPECT_CONTAINS(error_of([&] { parse(program); }),
                  "tensor_values[\"x\"].sizes[1].as_int: expected an integer, got number 2.5");

  program = minimal_program();
  first_node(program)["target"] = 3;
  EXPECT_CONTAINS(error_of([&] { parse(program); }), "nodes[0].target: expected a string");

  program = minimal_program();
  first_node(program)["inputs"][0]["arg"] = {{"as_tensor", {{"name", "x"}}}, {"as_int", 1}};
  EXPECT_CONTAINS(error_of([&] { parse(program); }), "expected an object with one key");

  program = minimal_program();
  program["graph_module"]["graph"]["tensor_values"]["x"]["sizes"][0] = {{"as_float", 2.0}};
  EXPECT_CONTAINS(error_of([&] { parse(program); }), "unknown union tag \"as_float\"");

  program = minimal_program();
  first_node(program)["inputs"][0]["arg"] = {{"as_int", 18446744073709551615ull}};
  EXPECT_CONTAINS(error_of([&] { parse(program); }), "out of the int64 range");
}

TEST(Parse, MissingRequiredKeys) {
  json program = minimal_program();
  first_node(program).erase("target");
  EXPECT_CONTAINS(error_of([&] { parse(program); }),
                  "graph_module.graph.nodes[0]: missing required key \"target\"");
  program = minimal_program();
  program.erase("graph_module");
  EXPECT_CONTAINS(error_of([&] { parse(program); }), "missing required key \"graph_module\"");
  program = minimal_program();
  program["graph_module"]["graph"]["tensor_values"]["y"].erase("strides");
  EXPECT_CONTAINS(error_of([&] { parse(program); }), "missing required key \"strides\"");
}

TEST(Parse, SchemaVersionIsChecked) {
  json program = minimal_program();
  program["schema_version"] = {{"major", 7}, {"minor", 3}};
  program["graph_module"] = 1;  // the version must be reported, not the odd shape
  const std::string message = error_of([&] { parse(program); });
  EXPECT_CONTAINS(message, "unsupported exported-program schema version 7.3");
  EXPECT_CONTAINS(message, "2.15.0");

  program = minimal_program();
  program["schema_version"] = {{"major", 9}, {"minor", 0}};
  EXPECT_EQ(parse(program).schema_version.major, 9);

  program = minimal_program();
  program.erase("schema_version");
  EXPECT_CONTAINS(error_of([&] { parse(program); }), "missing required key \"schema_version\"");
}

TEST(Parse, UnknownKeysAreIgnoredAndOptionalKeysDefault) {
  json program = minimal_program();
  program["a_future_field"] = {{"x", 1}};
  program["graph_module"]["graph"]["another"] = json::array();
  for (const char* key : {"verifiers", "torch_version", "guards_code", "range_constraints"}) {
    program.erase(key);
  }
  program["graph_module"].erase("module_call_graph");
  program["graph_module"]["graph"].erase("custom_obj_values");
  program["graph_module"]["graph"].erase("sym_float_values");
  program["graph_module"]["graph"].erase("is_single_tensor_return");
  first_node(program).erase("name");
  first_node(program)["inputs"][0].erase("kind");
  const ExportedProgram p = parse(program);
  EXPECT_EQ(p.torch_version, "<=2.4");
  EXPECT_TRUE(p.verifiers.empty());
  EXPECT_TRUE(p.range_constraints.empty());
  EXPECT_TRUE(p.graph_module.module_call_graph.empty());
  EXPECT_FALSE(p.graph_module.graph.is_single_tensor_return);
  EXPECT_FALSE(p.graph_module.graph.nodes[0].name.has_value());
  EXPECT_EQ(p.graph_module.graph.nodes[0].inputs[0].kind, 0);
}

TEST(Parse, UnknownArgumentTagParsesButThrowsOnAccess) {
  const Argument arg = parse_arg(R"({"as_hologram": {"beams": [1, 2]}})");
  EXPECT_EQ(arg.kind(), Kind::Unknown);
  EXPECT_EQ(arg.tag(), "as_hologram");
  EXPECT_EQ(json::parse(arg.as_unknown().raw_json), json::parse(R"({"beams": [1, 2]})"));
  const std::string message = error_of([&] { arg.as_tensor(); });
  EXPECT_CONTAINS(message, "as_hologram");
  EXPECT_CONTAINS(message, "as_tensor");
}

TEST(Parse, EveryArgumentKind) {
  EXPECT_TRUE(parse_arg(R"({"as_none": true})").is_none());
  EXPECT_EQ(parse_arg(R"({"as_tensor": {"name": "t"}})").as_tensor().name, "t");
  const Argument tensors = parse_arg(R"({"as_tensors": [{"name": "a"}, {"name": "b"}]})");
  ASSERT_EQ(tensors.as_tensors().size(), 2u);
  EXPECT_EQ(tensors.as_tensors()[1].name, "b");
  EXPECT_EQ(parse_arg(R"({"as_int": -4})").as_int(), -4);
  EXPECT_EQ(parse_arg(R"({"as_ints": [1, -2, 3]})").as_ints(), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_DOUBLE_EQ(parse_arg(R"({"as_float": 0.25})").as_float(), 0.25);
  EXPECT_DOUBLE_EQ(parse_arg(R"({"as_float": 2})").as_float(), 2.0);
  EXPECT_EQ(parse_arg(R"({"as_floats": [1.5, 2]})").as_floats(), (std::vector<double>{1.5, 2.0}));
  EXPECT_EQ(parse_arg(R"({"as_string": "mean"})").as_string(), "mean");
  EXPECT_EQ(parse_arg(R"({"as_strings": ["a", "b"]})").as_strings(),
            (std::vector<std::string>{"a", "b"}));

  const Argument sym_int = parse_arg(R"({"as_sym_int": {"as_name": "sym_size_int"}})");
  EXPECT_TRUE(sym_int.as_sym_int().is_name());
  EXPECT_EQ(std::get<std::string>(sym_int.as_sym_int().value), "sym_size_int");
  const Argument sym_ints = parse_arg(R"({"as_sym_ints": [{"as_name": "s"}, {"as_int": -1}]})");
  ASSERT_EQ(sym_ints.as_sym_ints().size(), 2u);
  EXPECT_FALSE(sym_ints.as_sym_ints()[1].is_name());
  EXPECT_EQ(std::get<int64_t>(sym_ints.as_sym_ints()[1].value), -1);

  EXPECT_EQ(parse_arg(R"({"as_scalar_type": 13})").as_scalar_type(), 13);
  EXPECT_EQ(parse_arg(R"({"as_memory_format": 1})").as_memory_format(), kMemoryFormatContiguous);
  EXPECT_EQ(parse_arg(R"({"as_layout": 7})").as_layout(), kLayoutStrided);
  const Argument device = parse_arg(R"({"as_device": {"type": "cuda", "index": 1}})");
  EXPECT_EQ(device.as_device().type, "cuda");
  EXPECT_EQ(device.as_device().index, std::optional<int64_t>(1));
  EXPECT_TRUE(parse_arg(R"({"as_bool": true})").as_bool());
  EXPECT_EQ(parse_arg(R"({"as_bools": [true, false]})").as_bools(),
            (std::vector<bool>{true, false}));
  EXPECT_EQ(std::get<bool>(parse_arg(R"({"as_sym_bool": {"as_bool": true}})").as_sym_bool().value),
            true);
  const Argument sym_bools =
      parse_arg(R"({"as_sym_bools": [{"as_name": "b"}, {"as_bool": false}]})");
  EXPECT_EQ(std::get<std::string>(sym_bools.as_sym_bools()[0].value), "b");

  const Argument optionals =
      parse_arg(R"({"as_optional_tensors": [{"as_tensor": {"name": "a"}}, {"as_none": true}]})");
  ASSERT_EQ(optionals.as_optional_tensors().size(), 2u);
  EXPECT_EQ(optionals.as_optional_tensors()[0].tensor->name, "a");
  EXPECT_FALSE(optionals.as_optional_tensors()[1].tensor.has_value());
  EXPECT_FALSE(parse_arg(R"({"as_optional_tensor": {"as_none": true}})")
                   .as_optional_tensor()
                   .tensor.has_value());
  EXPECT_EQ(parse_arg(R"({"as_optional_tensor": {"as_tensor": {"name": "o"}}})")
                .as_optional_tensor()
                .tensor->name,
            "o");

  const Argument obj = parse_arg(R"({"as_custom_obj": {"name": "obj0", "class_fqn": "ns.Cls"}})");
  EXPECT_EQ(obj.as_custom_obj().class_fqn, "ns.Cls");
  EXPECT_EQ(parse_arg(R"({"as_operator": "aten.add.Tensor"})").as_operator(), "aten.add.Tensor");
  EXPECT_EQ(std::get<std::string>(
                parse_arg(R"({"as_sym_float": {"as_name": "f"}})").as_sym_float().value),
            "f");
  const Argument sym_floats = parse_arg(R"({"as_sym_floats": [{"as_float": "NaN"}]})");
  EXPECT_TRUE(std::isnan(std::get<double>(sym_floats.as_sym_floats()[0].value)));
  const Argument complex = parse_arg(R"({"as_complex": {"real": 1.0, "imag": "-Infinity"}})");
  EXPECT_DOUBLE_EQ(complex.as_complex().real, 1.0);
  EXPECT_EQ(complex.as_complex().imag, -std::numeric_limits<double>::infinity());
  const Argument nested = parse_arg(R"({"as_nested_tensors": [[{"name": "a"}], []]})");
  ASSERT_EQ(nested.as_nested_tensors().size(), 2u);
  EXPECT_EQ(nested.as_nested_tensors()[0][0].name, "a");
  EXPECT_TRUE(nested.as_nested_tensors()[1].empty());
  EXPECT_EQ(parse_arg(R"({"as_int_lists": [[1, 2], [3]]})").as_int_lists(),
            (std::vector<std::vector<int64_t>>{{1, 2}, {3}}));
  EXPECT_EQ(parse_arg(R"({"as_float_lists": [[1.5], []]})").as_float_lists(),
            (std::vector<std::vector<double>>{{1.5}, {}}));
  const Argument map = parse_arg(
      R"({"as_string_to_argument": {"k": {"as_int": 5}, "t": {"as_tensor": {"name": "z"}}}})");
  EXPECT_EQ(map.as_string_to_argument().at("k").as_int(), 5);
  EXPECT_EQ(map.as_string_to_argument().at("t").as_tensor().name, "z");

  // Every kind reports its tag, and tags map back to kinds.
  EXPECT_EQ(map.tag(), "as_string_to_argument");
  EXPECT_EQ(Argument::kind_from_tag("as_optional_tensors"), Kind::OptionalTensors);
  EXPECT_FALSE(Argument::kind_from_tag("token").has_value());
  EXPECT_FALSE(Argument::kind_from_tag("as_hologram").has_value());
}

TEST(Parse, NestedGraphArgument) {
  json program = minimal_program();
  json sub = minimal_program()["graph_module"]["graph"];
  sub["is_single_tensor_return"] = true;
  first_node(program)["inputs"].push_back(
      {{"name", "body"}, {"arg", {{"as_graph", {{"name", "submod_0"}, {"graph", sub}}}}}});
  const ExportedProgram p = parse(program);
  const GraphArgument& graph = p.graph_module.graph.nodes[0].find_input("body")->arg.as_graph();
  EXPECT_EQ(graph.name, "submod_0");
  ASSERT_NE(graph.graph, nullptr);
  EXPECT_TRUE(graph.graph->is_single_tensor_return);
  EXPECT_EQ(graph.graph->nodes.at(0).target, "torch.ops.aten.relu.default");

  first_node(program)["inputs"][1]["arg"]["as_graph"]["graph"]["nodes"][0]["inputs"] = 7;
  EXPECT_CONTAINS(error_of([&] { parse(program); }),
                  "nodes[0].inputs[1].arg.as_graph.graph.nodes[0].inputs: expected an array");
}

TEST(Parse, AccessorKindMismatchThrows) {
  const Argument tensor = Argument::tensor("x");
  EXPECT_CONTAINS(error_of([&] { tensor.as_int(); }), "expected an as_int argument, got as_tensor");
  EXPECT_CONTAINS(error_of([&] { Argument::none().as_float(); }), "got as_none");
  EXPECT_CONTAINS(error_of([&] { Argument(Kind::Int, int64_t{1}).as_scalar_type(); }),
                  "as_scalar_type");
  EXPECT_CONTAINS(error_of([] { Argument(Kind::Tensor, int64_t{1}); }), "does not fit");
  EXPECT_EQ(Argument(Kind::Layout, int64_t{7}).as_layout(), 7);
}

TEST(Parse, NonFiniteFloats) {
  EXPECT_EQ(parse_arg(R"({"as_float": "Infinity"})").as_float(),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_arg(R"({"as_float": "+Infinity"})").as_float(),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_arg(R"({"as_float": "-Infinity"})").as_float(),
            -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(parse_arg(R"({"as_float": "NaN"})").as_float()));
  const std::vector<double> floats =
      parse_arg(R"({"as_floats": [1.0, "-Infinity", "NaN"]})").as_floats();
  ASSERT_EQ(floats.size(), 3u);
  EXPECT_EQ(floats[1], -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(floats[2]));
  EXPECT_CONTAINS(error_of([] { parse_arg(R"({"as_float": "inf"})"); }),
                  "arg.as_float: expected a number");

  json program = minimal_program();
  program["graph_module"]["graph"]["sym_float_values"]["f"] = {
      {"as_expr", {{"expr_str", "Symbol('zf0')"}, {"hint", {{"as_float", "-Infinity"}}}}}};
  const ExportedProgram p = parse(program);
  const auto& expr = std::get<SymExpr>(p.graph_module.graph.sym_float_values.at("f").value);
  EXPECT_EQ(expr.hint->as_float, -std::numeric_limits<double>::infinity());
}

TEST(Parse, SignatureSpecs) {
  json program = minimal_program();
  program["graph_module"]["signature"]["input_specs"] = json::parse(R"([
    {"parameter": {"arg": {"name": "p_fc_weight"}, "parameter_name": "fc.weight"}},
    {"buffer": {"arg": {"name": "b_running"}, "buffer_name": "running", "persistent": false}},
    {"tensor_constant": {"arg": {"name": "c_t"}, "tensor_constant_name": "t"}},
    {"custom_obj": {"arg": {"name": "obj", "class_fqn": "ns.C"}, "custom_obj_name": "o"}},
    {"token": {"arg": {"name": "token_0"}}},
    {"constant_input": {"name": "alpha", "value": {"as_float": 0.5}}},
    {"user_input": {"arg": {"as_sym_int": {"as_name": "s0"}}}},
    {"future_input": {"arg": {"name": "q"}}}
  ])");
  program["graph_module"]["signature"]["output_specs"] = json::parse(R"([
    {"loss_output": {"arg": {"name": "loss"}}},
    {"buffer_mutation": {"arg": {"name": "add"}, "buffer_name": "running"}},
    {"gradient_to_parameter": {"arg": {"name": "g"}, "parameter_name": "fc.weight"}},
    {"gradient_to_user_input": {"arg": {"name": "gi"}, "user_input_name": "x"}},
    {"user_input_mutation": {"arg": {"name": "add_1"}, "user_input_name": "x"}},
    {"token": {"arg": {"name": "token_1"}}},
    {"parameter_mutation": {"arg": {"name": "pm"}, "parameter_name": "fc.bias"}},
    {"user_output": {"arg": {"as_int": 3}}},
    {"future_output": {}}
  ])");
  const GraphSignature s = parse(program).graph_module.signature;
  ASSERT_EQ(s.input_specs.size(), 8u);
  EXPECT_EQ(s.input_specs[0].kind, InputSpec::Kind::Parameter);
  EXPECT_EQ(s.input_specs[0].target, "fc.weight");
  EXPECT_EQ(s.input_specs[0].arg.as_tensor().name, "p_fc_weight");
  EXPECT_EQ(s.input_specs[1].kind, InputSpec::Kind::Buffer);
  EXPECT_FALSE(s.input_specs[1].persistent);
  EXPECT_EQ(s.input_specs[2].kind, InputSpec::Kind::TensorConstant);
  EXPECT_EQ(s.input_specs[2].target, "t");
  EXPECT_EQ(s.input_specs[3].kind, InputSpec::Kind::CustomObj);
  EXPECT_EQ(s.input_specs[3].arg.as_custom_obj().class_fqn, "ns.C");
  EXPECT_EQ(s.input_specs[3].target, "o");
  EXPECT_EQ(s.input_specs[4].kind, InputSpec::Kind::Token);
  EXPECT_EQ(s.input_specs[4].arg.as_token().name, "token_0");
  EXPECT_EQ(s.input_specs[5].kind, InputSpec::Kind::ConstantInput);
  EXPECT_EQ(s.input_specs[5].target, "alpha");
  EXPECT_EQ(std::get<double>(s.input_specs[5].constant_value->value), 0.5);
  EXPECT_EQ(s.input_specs[5].arg.as_float(), 0.5);
  EXPECT_EQ(s.input_specs[6].kind, InputSpec::Kind::UserInput);
  EXPECT_EQ(std::get<std::string>(s.input_specs[6].arg.as_sym_int().value), "s0");
  EXPECT_EQ(s.input_specs[7].kind, InputSpec::Kind::Unknown);
  EXPECT_EQ(s.input_specs[7].unknown_tag, "future_input");
  EXPECT_CONTAINS(error_of([&] { s.input_specs[7].arg.as_tensor(); }), "future_input");

  ASSERT_EQ(s.output_specs.size(), 9u);
  const std::vector<OutputSpec::Kind> kinds = {OutputSpec::Kind::LossOutput,
                                               OutputSpec::Kind::BufferMutation,
                                               OutputSpec::Kind::GradientToParameter,
                                               OutputSpec::Kind::GradientToUserInput,
                                               OutputSpec::Kind::UserInputMutation,
                                               OutputSpec::Kind::Token,
                                               OutputSpec::Kind::ParameterMutation,
                                               OutputSpec::Kind::UserOutput,
                                               OutputSpec::Kind::Unknown};
  for (size_t i = 0; i < kinds.size(); ++i) EXPECT_EQ(s.output_specs[i].kind, kinds[i]) << i;
  EXPECT_EQ(s.output_specs[1].target, "running");
  EXPECT_EQ(s.output_specs[4].target, "x");
  EXPECT_EQ(s.output_specs[4].arg.as_tensor().name, "add_1");
  EXPECT_EQ(s.output_specs[6].target, "fc.bias");
  EXPECT_EQ(s.output_specs[7].arg.as_int(), 3);
  EXPECT_EQ(s.output_specs[8].unknown_tag, "future_output");

  // A user_input_mutation's arg is a bare TensorArgument, not an Argument union.
  program["graph_module"]["signature"]["output_specs"] = json::parse(
      R"([{"user_input_mutation": {"arg": {"as_tensor": {"name": "a"}}, "user_input_name": "x"}}])");
  EXPECT_CONTAINS(error_of([&] { parse(program); }),
                  "output_specs[0].user_input_mutation.arg: missing required key \"name\"");
}

TEST(Parse, RangeConstraints) {
  json program = minimal_program();
  program["range_constraints"] = json::parse(R"({
    "s0": {"min_val": 2, "max_val": null},
    "s1": {"min_val": 0, "max_val": 9223372036854775807},
    "s2": {"min_val": -9223372036854775808, "max_val": 18446744073709551615},
    "s3": {"min_val": 1, "max_val": 1e30},
    "s4": {"min_val": "-Infinity", "max_val": "Infinity"},
    "s5": {"min_val": 3, "max_val": 64},
    "s6": {}
  })");
  const auto ranges = parse(program).range_constraints;
  EXPECT_EQ(ranges.at("s0").min_val, std::optional<int64_t>(2));
  EXPECT_FALSE(ranges.at("s0").max_val.has_value());
  EXPECT_EQ(ranges.at("s1").min_val, std::optional<int64_t>(0));
  EXPECT_FALSE(ranges.at("s1").max_val.has_value());
  EXPECT_FALSE(ranges.at("s2").min_val.has_value());
  EXPECT_FALSE(ranges.at("s2").max_val.has_value());
  EXPECT_FALSE(ranges.at("s3").max_val.has_value());
  EXPECT_FALSE(ranges.at("s4").min_val.has_value());
  EXPECT_FALSE(ranges.at("s4").max_val.has_value());
  EXPECT_EQ(ranges.at("s5").max_val, std::optional<int64_t>(64));
  EXPECT_FALSE(ranges.at("s6").min_val.has_value());

  program["range_constraints"] = json::parse(R"({"s0": {"min_val": "two", "max_val": null}})");
  EXPECT_CONTAINS(error_of([&] { parse(program); }), "range_constraints[\"s0\"].min_val");
}

TEST(Parse, SymIntValues) {
  json program = minimal_program();
  program["graph_module"]["graph"]["tensor_values"]["x"]["sizes"][0] = {
      {"as_expr",
       {{"expr_str", "Symbol('s0', positive=True, integer=True)"}, {"hint", {{"as_int", 5}}}}}};
  program["graph_module"]["graph"]["sym_bool_values"]["b"] = {{"as_bool", true}};
  const ExportedProgram p = parse(program);
  const SymInt& size = p.graph_module.graph.tensor_values.at("x").sizes[0];
  EXPECT_FALSE(size.is_int());
  EXPECT_EQ(size.as_expr().hint->as_int, std::optional<int64_t>(5));
  EXPECT_EQ(parse_sympy(size.as_expr().expr_str), SympyExpr::symbol("s0"));
  EXPECT_CONTAINS(error_of([&] { size.as_int(); }), "Symbol('s0'");
  EXPECT_CONTAINS(error_of([&] { p.graph_module.graph.tensor_values.at("x").sizes[1].as_expr(); }),
                  "expected a symbolic expression");
  EXPECT_EQ(std::get<bool>(p.graph_module.graph.sym_bool_values.at("b").value), true);
}

TEST(Parse, DeepNestingIsAnErrorNotACrash) {
  std::string deep;
  constexpr int kDepth = 2000;
  for (int i = 0; i < kDepth; ++i) deep += R"({"as_string_to_argument": {"k": )";
  deep += R"({"as_int": 1})";
  for (int i = 0; i < kDepth; ++i) deep += "}}";
  // Spliced in as text: nlohmann's own dump() would recurse as deep as the value.
  json program = minimal_program();
  first_node(program)["inputs"].push_back({{"name", "extra"}, {"arg", "ARG"}});
  std::string text = program.dump();
  text.replace(text.find("\"ARG\""), 5, deep);
  EXPECT_CONTAINS(error_of([&] { parse_exported_program(text); }), "nested too deeply");
}

TEST(Parse, PayloadConfig) {
  const auto config = parse_payload_config(R"({"config": {
      "fc.weight": {"path_name": "weight_0", "is_param": true, "use_pickle": false,
                    "tensor_meta": )" + tensor_meta_json({4, 2}).dump() +
                                           R"(},
      "obj": {"path_name": "custom_obj_0", "is_param": false, "use_pickle": true,
              "tensor_meta": null}}})");
  ASSERT_EQ(config.size(), 2u);
  EXPECT_EQ(config.at("fc.weight").path_name, "weight_0");
  EXPECT_TRUE(config.at("fc.weight").is_param);
  EXPECT_EQ(concrete(config.at("fc.weight").tensor_meta->sizes), (std::vector<int64_t>{4, 2}));
  EXPECT_TRUE(config.at("obj").use_pickle);
  EXPECT_FALSE(config.at("obj").tensor_meta.has_value());

  EXPECT_CONTAINS(error_of([] { parse_payload_config("{}", "w.json"); }),
                  "w.json: missing required key \"config\"");
  EXPECT_CONTAINS(
      error_of([] { parse_payload_config(R"({"config": {"w": {"path_name": 0}}})", "w.json"); }),
      "w.json: config[\"w\"].path_name: expected a string, got integer 0");
  EXPECT_CONTAINS(error_of([] { parse_payload_config("{", "w.json"); }), "w.json: invalid JSON");
}

TEST(Parse, TensorMetaUsesTheGivenLocation) {
  const TensorMeta meta = parse_tensor_meta(tensor_meta_json({3}, 13), "here");
  EXPECT_EQ(meta.dtype, 13);
  json bad = tensor_meta_json({3});
  bad["device"] = "cpu";
  EXPECT_CONTAINS(error_of([&] { parse_tensor_meta(bad, "somewhere"); }),
                  "somewhere.device: expected an object, got string \"cpu\"");
}

// ---------------------------------------------------------------------------------------------
// Archive and package: malformed inputs
// ---------------------------------------------------------------------------------------------

TEST(Archive, ValidInMemoryPackage) {
  const Archive archive = Archive::from_buffer(make_zip(package_files("package")));
  EXPECT_EQ(archive.root(), "package");
  EXPECT_TRUE(archive.contains("archive_format"));
  EXPECT_FALSE(archive.contains("package/archive_format"));
  EXPECT_EQ(archive.read("archive_format"), "pt2");
  const Package package = load_package(archive);
  EXPECT_EQ(package.model_name, "model");
  EXPECT_EQ(package.archive_version, "0");
  ASSERT_EQ(package.weights.size(), 1u);
  EXPECT_EQ(package.weights.at("w").bytes->size(), 8u);
  EXPECT_EQ(strided_floats(package.weights.at("w")), (std::vector<double>{1.5, -2.0}));
  EXPECT_TRUE(package.constants.empty());

  Archive moved = Archive::from_buffer(make_zip(package_files()));
  Archive target = std::move(moved);
  EXPECT_EQ(target.root(), "archive");
}

TEST(Archive, GarbageIsRejected) {
  EXPECT_CONTAINS(error_of([] { Archive::from_buffer(""); }), "empty");
  std::mt19937 rng(1234);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(noise); }), "not a zip archive");
  EXPECT_CONTAINS(error_of([] { Archive::from_buffer("PK\x03\x04 truncated"); }),
                  "not a zip archive");
  EXPECT_CONTAINS(error_of([] { Archive::from_file(fixture_path("no_such_file.pt2")); }),
                  "no_such_file.pt2");
  EXPECT_CONTAINS(error_of([] { Archive::from_file(fixture_path("no_such_file.pt2")); }), "no such file");
  EXPECT_CONTAINS(error_of([] { Archive::from_file(fixture_path("make_fixtures.py")); }),
                  "corrupt zip archive");
}

TEST(Archive, TruncatedFixtureIsRejected) {
  const std::string bytes = read_file(fixture_path("mlp.pt2"));
  for (const size_t keep : {size_t{22}, bytes.size() / 2, bytes.size() - 10}) {
    const std::string message = error_of([&] {
      const Archive archive = Archive::from_buffer(bytes.substr(0, keep));
      load_package(archive);
    });
    EXPECT_FALSE(message.empty());
  }
}

TEST(Archive, CorruptEntryIsDetected) {
  std::string bytes = read_file(fixture_path("mlp.pt2"));
  const size_t at = bytes.find("\"graph_module\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] ^= 0x20;  // still valid zip structure; the CRC of models/model.json breaks
  const Archive archive = Archive::from_buffer(bytes);
  EXPECT_CONTAINS(error_of([&] { load_package(archive); }), "models/model.json");
}

// Flipping random bytes of a real archive must give a clean luminal::Error or a successful load,
// never a crash or another exception type.
TEST(Archive, RandomCorruptionNeverCrashes) {
  const std::string original = read_file(fixture_path("constants.pt2"));
  std::mt19937 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    try {
      const Archive archive = Archive::from_buffer(bytes);
      load_package(archive);
    } catch (const Error&) {
      // expected for most trials
    } catch (const std::exception& e) {
      FAIL() << "trial " << trial << ": unexpected exception type: " << e.what();
    }
  }
}

TEST(Archive, ZipWithoutArchiveFormat) {
  auto files = package_files();
  remove_file(files, "archive/archive_format");
  EXPECT_CONTAINS(error_of([&] { load_files(files); }), "not a PT2 archive");
  EXPECT_CONTAINS(error_of([] { load_files({{"readme.txt", "hello"}}); }), "not a PT2 archive");
}

TEST(Archive, WrongArchiveFormat) {
  auto files = package_files();
  set_file(files, "archive/archive_format", "torchscript");
  const std::string message = error_of([&] { load_files(files); });
  EXPECT_CONTAINS(message, "not a PT2 archive");
  EXPECT_CONTAINS(message, "torchscript");
}

TEST(Archive, ModelJsonErrorsNameTheEntry) {
  auto files = package_files();
  set_file(files, "archive/models/model.json", "{\"graph_module\": [");
  EXPECT_CONTAINS(error_of([&] { load_files(files); }), "models/model.json: invalid JSON");

  json program = minimal_program();
  program["graph_module"]["graph"]["nodes"][0]["inputs"] = "oops";
  set_file(files, "archive/models/model.json", program.dump());
  EXPECT_CONTAINS(error_of([&] { load_files(files); }),
                  "models/model.json: graph_module.graph.nodes[0].inputs: expected an array");

  program = minimal_program();
  program["schema_version"]["major"] = 7;
  set_file(files, "archive/models/model.json", program.dump());
  EXPECT_CONTAINS(error_of([&] { load_files(files); }), "schema version 7.20");
}

TEST(Archive, PickledPayloadFailsOnlyWhenLoaded) {
  auto files = package_files();
  const json constants = {{"config",
                           {{"obj",
                             {{"path_name", "custom_obj_0"},
                              {"is_param", false},
                              {"use_pickle", true},
                              {"tensor_meta", nullptr}}}}}};
  set_file(files, "archive/data/constants/model_constants_config.json", constants.dump());
  set_file(files, "archive/data/constants/custom_obj_0", "\x80\x04pickle");

  LoadOptions without_constants;
  without_constants.load_constants = false;
  EXPECT_EQ(load_files(files, without_constants).weights.size(), 1u);
  const std::string message = error_of([&] { load_files(files); });
  EXPECT_CONTAINS(message, "constant 'obj'");
  EXPECT_CONTAINS(message, "pickled payloads");
}

TEST(Archive, PayloadSmallerThanTensorMetaNeeds) {
  auto files = package_files();
  set_file(files, "archive/data/weights/weight_0", std::string(4, '\0'));
  const std::string message = error_of([&] { load_files(files); });
  EXPECT_CONTAINS(message, "weight 'w'");
  EXPECT_CONTAINS(message, "holds 4 bytes");
  EXPECT_CONTAINS(message, "needs at least 8 bytes");

  LoadOptions without_weights;
  without_weights.load_weights = false;
  EXPECT_TRUE(load_files(files, without_weights).weights.empty());

  // A storage offset past the end is caught as well.
  auto offset_files = package_files();
  json config = json::parse(R"({"config": {}})");
  json meta = tensor_meta_json({2});
  meta["storage_offset"] = {{"as_int", 1}};
  config["config"]["w"] = {
      {"path_name", "weight_0"}, {"is_param", true}, {"use_pickle", false}, {"tensor_meta", meta}};
  set_file(offset_files, "archive/data/weights/model_weights_config.json", config.dump());
  EXPECT_CONTAINS(error_of([&] { load_files(offset_files); }), "needs at least 12 bytes");

  // A payload that is not a whole number of elements.
  auto odd_files = package_files();
  set_file(odd_files, "archive/data/weights/weight_0", std::string(9, '\0'));
  EXPECT_CONTAINS(error_of([&] { load_files(odd_files); }), "not a multiple of the element size");
}

TEST(Archive, MissingPayloadFile) {
  auto files = package_files();
  remove_file(files, "archive/data/weights/weight_0");
  const std::string message = error_of([&] { load_files(files); });
  EXPECT_CONTAINS(message, "weight 'w'");
  EXPECT_CONTAINS(message, "data/weights/weight_0 is missing");
}

TEST(Archive, LegacyPickledWeightsFailOnlyWhenRequested) {
  auto files = package_files();
  remove_file(files, "archive/data/weights/model_weights_config.json");
  remove_file(files, "archive/data/weights/weight_0");
  set_file(files, "archive/data/weights/model.pt", "PK legacy pickle");
  EXPECT_CONTAINS(error_of([&] { load_files(files); }), "legacy pickled weight format");
  LoadOptions without_weights;
  without_weights.load_weights = false;
  EXPECT_EQ(load_files(files, without_weights).program.graph_module.graph.nodes.size(), 1u);
}

TEST(Archive, MissingConfigsGiveEmptyMaps) {
  auto files = package_files();
  remove_file(files, "archive/data/weights/model_weights_config.json");
  remove_file(files, "archive/data/constants/model_constants_config.json");
  remove_file(files, "archive/archive_version");
  const Package package = load_files(files);
  EXPECT_TRUE(package.weights.empty());
  EXPECT_TRUE(package.constants.empty());
  EXPECT_EQ(package.archive_version, "");
}

TEST(Archive, ModelSelection) {
  auto files = package_files();
  set_file(files, "archive/models/other.json", minimal_program().dump());
  EXPECT_CONTAINS(error_of([&] { load_files(files); }), "several models (model, other)");
  LoadOptions pick;
  pick.model_name = "other";
  pick.load_weights = false;  // other_weights_config.json does not exist: empty, not an error
  EXPECT_EQ(load_files(files, pick).model_name, "other");
  pick.model_name = "absent";
  EXPECT_CONTAINS(error_of([&] { load_files(files, pick); }), "no model \"absent\"");

  auto no_model = package_files();
  remove_file(no_model, "archive/models/model.json");
  EXPECT_CONTAINS(error_of([&] { load_files(no_model); }), "no models/<name>.json");
}

TEST(Archive, ReadOfMissingEntryNamesIt) {
  const Archive archive = Archive::from_buffer(make_zip(package_files()));
  EXPECT_CONTAINS(error_of([&] { archive.read("models/nope.json"); }), "models/nope.json");
}

// ---------------------------------------------------------------------------------------------
// Fixtures written by torch.export.save
// ---------------------------------------------------------------------------------------------

std::vector<std::string> targets_of(const Graph& graph) {
  std::vector<std::string> targets;
  for (const Node& node : graph.nodes) targets.push_back(node.target);
  return targets;
}

std::vector<std::string> expected_targets(const json& expected) {
  return expected.at("node_targets").get<std::vector<std::string>>();
}

const InputSpec* find_input_spec(const GraphSignature& signature, const std::string& target) {
  for (const InputSpec& spec : signature.input_specs) {
    if (spec.target == target) return &spec;
  }
  return nullptr;
}

void expect_matches_summary(const TensorPayload& payload, const json& summary) {
  SCOPED_TRACE(payload.fqn);
  const TensorMeta& meta = payload.meta.tensor_meta.value();
  EXPECT_EQ(concrete(meta.sizes), summary.at("sizes").get<std::vector<int64_t>>());
  const std::vector<double> values = strided_floats(payload);
  ASSERT_EQ(static_cast<int64_t>(values.size()), summary.at("numel").get<int64_t>());
  const auto first = summary.at("first").get<std::vector<double>>();
  for (size_t i = 0; i < first.size(); ++i) EXPECT_DOUBLE_EQ(values[i], first[i]) << i;
  double sum = 0;
  for (const double v : values) sum += v;
  EXPECT_NEAR(sum, summary.at("sum").get<double>(), 1e-9);
}

TEST(Fixtures, MlpStructure) {
  const json expected = read_expected("mlp");
  const Archive archive = Archive::from_file(fixture_path("mlp.pt2"));
  EXPECT_EQ(archive.root(), "mlp");  // torch names the root after the file's stem
  EXPECT_EQ(archive.read("archive_format"), "pt2");
  EXPECT_TRUE(archive.contains("models/model.json"));
  EXPECT_TRUE(archive.contains("data/weights/model_weights_config.json"));

  const Package package = load_package(archive);
  const ExportedProgram& program = package.program;
  EXPECT_EQ(package.model_name, "model");
  EXPECT_EQ(program.schema_version.major, 8);
  EXPECT_EQ(program.torch_version, expected.at("torch_version").get<std::string>());
  const Graph& graph = program.graph_module.graph;
  EXPECT_EQ(targets_of(graph), expected_targets(expected));
  EXPECT_EQ(graph.nodes.size(), expected.at("node_targets").size());
  const auto targets = targets_of(graph);
  EXPECT_NE(std::find(targets.begin(), targets.end(), "torch.ops.aten.addmm.default"),
            targets.end());

  const TensorMeta& x = graph.tensor_values.at("x");
  EXPECT_EQ(x.dtype, 7);
  EXPECT_EQ(concrete(x.sizes), (std::vector<int64_t>{2, 4}));
  const Node* addmm = nullptr;
  for (const Node& node : graph.nodes) {
    if (node.target == "torch.ops.aten.addmm.default") {
      addmm = &node;
      break;
    }
  }
  ASSERT_NE(addmm, nullptr);
  EXPECT_EQ(concrete(graph.tensor_values.at(addmm->outputs.at(0).as_tensor().name).sizes),
            (std::vector<int64_t>{2, 8}));

  const GraphSignature& signature = program.graph_module.signature;
  const InputSpec* fc1_weight = find_input_spec(signature, "fc1.weight");
  ASSERT_NE(fc1_weight, nullptr);
  EXPECT_EQ(fc1_weight->kind, InputSpec::Kind::Parameter);
  EXPECT_EQ(fc1_weight->arg.as_tensor().name, "p_fc1_weight");
  EXPECT_EQ(concrete(graph.tensor_values.at("p_fc1_weight").sizes), (std::vector<int64_t>{8, 4}));
  for (const char* name : {"fc1.bias", "fc2.weight", "fc2.bias"}) {
    ASSERT_NE(find_input_spec(signature, name), nullptr) << name;
    EXPECT_EQ(find_input_spec(signature, name)->kind, InputSpec::Kind::Parameter) << name;
  }
  const InputSpec* row = find_input_spec(signature, "fc1_row1");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->kind, InputSpec::Kind::Buffer);
  EXPECT_TRUE(row->persistent);
  EXPECT_EQ(signature.input_specs.back().kind, InputSpec::Kind::UserInput);
  EXPECT_EQ(signature.input_specs.back().arg.as_tensor().name, "x");
  ASSERT_EQ(signature.output_specs.size(), 1u);
  EXPECT_EQ(signature.output_specs[0].kind, OutputSpec::Kind::UserOutput);
}

TEST(Fixtures, MlpWeightsMatchTheSidecar) {
  const json expected = read_expected("mlp");
  const Package package = load_package(Archive::from_file(fixture_path("mlp.pt2")));
  const json& weights = expected.at("weights");
  ASSERT_EQ(package.weights.size(), weights.size());
  for (const auto& [fqn, summary] : weights.items()) {
    ASSERT_EQ(package.weights.count(fqn), 1u) << fqn;
    const TensorPayload& payload = package.weights.at(fqn);
    EXPECT_EQ(payload.fqn, fqn);
    EXPECT_EQ(payload.meta.tensor_meta->dtype, 7);
    expect_matches_summary(payload, summary);
  }
  EXPECT_TRUE(package.weights.at("fc1.weight").meta.is_param);
  EXPECT_EQ(package.weights.at("fc1.weight").bytes->size(), 8u * 4u * 4u);
  EXPECT_EQ(package.weights.at("fc2.bias").bytes->size(), 3u * 4u);
  // fc1_row1 aliases row 1 of fc1.weight: same storage, offset 4.
  const TensorPayload& row = package.weights.at("fc1_row1");
  EXPECT_FALSE(row.meta.is_param);
  EXPECT_EQ(row.meta.path_name, package.weights.at("fc1.weight").meta.path_name);
  EXPECT_EQ(row.meta.tensor_meta->storage_offset.as_int(), 4);
  EXPECT_EQ(row.bytes, package.weights.at("fc1.weight").bytes);  // one shared storage, not a copy
  EXPECT_TRUE(package.constants.empty());
}

TEST(Fixtures, BufferAndFileGiveTheSameResult) {
  const Package from_file = load_package(Archive::from_file(fixture_path("mlp.pt2")));
  const Archive archive = Archive::from_buffer(read_file(fixture_path("mlp.pt2")));
  EXPECT_EQ(archive.root(), "mlp");
  const Package from_buffer = load_package(archive);
  EXPECT_EQ(targets_of(from_buffer.program.graph_module.graph),
            targets_of(from_file.program.graph_module.graph));
  for (const auto& [fqn, payload] : from_file.weights) {
    EXPECT_EQ(*from_buffer.weights.at(fqn).bytes, *payload.bytes) << fqn;
  }
  LoadOptions graph_only;
  graph_only.load_weights = false;
  graph_only.load_constants = false;
  EXPECT_TRUE(load_package(archive, graph_only).weights.empty());
}

TEST(Fixtures, DynamicBatch) {
  const json expected = read_expected("dynamic");
  const Package package = load_package(Archive::from_file(fixture_path("dynamic.pt2")));
  const ExportedProgram& program = package.program;
  const Graph& graph = program.graph_module.graph;
  EXPECT_EQ(targets_of(graph), expected_targets(expected));

  const TensorMeta& x = graph.tensor_values.at("x");
  ASSERT_EQ(x.sizes.size(), 3u);
  ASSERT_FALSE(x.sizes[0].is_int());
  const SymExpr& batch = x.sizes[0].as_expr();
  ASSERT_TRUE(batch.hint.has_value());
  EXPECT_EQ(batch.hint->as_int, std::optional<int64_t>(3));
  const SympyExpr symbol = parse_sympy(batch.expr_str);
  ASSERT_EQ(symbol.kind, SympyExpr::Kind::Symbol);
  EXPECT_EQ(x.sizes[1].as_int(), 2);
  EXPECT_EQ(x.sizes[2].as_int(), 4);
  EXPECT_EQ(x.strides[0].as_int(), 8);

  ASSERT_EQ(program.range_constraints.count(symbol.name), 1u) << symbol.name;
  const RangeConstraint& range = program.range_constraints.at(symbol.name);
  EXPECT_EQ(range.min_val, std::optional<int64_t>(2));
  EXPECT_FALSE(range.max_val.has_value());

  const Node& sym_size = graph.nodes.at(0);
  EXPECT_EQ(sym_size.target, "torch.ops.aten.sym_size.int");
  EXPECT_EQ(sym_size.find_input("dim")->arg.as_int(), 0);
  const std::string& sym_name = std::get<std::string>(sym_size.outputs.at(0).as_sym_int().value);
  ASSERT_EQ(graph.sym_int_values.count(sym_name), 1u);
  EXPECT_EQ(parse_sympy(graph.sym_int_values.at(sym_name).as_expr().expr_str), symbol);

  const Node& view = graph.nodes.back();
  EXPECT_EQ(view.target, "torch.ops.aten.view.default");
  const auto& size = view.find_input("size")->arg.as_sym_ints();
  ASSERT_EQ(size.size(), 2u);
  EXPECT_EQ(std::get<std::string>(size[0].value), sym_name);
  EXPECT_EQ(std::get<int64_t>(size[1].value), -1);
  const TensorMeta& out = graph.tensor_values.at(view.outputs.at(0).as_tensor().name);
  EXPECT_EQ(parse_sympy(out.sizes[0].as_expr().expr_str), symbol);
  EXPECT_EQ(out.sizes[1].as_int(), 8);
  EXPECT_TRUE(package.weights.empty());
}

TEST(Fixtures, ConstantsAndInputMutation) {
  const json expected = read_expected("constants");
  const Package package = load_package(Archive::from_file(fixture_path("constants.pt2")));
  const ExportedProgram& program = package.program;
  EXPECT_EQ(targets_of(program.graph_module.graph), expected_targets(expected));

  const GraphSignature& signature = program.graph_module.signature;
  ASSERT_EQ(signature.input_specs.size(), 3u);
  EXPECT_EQ(signature.input_specs[0].kind, InputSpec::Kind::Buffer);
  EXPECT_EQ(signature.input_specs[0].target, "scale");
  EXPECT_EQ(signature.input_specs[0].arg.as_tensor().name, "b_scale");
  EXPECT_EQ(signature.input_specs[1].kind, InputSpec::Kind::TensorConstant);
  EXPECT_EQ(signature.input_specs[1].target, "lifted_tensor_0");
  EXPECT_EQ(signature.input_specs[1].arg.as_tensor().name, "c_lifted_tensor_0");
  EXPECT_EQ(signature.input_specs[2].kind, InputSpec::Kind::UserInput);
  EXPECT_EQ(signature.input_specs[2].arg.as_tensor().name, "x");

  ASSERT_EQ(signature.output_specs.size(), 2u);
  EXPECT_EQ(signature.output_specs[0].kind, OutputSpec::Kind::UserInputMutation);
  EXPECT_EQ(signature.output_specs[0].target, "x");
  const std::string& mutated = signature.output_specs[0].arg.as_tensor().name;
  EXPECT_EQ(program.graph_module.graph.outputs.at(0).as_tensor().name, mutated);
  EXPECT_EQ(signature.output_specs[1].kind, OutputSpec::Kind::UserOutput);

  const json& constants = expected.at("constants");
  ASSERT_EQ(package.constants.size(), constants.size());
  for (const auto& [fqn, summary] : constants.items()) {
    ASSERT_EQ(package.constants.count(fqn), 1u) << fqn;
    expect_matches_summary(package.constants.at(fqn), summary);
  }
  EXPECT_EQ(strided_floats(package.constants.at("lifted_tensor_0")),
            (std::vector<double>{1.0, 2.0, 3.0}));
  const json& weights = expected.at("weights");
  ASSERT_EQ(package.weights.size(), weights.size());
  expect_matches_summary(package.weights.at("scale"), weights.at("scale"));
  EXPECT_EQ(strided_floats(package.weights.at("scale")), (std::vector<double>{0.5, 2.0, 4.0}));

  LoadOptions no_constants;
  no_constants.load_constants = false;
  EXPECT_TRUE(load_package(Archive::from_file(fixture_path("constants.pt2")), no_constants)
                  .constants.empty());
}

TEST(Fixtures, NonFiniteFloats) {
  const json expected = read_expected("nonfinite");
  const Archive archive = Archive::from_file(fixture_path("nonfinite.pt2"));
  EXPECT_EQ(archive.root(), "archive");  // saved to a buffer
  const Package package = load_package(archive);
  const Graph& graph = package.program.graph_module.graph;
  EXPECT_EQ(targets_of(graph), expected_targets(expected));
  constexpr double kInf = std::numeric_limits<double>::infinity();

  const Node* scalar_tensor = nullptr;
  const Node* clamp = nullptr;
  const Node* add = nullptr;
  for (const Node& node : graph.nodes) {
    if (node.target == "torch.ops.aten.scalar_tensor.default") scalar_tensor = &node;
    if (node.target == "torch.ops.aten.clamp.default") clamp = &node;
    if (node.target == "torch.ops.aten.add.Tensor") add = &node;
  }
  ASSERT_NE(scalar_tensor, nullptr);
  ASSERT_NE(clamp, nullptr);
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(scalar_tensor->find_input("s")->arg.as_float(), -kInf);
  EXPECT_EQ(scalar_tensor->find_input("dtype")->arg.as_scalar_type(), 7);
  EXPECT_EQ(scalar_tensor->find_input("dtype")->kind, 2);
  EXPECT_EQ(scalar_tensor->find_input("layout")->arg.as_layout(), kLayoutStrided);
  EXPECT_EQ(scalar_tensor->find_input("device")->arg.as_device().type, "cpu");
  EXPECT_FALSE(scalar_tensor->find_input("device")->arg.as_device().index.has_value());
  EXPECT_EQ(clamp->find_input("min")->arg.as_float(), -kInf);
  EXPECT_EQ(clamp->find_input("max")->arg.as_float(), kInf);
  EXPECT_TRUE(std::isnan(add->find_input("other")->arg.as_float()));
  EXPECT_EQ(graph.tensor_values.at("gt").dtype, 12);
  EXPECT_TRUE(graph.tensor_values.at("scalar_tensor").sizes.empty());
}

}  // namespace
}  // namespace luminal::pt2
