// Limits of the JSON reader against hostile documents (see README, "Threat model"): a document
// whose parsed form would take far more memory than its text is refused before parsing.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "pt2/parse.h"

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

// 2M empty arrays (each counts as a container and a separator): 6 MiB of text that would take
// some 100 MB once parsed; the count refuses it without parsing.
TEST(JsonLimits, ManySmallValuesAreRefusedBeforeParsing) {
  const std::string text = R"({"config": {}, "padding": [)" + repeat("[],", size_t{2} << 20) + "[]]}";
  const std::string message = error_of_payload_config(text);
  EXPECT_NE(message.find("w.json: the JSON document holds about 4194310 values (6291487 bytes)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("more than the 4194304"), std::string::npos) << message;
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

}  // namespace
}  // namespace luminal::pt2
