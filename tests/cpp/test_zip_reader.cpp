// Tests of the zip reader (csrc/pt2/zip_reader.h) through pt2::Archive: archives are written byte
// by byte here (ZipWriter below), so that every field a hostile file controls can be set to what a
// test needs: ZIP64 records, comments, data descriptors, offsets that overlap or run past the end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "pt2/archive.h"
#include "pt2/zip_reader.h"
#include "error_helpers.h"
#include "zip_helpers.h"

namespace luminal::pt2 {
namespace {

using testing::error_of;

void put(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}
void put_at(std::string& out, size_t at, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>((value >> (8 * i)) & 0xFF);
}

struct TestEntry {
  std::string name;
  std::string data;
  uint16_t method = 0;
  uint16_t flags = 0;  // 0x0008: a data descriptor follows the data, the local CRC and sizes are 0 (torch)
};

// A zip as torch or Python would write it, with the offsets of its records so that a test can
// patch any field afterwards.
struct Written {
  std::string bytes;
  std::vector<size_t> local;    // local header offsets
  std::vector<size_t> central;  // central record offsets
  size_t end = 0;               // classic end record
};

struct WriteOptions {
  bool zip64 = false;  // sentinels in the central records and end record, the values in ZIP64 fields
  std::string comment;
};

Written write_zip(const std::vector<TestEntry>& entries, const WriteOptions& options = {}) {
  Written out;
  std::string& z = out.bytes;
  for (const TestEntry& entry : entries) {
    out.local.push_back(z.size());
    const bool descriptor = (entry.flags & 0x0008) != 0;
    const uint32_t crc = crc32_update(0, entry.data.data(), entry.data.size());
    put(z, 0x04034b50, 4);
    put(z, 20, 2);
    put(z, entry.flags, 2);
    put(z, entry.method, 2);
    put(z, 0, 4);  // time, date
    put(z, descriptor ? 0 : crc, 4);
    put(z, descriptor ? 0 : entry.data.size(), 4);
    put(z, descriptor ? 0 : entry.data.size(), 4);
    put(z, entry.name.size(), 2);
    put(z, 4, 2);  // extra: torch's alignment padding field "FB"
    z += entry.name;
    z += "FB";
    put(z, 0, 2);
    z += entry.data;
    if (descriptor) {
      put(z, 0x08074b50, 4);
      put(z, crc, 4);
      put(z, entry.data.size(), 4);
      put(z, entry.data.size(), 4);
    }
  }
  const size_t directory_offset = z.size();
  for (size_t i = 0; i < entries.size(); ++i) {
    const TestEntry& entry = entries[i];
    out.central.push_back(z.size());
    std::string extra;
    if (options.zip64) {
      put(extra, 0x0001, 2);
      put(extra, 24, 2);
      put(extra, entry.data.size(), 8);
      put(extra, entry.data.size(), 8);
      put(extra, out.local[i], 8);
    }
    const uint64_t size32 = options.zip64 ? 0xFFFFFFFF : entry.data.size();
    put(z, 0x02014b50, 4);
    put(z, 45, 2);
    put(z, 45, 2);
    put(z, entry.flags, 2);
    put(z, entry.method, 2);
    put(z, 0, 4);
    put(z, crc32_update(0, entry.data.data(), entry.data.size()), 4);
    put(z, size32, 4);
    put(z, size32, 4);
    put(z, entry.name.size(), 2);
    put(z, extra.size(), 2);
    put(z, 0, 2);  // comment
    put(z, 0, 2);  // disk
    put(z, 0, 2);  // internal attributes
    put(z, 0, 4);  // external attributes
    put(z, options.zip64 ? 0xFFFFFFFF : out.local[i], 4);
    z += entry.name;
    z += extra;
  }
  const size_t directory_size = z.size() - directory_offset;
  if (options.zip64) {
    const size_t record = z.size();
    put(z, 0x06064b50, 4);
    put(z, 44, 8);
    put(z, 45, 2);
    put(z, 45, 2);
    put(z, 0, 4);
    put(z, 0, 4);
    put(z, entries.size(), 8);
    put(z, entries.size(), 8);
    put(z, directory_size, 8);
    put(z, directory_offset, 8);
    put(z, 0x07064b50, 4);  // locator
    put(z, 0, 4);
    put(z, record, 8);
    put(z, 1, 4);
  }
  out.end = z.size();
  put(z, 0x06054b50, 4);
  put(z, 0, 2);
  put(z, 0, 2);
  put(z, options.zip64 ? 0xFFFF : entries.size(), 2);
  put(z, options.zip64 ? 0xFFFF : entries.size(), 2);
  put(z, options.zip64 ? 0xFFFFFFFF : directory_size, 4);
  put(z, options.zip64 ? 0xFFFFFFFF : directory_offset, 4);
  put(z, options.comment.size(), 2);
  z += options.comment;
  return out;
}

const std::vector<TestEntry> kTwoEntries = {{"a/archive_format", "pt2"},
                                            {"a/data/weights/weight_0", "0123456789abcdef"}};

// Central record fields (offsets from the record's start).
constexpr size_t kCentralFlags = 8, kCentralMethod = 10, kCentralCrc = 16, kCentralCompressed = 20, kCentralSize = 24,
                 kCentralOffset = 42;

// ---------------------------------------------------------------------------------------------
// CRC-32
// ---------------------------------------------------------------------------------------------

uint32_t bitwise_crc32(const std::string& data) {
  uint32_t crc = 0xFFFFFFFF;
  for (const char c : data) {
    crc ^= static_cast<unsigned char>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(ZipCrc32, MatchesTheStandardCheckValueAndABitwiseReference) {
  EXPECT_EQ(crc32_update(0, "123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32_update_portable(0, "123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32_update(0, "", 0), 0u);
  std::mt19937 rng(7);
  std::string data(100003, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  // Every length around the folding path's boundaries (64 bytes, multiples of 16), at every
  // alignment, continuing from a non-zero CRC: the folded and table paths against the bitwise one.
  for (size_t length = 0; length < 300; ++length) {
    for (size_t offset = 0; offset < 16; ++offset) {
      const std::string piece = data.substr(offset, length);
      const uint32_t expected = bitwise_crc32(piece);
      ASSERT_EQ(crc32_update(0, piece.data(), length), expected) << length << " at " << offset;
      ASSERT_EQ(crc32_update_portable(0, piece.data(), length), expected) << length << " at " << offset;
      const uint32_t head = crc32_update(0, "prefix", 6);
      ASSERT_EQ(crc32_update(head, piece.data(), length), bitwise_crc32("prefix" + piece));
    }
  }
  for (const size_t length : {size_t{4096}, size_t{4099}, data.size()}) {
    EXPECT_EQ(crc32_update(0, data.data(), length), bitwise_crc32(data.substr(0, length))) << length;
  }
  // Incremental over uneven pieces equals one pass.
  uint32_t crc = 0;
  for (size_t at = 0; at < data.size(); at += 1237) {
    crc = crc32_update(crc, data.data() + at, std::min<size_t>(1237, data.size() - at));
  }
  EXPECT_EQ(crc, bitwise_crc32(data));
}

// ---------------------------------------------------------------------------------------------
// What torch, Python and libzip write
// ---------------------------------------------------------------------------------------------

TEST(ZipReader, ReadsStoredEntriesWithAndWithoutDataDescriptors) {
  for (const uint16_t flags : {uint16_t{0}, uint16_t{0x0808}}) {  // 0x0808: what torch writes
    std::vector<TestEntry> entries = kTwoEntries;
    for (TestEntry& entry : entries) entry.flags = flags;
    const Archive archive = Archive::from_buffer(write_zip(entries).bytes);
    EXPECT_EQ(archive.root(), "a");
    EXPECT_EQ(archive.entries(), (std::vector<std::string>{"archive_format", "data/weights/weight_0"}));
    EXPECT_EQ(archive.read("archive_format"), "pt2");
    EXPECT_EQ(archive.read("data/weights/weight_0"), "0123456789abcdef");
    EXPECT_EQ(archive.declared_size("data/weights/weight_0"), 16u);
  }
}

TEST(ZipReader, ReadsZip64RecordsAndExtraFields) {
  const Archive archive = Archive::from_buffer(write_zip(kTwoEntries, {true, ""}).bytes);
  EXPECT_EQ(archive.read("data/weights/weight_0"), "0123456789abcdef");
  EXPECT_EQ(archive.read("archive_format"), "pt2");
}

TEST(ZipReader, ReadsWhatLibzipWrites) {
  const Archive archive =
      Archive::from_buffer(testing::make_zip({{"root/x", std::string(70000, 'x'), false}, {"root/empty", "", false}}));
  EXPECT_EQ(archive.read("x"), std::string(70000, 'x'));
  EXPECT_EQ(archive.read("empty"), "");
}

TEST(ZipReader, EmptyZipHasNoEntries) {
  const Archive archive = Archive::from_buffer(write_zip({}).bytes);
  EXPECT_TRUE(archive.entries().empty());
  EXPECT_EQ(archive.root(), "");
}

// ---------------------------------------------------------------------------------------------
// The end record
// ---------------------------------------------------------------------------------------------

TEST(ZipReader, EveryTruncationOfTheEndIsRejected) {
  const std::string bytes = write_zip(kTwoEntries).bytes;
  for (size_t cut = 1; cut <= 40; ++cut) {
    EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes.substr(0, bytes.size() - cut)); }), "zip archive");
  }
  const std::string zip64 = write_zip(kTwoEntries, {true, ""}).bytes;
  for (size_t cut = 1; cut <= 80; ++cut) {
    EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(zip64.substr(0, zip64.size() - cut)); }), "zip archive");
  }
}

TEST(ZipReader, CommentWithAFakeEndSignatureIsSkipped) {
  // The comment holds "PK\5\6" and a record-shaped tail whose comment length does not reach the end.
  std::string comment = std::string("PK\x05\x06", 4) + std::string(16, '\x01') + std::string("\x07\x00", 2) + "tail";
  const Written written = write_zip(kTwoEntries, {false, comment});
  const Archive archive = Archive::from_buffer(written.bytes);
  EXPECT_EQ(archive.read("archive_format"), "pt2");
}

TEST(ZipReader, EndRecordWhoseCommentDoesNotReachTheEndIsNotFound) {
  const std::string bytes = write_zip(kTwoEntries).bytes + "trailing junk";
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes); }), "no end-of-central-directory record");
}

TEST(ZipReader, EndRecordBeyondTheLast64KiBIsNotSearchedFor) {
  // A valid end record followed by a 65535-byte comment is found; one more byte of junk hides it.
  const Written written = write_zip(kTwoEntries, {false, std::string(0xFFFF, 'c')});
  EXPECT_EQ(Archive::from_buffer(written.bytes).read("archive_format"), "pt2");
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes + "x"); }), "not a zip archive");
}

TEST(ZipReader, DirectoryOutsideTheFileIsCorrupt) {
  Written written = write_zip(kTwoEntries);
  put_at(written.bytes, written.end + 16, 0xFFFFFF00, 4);  // directory offset
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "does not lie before the end record");
  written = write_zip(kTwoEntries);
  put_at(written.bytes, written.end + 8, 1000, 2);
  put_at(written.bytes, written.end + 10, 1000, 2);  // 1000 entries cannot fit
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "1000 entries cannot fit");
  written = write_zip(kTwoEntries);
  put_at(written.bytes, written.end + 8, 1, 2);
  put_at(written.bytes, written.end + 10, 1, 2);  // one record read, the second one left over
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "records take");
  written = write_zip(kTwoEntries);
  put_at(written.bytes, written.end + 4, 1, 2);  // another disk
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "multi-disk");
}

TEST(ZipReader, Zip64RecordsAreChecked) {
  const Written written = write_zip(kTwoEntries, {true, ""});
  const size_t locator = written.end - 20, record = locator - 56;
  std::string bytes = written.bytes;
  put_at(bytes, locator + 8, 0xFFFFFFFFFFFFFF00ull, 8);  // the record's offset, past the end
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes); }), "ZIP64 end record offset");
  bytes = written.bytes;
  put_at(bytes, record + 48, 0x7FFFFFFFFFFFFFFFull, 8);  // the directory's offset
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes); }), "does not lie before the end record");
  bytes = written.bytes;
  put_at(bytes, record + 40, 0xFFFFFFFFFFFFFFF0ull, 8);  // the directory's size
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes); }), "does not lie before the end record");
  bytes = written.bytes;
  put_at(bytes, record + 24, 0xFFFFFFFFFFFFull, 8);  // entry counts that disagree
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes); }), "entry counts disagree");
  bytes = written.bytes;
  put_at(bytes, record + 24, 0xFFFFFFFFFFFFull, 8);
  put_at(bytes, record + 32, 0xFFFFFFFFFFFFull, 8);  // agreeing, and far too many
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes); }), "cannot fit");
  bytes = written.bytes;
  put_at(bytes, written.end + 12, 12345, 4);  // the classic size, neither sentinel nor the ZIP64 value
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes); }), "disagree");
  bytes = written.bytes;
  put_at(bytes, record, 0, 4);  // no record where the locator points
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes); }), "no ZIP64 end record");
}

// ---------------------------------------------------------------------------------------------
// Central records
// ---------------------------------------------------------------------------------------------

TEST(ZipReader, SentinelWithoutZip64ExtraIsCorrupt) {
  Written written = write_zip(kTwoEntries);
  put_at(written.bytes, written.central[1] + kCentralSize, 0xFFFFFFFF, 4);
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "has no ZIP64 extra field");
  // A ZIP64 extra field too short for the values it must hold.
  written = write_zip(kTwoEntries, {true, ""});
  put_at(written.bytes, written.central[0] + 46 + kTwoEntries[0].name.size() + 2, 16, 2);
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "runs past the end");
}

TEST(ZipReader, DuplicateNamesAreRefused) {
  const std::string bytes = write_zip({{"a/x", "1"}, {"a/y", "2"}, {"a/x", "3"}}).bytes;
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes); }), "two entries are named a/x");
}

TEST(ZipReader, NamesWithNulBytesAreRefused) {
  const std::string bytes = write_zip({{std::string("a/x\0y", 5), "1"}}).bytes;
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(bytes); }), "NUL byte");
}

TEST(ZipReader, EntriesSharingBytesAreRefused) {
  // Every record points at the first local header (the "one large stored file" amplification).
  Written written = write_zip({{"a/x", std::string(1000, 'x')}, {"a/y", std::string(1000, 'x')}});
  put_at(written.bytes, written.central[1] + kCentralOffset, written.local[0], 4);
  put_at(written.bytes, written.central[1] + 28, 3, 2);  // same name length, so only the offset differs
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "entries overlap");
  // Sizes that run into the next entry, or into the central directory.
  written = write_zip({{"a/x", "12345678"}, {"a/y", "abcdefgh"}});
  put_at(written.bytes, written.central[0] + kCentralCompressed, 100, 4);
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "entries overlap (a/x");
  written = write_zip({{"a/x", "12345678"}, {"a/y", "abcdefgh"}});
  put_at(written.bytes, written.central[1] + kCentralCompressed, 100, 4);
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "runs into the central directory");
  // A local header offset inside the directory itself.
  written = write_zip({{"a/x", "12345678"}});
  put_at(written.bytes, written.central[0] + kCentralOffset, written.central[0], 4);
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "runs into the central directory");
}

TEST(ZipReader, HugeDeclaredSizesAreRefusedWithoutAllocating) {
  // ZIP64 sizes of 2^63: refused at open, since the bytes are not in the file.
  Written written = write_zip(kTwoEntries, {true, ""});
  const size_t extra = written.central[1] + 46 + kTwoEntries[1].name.size();
  put_at(written.bytes, extra + 4, 0x8000000000000000ull, 8);
  put_at(written.bytes, extra + 12, 0x8000000000000000ull, 8);
  EXPECT_CONTAINS(error_of([&] { Archive::from_buffer(written.bytes); }), "runs into the central directory");
  // An uncompressed size of 2^63 beside the real stored size: refused on reading, by the limit
  // first and by the stored size when the limit allows it.
  written = write_zip(kTwoEntries, {true, ""});
  put_at(written.bytes, extra + 4, 0x8000000000000000ull, 8);
  const Archive archive = Archive::from_buffer(written.bytes);
  EXPECT_EQ(archive.declared_size("data/weights/weight_0"), 0x8000000000000000ull);
  EXPECT_CONTAINS(error_of([&] { archive.read("data/weights/weight_0"); }), "over its limit");
  ReadLimits unlimited;
  unlimited.archive_bytes = ~uint64_t{0};
  const Archive lax = Archive::from_buffer(written.bytes, unlimited);
  EXPECT_CONTAINS(error_of([&] { lax.read("data/weights/weight_0"); }), "is stored uncompressed with 16 bytes");
}

// ---------------------------------------------------------------------------------------------
// Local headers and data
// ---------------------------------------------------------------------------------------------

TEST(ZipReader, LocalHeaderMustMatchTheCentralRecord) {
  Written written = write_zip(kTwoEntries);
  written.bytes[written.local[1] + 30 + 2] = 'X';  // the local name
  const Archive renamed = Archive::from_buffer(written.bytes);
  EXPECT_CONTAINS(error_of([&] { renamed.read("data/weights/weight_0"); }), "names another entry");

  written = write_zip(kTwoEntries);
  put_at(written.bytes, written.local[1], 0, 4);  // no local header signature
  const Archive unsigned_header = Archive::from_buffer(written.bytes);
  EXPECT_CONTAINS(error_of([&] { unsigned_header.read("data/weights/weight_0"); }), "no local header");

  written = write_zip(kTwoEntries);
  put_at(written.bytes, written.local[1] + 14, 1234, 4);  // the local CRC (no data descriptor)
  const Archive other_crc = Archive::from_buffer(written.bytes);
  EXPECT_CONTAINS(error_of([&] { other_crc.read("data/weights/weight_0"); }), "differ from the central");

  written = write_zip(kTwoEntries);
  put_at(written.bytes, written.local[1] + 8, 8, 2);  // the local method
  const Archive other_method = Archive::from_buffer(written.bytes);
  EXPECT_CONTAINS(error_of([&] { other_method.read("data/weights/weight_0"); }), "says method 8");

  // A local extra field long enough to push the data into the next structure.
  written = write_zip(kTwoEntries);
  put_at(written.bytes, written.local[1] + 28, 0xFFFF, 2);
  const Archive long_extra = Archive::from_buffer(written.bytes);
  EXPECT_CONTAINS(error_of([&] { long_extra.read("data/weights/weight_0"); }), "run past offset");
}

TEST(ZipReader, CrcMismatchNamesTheEntry) {
  Written written = write_zip(kTwoEntries);
  const size_t data = written.local[1] + 30 + kTwoEntries[1].name.size() + 4;
  written.bytes[data + 3] ^= 0x01;
  const Archive archive = Archive::from_buffer(written.bytes);
  EXPECT_CONTAINS(error_of([&] { archive.read("data/weights/weight_0"); }),
                  "data/weights/weight_0: corrupt entry: CRC-32 mismatch");
  EXPECT_EQ(archive.read("archive_format"), "pt2");  // the other entry is unaffected
}

TEST(ZipReader, CompressedAndEncryptedEntriesAreRefusedByName) {
  Written written = write_zip(kTwoEntries);
  put_at(written.bytes, written.central[1] + kCentralMethod, 8, 2);
  put_at(written.bytes, written.local[1] + 8, 8, 2);
  const Archive deflated = Archive::from_buffer(written.bytes);
  EXPECT_EQ(deflated.read("archive_format"), "pt2");
  EXPECT_CONTAINS(error_of([&] { deflated.read("data/weights/weight_0"); }),
                  "compressed zip entries are not supported: data/weights/weight_0 uses method 8 (deflate)");
  // What libzip deflates.
  const Archive from_libzip = Archive::from_buffer(testing::make_zip({{"r/z", std::string(1000, 'z'), true}}));
  EXPECT_CONTAINS(error_of([&] { from_libzip.read("z"); }), "z uses method 8");

  written = write_zip(kTwoEntries);
  put_at(written.bytes, written.central[1] + kCentralFlags, 1, 2);
  const Archive encrypted = Archive::from_buffer(written.bytes);
  EXPECT_CONTAINS(error_of([&] { encrypted.read("data/weights/weight_0"); }),
                  "encrypted zip entries are not supported");
}

TEST(ZipReader, RandomCorruptionIsAlwaysALuminalError) {
  const std::string original = write_zip(kTwoEntries, {true, "comment"}).bytes;
  std::mt19937 rng(3);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = original;
    for (int f = 0; f < 1 + static_cast<int>(rng() % 3); ++f)
      bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    try {
      const Archive archive = Archive::from_buffer(bytes);
      for (const std::string& name : archive.entries()) archive.read(name);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      FAIL() << "trial " << trial << ": unexpected exception type: " << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Files: pread from several threads, a file that shrinks under the reader
// ---------------------------------------------------------------------------------------------

std::string temp_file(const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("luminal_zip_reader_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand())))
                               .string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(ZipReader, FileEntriesReadConcurrently) {
  std::vector<TestEntry> entries;
  for (int i = 0; i < 8; ++i)
    entries.push_back({"a/w" + std::to_string(i), std::string(300000 + i, static_cast<char>('a' + i))});
  const std::string path = temp_file(write_zip(entries).bytes);
  const Archive archive = Archive::from_file(path);
  std::vector<std::thread> threads;
  std::vector<int> good(entries.size(), 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int repeat = 0; repeat < 4; ++repeat) good[i] += archive.read("w" + std::to_string(i)) == entries[i].data;
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t i = 0; i < entries.size(); ++i) EXPECT_EQ(good[i], 4) << i;
  std::remove(path.c_str());
}

TEST(ZipReader, FileThatShrinksWhileOpenIsAnError) {
  const Written written = write_zip(kTwoEntries);
  const std::string path = temp_file(written.bytes);
  const Archive archive = Archive::from_file(path);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(written.local[1] + 10)), 0);
  EXPECT_CONTAINS(error_of([&] { archive.read("data/weights/weight_0"); }), "the file ended at offset");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace luminal::pt2
