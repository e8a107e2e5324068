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

// Empties the in-memory cache (the disk cache stays): for measuring cold compiles.
void clear_memory_cache();

// NVRTC's version as "major.minor" (raises when NVRTC cannot be loaded).
std::string nvrtc_version();

}  // namespace luminal::cuda
