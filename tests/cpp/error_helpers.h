// Test helpers for errors: the message of a luminal::Error a body must throw, and a substring check.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>

#include "common/error.h"

namespace luminal::testing {

// Runs `body`, which must throw luminal::Error, and returns the message ("" plus a test failure
// otherwise).
inline std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected luminal::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected luminal::Error, nothing was thrown";
  return "";
}

}  // namespace luminal::testing

#define EXPECT_CONTAINS(haystack, needle)                               \
  do {                                                                  \
    const std::string haystack_ = (haystack);                           \
    EXPECT_NE(haystack_.find(needle), std::string::npos)                \
        << "expected to find \"" << (needle) << "\" in: " << haystack_; \
  } while (false)
