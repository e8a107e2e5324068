// luminal-run: runs a luminal package (luminal.compile(...).save) or a .pt2 archive
// (torch.export.save, weights included) on luminal's CPU or CUDA engine, with inputs read from
// .npy files and outputs written as .npy files. No Python, no torch.
//
//   luminal-run MODEL.luminal --list
//   luminal-run MODEL.pt2 --input a.npy --input b.npy --output-dir out/ [--device cuda]
//
// Exit status: 0 on success, 1 when loading or running fails, 2 for a bad command line; a failure
// prints one line "luminal-run: error: ..." on stderr.
#include <algorithm>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "runner/npy.h"
#include "runner/runner.h"

namespace {

constexpr const char* kUsage =
    "usage: luminal-run MODEL [--input FILE.npy]... --output-dir DIR [--device cpu|cuda|cuda:N] [options]\n"
    "       luminal-run MODEL --list\n"
    "Runs MODEL, a luminal package (luminal.compile(...).save(path)) or a .pt2 archive written by\n"
    "torch.export.save (weights from the archive), on luminal's CPU engine or on its CUDA engine.\n"
    "  --input FILE.npy         the next user input, in the program's order (see --list)\n"
    "  --output-dir DIR         writes DIR/output_<k>.npy for each user output (created if missing), and\n"
    "                           DIR/updated_input_<k>.npy for each input the program updates in place\n"
    "  --list                   prints the program's inputs, outputs and shape symbols, and exits\n"
    "  --max-archive-bytes N    the most bytes read from the archive (default LUMINAL_MAX_ARCHIVE_BYTES, else 64 GiB)\n"
    "  --device D               cpu (default), cuda (cuda:0) or cuda:N; on CUDA the weights are uploaded once\n"
    "  --tf32-matmul            CUDA: TF32 in float32 matmuls (torch.backends.cuda.matmul.allow_tf32)\n"
    "  --tf32-convolution       CUDA: TF32 in float32 convolutions (torch.backends.cudnn.allow_tf32)\n"
    "  --cuda-lib-dir DIR       CUDA: search DIR first for libnvrtc, libcublasLt, libcudnn (repeatable)\n"
    "  --no-cache-entries       packages: do not install the package's kernels and measured choices\n"
    "  --verbose                prints what the engine did (choices, cache hits, libraries) on stderr\n"
    "On CUDA the bits are luminal's Python path's when both use the same CUDA libraries, TF32 settings and\n"
    "measured choices: a package carries its choices; for a .pt2, share LUMINAL_CACHE_DIR with the Python run.\n"
    ".npy files: little-endian, C-order float32/float64/float16/int64/int32/int16/int8/uint8/bool; bfloat16 as\n"
    "raw 2-byte records ('|V2', e.g. numpy's a.view('V2') of the bits). Integer outputs are int64 0-d arrays.\n";

struct UsageError : std::exception {
  explicit UsageError(std::string text) : message(std::move(text)) {}
  const char* what() const noexcept override { return message.c_str(); }
  std::string message;
};

struct Arguments {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  bool list = false;
  bool help = false;
  bool verbose = false;
  std::optional<uint64_t> max_archive_bytes;
  luminal::runner::LoadOptions load;
};

luminal::runtime::Device parse_device(const std::string& text) {
  if (text == "cpu") return {};
  if (text == "cuda") return {luminal::runtime::DeviceType::CUDA, 0};
  const std::string prefix = "cuda:";
  const std::string number = text.substr(std::min(text.size(), prefix.size()));
  const bool numeric = !number.empty() && number.size() <= 4 &&
                       number.find_first_not_of("0123456789") == std::string::npos;
  if (text.rfind(prefix, 0) != 0 || !numeric) {
    throw UsageError("--device takes cpu, cuda or cuda:N, got '" + text + "'");
  }
  return {luminal::runtime::DeviceType::CUDA, std::stoi(number)};
}

uint64_t parse_byte_count(const std::string& text) {
  uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') throw UsageError("--max-archive-bytes takes a positive integer, got '" + text + "'");
    const auto digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) throw UsageError("--max-archive-bytes " + text + " is too large");
    value = value * 10 + digit;
  }
  if (text.empty() || value == 0) throw UsageError("--max-archive-bytes takes a positive integer, got '" + text + "'");
  return value;
}

Arguments parse_arguments(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      args.help = true;
    } else if (arg == "--list") {
      args.list = true;
    } else if (arg == "--input") {
      args.inputs.push_back(value());
    } else if (arg == "--output-dir") {
      args.output_dir = value();
    } else if (arg == "--max-archive-bytes") {
      args.max_archive_bytes = parse_byte_count(value());
    } else if (arg == "--device") {
      args.load.device = parse_device(value());
    } else if (arg == "--tf32-matmul") {
      args.load.allow_tf32_matmul = true;
    } else if (arg == "--tf32-convolution") {
      args.load.allow_tf32_convolution = true;
    } else if (arg == "--cuda-lib-dir") {
      args.load.cuda_library_dirs.push_back(value());
    } else if (arg == "--no-cache-entries") {
      args.load.install_cache_entries = false;
    } else if (arg == "--verbose") {
      args.verbose = true;
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError("unknown option " + arg);
    } else if (args.model.empty()) {
      args.model = arg;
    } else {
      throw UsageError("more than one model given ('" + args.model + "' and '" + arg + "'): inputs take --input");
    }
  }
  if (args.help) return args;
  if (args.model.empty()) throw UsageError("no model given");
  if (!args.list && args.output_dir.empty()) throw UsageError("--output-dir is required (or --list)");
  return args;
}

// Messages of the core may span lines (a list of refused nodes); the error is one line.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

std::string output_path(const std::string& dir, const std::string& stem, size_t k) {
  return (std::filesystem::path(dir) / (stem + std::to_string(k) + ".npy")).string();
}

int run(const Arguments& args) {
  luminal::runner::LoadOptions options = args.load;
  options.max_archive_bytes = args.max_archive_bytes;
  const auto model = luminal::runner::Model::load(args.model, options);
  if (args.list) {
    std::cout << model.signature_text();
    return 0;
  }
  LUMINAL_CHECK(args.inputs.size() == model.inputs().size(), "the program takes ", model.inputs().size(),
                " inputs, ", args.inputs.size(), " --input files given (see --list)");
  std::vector<luminal::runner::HostTensor> inputs;
  std::vector<luminal::runtime::TensorView> views;
  inputs.reserve(args.inputs.size());
  for (const std::string& path : args.inputs) {
    inputs.push_back(luminal::runner::read_npy(path));
    views.push_back(inputs.back().view());
  }
  const std::vector<luminal::runner::HostTensor> outputs = model.run(views);

  std::error_code error;
  std::filesystem::create_directories(args.output_dir, error);
  LUMINAL_CHECK(!error, args.output_dir, ": cannot create the output directory (", error.message(), ")");
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::string path = output_path(args.output_dir, "output_", k);
    luminal::runner::write_npy(path, outputs[k]);
    std::cout << path << ": " << outputs[k].describe() << "\n";
  }
  for (const size_t k : model.updated_inputs()) {
    const std::string path = output_path(args.output_dir, "updated_input_", k);
    luminal::runner::write_npy(path, inputs[k]);
    std::cout << path << ": " << inputs[k].describe() << "\n";
  }
  if (args.verbose) std::cerr << model.report();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Arguments args = parse_arguments(argc, argv);
    if (args.help) {
      std::cout << kUsage;
      return 0;
    }
    return run(args);
  } catch (const UsageError& error) {
    std::cerr << "luminal-run: error: " << one_line(error.what()) << "\n" << kUsage;
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "luminal-run: error: out of memory\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "luminal-run: error: " << one_line(error.what()) << "\n";
    return 1;
  }
}
