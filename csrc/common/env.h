// Transitional: the two executors still read LUMINAL_PROFILE, LUMINAL_SYNC_CHECK and
// LUMINAL_POISON_OUTPUTS through these. Everything else reads config() (common/config.h), which
// holds every variable; delete this header once the executors use config()->profile,
// config()->sync_check and config()->poison_outputs.
#pragma once

#include <cstdlib>

#include "common/config.h"

namespace luminal {

// True when the variable is set to something other than "" or "0".
inline bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' && !(value[0] == '0' && value[1] == '\0');
}

inline bool poison_enabled() { return config()->poison_outputs; }

}  // namespace luminal
