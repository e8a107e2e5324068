#include "fuzz_entry.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "ir/expr.h"
#include "pt2/archive.h"
#include "pt2/schema.h"
#include "pt2/sympy.h"
#include "runtime/compiled.h"
#include "runtime/tensor.h"

namespace luminal::fuzz {
namespace {

void parse_expression(const pt2::SymInt& value) {
  if (value.is_int()) return;
  try {
    (void)pt2::parse_sympy(value.as_expr().expr_str);
  } catch (const Error&) {
    // A malformed expression is rejected; go on with the next one so that one bad string does not
    // hide the others from the fuzzer.
  }
}

// Translation parses only the expressions its nodes reach; the parse target reads them all.
void parse_expressions(const pt2::Graph& graph) {
  for (const auto& [name, meta] : graph.tensor_values) {
    for (const pt2::SymInt& size : meta.sizes) parse_expression(size);
    for (const pt2::SymInt& stride : meta.strides) parse_expression(stride);
    parse_expression(meta.storage_offset);
  }
  for (const auto& [name, value] : graph.sym_int_values) parse_expression(value);
}

// The harness allocates inputs and outputs itself: never more than this per tensor, so that only
// the core's own allocations (intermediates) can follow what an archive declares.
constexpr int64_t kMaxRunTensorBytes = int64_t{1} << 20;

// Bytes of a contiguous tensor, or nullopt when it is larger than the harness allocates.
std::optional<size_t> harness_bytes(const std::vector<int64_t>& sizes, DType dtype) {
  int64_t bytes = static_cast<int64_t>(dtype_size(dtype));
  for (const int64_t size : sizes) {
    if (size < 0) return std::nullopt;
    if (size != 0 && bytes > kMaxRunTensorBytes / size) return std::nullopt;
    bytes *= size;
  }
  return static_cast<size_t>(bytes);
}

// Small values (integers 0 and 1, floats -2 to 2) so that index inputs are mostly in range and
// both the kernels and their range checks run; other dtypes stay zero, which all read as 0.
void fill(std::vector<unsigned char>& storage, DType dtype) {
  const size_t count = storage.size() / dtype_size(dtype);
  for (size_t i = 0; i < count; ++i) {
    unsigned char* element = storage.data() + i * dtype_size(dtype);
    if (dtype == DType::F32) {
      const float value = static_cast<float>(i % 5) - 2.0f;
      std::memcpy(element, &value, sizeof value);
    } else if (dtype == DType::I64) {
      const int64_t value = static_cast<int64_t>(i % 2);
      std::memcpy(element, &value, sizeof value);
    } else if (dtype == DType::I32) {
      const int32_t value = static_cast<int32_t>(i % 2);
      std::memcpy(element, &value, sizeof value);
    } else if (dtype == DType::Bool) {
      *element = static_cast<unsigned char>(i % 2);
    }
  }
}

// Runs the compiled graph on the CPU with made-up inputs of the static sizes it declares; graphs
// with symbolic input sizes or inputs above the harness's limit are only compiled.
bool run_on_cpu(const runtime::CompiledGraph& graph) {
  std::vector<std::vector<unsigned char>> storage;
  std::vector<runtime::TensorView> inputs;
  for (size_t k = 0; k < graph.num_inputs(); ++k) {
    const ir::Node& input = graph.input(k);
    std::vector<int64_t> sizes;
    for (const ir::Expr& size : input.shape) {
      const std::optional<int64_t> value = ir::as_int_const(size);
      if (!value) return false;
      sizes.push_back(*value);
    }
    const std::optional<size_t> bytes = harness_bytes(sizes, input.dtype);
    if (!bytes) return false;
    fill(storage.emplace_back(*bytes), input.dtype);
    inputs.push_back(runtime::TensorView{storage.back().data(), input.dtype, sizes,
                                         runtime::contiguous_strides(sizes), {}});
  }
  const runtime::SymbolValues symbols = graph.bind(inputs);
  std::vector<runtime::TensorView> outputs;
  for (size_t k = 0; k < graph.outputs().size(); ++k) {
    const runtime::OutputInfo& info = graph.outputs()[k];
    if (!info.is_tensor) {
      outputs.emplace_back();
      continue;
    }
    const std::vector<int64_t> sizes = graph.output_shape(k, symbols);
    const std::optional<size_t> bytes = harness_bytes(sizes, info.dtype);
    if (!bytes) return false;
    outputs.push_back(runtime::TensorView{storage.emplace_back(*bytes).data(), info.dtype, sizes,
                                          runtime::contiguous_strides(sizes), {}});
  }
  graph.run(inputs, outputs, symbols);
  return true;
}

// What luminal.load and the torch.compile backend do: compile; when a node is refused, the backend
// asks the translator for every refused node in one pass (runtime::refused_nodes) to run those in
// eager, so that path reads the same hostile bytes.
Outcome compile(std::string bytes, bool run) {
  try {
    const std::shared_ptr<runtime::CompiledGraph> graph = runtime::CompiledGraph::from_archive_bytes(bytes);
    return run && run_on_cpu(*graph) ? Outcome::Ran : Outcome::Accepted;
  } catch (const UnsupportedNode&) {
    (void)runtime::refused_nodes(std::move(bytes));
    throw;
  }
}

Outcome parse(std::string bytes) {
  const pt2::Archive archive = pt2::Archive::from_buffer(std::move(bytes));
  const pt2::Package package = pt2::load_package(archive);
  parse_expressions(package.program.graph_module.graph);
  return Outcome::Accepted;
}

}  // namespace

Outcome run_pt2_input(const uint8_t* data, size_t size, Depth depth) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    // Default compile options: the CPU engine only, no CUDA code generation.
    return depth == Depth::Parse ? parse(std::move(bytes)) : compile(std::move(bytes), depth == Depth::Run);
  } catch (const Error&) {
    return Outcome::Rejected;  // with a message: the expected outcome for most mutated inputs
  }
}

}  // namespace luminal::fuzz
