// Config read from a given environment (common/config.h's read_config with a fake lookup), for
// tests of the settings.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "common/config.h"

namespace luminal::test {

inline std::map<std::string, std::string>& fake_environment() {
  static std::map<std::string, std::string> environment;
  return environment;
}

inline const char* fake_lookup(const char* name) {
  const auto it = fake_environment().find(name);
  return it == fake_environment().end() ? nullptr : it->second.c_str();
}

inline Config read(std::map<std::string, std::string> environment) {
  fake_environment() = std::move(environment);
  return read_config(fake_lookup);
}

}  // namespace luminal::test
