// Checked element/byte arithmetic (common/checked.h), error-message sanitizing (common/error.h)
// and the archive reader's limits (pt2/archive.h): what hostile sizes must turn into.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/checked.h"
#include "common/config.h"
#include "common/error.h"
#include "pt2/archive.h"
#include "zip_helpers.h"

namespace luminal {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "<no error>";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

TEST(Checked, ArithmeticRaisesOnOverflowOnly) {
  EXPECT_EQ(checked_add(int64_t{kMax - 1}, int64_t{1}, "t"), kMax);
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31, "t"), int64_t{1} << 62);
  EXPECT_EQ(checked_sub(int64_t{-kMax}, int64_t{1}, "t"), std::numeric_limits<int64_t>::min());
  EXPECT_CONTAINS(error_of([] { checked_add(kMax, int64_t{1}, "tensor 'x'"); }), "tensor 'x': integer overflow");
  EXPECT_CONTAINS(error_of([] { checked_mul(int64_t{1} << 32, int64_t{1} << 31, "m"); }), "does not fit in int64");
  EXPECT_CONTAINS(error_of([] { checked_mul(-(int64_t{1} << 32), int64_t{1} << 32, "m"); }), "does not fit in int64");
  EXPECT_CONTAINS(error_of([] { checked_sub(std::numeric_limits<int64_t>::min(), int64_t{1}, "s"); }), "overflow");
  EXPECT_CONTAINS(error_of([] { checked_add(~size_t{0}, size_t{1}, "arena"); }), "arena: integer overflow");
  EXPECT_CONTAINS(error_of([] { checked_mul(size_t{1} << 33, size_t{1} << 31, "bytes"); }), "overflow");
}

TEST(Checked, ElementCountNamesTheTensorAndShape) {
  EXPECT_EQ(element_count({}, "scalar"), 1);
  EXPECT_EQ(element_count({3, 0, 5}, "empty"), 0);
  EXPECT_EQ(element_count({int64_t{1} << 31, int64_t{1} << 31}, "big"), int64_t{1} << 62);
  const std::string wrapped = error_of([] { element_count({int64_t{1} << 62, 4}, "node 'mul'"); });
  EXPECT_CONTAINS(wrapped, "node 'mul'");
  EXPECT_CONTAINS(wrapped, "[4611686018427387904, 4]");  // the product wraps to 0 without the check
  EXPECT_CONTAINS(error_of([] { element_count({kMax, 2}, "x"); }), "does not fit in int64");
  EXPECT_CONTAINS(error_of([] { element_count({2, -1}, "x"); }), "negative size in shape [2, -1]");
  // A zero size makes the tensor empty whatever the others are (in any order), but not a negative one.
  EXPECT_EQ(element_count({0, int64_t{1} << 62, 8}, "x"), 0);
  EXPECT_EQ(element_count({int64_t{1} << 62, 8, 0}, "x"), 0);
  EXPECT_CONTAINS(error_of([] { element_count({0, -3}, "x"); }), "negative");
}

TEST(Checked, ByteCounts) {
  EXPECT_EQ(byte_count(10, DType::F32, "t"), 40u);
  EXPECT_EQ(tensor_bytes({2, 3}, DType::F64, "t"), 48u);
  EXPECT_EQ(tensor_bytes({0, kMax}, DType::F64, "t"), 0u);
  // 2**61 elements fit; their f32 bytes (2**63) do not.
  EXPECT_CONTAINS(error_of([] { tensor_bytes({int64_t{1} << 59, 4}, DType::F32, "node 'e'"); }),
                  "node 'e': a float32 tensor of shape [576460752303423488, 4] needs more than 2**63 bytes");
  EXPECT_CONTAINS(error_of([] { byte_count(int64_t{1} << 62, DType::I64, "w"); }), "64-bit byte count");
  EXPECT_CONTAINS(error_of([] { byte_count(-1, size_t{4}, "w"); }), "negative element count");
  EXPECT_CONTAINS(error_of([] { feasible_tensor_bytes({int64_t{1} << 40, 4}, DType::F32, "node 'big'"); }),
                  "more than any device can hold");
  EXPECT_EQ(feasible_tensor_bytes({1024, 4}, DType::F32, "small"), 16384u);
  EXPECT_GT(physical_memory_bytes(), int64_t{1} << 20);
  EXPECT_GE(max_tensor_bytes(), int64_t{256} << 30);  // an accelerator may hold more than this host
  EXPECT_GE(max_tensor_bytes(), physical_memory_bytes());
}

TEST(Checked, StridedStorageExtent) {
  EXPECT_EQ(strided_storage_elements({2, 3}, {3, 1}, 0, "w"), 6);
  EXPECT_EQ(strided_storage_elements({3}, {1}, 4, "w"), 7);           // a view at an offset
  EXPECT_EQ(strided_storage_elements({5, 4}, {0, 1}, 0, "w"), 4);     // broadcast (stride 0)
  EXPECT_EQ(strided_storage_elements({0, kMax}, {kMax, 1}, 9, "w"), 0);  // empty: needs nothing
  EXPECT_EQ(strided_storage_elements({}, {}, 2, "w"), 3);             // a scalar at an offset
  EXPECT_CONTAINS(error_of([] { strided_storage_elements({2}, {int64_t{1} << 62}, int64_t{1} << 62, "w"); }),
                  "reaches past int64");
  EXPECT_CONTAINS(error_of([] { strided_storage_elements({1}, {1}, kMax, "w"); }), "reaches past int64");
  EXPECT_CONTAINS(error_of([] { strided_storage_elements({2}, {-1}, 4, "weight 'w'"); }),
                  "weight 'w': negative size or stride");
  EXPECT_CONTAINS(error_of([] { strided_storage_elements({2}, {1}, -1, "w"); }), "negative storage offset");
  EXPECT_CONTAINS(error_of([] { strided_storage_elements({2, 2}, {1}, 0, "w"); }), "2 sizes but 1 strides");
}

TEST(ErrorMessages, InvalidUtf8IsReplaced) {
  EXPECT_EQ(valid_utf8("plain ascii"), "plain ascii");
  EXPECT_EQ(valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(valid_utf8("\xFFx"), replacement + "x");  // the first byte
  EXPECT_EQ(valid_utf8("a\xC3"), "a" + replacement);  // truncated at the end
  EXPECT_EQ(valid_utf8("\xC0\xAF"), replacement + replacement);  // overlong
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), replacement + replacement + replacement);  // a surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), replacement + replacement + replacement + replacement);  // > U+10FFFF
  const Error error(std::string("entry m\xFF") + "del.json");
  EXPECT_EQ(std::string(error.what()), "entry m" + replacement + "del.json");
}

using luminal::testing::make_zip;

TEST(ArchiveLimits, DeclaredSizesAreCheckedBeforeReading) {
  pt2::ReadLimits limits;
  limits.small_entry_bytes = 8;
  limits.archive_bytes = 1 << 20;
  const std::string zeros(512 << 10, '\0');
  const pt2::Archive archive = pt2::Archive::from_buffer(
      make_zip({{"a/archive_format", "pt2", false}, {"a/big", zeros, false}, {"a/stored", zeros, false}}), limits);
  EXPECT_EQ(archive.read("archive_format", limits.small_entry_bytes, "small fixed entry"), "pt2");
  EXPECT_EQ(archive.declared_size("big"), zeros.size());
  EXPECT_CONTAINS(error_of([&] { archive.read("big", 4096, "JSON entry"); }),
                  "declares 524288 bytes for this JSON entry, over its limit of 4096 bytes");
  EXPECT_EQ(archive.read("big", 1 << 20, "weight payload"), zeros);
  // The archive's budget is shared by every read: the second half MiB does not fit any more.
  EXPECT_CONTAINS(error_of([&] { archive.read("stored", 1 << 20, "weight payload"); }),
                  "past its limit of 1048576");
}

TEST(ArchiveLimits, EnvironmentIsValidated) {
  ::setenv("LUMINAL_MAX_ARCHIVE_BYTES", "12345", 1);
  reload_config();
  EXPECT_EQ(pt2::ReadLimits::from_environment().archive_bytes, 12345u);
  EXPECT_EQ(pt2::ReadLimits::with_max_archive_bytes(77).archive_bytes, 77u);
  for (const char* bad : {"0", "-1", "12k", "1e9", " 5", "99999999999999999999999"}) {
    ::setenv("LUMINAL_MAX_ARCHIVE_BYTES", bad, 1);
    reload_config();
    EXPECT_CONTAINS(error_of([] { pt2::ReadLimits::from_environment(); }), "LUMINAL_MAX_ARCHIVE_BYTES") << bad;
  }
  ::unsetenv("LUMINAL_MAX_ARCHIVE_BYTES");
  reload_config();
  ::setenv("LUMINAL_MAX_ARCHIVE_JSON_BYTES", "x", 1);
  reload_config();
  EXPECT_CONTAINS(error_of([] { pt2::ReadLimits::from_environment(); }), "LUMINAL_MAX_ARCHIVE_JSON_BYTES");
  ::unsetenv("LUMINAL_MAX_ARCHIVE_JSON_BYTES");
  reload_config();
  const pt2::ReadLimits defaults = pt2::ReadLimits::from_environment();
  EXPECT_EQ(defaults.archive_bytes, uint64_t{64} << 30);
  EXPECT_EQ(defaults.json_entry_bytes, uint64_t{64} << 20);
  EXPECT_EQ(defaults.json_values(), size_t{2} << 20);
}

TEST(ArchiveFiles, WhatIsNotARegularFileIsRefused) {
  EXPECT_CONTAINS(error_of([] { pt2::Archive::from_file("/nonexistent/dir/model.pt2"); }), "no such file");
  EXPECT_CONTAINS(error_of([] { pt2::Archive::from_file("/"); }), "is a directory");
  EXPECT_CONTAINS(error_of([] { pt2::Archive::from_file("/dev/zero"); }), "not a regular file");
  EXPECT_CONTAINS(error_of([] { pt2::Archive::from_file("/dev/null"); }), "not a regular file");
}

}  // namespace
}  // namespace luminal
