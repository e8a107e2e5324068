// Timing work on a CUDA stream with events: what every measured choice (cuBLASLt algorithms, cuDNN
// engines, generated kernels) uses, so they all measure the same way.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>

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

// The fastest of `count` candidates: `choose(i)` makes candidate i current, `run()` enqueues it on
// `stream`; each is timed by time_on_stream. A candidate whose run raises is skipped (keeping it
// would only fail later, inside a captured CUDA graph); `last_failure` says why the last one did.
struct FastestCandidate {
  std::optional<size_t> index;  // none when every candidate failed
  float ms = std::numeric_limits<float>::max();
  std::string last_failure;
};

template <typename Choose, typename Run>
FastestCandidate time_candidates(size_t count, CUstream stream, size_t& syncs, const Choose& choose, const Run& run) {
  FastestCandidate fastest;
  for (size_t i = 0; i < count; ++i) {
    choose(i);
    float ms = 0;
    try {
      ms = time_on_stream(stream, 3, syncs, run);
    } catch (const Error& error) {
      fastest.last_failure = error.what();
      continue;
    }
    if (ms < fastest.ms) {
      fastest.ms = ms;
      fastest.index = i;
    }
  }
  return fastest;
}

}  // namespace luminal::cuda
