#include "runner/runner.h"

#include <cstring>
#include <sstream>
#include <utility>

#include "common/checked.h"
#include "common/config.h"
#include "common/error.h"
#include "ir/expr.h"
#include "runtime/compiled.h"

namespace luminal::runner {
namespace {

std::vector<std::string> shape_text(const ir::Shape& shape) {
  std::vector<std::string> dims;
  dims.reserve(shape.size());
  for (const ir::Expr& dim : shape) dims.push_back(ir::to_string(dim));
  return dims;
}

std::string describe_signature(const TensorSignature& signature) {
  if (!signature.is_tensor) return "int";
  std::string text = str_cat(dtype_name(signature.dtype), "[");
  for (size_t d = 0; d < signature.shape.size(); ++d) text += str_cat(d ? ", " : "", signature.shape[d]);
  return text + "]";
}

// The bytes [first, last) a view may touch (empty views: none).
std::pair<uintptr_t, uintptr_t> byte_range(const runtime::TensorView& view) {
  std::vector<int64_t> strides = view.strides;  // a size-1 dimension's stride is never used (bind allows any)
  for (size_t d = 0; d < strides.size(); ++d) strides[d] = view.sizes[d] <= 1 ? 0 : strides[d];
  const int64_t elements = strided_storage_elements(view.sizes, strides, 0, "input");
  const auto first = reinterpret_cast<uintptr_t>(view.data);
  return {first, first + byte_count(elements, view.dtype, "input")};
}

// An input the program updates in place is written back as one dense block after the run: it must
// be contiguous, and share no memory with another input (eager would see the update through the
// alias while the program runs; the runner would not).
void check_writable(const std::vector<runtime::TensorView>& inputs, size_t k, const std::string& name) {
  const runtime::TensorView& view = inputs[k];
  LUMINAL_CHECK(view.is_contiguous(), "input #", k, " '", name, "' is updated in place by the program and must be "
                "contiguous, got ", runtime::describe(view));
  const auto [first, last] = byte_range(view);
  for (size_t other = 0; other < inputs.size(); ++other) {
    if (other == k) continue;
    const auto [other_first, other_last] = byte_range(inputs[other]);
    LUMINAL_CHECK(last <= other_first || other_last <= first || first == last || other_first == other_last,
                  "input #", k, " '", name, "' is updated in place by the program and shares memory with input #",
                  other);
  }
}

// LUMINAL_POISON_OUTPUTS: outputs start as NaN (all bytes 0xff in every float dtype), -1 (255 for
// uint8) or the invalid bool byte 0x5A, so that an element the program fails to write cannot pass
// for a computed zero (as the Python binding does).
void poison(HostTensor& tensor) {
  std::memset(tensor.data(), tensor.dtype() == DType::Bool ? 0x5A : 0xff, tensor.nbytes());
}

}  // namespace

Model::Model(std::shared_ptr<const runtime::CompiledGraph> graph) : graph_(std::move(graph)) {
  const ir::Graph& ir_graph = graph_->graph();
  for (size_t k = 0; k < graph_->num_inputs(); ++k) {
    const ir::Node& node = graph_->input(k);
    inputs_.push_back({node.name, true, node.dtype, shape_text(node.shape)});
  }
  for (size_t k = 0; k < ir_graph.outputs.size(); ++k) {
    const ir::GraphOutput& out = ir_graph.outputs[k];
    if (out.mutated_input >= 0) {
      updated_inputs_.push_back(static_cast<size_t>(out.mutated_input));
      continue;
    }
    if (out.kind == ir::GraphOutput::Kind::Int) {
      outputs_.push_back({out.name, false, DType::I64, {}});
    } else {
      const ir::Node& node = ir_graph.node(out.node);
      outputs_.push_back({out.name, true, node.dtype, shape_text(node.shape)});
    }
  }
  for (const auto& [name, info] : ir_graph.symbols) symbols_.push_back({name, info.min, info.max});
}

Model Model::load(const std::string& path, const LoadOptions& options) {
  runtime::CompileOptions compile;
  compile.max_archive_bytes = options.max_archive_bytes;
  return Model(runtime::CompiledGraph::from_archive_file(path, compile));
}

std::string Model::signature_text() const {
  std::ostringstream out;
  for (size_t k = 0; k < inputs_.size(); ++k) {
    out << "input " << k << " " << inputs_[k].name << ": " << describe_signature(inputs_[k]) << "\n";
  }
  for (size_t k = 0; k < outputs_.size(); ++k) {
    out << "output " << k << " " << outputs_[k].name << ": " << describe_signature(outputs_[k]) << "\n";
  }
  for (const size_t k : updated_inputs_) out << "updates input " << k << " " << inputs_[k].name << " in place\n";
  for (const SymbolRange& symbol : symbols_) {
    out << "symbol " << symbol.name << ": " << symbol.min << " <= " << symbol.name << " <= ";
    if (symbol.max) {
      out << *symbol.max << "\n";
    } else {
      out << "inf\n";
    }
  }
  return out.str();
}

std::vector<HostTensor> Model::run(const std::vector<runtime::TensorView>& inputs) const {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const runtime::TensorView& view = inputs[k];
    LUMINAL_CHECK(view.device.type == runtime::DeviceType::CPU, "input #", k, " is on ",
                  runtime::device_name(view.device), ": the runner runs on the CPU and takes host memory");
    LUMINAL_CHECK(view.sizes.size() == view.strides.size(), "input #", k, " has ", view.sizes.size(), " sizes but ",
                  view.strides.size(), " strides");
    const int64_t elements = element_count(view.sizes, str_cat("input #", k));
    LUMINAL_CHECK(view.data != nullptr || elements == 0, "input #", k, " has no data pointer but ", elements,
                  " elements");
  }
  const runtime::SymbolValues symbols = graph_->bind(inputs);  // count, dtypes, shapes, symbols

  const auto& infos = graph_->outputs();
  for (const auto& info : infos) {
    if (info.mutated_input >= 0) {
      const auto k = static_cast<size_t>(info.mutated_input);
      check_writable(inputs, k, graph_->input(k).name);
    }
  }
  const bool poison_outputs = config()->poison_outputs;
  std::vector<HostTensor> results(infos.size());
  std::vector<runtime::TensorView> views(infos.size());
  for (size_t k = 0; k < infos.size(); ++k) {
    if (!infos[k].is_tensor) continue;  // an empty view: the core skips integer outputs
    results[k] = HostTensor(infos[k].dtype, graph_->output_shape(k, symbols), str_cat("output #", k));
    if (poison_outputs) poison(results[k]);
    views[k] = results[k].view();
  }
  graph_->run(inputs, views, symbols);

  std::vector<HostTensor> user_outputs;
  for (size_t k = 0; k < infos.size(); ++k) {
    if (infos[k].mutated_input >= 0) {
      // Contiguous (checked above) and of the output's dtype and shape (bind checked the input).
      std::memcpy(inputs.at(static_cast<size_t>(infos[k].mutated_input)).data, results[k].data(), results[k].nbytes());
    } else if (infos[k].is_tensor) {
      user_outputs.push_back(std::move(results[k]));
    } else {
      HostTensor value(DType::I64, {}, str_cat("output #", k));
      const int64_t number = graph_->int_output(k, symbols);
      std::memcpy(value.data(), &number, sizeof number);
      user_outputs.push_back(std::move(value));
    }
  }
  return user_outputs;
}

}  // namespace luminal::runner
