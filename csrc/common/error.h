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

// An exported node luminal does not compile (no translator, or its translator refuses this call:
// a dtype or variant it lacks). Typed so that callers can run just that node elsewhere (the Python
// backend runs it in eager) instead of parsing the message.
class UnsupportedNode : public Error {
 public:
  UnsupportedNode(std::string node, std::string target, std::string reason, const std::string& message)
      : Error(message), node_(std::move(node)), target_(std::move(target)), reason_(std::move(reason)) {}

  const std::string& node() const { return node_; }      // the exported node's name, e.g. "pow_1"
  const std::string& target() const { return target_; }  // e.g. "torch.ops.aten.pow.Tensor_Tensor"
  const std::string& reason() const { return reason_; }  // why, without the node context

 private:
  std::string node_;
  std::string target_;
  std::string reason_;
};

}  // namespace luminal

// Raises luminal::Error with the streamed message when `cond` is false.
#define LUMINAL_CHECK(cond, ...)          \
  do {                                    \
    if (!(cond)) ::luminal::fail(__VA_ARGS__); \
  } while (false)
