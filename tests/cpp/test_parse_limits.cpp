// Limits of the JSON reader against hostile documents (see README, "Threat model"): a document
// whose parsed form would take far more memory than its text stops at a value budget while it is
// parsed (kDefaultMaxJsonValues, counted by the DOM builder).
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "pt2/parse.h"
#include "pt2/sympy.h"

namespace luminal::pt2 {
namespace {

std::string repeat(const std::string& piece, size_t times) {
  std::string out;
  out.reserve(piece.size() * times);
  for (size_t i = 0; i < times; ++i) out += piece;
  return out;
}

std::string error_of_payload_config(const std::string& text) {
  try {
    parse_payload_config(text, "w.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// 2M empty arrays: 6 MiB of text that would take some 100 MB once parsed.
TEST(JsonLimits, ManySmallValuesAreRefused) {
  const std::string text = R"({"config": {}, "padding": [)" + repeat("[],", size_t{2} << 20) + "[]]}";
  const std::string message = error_of_payload_config(text);
  EXPECT_NE(message.find("w.json: the JSON document holds more than 2097152 values"), std::string::npos) << message;
}

TEST(JsonLimits, ObjectsCountLikeArrays) {
  const std::string text = R"({"config": {}, "padding": [)" + repeat("{},", size_t{2} << 20) + "{}]}";
  EXPECT_NE(error_of_payload_config(text).find("values"), std::string::npos);
}

// Separators inside strings (escaped quotes included) are text, not values.
TEST(JsonLimits, SeparatorsInsideStringsDoNotCount) {
  const std::string text =
      R"({"config": {}, "note": "a \" )" + repeat(",[{", size_t{2} << 20) + R"( \\", "more": [1, 2]})";
  EXPECT_EQ(error_of_payload_config(text), "");
  EXPECT_TRUE(parse_payload_config(text, "w.json").empty());
}

TEST(JsonLimits, DocumentsBelowTheLimitParse) {
  const std::string text = R"({"config": {}, "padding": [)" + repeat("1,", 100000) + "1]}";
  EXPECT_EQ(error_of_payload_config(text), "");
}

// A long argument list would take some 35 times its text once parsed: long expressions are refused
// by length, and the longest accepted one still parses.
TEST(SympyLimits, LongExpressionsAreRefusedByLength) {
  const std::string symbol = "Symbol('s0', positive=True, integer=True)";
  const std::string too_long = "Add(" + repeat("0,", 40000) + symbol + ")";
  try {
    parse_sympy(too_long);
    ADD_FAILURE() << "a " << too_long.size() << "-byte expression was parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is 80046 bytes long, more than the 65536 this parser reads"),
              std::string::npos)
        << e.what();
  }
  std::string longest = "Add(" + repeat("0,", 32000) + symbol;
  longest += std::string(65536 - longest.size() - 1, ' ') + ")";
  ASSERT_EQ(longest.size(), 65536u);
  const SympyExpr parsed = parse_sympy(longest);
  EXPECT_EQ(parsed.args.size(), 32001u);
  EXPECT_EQ(parsed.args.back(), SympyExpr::symbol("s0"));
}

}  // namespace
}  // namespace luminal::pt2
