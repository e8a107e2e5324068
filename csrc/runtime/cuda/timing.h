// Timing work on a CUDA stream with events: what every measured choice (cuBLASLt algorithms, cuDNN
// engines, generated kernels) uses, so they all measure the same way.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/cuda/api.h"

namespace luminal::cuda {

// A CUDA event, released with the object.
class TimingEvent {
 public:
  TimingEvent() { LUMINAL_CU(driver().cuEventCreate(&event_, CU_EVENT_DEFAULT)); }
  ~TimingEvent() {
    try {
      if (event_) driver().cuEventDestroy(event_);
    } catch (const Error&) {
    }
  }
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
  CUevent get() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

// Milliseconds per run of `run` (which enqueues work on `stream`): one warm-up run, then `repeats`
// runs between two events. Waits for the stream once, counted in `syncs`. Errors from `run`
// propagate; the events are released either way.
template <typename Run>
float time_on_stream(CUstream stream, int repeats, size_t& syncs, const Run& run) {
  const DriverApi& api = driver();
  const TimingEvent start, end;
  run();
  LUMINAL_CU(api.cuEventRecord(start.get(), stream));
  for (int repeat = 0; repeat < repeats; ++repeat) run();
  LUMINAL_CU(api.cuEventRecord(end.get(), stream));
  ++syncs;
  LUMINAL_CU(api.cuEventSynchronize(end.get()));
  float ms = 0;
  LUMINAL_CU(api.cuEventElapsedTime(&ms, start.get(), end.get()));
  return ms / static_cast<float>(repeats);
}

// Writes a scratch buffer of at least twice the L2 cache, so that the cache holds none of what the
// work before it read: a cold timing enqueues it before each timed run. A run timed again and
// again otherwise finds its operands in L2 (a 32 MiB weight fits an H100's 50 MiB), unlike inside
// a decode step's CUDA graph, which reads each weight once per call after gigabytes of others.
class L2Flush {
 public:
  L2Flush(CUdeviceptr scratch, size_t bytes) : scratch_(scratch), bytes_(bytes) {}
  void enqueue(CUstream stream) const { LUMINAL_CU(driver().cuMemsetD8Async(scratch_, 0, bytes_, stream)); }

 private:
  CUdeviceptr scratch_;
  size_t bytes_;
};

// Milliseconds of one run of `run` with a cold L2 cache: one warm-up run, then `repeats` runs,
// each after `flush` and between its own two events; the median. Waits for the stream once.
template <typename Run>
float time_cold_on_stream(CUstream stream, int repeats, size_t& syncs, const L2Flush& flush, const Run& run) {
  LUMINAL_CHECK(repeats > 0, "internal error: a cold timing of ", repeats, " runs");
  const DriverApi& api = driver();
  run();
  std::vector<TimingEvent> starts(static_cast<size_t>(repeats)), ends(static_cast<size_t>(repeats));
  for (size_t r = 0; r < starts.size(); ++r) {
    flush.enqueue(stream);
    LUMINAL_CU(api.cuEventRecord(starts[r].get(), stream));
    run();
    LUMINAL_CU(api.cuEventRecord(ends[r].get(), stream));
  }
  ++syncs;
  LUMINAL_CU(api.cuEventSynchronize(ends.back().get()));
  std::vector<float> ms(starts.size());
  for (size_t r = 0; r < starts.size(); ++r) {
    LUMINAL_CU(api.cuEventElapsedTime(&ms[r], starts[r].get(), ends[r].get()));
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

// The fastest of `count` candidates: `choose(i)` makes candidate i current, `run()` enqueues it on
// `stream`; each is timed by time_on_stream. A candidate whose run raises is skipped (keeping it
// would only fail later, inside a captured CUDA graph); `last_failure` says why the last one did.
struct FastestCandidate {
  std::optional<size_t> index;  // none when every candidate failed
  float ms = std::numeric_limits<float>::max();
  std::string last_failure;
};

// With `flush`, each candidate is timed cold (time_cold_on_stream).
template <typename Choose, typename Run>
FastestCandidate time_candidates(size_t count, CUstream stream, size_t& syncs, const Choose& choose, const Run& run,
                                 const L2Flush* flush = nullptr) {
  constexpr int kRepeats = 3, kColdRepeats = 7;  // a cold run is timed alone: more of them, the median
  FastestCandidate fastest;
  for (size_t i = 0; i < count; ++i) {
    choose(i);
    float ms = 0;
    try {
      ms = flush ? time_cold_on_stream(stream, kColdRepeats, syncs, *flush, run)
                 : time_on_stream(stream, kRepeats, syncs, run);
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
