// Run-time compilation of generated CUDA C with NVRTC, with in-memory and on-disk caches.
#pragma once

#include <string>

namespace luminal::cuda {

// Compiles `source` for `arch` (e.g. "sm_90") to a cubin. Results are cached in memory and, unless
// caching is off, on disk in the cache root (common/cache_files.h: LUMINAL_CACHE_DIR, default
// $XDG_CACHE_HOME/luminal or ~/.cache/luminal), keyed by source, arch and NVRTC version. A bad disk
// entry is evicted and recompiled with one "cache" notice (common/notices.h).
// Raises luminal::Error with the compiler log on failure.
std::string compile_to_cubin(const std::string& source, const std::string& arch);

// Compiles `source` for `arch` only to find errors (LUMINAL_CHECK_CUDA_CODEGEN: machines without a
// GPU compile every graph's module), through the same front end and PTX assembler with fewer
// optimizations (NVRTC's fast-compile level): the generated code is parsed, type-checked and
// assembled (inline PTX included), in a fraction of the time for large modules (a fully unrolled
// row kernel: 15-22 s -> 0.5 s). Cached like compile_to_cubin under keys of their own, so that such
// a cubin is never run. Raises luminal::Error with the compiler log on failure.
void check_compiles(const std::string& source, const std::string& arch);

// Empties the in-memory cache (the disk cache stays): for measuring cold compiles.
void clear_memory_cache();

// NVRTC's version as "major.minor" (raises when NVRTC cannot be loaded).
std::string nvrtc_version();

}  // namespace luminal::cuda
