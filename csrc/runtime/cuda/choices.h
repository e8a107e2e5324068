// The CUDA engine's measured choices through the on-disk choice cache (common/choice_cache.h), so
// that a warm compile does no search: the keys (the problem in words with the device, driver and
// library versions), and reuse of a stored winner, which is taken only when it is still among the
// candidates and runs. LUMINAL_SEARCH=0 (rules only) neither reads nor writes the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "codegen/cuda_codegen.h"
#include "common/choice_cache.h"
#include "common/config.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/executor.h"
#include "runtime/cuda/timing.h"

namespace luminal::runtime::gpu {

// Choices taken from the cache (hits) and measured on the device (misses: no usable entry, or
// caching off).
struct ChoiceCounts {
  size_t hits = 0;
  size_t misses = 0;
};

// The device and driver in words, for keys: "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, driver 12080".
std::string device_key(int device);

// The L2 flush that measured choices are timed with (cuda::L2Flush): its scratch memory, twice the
// device's L2 cache, is allocated at the first get() and released with the object.
class L2FlushScratch {
 public:
  L2FlushScratch(DeviceAllocator& allocator, int device) : allocator_(allocator), device_(device) {}
  // Null when the memory cannot be had (then choices are timed warm).
  const cuda::L2Flush* get();

 private:
  DeviceAllocator& allocator_;
  int device_;
  bool tried_ = false;
  std::shared_ptr<void> scratch_;
  std::optional<cuda::L2Flush> flush_;
};

// Chooses `matmul`'s algorithm (its pointers final, its output `out`): the generated GEMV where
// settings.gemv forces it (the configuration settings.gemv_config names, else by rule; raises when
// it names none); with settings.search off, cuBLASLt's best ranked; else the stored winner when it
// is still a candidate and runs, else the fastest as timed (cuBLASLt's algorithms and the generated
// GEMV's configurations), then stored. Returns the choice in words ("" when there is one candidate).
// Candidates are timed with their operands out of L2, as a CUDA graph that reads each weight once
// per call finds them: `l2_flush` is asked for its flush only when something is timed (where none
// could be had, they are timed warm, which the stored times say).
std::string choose_matmul_algorithm(cuda::Matmul& matmul, void* out, void* workspace, CUstream stream,
                                    const std::string& device, const Config& settings, size_t& syncs,
                                    ChoiceCounts& counts, L2FlushScratch& l2_flush);

// The entry of a step cuDNN may compute (a convolution, a fused attention): what was stored under
// `key` for it.
struct CudnnLookup {
  enum class Winner { None, Library, Generated };
  std::string key;  // "" when the choice is not cached (rules only)
  Winner winner = Winner::None;
  int64_t engine = -1;   // Library: cuDNN's global engine index
  std::string times;     // what was measured, for the record of choices
};

// A generated kernel as a part of keys: its source's hash and its launch shape.
std::string generated_kernel_key(const codegen::Kernel& kernel);

// The key of a cuDNN step's choice: the problem (`problem`: every shape, stride, dtype, alignment
// and parameter, in words), whether the generated kernel is timed against cuDNN (`generated`: its
// source's hash and launch shape; empty: cuDNN's engines only), the device and cuDNN's version.
// Raises when cuDNN is missing.
std::string cudnn_choice_key(const std::string& problem, const std::string& generated, const std::string& device);

// The entry stored under `key` ("" or none: Winner::None). An entry that does not say a winner
// the engine can use is evicted, like a corrupted one, and reads as none.
CudnnLookup look_up_cudnn_choice(const std::string& key);

// Stores a measured choice (`library`: cuDNN's plan of `engine`, else the generated kernel).
void store_cudnn_choice(const std::string& key, bool library, int64_t engine, const std::string& times);

// A graph with a row-kernel candidate (passes/row_plan.h) runs calls with contiguous inputs as the
// megakernel or on the general path, whichever measured faster for the call's binding.
struct RowKernelLookup {
  enum class Winner { None, Megakernel, General };
  Winner winner = Winner::None;
  std::string times;  // what was measured, for the record of choices
};

// The key of that choice: both candidates' generated modules (hashed: the graph's content as each
// path runs it, and the code generator's version), the binding (shape symbols, TF32 settings) and
// the device.
std::string row_kernel_choice_key(const std::string& megakernel_source, const std::string& general_source,
                                  const std::map<std::string, int64_t>& symbols, bool allow_tf32,
                                  bool allow_tf32_convolution, const std::string& device);

// What `fields` say (fields winner = megakernel | general, times); Winner::None when they name no
// winner. Pure: look_up_row_kernel_choice evicts such an entry.
RowKernelLookup parse_row_kernel_choice(const ChoiceFields& fields);

// The entry stored under `key`; none when there is none or it names no winner (then evicted).
RowKernelLookup look_up_row_kernel_choice(const std::string& key);

void store_row_kernel_choice(const std::string& key, bool megakernel, const std::string& times);

}  // namespace luminal::runtime::gpu
