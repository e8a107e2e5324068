#include "runtime/cuda/nvrtc.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "runtime/cuda/api.h"

namespace luminal::cuda {

namespace {

// FNV-1a, 64 bits: a stable file name for the disk cache (std::hash may differ across builds).
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::filesystem::path cache_dir() {
  if (const char* dir = std::getenv("LUMINAL_CACHE_DIR")) return dir;  // "" disables the disk cache
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "luminal";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "luminal";
  return "";
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Writes atomically (temporary file + rename) so concurrent processes never see half a cubin.
void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return;
  const std::filesystem::path temp = path.string() + ".tmp" + std::to_string(fnv1a(bytes) ^ reinterpret_cast<uintptr_t>(&ec));
  {
    std::ofstream out(temp, std::ios::binary);
    if (!out) return;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) std::filesystem::remove(temp, ec);
}

struct ProgramDeleter {
  void operator()(nvrtcProgram* program) const {
    nvrtc().nvrtcDestroyProgram(program);
    delete program;
  }
};

std::string compile_uncached(const std::string& source, const std::string& arch) {
  const NvrtcApi& api = nvrtc();
  std::unique_ptr<nvrtcProgram, ProgramDeleter> program(new nvrtcProgram(nullptr));
  check(api.nvrtcCreateProgram(program.get(), source.c_str(), "luminal.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  const std::string arch_option = "--gpu-architecture=" + arch;
  const char* options[] = {arch_option.c_str(), "--std=c++17", "-default-device"};
  const nvrtcResult result = api.nvrtcCompileProgram(*program, 3, options);
  if (result != NVRTC_SUCCESS) {
    size_t size = 0;
    api.nvrtcGetProgramLogSize(*program, &size);
    std::string log(size, '\0');
    if (size) api.nvrtcGetProgramLog(*program, log.data());
    fail("NVRTC failed to compile generated CUDA for ", arch, ":\n", log);
  }
  size_t size = 0;
  check(api.nvrtcGetCUBINSize(*program, &size), "nvrtcGetCUBINSize");
  std::string cubin(size, '\0');
  check(api.nvrtcGetCUBIN(*program, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtc().nvrtcVersion(&major, &minor), "nvrtcVersion");
  return str_cat(major, ".", minor);
}

namespace {

struct MemoryCache {
  std::mutex mutex;
  std::map<std::string, std::string> cubins;
};

MemoryCache& memory_cache() {
  static MemoryCache cache;
  return cache;
}

}  // namespace

void clear_memory_cache() {
  MemoryCache& cache = memory_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.cubins.clear();
}

std::string compile_to_cubin(const std::string& source, const std::string& arch) {
  MemoryCache& cache = memory_cache();
  std::mutex& mutex = cache.mutex;
  std::map<std::string, std::string>& memory = cache.cubins;
  const std::string key = str_cat(arch, "|nvrtc ", nvrtc_version(), "|", source);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = memory.find(key); it != memory.end()) return it->second;
  }
  // Disk entries hold the whole key before the cubin, so a file-name collision can never hand
  // back another program's code.
  const std::filesystem::path dir = cache_dir();
  const std::filesystem::path file =
      dir.empty() ? std::filesystem::path() : dir / str_cat(arch, "-", std::hex, fnv1a(key), ".cubin");
  const std::string header = key + '\0';
  std::string cubin;
  if (!file.empty()) {
    const std::string entry = read_file(file);
    if (entry.size() > header.size() + 4 && entry.compare(0, header.size(), header) == 0 &&
        entry.compare(header.size(), 4, "\x7f" "ELF") == 0) {
      cubin = entry.substr(header.size());
      // Recently used: the cache's size limit evicts least recently used files first.
      std::error_code ignored;
      std::filesystem::last_write_time(file, std::filesystem::file_time_type::clock::now(), ignored);
    }
  }
  if (cubin.empty()) {
    cubin = compile_uncached(source, arch);
    if (!file.empty()) write_file(file, header + cubin);
  }
  std::lock_guard<std::mutex> lock(mutex);
  memory.emplace(key, cubin);
  return cubin;
}

}  // namespace luminal::cuda
