#include "fuzz_entry.h"

#include <string>
#include <utility>

#include "common/error.h"
#include "pt2/archive.h"
#include "pt2/schema.h"
#include "pt2/sympy.h"
#include "runtime/compiled.h"

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

// What luminal.load and the torch.compile backend do: compile; when a node is refused, the backend
// asks the translator for every refused node in one pass (runtime::refused_nodes) to run those in
// eager, so that path reads the same hostile bytes.
void compile(std::string bytes) {
  try {
    (void)runtime::CompiledGraph::from_archive_bytes(bytes);
  } catch (const UnsupportedNode&) {
    (void)runtime::refused_nodes(std::move(bytes));
  }
}

void parse(std::string bytes) {
  const pt2::Archive archive = pt2::Archive::from_buffer(std::move(bytes));
  const pt2::Package package = pt2::load_package(archive);
  parse_expressions(package.program.graph_module.graph);
}

}  // namespace

void run_pt2_input(const uint8_t* data, size_t size, Depth depth) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    // Default compile options: the CPU engine only, no CUDA code generation.
    depth == Depth::Parse ? parse(std::move(bytes)) : compile(std::move(bytes));
  } catch (const Error&) {
    // Rejected with a message: the expected outcome for most mutated inputs.
  }
}

}  // namespace luminal::fuzz
