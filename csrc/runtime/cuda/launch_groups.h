// Grouped launches of independent node kernels (runtime/cuda/program.h, KernelGroup): one kernel
// node of the CUDA graph for the steps of a group instead of one each.
#pragma once

#include <cstddef>

#include "runtime/cuda/instance.h"
#include "runtime/cuda/program.h"

namespace luminal::runtime::gpu {

// Replaces the launches of each of the program's kernel groups by one launch of its group kernel
// where every member step has its one launch (besides a scatter's base copy that this instance
// does not record) and no member writes memory another one reads or writes (the arena reuses
// slots across steps that a shared launch runs at once). Other groups keep their launches.
// Call with every launch added and pointers final, before the graph is recorded. Returns how
// many kernels now share a launch.
size_t group_launches(const CudaProgram& program, Instance& instance);

}  // namespace luminal::runtime::gpu
