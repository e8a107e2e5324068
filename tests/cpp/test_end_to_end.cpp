// PT2 archive -> translation -> optimization -> CPU execution, without Python or torch: the
// fixture archives are compiled by the core and their outputs compared with eager results that
// tests/fixtures/make_fixtures.py recorded next to them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/half.h"
#include "runtime/compiled.h"
#include "fixture_helpers.h"

using namespace luminal;
using runtime::TensorView;

namespace {

using luminal::testing::fixture;
using luminal::testing::read_json;

DType dtype_named(const std::string& name) {
  for (DType dtype : kAllDTypes) {
    if (name == dtype_name(dtype)) return dtype;
  }
  fail("unknown dtype ", name);
}

// A host tensor that owns its bytes.
struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> bytes;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  TensorView view() {
    TensorView v;
    v.data = bytes.data();
    v.dtype = dtype;
    v.sizes = sizes;
    v.strides = runtime::contiguous_strides(sizes);
    return v;
  }
  double at(int64_t i) const {
    switch (dtype) {
      case DType::F32: return reinterpret_cast<const float*>(bytes.data())[i];
      case DType::F64: return reinterpret_cast<const double*>(bytes.data())[i];
      case DType::I64: return static_cast<double>(reinterpret_cast<const int64_t*>(bytes.data())[i]);
      default: fail("test helper: unsupported dtype");
    }
  }
};

HostTensor from_record(const nlohmann::json& record) {
  HostTensor t;
  t.dtype = dtype_named(record.at("dtype"));
  t.sizes = record.at("sizes").get<std::vector<int64_t>>();
  const auto values = record.at("values").get<std::vector<double>>();
  t.bytes.resize(values.size() * dtype_size(t.dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (t.dtype) {
      case DType::F32: reinterpret_cast<float*>(t.bytes.data())[i] = static_cast<float>(values[i]); break;
      case DType::F64: reinterpret_cast<double*>(t.bytes.data())[i] = values[i]; break;
      case DType::I64: reinterpret_cast<int64_t*>(t.bytes.data())[i] = static_cast<int64_t>(values[i]); break;
      default: fail("test helper: unsupported dtype");
    }
  }
  return t;
}

// Runs every recorded sample of a fixture and compares all outputs (mutations included).
void check_fixture_runs(const std::string& name) {
  const auto graph = runtime::CompiledGraph::from_archive_file(fixture(name + ".pt2"));
  const nlohmann::json expected = read_json(fixture(name + ".expected.json"));
  ASSERT_TRUE(expected.contains("runs"));
  for (const auto& run : expected.at("runs")) {
    std::vector<HostTensor> inputs;
    for (const auto& record : run.at("inputs")) inputs.push_back(from_record(record));
    std::vector<TensorView> views;
    for (HostTensor& t : inputs) views.push_back(t.view());
    const runtime::SymbolValues symbols = graph->bind(views);

    const auto& outputs = graph->outputs();
    ASSERT_EQ(outputs.size(), run.at("outputs").size());
    std::vector<HostTensor> results(outputs.size());
    std::vector<TensorView> out_views(outputs.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      results[k].dtype = outputs[k].dtype;
      results[k].sizes = graph->output_shape(k, symbols);
      results[k].bytes.assign(results[k].numel() * dtype_size(outputs[k].dtype), 0xFF);  // poison
      out_views[k] = results[k].view();
    }
    graph->run(views, out_views, symbols);
    for (size_t k = 0; k < outputs.size(); ++k) {
      const HostTensor want = from_record(run.at("outputs")[k]);
      ASSERT_EQ(results[k].sizes, want.sizes) << name << " output " << k;
      for (int64_t i = 0; i < want.numel(); ++i) {
        EXPECT_NEAR(results[k].at(i), want.at(i), 1e-5 + 1e-5 * std::fabs(want.at(i)))
            << name << " output " << k << " element " << i;
      }
    }
  }
}

}  // namespace

TEST(EndToEnd, MlpWithArchiveWeights) { check_fixture_runs("mlp"); }

TEST(EndToEnd, DynamicBatchServesEveryBatchSize) { check_fixture_runs("dynamic"); }

TEST(EndToEnd, ConstantsAndInputMutation) {
  check_fixture_runs("constants");
  const auto graph = runtime::CompiledGraph::from_archive_file(fixture("constants.pt2"));
  ASSERT_GE(graph->outputs().size(), 2u);
  EXPECT_EQ(graph->outputs()[0].mutated_input, 0);  // x.add_(1) is written back into input 0
  EXPECT_EQ(graph->outputs()[1].mutated_input, -1);
}

TEST(EndToEnd, WrongInputsRaiseWithNames) {
  const auto graph = runtime::CompiledGraph::from_archive_file(fixture("mlp.pt2"));
  HostTensor x;
  x.dtype = DType::F64;
  x.sizes = {2, 4};
  x.bytes.resize(8 * 8);
  EXPECT_THROW(
      {
        try {
          graph->bind({x.view()});
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  x.dtype = DType::F32;
  x.sizes = {2, 5};
  EXPECT_THROW(graph->bind({x.view()}), Error);
  EXPECT_THROW(graph->bind({}), Error);
}

TEST(EndToEnd, BindReusesOnlyIdenticalLayouts) {
  // A call with the last bound call's layouts skips the checks; any difference is checked again.
  const auto graph = runtime::CompiledGraph::from_archive_file(fixture("mlp.pt2"));
  HostTensor x;
  x.dtype = DType::F32;
  x.sizes = {2, 4};
  x.bytes.resize(2 * 4 * 4);
  const runtime::SymbolValues first = graph->bind({x.view()});
  EXPECT_EQ(graph->bind({x.view()}), first);
  runtime::TensorView transposed = x.view();
  transposed.strides = {1, 2};  // same sizes and dtype, other strides: a new layout, checked again
  EXPECT_NO_THROW(graph->bind({transposed}));
  HostTensor wrong = x;
  wrong.sizes = {2, 5};
  wrong.bytes.resize(2 * 5 * 4);
  EXPECT_THROW(graph->bind({wrong.view()}), Error);
  wrong.sizes = {2, 4};
  wrong.dtype = DType::F64;
  wrong.bytes.resize(2 * 4 * 8);
  EXPECT_THROW(graph->bind({wrong.view()}), Error);
  EXPECT_EQ(graph->bind({x.view()}), first);
  EXPECT_THROW(graph->bind({x.view(), x.view()}), Error);
}

TEST(EndToEnd, IrTextShowsBothStages) {
  const auto graph = runtime::CompiledGraph::from_archive_file(fixture("mlp.pt2"));
  const std::string before = graph->ir_text(false);
  const std::string after = graph->ir_text(true);
  EXPECT_NE(before.find("aten.addmm.default"), std::string::npos);
  EXPECT_NE(before.find("matmul"), std::string::npos);
  // Both matmuls are small (K = 4 and 8): the first becomes a reduction, the second a fold fused
  // with the first layer's bias and ReLU and the second layer's bias.
  EXPECT_EQ(graph->stats().matmuls, 0u) << after;
  EXPECT_NE(after.find("reduce.sum"), std::string::npos) << after;
  EXPECT_NE(after.find("sum(r0 < 8: "), std::string::npos) << after;
  EXPECT_EQ(graph->stats().constants, 5u);  // fc1/fc2 weights and biases, and the aliasing buffer
}
