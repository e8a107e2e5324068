// Error handling for the luminal core.
//
// Every failure is a luminal::Error exception carrying a human-readable message; the core never
// aborts. Messages name what failed (node, ATen target, shapes, dtypes) so that a user can act.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace luminal {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates any streamable values into one string.
template <typename... Parts>
std::string str_cat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

template <typename... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  throw Error(str_cat(std::forward<Parts>(parts)...));
}

}  // namespace luminal

// Raises luminal::Error with the streamed message when `cond` is false.
#define LUMINAL_CHECK(cond, ...)          \
  do {                                    \
    if (!(cond)) ::luminal::fail(__VA_ARGS__); \
  } while (false)
