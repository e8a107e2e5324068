// The runner: a small torch-free C++ API over the core that loads a luminal package
// (luminal.compile(...).save(path): the program, its parameters and buffers, its cache entries) or a
// .pt2 archive written by torch.export.save (weights from the archive), describes its signature,
// and runs it on the CPU engine or on the CUDA engine. `luminal-run` (runner/main.cpp) is its
// command-line front end.
//
//   auto model = luminal::runner::Model::load("mlp.luminal");            // CPU
//   std::vector<luminal::runtime::TensorView> inputs = {...};              // caller's host memory
//   std::vector<luminal::runner::HostTensor> outputs = model.run(inputs);
//
//   LoadOptions options;
//   options.device = {luminal::runtime::DeviceType::CUDA, 0};
//   auto gpu = luminal::runner::Model::load("mlp.luminal", options);      // weights uploaded here, once
//   gpu.run(inputs);                           // host in, host out: copies in, runs, copies back
//   gpu.run_on_device(device_inputs, device_outputs, stream);   // caller's device memory, no copies
//
// On CUDA the outputs are those of luminal's Python path on the same machine bit for bit when both
// make the same choices: the same CUDA libraries (LoadOptions::cuda_library_dirs), the same TF32
// settings, and the same measured choices (cuBLASLt algorithms picked by timing): a package
// carries the choices its saving process made and installs them into the cache; for a .pt2, run
// Python and the runner with the same LUMINAL_CACHE_DIR (or LUMINAL_SEARCH=0: choices by rule).
//
// Every failure (unreadable archive, unsupported node, no such device, wrong input count, dtype or
// shape) raises luminal::Error with a message naming what is wrong.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/host_tensor.h"
#include "runtime/symbols.h"
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
  // Where the program runs: the CPU engine, or the CUDA engine on device {CUDA, index}.
  runtime::Device device;
  // CUDA: TF32 in float32 matmuls and convolutions. luminal's Python path follows torch's
  // settings (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32): pass the same
  // ones for the same bits.
  bool allow_tf32_matmul = false;
  bool allow_tf32_convolution = false;
  // Directories searched first for libnvrtc, libcublasLt and libcudnn (then /usr/local/cuda/lib64,
  // then the default search path; registered for the process). For bit-exactness with a Python
  // process, name the directories its libraries came from (torch's site-packages/nvidia/*/lib).
  std::vector<std::string> cuda_library_dirs;
  // Packages: copy the package's cache entries (compiled kernels, measured choices) into the cache
  // directory, as luminal.load does (see common/cache_files.h for where it is).
  bool install_cache_entries = true;
};

class ModelState;  // the engine's memory: the state tensors, the device (runner.cpp)

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
  const runtime::Device& device() const { return device_; }
  bool is_package() const { return is_package_; }

  // Host memory in, host memory out. Each input view is the caller's host memory (any strides the
  // graph accepts; CPU device). On the CPU engine nothing is copied in; on CUDA the inputs are
  // copied to the device, the program runs, the outputs are copied back and device-side errors
  // (an index out of range) are raised. Returns the user outputs in order. Inputs the program
  // updates in place (x.add_(1) in forward) are written back and must then be dense.
  std::vector<HostTensor> run(const std::vector<runtime::TensorView>& inputs) const;

  // The shapes of the user outputs for these inputs (integer outputs: empty), for a caller that
  // allocates the outputs of run_on_device.
  std::vector<std::vector<int64_t>> output_shapes(const std::vector<runtime::TensorView>& inputs) const;

  // CUDA only: runs on the caller's device memory, queued on `stream` (a CUstream; nullptr is the
  // legacy default stream), with no copies and no wait for the GPU. `inputs` are views of device
  // memory on this model's device; `outputs` has one view per user output: for a tensor output,
  // dense device memory of its dtype and shape (see output_shapes); for an integer output, an empty
  // view. Returns the integer outputs' values (nullopt for tensor outputs). Inputs the program
  // updates in place are updated on the stream (dense ones only); when that takes a copy, the call
  // waits for the stream before it returns. Device-side errors surface at a later call or at
  // synchronize().
  std::vector<std::optional<int64_t>> run_on_device(const std::vector<runtime::TensorView>& inputs,
                                                    const std::vector<runtime::TensorView>& outputs,
                                                    void* stream) const;
  // CUDA: waits for the calls queued so far and raises the device-side errors they recorded.
  void synchronize() const;

  // What the engine did, as text (engine, kernels, library calls, the measured choices and how many
  // came from the cache, the CUDA libraries' files): what `luminal-run --verbose` prints.
  std::string report() const;

 private:
  Model(std::shared_ptr<const runtime::CompiledGraph> graph, std::shared_ptr<ModelState> state,
        const std::vector<std::string>& input_names);

  runtime::SymbolValues bind(const std::vector<runtime::TensorView>& all) const;
  std::string caller_message(const std::string& message) const;
  void check_updated(const std::vector<runtime::TensorView>& all) const;  // inputs updated in place: writable
  // The program's inputs: the state's views, then the user's.
  std::vector<runtime::TensorView> program_inputs(const std::vector<runtime::TensorView>& user_inputs) const;
  std::vector<HostTensor> run_cpu(const std::vector<runtime::TensorView>& inputs) const;
  std::vector<HostTensor> run_cuda_from_host(const std::vector<runtime::TensorView>& inputs) const;

  std::shared_ptr<const runtime::CompiledGraph> graph_;
  std::shared_ptr<ModelState> state_;
  runtime::Device device_;
  bool is_package_ = false;
  std::vector<TensorSignature> inputs_;
  std::vector<TensorSignature> outputs_;
  std::vector<SymbolRange> symbols_;
  std::vector<size_t> updated_inputs_;
};

}  // namespace luminal::runner
