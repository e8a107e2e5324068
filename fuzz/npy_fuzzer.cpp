// libFuzzer target: bytes -> the runner's strict .npy reader (csrc/runner/npy.h). A file it
// accepts must hold exactly its data (nothing allocated past the input's size) and survive a
// write and a second read unchanged; anything else must raise luminal::Error.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/error.h"
#include "runner/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto tensor = luminal::runner::parse_npy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    if (tensor.nbytes() > size) __builtin_trap();
    const auto again = luminal::runner::parse_npy(luminal::runner::encode_npy(tensor), "rewritten");
    if (again.dtype() != tensor.dtype() || again.sizes() != tensor.sizes() ||
        std::memcmp(again.data(), tensor.data(), tensor.nbytes()) != 0) {
      __builtin_trap();
    }
  } catch (const luminal::Error&) {
  }
  return 0;
}
