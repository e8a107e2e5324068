#include "runtime/cuda/choices.h"

#include <charconv>
#include <map>
#include <mutex>
#include <optional>

#include "common/cache_files.h"
#include "common/choice_cache.h"
#include "common/error.h"
#include "runtime/cuda/cudnn_call.h"

namespace luminal::runtime::gpu {

std::string device_key(int device) {
  static std::mutex mutex;
  static std::map<int, std::string> keys;
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto known = keys.find(device); known != keys.end()) return known->second;
  const cuda::DriverApi& api = cuda::driver();
  CUdevice dev = 0;
  LUMINAL_CU(api.cuDeviceGet(&dev, device));
  char name[256] = {};
  LUMINAL_CU(api.cuDeviceGetName(name, sizeof name - 1, dev));
  int major = 0, minor = 0, sms = 0, driver_version = 0;
  LUMINAL_CU(api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  LUMINAL_CU(api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  LUMINAL_CU(api.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  LUMINAL_CU(api.cuDriverGetVersion(&driver_version));
  return keys[device] = str_cat(name, ", sm_", major, minor, ", ", sms, " SMs, driver ", driver_version);
}

namespace {

std::optional<int64_t> parse_int(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

// The stored winner of `matmul` chosen, and run once to see that it still runs; false (nothing
// usable: measure) otherwise, the entry forgotten where it named something unusable.
bool reuse_matmul_algorithm(cuda::Matmul& matmul, const std::string& key, void* out, void* workspace,
                            CUstream stream, std::string& times) {
  const std::optional<ChoiceFields> stored = load_choice(key);
  if (!stored) return false;
  const auto algorithm = stored->find("algorithm");
  if (algorithm == stored->end() || !matmul.choose_algorithm(algorithm->second)) {
    forget_choice(key, "names no algorithm cuBLASLt offers for this problem");
    return false;
  }
  try {
    matmul.run(out, workspace, stream);
  } catch (const Error& error) {
    forget_choice(key, str_cat("names an algorithm that failed to run: ", error.what()));
    return false;
  }
  const auto measured = stored->find("times");
  times = measured == stored->end() ? "" : measured->second;
  return true;
}

}  // namespace

namespace {

// The generated GEMV as LUMINAL_GEMV=generated[:configuration] forces it, run once (its module
// loaded before the call's CUDA graph is recorded, and a failure raised here).
std::string force_generated_gemv(cuda::Matmul& matmul, void* out, void* workspace, CUstream stream,
                                 const Config& settings) {
  if (settings.gemv_config.empty()) {
    matmul.choose_generated_by_rule();
  } else {
    LUMINAL_CHECK(matmul.choose_algorithm("generated gemv " + settings.gemv_config), "LUMINAL_GEMV=generated:",
                  settings.gemv_config, " names no configuration of the generated GEMV for ",
                  matmul.choice_key(out));
  }
  matmul.run(out, workspace, stream);
  return str_cat(matmul.chosen_algorithm(), " (forced by LUMINAL_GEMV)");
}

}  // namespace

const cuda::L2Flush* L2FlushScratch::get() {
  if (!tried_) {
    tried_ = true;
    const size_t bytes = 2 * cuda::l2_cache_bytes(device_);
    try {
      if (bytes > 0) scratch_ = allocator_.allocate(bytes, device_);
    } catch (const std::exception&) {  // the allocator's out-of-memory error: time warm instead
      scratch_.reset();
    }
    if (scratch_) flush_.emplace(reinterpret_cast<CUdeviceptr>(scratch_.get()), bytes);
  }
  return flush_ ? &*flush_ : nullptr;
}

std::string choose_matmul_algorithm(cuda::Matmul& matmul, void* out, void* workspace, CUstream stream,
                                    const std::string& device, const Config& settings, size_t& syncs,
                                    ChoiceCounts& counts, L2FlushScratch& l2_flush) {
  if (settings.gemv == GemvChoice::Generated && matmul.has_generated()) {
    return force_generated_gemv(matmul, out, workspace, stream, settings);
  }
  const size_t candidates = matmul.candidate_count();
  if (candidates < 2) return "";
  const auto chosen = [&] {
    if (matmul.chosen_is_generated()) return str_cat(matmul.chosen_algorithm(), " (of ", candidates, " candidates)");
    return str_cat("cuBLASLt algorithm ", matmul.chosen() + 1, " of ", candidates);
  };
  if (!settings.search) return chosen() + " (by rule: cuBLASLt's best ranked)";
  // Choices timed with a warm L2 (before cold timing) are not reused: the key names the method.
  const std::string key = str_cat("matmul | ", matmul.choice_key(out), " | ", device, " | timed with L2 flushed");
  std::string times;
  if (reuse_matmul_algorithm(matmul, key, out, workspace, stream, times)) {
    ++counts.hits;
    return str_cat(chosen(), " (cached: ", times, ")");
  }
  const cuda::L2Flush* flush = l2_flush.get();
  const float ms = matmul.select_fastest(out, workspace, stream, syncs, flush);
  ++counts.misses;
  times = str_cat(ms, " ms, the fastest of ", candidates, " timed", flush ? "" : " (warm: no memory to flush L2)");
  store_choice(key, {{"algorithm", matmul.chosen_algorithm()}, {"times", times}});
  return str_cat(chosen(), " (", times, ")");
}

std::string generated_kernel_key(const codegen::Kernel& kernel) {
  return str_cat(std::hex, fnv1a64(kernel.source), std::dec, " (blocks of ", kernel.block_size, ", ",
                 kernel.threads_per_output, " threads per output, ", kernel.grid_y, " pieces)");
}

std::string cudnn_choice_key(const std::string& problem, const std::string& generated, const std::string& device) {
  return str_cat(problem, " | cuDNN ", cuda::cudnn_version(),
                 generated.empty() ? std::string(" only") : str_cat(" or the generated kernel ", generated), " | ",
                 device);
}

CudnnLookup look_up_cudnn_choice(const std::string& key) {
  CudnnLookup lookup;
  lookup.key = key;
  const std::optional<ChoiceFields> stored = load_choice(key);
  if (!stored) return lookup;
  const auto field = [&](const char* name) {
    const auto found = stored->find(name);
    return found == stored->end() ? std::string() : found->second;
  };
  lookup.times = field("times");
  const std::string winner = field("winner");
  const std::optional<int64_t> engine = parse_int(field("engine"));
  if (winner == "generated") {
    lookup.winner = CudnnLookup::Winner::Generated;
  } else if (winner == "cudnn" && engine) {
    lookup.winner = CudnnLookup::Winner::Library;
    lookup.engine = *engine;
  } else {
    forget_choice(key, "names no winner (fields winner, engine)");
  }
  return lookup;
}

void store_cudnn_choice(const std::string& key, bool library, int64_t engine, const std::string& times) {
  if (key.empty()) return;
  if (!library) {
    store_choice(key, {{"winner", "generated"}, {"times", times}});
    return;
  }
  store_choice(key, {{"winner", "cudnn"}, {"engine", str_cat(engine)}, {"times", times}});
}

std::string row_kernel_choice_key(const std::string& megakernel_source, const std::string& general_source,
                                  const std::map<std::string, int64_t>& symbols, bool allow_tf32,
                                  bool allow_tf32_convolution, const std::string& device) {
  std::string binding;
  for (const auto& [name, value] : symbols) binding += str_cat(binding.empty() ? "" : ", ", name, "=", value);
  return str_cat("megakernel or general path | megakernel module ", std::hex, fnv1a64(megakernel_source),
                 ", general module ", fnv1a64(general_source), std::dec, " | symbols {", binding, "}",
                 allow_tf32 ? ", TF32 matmuls" : "", allow_tf32_convolution ? ", TF32 convolutions" : "", " | ", device);
}

RowKernelLookup parse_row_kernel_choice(const ChoiceFields& fields) {
  RowKernelLookup lookup;
  const auto winner = fields.find("winner");
  if (winner == fields.end()) return lookup;
  if (winner->second == "megakernel") {
    lookup.winner = RowKernelLookup::Winner::Megakernel;
  } else if (winner->second == "general") {
    lookup.winner = RowKernelLookup::Winner::General;
  } else {
    return lookup;
  }
  const auto times = fields.find("times");
  lookup.times = times == fields.end() ? "" : times->second;
  return lookup;
}

RowKernelLookup look_up_row_kernel_choice(const std::string& key) {
  const std::optional<ChoiceFields> stored = load_choice(key);
  if (!stored) return {};
  RowKernelLookup lookup = parse_row_kernel_choice(*stored);
  if (lookup.winner == RowKernelLookup::Winner::None) forget_choice(key, "names no winner (field winner)");
  return lookup;
}

void store_row_kernel_choice(const std::string& key, bool megakernel, const std::string& times) {
  store_choice(key, {{"winner", megakernel ? "megakernel" : "general"}, {"times", times}});
}

}  // namespace luminal::runtime::gpu
