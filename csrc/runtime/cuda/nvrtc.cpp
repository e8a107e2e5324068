#include "runtime/cuda/nvrtc.h"

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "common/cache_files.h"
#include "common/error.h"
#include "common/notices.h"
#include "runtime/cuda/api.h"

namespace luminal::cuda {

namespace {

struct ProgramDeleter {
  void operator()(nvrtcProgram* program) const {
    nvrtc().nvrtcDestroyProgram(program);
    delete program;
  }
};

// Optimized: the cubins that run. Check: errors only (check_compiles), compiled fast.
enum class Mode { Optimized, Check };

// NVRTC's fast-compile level for the check (CUDA 12.8+): fewer optimizations in both NVVM and
// ptxas, which still parse, type-check and assemble everything. Measured on two generated modules:
// a fully unrolled MLP row kernel 15-22 s -> 0.5 s, a 3-D max pool 2.3 -> 1.9 s. (-G was tried
// first: 0.7 s for the row kernel, but minutes for the pool, whose debug PTX ptxas assembles slowly.)
constexpr const char* kFastCompile = "-Ofc=mid";

using Program = std::unique_ptr<nvrtcProgram, ProgramDeleter>;

Program new_program(const std::string& source) {
  Program program(new nvrtcProgram(nullptr));
  check(nvrtc().nvrtcCreateProgram(program.get(), source.c_str(), "luminal.cu", 0, nullptr, nullptr),
        "nvrtcCreateProgram");
  return program;
}

std::string compile_uncached(const std::string& source, const std::string& arch, Mode mode) {
  const NvrtcApi& api = nvrtc();
  Program program = new_program(source);
  const std::string arch_option = "--gpu-architecture=" + arch;
  const char* options[] = {arch_option.c_str(), "--std=c++17", "-default-device", kFastCompile};
  nvrtcResult result = api.nvrtcCompileProgram(*program, mode == Mode::Check ? 4 : 3, options);
  if (mode == Mode::Check && result == NVRTC_ERROR_INVALID_OPTION) {
    program = new_program(source);  // an NVRTC before 12.8: a full compile, in a program of its own
    result = api.nvrtcCompileProgram(*program, 3, options);
  }
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

namespace {

// Bumped when the entry's payload changes meaning; part of the file name, so that other luminal
// versions sharing the directory never read each other's entries.
constexpr const char* kDiskFormat = "kernel-cache v2";
// A kernel cache entry (key with the generated source, plus the cubin) larger than this is bad:
// memory stays bounded whatever is found in the cache.
constexpr uint64_t kMaxEntryBytes = uint64_t{256} << 20;

// The entry's path ("" when the disk cache is off). The file holds the whole key, so a file-name
// collision can never hand back another program's code.
std::string disk_cache_file(const std::string& key, const std::string& arch) {
  const std::string root = cache_root();
  if (root.empty()) return "";
  const std::string name = str_cat(arch, "-", std::hex, fnv1a64(str_cat(kDiskFormat, "|", key)), ".cubin");
  return (std::filesystem::path(root) / name).string();
}

struct DiskLookup {
  std::string cubin;      // "" on a miss
  bool writable = true;   // false: something that is not ours to remove occupies the entry's path
};

// The cached cubin. A bad entry is evicted (the caller recompiles), with one notice per path and
// process; what cannot be evicted (a directory that is not empty) is left and bypassed.
DiskLookup read_disk_entry(const std::string& file, const std::string& key) {
  CacheEntryRead read = read_cache_entry(file, key, kMaxEntryBytes);
  if (read.status == CacheEntryRead::Status::Hit && read.payload.compare(0, 4, "\x7f" "ELF") != 0) {
    read.status = CacheEntryRead::Status::Bad;
    read.reason = "holds no cubin (no ELF header)";
  }
  DiskLookup lookup;
  if (read.status == CacheEntryRead::Status::Hit) {
    lookup.cubin = std::move(read.payload);  // (read_cache_entry marked it recently used)
  } else if (read.status == CacheEntryRead::Status::Bad) {
    const std::string left = evict_cache_entry(file);
    lookup.writable = left.empty();
    const std::string outcome = left.empty() ? "removed it and compiled the kernels again"
                                             : str_cat("compiled the kernels again without caching them: ", left);
    notify_once("cache", "kernel-entry:" + file,
                str_cat("luminal: the kernel cache entry ", file, " ", read.reason, "; ", outcome));
  }
  return lookup;
}

void write_disk_entry(const std::string& file, const std::string& key, const std::string& cubin) {
  const std::string error = write_cache_entry(file, key, cubin);
  if (error.empty()) return;
  const std::string dir = std::filesystem::path(file).parent_path().string();
  notify_once("cache", "kernel-write:" + dir,
              str_cat("luminal: compiled kernels are not cached on disk: ", error));
}

}  // namespace

namespace {

std::string cached_compile(const std::string& source, const std::string& arch, Mode mode) {
  MemoryCache& cache = memory_cache();
  std::mutex& mutex = cache.mutex;
  std::map<std::string, std::string>& memory = cache.cubins;
  const char* const purpose = mode == Mode::Check ? "|check fast-compile|" : "|";
  const std::string key = str_cat(arch, "|nvrtc ", nvrtc_version(), purpose, source);
  const std::string file = disk_cache_file(key, arch);
  std::optional<std::string> remembered;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = memory.find(key); it != memory.end()) remembered = it->second;
  }
  if (remembered) {
    // Journaled all the same, so that a saved module carries the entry; written when the disk
    // cache lacks it (the cache directory changed since, or the entry was pruned).
    std::error_code ec;
    if (!file.empty() && std::filesystem::is_regular_file(file, ec)) {
      journal_cache_entry_read(file);
    } else if (!file.empty()) {
      write_disk_entry(file, key, *remembered);
    }
    return *remembered;
  }
  DiskLookup lookup = file.empty() ? DiskLookup{"", false} : read_disk_entry(file, key);
  std::string cubin = std::move(lookup.cubin);
  if (cubin.empty()) {
    cubin = compile_uncached(source, arch, mode);
    if (lookup.writable) write_disk_entry(file, key, cubin);
  }
  std::lock_guard<std::mutex> lock(mutex);
  memory.emplace(key, cubin);
  return cubin;
}

}  // namespace

std::string compile_to_cubin(const std::string& source, const std::string& arch) {
  return cached_compile(source, arch, Mode::Optimized);
}

void check_compiles(const std::string& source, const std::string& arch) { cached_compile(source, arch, Mode::Check); }

}  // namespace luminal::cuda
