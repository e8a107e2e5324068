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

// `text` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD.
// Messages quote archive contents (entry names, JSON excerpts) and reach Python as str: invalid
// UTF-8 there would surface as a UnicodeDecodeError instead of the error itself.
inline std::string valid_utf8(const std::string& text) {
  const auto byte = [&](size_t i) { return i < text.size() ? static_cast<unsigned char>(text[i]) : 0u; };
  const auto in = [](unsigned c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
  // Length of the well-formed sequence starting at i (Unicode table 3-7), or 0.
  const auto sequence = [&](size_t i) -> size_t {
    const unsigned c = byte(i);
    if (c < 0x80) return 1;
    if (in(c, 0xC2, 0xDF)) return in(byte(i + 1), 0x80, 0xBF) ? 2 : 0;
    if (in(c, 0xE0, 0xEF)) {
      const unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
      return in(byte(i + 1), lo, hi) && in(byte(i + 2), 0x80, 0xBF) ? 3 : 0;
    }
    if (in(c, 0xF0, 0xF4)) {
      const unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
      return in(byte(i + 1), lo, hi) && in(byte(i + 2), 0x80, 0xBF) && in(byte(i + 3), 0x80, 0xBF) ? 4 : 0;
    }
    return 0;
  };
  std::string out;
  bool replaced = false;
  size_t copied = 0;  // text[copied, i) is valid and not yet in `out`
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequence(i);
    if (n > 0) {
      i += n;
      continue;
    }
    out.append(text, copied, i - copied).append("\xEF\xBF\xBD");
    replaced = true;
    copied = ++i;
  }
  if (!replaced) return text;
  return out.append(text, copied, std::string::npos);
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(valid_utf8(message)) {}
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

// A call the CUDA engine cannot add to the caller's CUDA graph capture (runtime/cuda/capture.cpp):
// the compiled graph's first call on the device, which loads and measures kernels, or a binding
// no earlier call built. Typed so that the bindings run that call in eager, whose kernels the
// capture takes.
class CaptureUnsupported : public Error {
 public:
  using Error::Error;
};

// An exported node luminal does not compile (no translator, or its translator refuses this call:
// a dtype or variant it lacks). Typed so that callers can run just that node elsewhere (the Python
// backend runs it in eager) instead of parsing the message.
class UnsupportedNode : public Error {
 public:
  UnsupportedNode(std::string node, std::string target, std::string reason, const std::string& message)
      : Error(message), node_(valid_utf8(node)), target_(valid_utf8(target)), reason_(valid_utf8(reason)) {}

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
