// Timing work on a CUDA stream with events: what every measured choice (cuBLASLt algorithms, cuDNN
// engines and forms, generated kernels) uses, so they all measure the same way.
#pragma once

#include <cstddef>

#include "common/error.h"
#include "runtime/cuda/api.h"

namespace luminal::cuda {

// Milliseconds per run of `run` (which enqueues work on `stream`): one warm-up run, then `repeats`
// runs between two events. Waits for the stream once, counted in `syncs`. Errors from `run`
// propagate; the events are released either way.
template <typename Run>
float time_on_stream(CUstream stream, int repeats, size_t& syncs, const Run& run) {
  const DriverApi& api = driver();
  struct Event {
    CUevent event = nullptr;
    Event() { LUMINAL_CU(driver().cuEventCreate(&event, CU_EVENT_DEFAULT)); }
    ~Event() {
      try {
        if (event) driver().cuEventDestroy(event);
      } catch (const Error&) {
      }
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
  };
  const Event start, end;
  run();
  LUMINAL_CU(api.cuEventRecord(start.event, stream));
  for (int repeat = 0; repeat < repeats; ++repeat) run();
  LUMINAL_CU(api.cuEventRecord(end.event, stream));
  ++syncs;
  LUMINAL_CU(api.cuEventSynchronize(end.event));
  float ms = 0;
  LUMINAL_CU(api.cuEventElapsedTime(&ms, start.event, end.event));
  return ms / static_cast<float>(repeats);
}

}  // namespace luminal::cuda
