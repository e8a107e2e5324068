// Test helpers for the archive fixtures in tests/fixtures (LUMINAL_FIXTURE_DIR, set by CMake) and
// the JSON records of eager's results next to them.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace luminal::testing {

inline std::string fixture(const std::string& name) { return std::string(LUMINAL_FIXTURE_DIR) + "/" + name; }

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

}  // namespace luminal::testing
