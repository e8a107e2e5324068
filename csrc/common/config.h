// Every environment variable the core reads, in one place, read once.
//
// The core never calls std::getenv elsewhere: code asks config() for the snapshot taken at first
// use. A process that changes its environment afterwards (the Python tests do) calls
// reload_config() (luminal._C.reload_config, luminal.settings.reload) to take a new snapshot;
// snapshots already handed out stay valid and unchanged.
//
// The Python side's variables (LUMINAL_DUMP_PT2, LUMINAL_CACHE_MAX_BYTES) are documented and read
// in python/luminal/settings.py.
//
//   LUMINAL_POISON_OUTPUTS=1      outputs and intermediates are filled with garbage (NaN for floats)
//                                 before every run, so elements a kernel fails to write cannot hide
//   LUMINAL_PROFILE=1             the executors time every step and print a profile per run
//   LUMINAL_SYNC_CHECK=1          CUDA: synchronize after every run, so a device-side error is raised
//                                 by the call that caused it
//   LUMINAL_CPU_ROW_GRAPH=1       the CPU engine runs the row-planned (megakernel) graph too, so the
//                                 CPU suite exercises the row planner
//   LUMINAL_CHECK_CUDA_CODEGEN=   sm_XX (or 1 for sm_90): compile every graph's CUDA module with
//                                 NVRTC at compile time, also on machines without a GPU (at the
//                                 fast-compile level: errors only, cuda::check_compiles)
//   LUMINAL_DUMP_KERNELS=<dir>    keep every generated CUDA module in <dir> (a debugging aid)
//   LUMINAL_CACHE_DIR=<dir>       the on-disk cache's root ("" turns caching off); unset: then
//   XDG_CACHE_HOME, HOME          $XDG_CACHE_HOME/luminal (when absolute), else $HOME/.cache/luminal;
//                                 HOME also expands "~" in the directories above
//   LUMINAL_SEARCH=0              CUDA: choose kernels by rule only, without timing candidates on
//                                 the device (default: measured choice, remembered in the cache:
//                                 common/choice_cache.h; rules only neither read nor write it)
//   LUMINAL_CONVOLUTION=          CUDA: "cudnn" or "generated" runs every convolution that way
//                                 (where cuDNN takes it); unset or "auto": the faster, as measured
//   LUMINAL_ATTENTION=            CUDA: the same for fused attention (cuDNN's SDPA operation or the
//                                 generated flash kernel)
//   LUMINAL_GEMV=                 CUDA: "cublaslt" keeps matmuls of at most 8 rows on cuBLASLt;
//                                 "generated" runs them as the generated GEMV (its configuration by
//                                 rule; "generated:n1 k4 w1 u4" names one), without timing: for tests;
//                                 unset or "auto": the fastest of both, as measured
//   LUMINAL_MAX_ARCHIVE_BYTES=n   the most bytes read from one PT2 archive (default 64 GiB)
//   LUMINAL_MAX_ARCHIVE_JSON_BYTES=n  the most bytes of one JSON entry in it
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace luminal {

// A byte count from the environment: unset, a positive integer, or text that is neither (an error
// raised where the limit is used, naming the variable).
struct ByteLimitSetting {
  std::optional<uint64_t> bytes;  // set and valid
  std::string problem;            // set and invalid: the message to raise
};

// How the CUDA engine runs a step cuDNN may compute (LUMINAL_CONVOLUTION, LUMINAL_ATTENTION).
enum class CudnnChoice { Measured, Library, Generated };

// Whether the CUDA engine's small matmuls may run as the generated GEMV (LUMINAL_GEMV).
enum class GemvChoice { Measured, Library, Generated };

struct Config {
  bool poison_outputs = false;   // LUMINAL_POISON_OUTPUTS
  bool profile = false;          // LUMINAL_PROFILE
  bool sync_check = false;       // LUMINAL_SYNC_CHECK
  bool cpu_runs_row_graph = false;  // LUMINAL_CPU_ROW_GRAPH
  bool search = true;                // LUMINAL_SEARCH (false: rules only)
  bool assign_layouts = true;        // LUMINAL_LAYOUTS (false: every tensor in its logical order)
  // LUMINAL_PDL (false: "0"): a CUDA graph's consecutive generated kernels are linked by
  // programmatic edges (sm_90+), so that each launches while the one before it finishes.
  bool programmatic_launch = true;
  // LUMINAL_GEMV_GROUP (false: "0"): consecutive generated GEMVs of one activation (q, k, v) share a launch.
  bool group_gemvs = true;
  // LUMINAL_KERNEL_GROUP (false: "0"): consecutive independent generated kernels share a launch.
  bool group_kernels = true;
  // LUMINAL_GEMV_GLU (false: "0"): a SwiGLU's gate and up products store its values (one launch).
  bool fuse_swiglu = true;
  // LUMINAL_ATTENTION_SPLIT (false: "0"): a decode row's keys are split over a cluster of blocks.
  bool split_attention_keys = true;
  CudnnChoice convolution = CudnnChoice::Measured;  // LUMINAL_CONVOLUTION
  CudnnChoice attention = CudnnChoice::Measured;    // LUMINAL_ATTENTION
  GemvChoice gemv = GemvChoice::Measured;  // LUMINAL_GEMV
  std::string gemv_config;                 // LUMINAL_GEMV=generated:<configuration>; "" by rule
  std::string check_cuda_arch;   // LUMINAL_CHECK_CUDA_CODEGEN: "" (off) or an arch, "1" read as "sm_90"
  std::string dump_kernels_dir;  // LUMINAL_DUMP_KERNELS as given ("" off; resolve_user_directory it)
  // The cache's location as given; nullopt where unset (an empty LUMINAL_CACHE_DIR is set: it
  // turns caching off). cache_root() (common/cache_files.h) resolves them.
  std::optional<std::string> cache_dir;       // LUMINAL_CACHE_DIR
  std::optional<std::string> xdg_cache_home;  // XDG_CACHE_HOME
  std::optional<std::string> home;            // HOME
  ByteLimitSetting max_archive_bytes;         // LUMINAL_MAX_ARCHIVE_BYTES
  ByteLimitSetting max_archive_json_bytes;    // LUMINAL_MAX_ARCHIVE_JSON_BYTES
};

// The current snapshot (read from the environment at first use). Thread-safe.
std::shared_ptr<const Config> config();

// Reads the environment again; later config() calls return the new snapshot.
void reload_config();

// The snapshot `read_config` would take from an environment given as a lookup (nullptr: unset);
// for tests of the parsing rules.
Config read_config(const char* (*lookup)(const char* name));

}  // namespace luminal
