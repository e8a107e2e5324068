#include "common/config.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/error.h"

namespace luminal {
namespace {

// True when the variable is set to something other than "" or "0".
bool flag(const char* value) { return value != nullptr && value[0] != '\0' && std::strcmp(value, "0") != 0; }

std::optional<std::string> optional_text(const char* value) {
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

ByteLimitSetting byte_limit(const char* variable, const char* text) {
  ByteLimitSetting setting;
  if (text == nullptr || text[0] == '\0') return setting;
  uint64_t value = 0;
  const char* end = text + std::strlen(text);
  const auto [rest, error] = std::from_chars(text, end, value);
  if (error != std::errc() || rest != end || value == 0) {
    setting.problem =
        str_cat(variable, "=\"", std::string(text).substr(0, 64), "\" is not a positive integer number of bytes");
  } else {
    setting.bytes = value;
  }
  return setting;
}

std::string cuda_check_arch(const char* value) {
  if (!flag(value)) return "";
  return std::strcmp(value, "1") == 0 ? "sm_90" : value;
}

CudnnChoice cudnn_choice(const char* value) {
  if (value != nullptr && std::strcmp(value, "cudnn") == 0) return CudnnChoice::Library;
  if (value != nullptr && std::strcmp(value, "generated") == 0) return CudnnChoice::Generated;
  return CudnnChoice::Measured;
}

void read_gemv_choice(const char* value, Config& c) {
  if (value == nullptr) return;
  const std::string text = value;
  const std::string forced = "generated:";
  if (text == "cublaslt") {
    c.gemv = GemvChoice::Library;
  } else if (text == "generated") {
    c.gemv = GemvChoice::Generated;
  } else if (text.rfind(forced, 0) == 0) {
    c.gemv = GemvChoice::Generated;
    c.gemv_config = text.substr(forced.size());
  }
}

// LUMINAL_SEARCH: on unless set to "0" (or "").
bool search_enabled(const char* value) { return value == nullptr || flag(value); }

const char* from_environment(const char* name) { return std::getenv(name); }

std::mutex config_mutex;
std::shared_ptr<const Config> current_config;

}  // namespace

Config read_config(const char* (*lookup)(const char* name)) {
  Config c;
  c.poison_outputs = flag(lookup("LUMINAL_POISON_OUTPUTS"));
  c.profile = flag(lookup("LUMINAL_PROFILE"));
  c.sync_check = flag(lookup("LUMINAL_SYNC_CHECK"));
  c.cpu_runs_row_graph = flag(lookup("LUMINAL_CPU_ROW_GRAPH"));
  c.search = search_enabled(lookup("LUMINAL_SEARCH"));
  c.assign_layouts = search_enabled(lookup("LUMINAL_LAYOUTS"));  // on unless "0" (or "")
  c.programmatic_launch = search_enabled(lookup("LUMINAL_PDL"));  // on unless "0" (or "")
  c.group_gemvs = search_enabled(lookup("LUMINAL_GEMV_GROUP"));   // on unless "0" (or "")
  c.group_kernels = search_enabled(lookup("LUMINAL_KERNEL_GROUP"));  // on unless "0" (or "")
  c.fuse_swiglu = search_enabled(lookup("LUMINAL_GEMV_GLU"));        // on unless "0" (or "")
  c.split_attention_keys = search_enabled(lookup("LUMINAL_ATTENTION_SPLIT"));  // on unless "0" (or "")
  c.convolution = cudnn_choice(lookup("LUMINAL_CONVOLUTION"));
  c.attention = cudnn_choice(lookup("LUMINAL_ATTENTION"));
  read_gemv_choice(lookup("LUMINAL_GEMV"), c);
  c.check_cuda_arch = cuda_check_arch(lookup("LUMINAL_CHECK_CUDA_CODEGEN"));
  c.dump_kernels_dir = optional_text(lookup("LUMINAL_DUMP_KERNELS")).value_or("");
  c.cache_dir = optional_text(lookup("LUMINAL_CACHE_DIR"));
  c.xdg_cache_home = optional_text(lookup("XDG_CACHE_HOME"));
  c.home = optional_text(lookup("HOME"));
  c.max_archive_bytes = byte_limit("LUMINAL_MAX_ARCHIVE_BYTES", lookup("LUMINAL_MAX_ARCHIVE_BYTES"));
  c.max_archive_json_bytes = byte_limit("LUMINAL_MAX_ARCHIVE_JSON_BYTES", lookup("LUMINAL_MAX_ARCHIVE_JSON_BYTES"));
  return c;
}

std::shared_ptr<const Config> config() {
  const std::lock_guard<std::mutex> lock(config_mutex);
  if (!current_config) current_config = std::make_shared<const Config>(read_config(from_environment));
  return current_config;
}

void reload_config() {
  auto fresh = std::make_shared<const Config>(read_config(from_environment));
  const std::lock_guard<std::mutex> lock(config_mutex);
  current_config = std::move(fresh);
}

}  // namespace luminal
