// The runner: a small torch-free C++ API over the core that loads a .pt2 archive written by
// torch.export.save (weights from the archive), describes its signature, and runs it on the CPU
// engine on tensors in host memory. `luminal-run` (runner/main.cpp) is its command-line front end.
//
//   auto model = luminal::runner::Model::load("mlp.pt2");
//   std::vector<luminal::runtime::TensorView> inputs = {...};   // caller's pointers, sizes, strides
//   std::vector<luminal::runner::HostTensor> outputs = model.run(inputs);
//
// Every failure (unreadable archive, unsupported node, wrong input count, dtype or shape) raises
// luminal::Error with a message naming what is wrong.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/host_tensor.h"
#include "runtime/tensor.h"

namespace luminal::runtime {
class CompiledGraph;
}

namespace luminal::runner {

// One input or user output of the program.
struct TensorSignature {
  std::string name;
  bool is_tensor = true;  // false: an integer output (a symbolic size), returned as an int64 0-d tensor
  DType dtype = DType::I64;
  // One entry per dimension: a number ("13") or a shape expression over symbols ("s0", "2*s0").
  std::vector<std::string> shape;
};

// A shape symbol and the range export allows for it.
struct SymbolRange {
  std::string name;
  int64_t min = 1;
  std::optional<int64_t> max;
};

struct LoadOptions {
  // The most bytes read from the archive, weights included (unset: LUMINAL_MAX_ARCHIVE_BYTES, else 64 GiB).
  std::optional<uint64_t> max_archive_bytes;
};

class Model {
 public:
  static Model load(const std::string& path, const LoadOptions& options = {});

  const std::vector<TensorSignature>& inputs() const { return inputs_; }
  // User outputs only: the new values of inputs updated in place are written back into them.
  const std::vector<TensorSignature>& outputs() const { return outputs_; }
  const std::vector<SymbolRange>& symbols() const { return symbols_; }
  // The inputs the program updates in place (run() writes their new values back), by position.
  const std::vector<size_t>& updated_inputs() const { return updated_inputs_; }
  // The signature as text, one line per input, output and symbol (what `luminal-run --list` prints).
  std::string signature_text() const;

  // Runs on the CPU engine. Each input view is the caller's host memory (any strides the graph
  // accepts; CPU device); nothing is copied in. Returns the user outputs in order. Inputs the
  // program updates in place (x.add_(1) in forward) are written back and must then be dense.
  std::vector<HostTensor> run(const std::vector<runtime::TensorView>& inputs) const;

 private:
  explicit Model(std::shared_ptr<const runtime::CompiledGraph> graph);

  std::shared_ptr<const runtime::CompiledGraph> graph_;
  std::vector<TensorSignature> inputs_;
  std::vector<TensorSignature> outputs_;
  std::vector<SymbolRange> symbols_;
  std::vector<size_t> updated_inputs_;
};

}  // namespace luminal::runner
