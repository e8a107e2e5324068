// libFuzzer target: archive bytes -> package -> translation to IR -> passes -> CPU executor plan.
// Nothing runs: it finds crashes in translation and in the passes' handling of declared shapes
// (a self-consistent archive may declare any size), not in kernels.
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)luminal::fuzz::run_pt2_input(data, size, luminal::fuzz::Depth::Compile);
  return 0;
}
