// Debug switches read from the environment.
#pragma once

#include <cstdlib>

namespace luminal {

// True when the variable is set to something other than "" or "0".
inline bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' && !(value[0] == '0' && value[1] == '\0');
}

// LUMINAL_POISON_OUTPUTS=1: outputs and intermediates are filled with garbage (NaN for floats)
// before every run, so elements that a kernel fails to write cannot hide.
inline bool poison_enabled() { return env_flag("LUMINAL_POISON_OUTPUTS"); }

}  // namespace luminal
