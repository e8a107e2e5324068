// luminal._C._ReferenceKernel: a hand-written CUDA kernel compiled with the core's NVRTC wrapper and
// launched from Python on torch's current stream (runtime/cuda/standalone_kernel.h). Private: the
// benchmarks' reference rows use it; compiled graphs never do.
#pragma once

#include <pybind11/pybind11.h>

namespace luminal::bindings {

// Adds the class to `m` when the core has its CUDA engine (otherwise `m` has no such attribute).
void register_reference_kernel(pybind11::module_& m);

}  // namespace luminal::bindings
