// libFuzzer target: archive bytes -> zip reader -> package -> exported-program parser.
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)luminal::fuzz::run_pt2_input(data, size, luminal::fuzz::Depth::Parse);
  return 0;
}
