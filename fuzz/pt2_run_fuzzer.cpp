// libFuzzer target: archive bytes -> compile -> one CPU run with small made-up inputs (see
// fuzz_entry.h, Depth::Run). Slower than the others; catches what only shows at call time.
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)luminal::fuzz::run_pt2_input(data, size, luminal::fuzz::Depth::Run);
  return 0;
}
