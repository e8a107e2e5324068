// Tests of the on-disk cache's entry files and directory (common/cache_files.h): corrupt, foreign
// and hostile files in an entry's place are reported as bad without blocking or crashing, writes
// are atomic under races, and the directory's environment values resolve as documented.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/cache_files.h"
#include "common/config.h"
#include "common/notices.h"

namespace luminal {
namespace {

namespace fs = std::filesystem;
using Status = CacheEntryRead::Status;

class CacheFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "luminal-cache-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  static std::string bytes_of(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void overwrite(const std::string& file, const std::string& bytes) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  }

  std::string dir_;
};

constexpr uint64_t kLimit = 1 << 20;

TEST_F(CacheFilesTest, RoundTripAndMissing) {
  const std::string file = path("a.cubin");
  EXPECT_EQ(read_cache_entry(file, "key", kLimit).status, Status::Missing);
  ASSERT_EQ(write_cache_entry(file, "key", std::string("\x7f" "ELF payload\0with nul", 21)), "");
  const CacheEntryRead read = read_cache_entry(file, "key", kLimit);
  ASSERT_EQ(read.status, Status::Hit) << read.reason;
  EXPECT_EQ(read.payload, std::string("\x7f" "ELF payload\0with nul", 21));
  // No temporary file is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

// A hit is marked recently used (pruning removes the least recently used entries first); a read
// under another key is no hit and leaves the entry's time alone.
TEST_F(CacheFilesTest, HitIsMarkedRecentlyUsed) {
  const std::string file = path("a.choice");
  ASSERT_EQ(write_cache_entry(file, "key", "payload"), "");
  const fs::file_time_type old_time = fs::last_write_time(file) - std::chrono::hours(48);
  fs::last_write_time(file, old_time);
  EXPECT_EQ(read_cache_entry(file, "other key", kLimit).status, Status::Bad);
  EXPECT_EQ(fs::last_write_time(file), old_time);
  ASSERT_EQ(read_cache_entry(file, "key", kLimit).status, Status::Hit);
  EXPECT_GT(fs::last_write_time(file), old_time + std::chrono::hours(47));
}

TEST_F(CacheFilesTest, EveryTruncationAndEveryFlippedByteIsBad) {
  const std::string file = path("b.cubin");
  ASSERT_EQ(write_cache_entry(file, "some key", "payload bytes"), "");
  const std::string good = bytes_of(file);
  for (size_t size = 0; size < good.size(); ++size) {
    overwrite(file, good.substr(0, size));
    EXPECT_EQ(read_cache_entry(file, "some key", kLimit).status, Status::Bad) << "truncated to " << size;
  }
  for (size_t i = 0; i < good.size(); ++i) {
    std::string flipped = good;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x10);
    overwrite(file, flipped);
    EXPECT_EQ(read_cache_entry(file, "some key", kLimit).status, Status::Bad) << "byte " << i << " flipped";
  }
  overwrite(file, good + "x");
  EXPECT_EQ(read_cache_entry(file, "some key", kLimit).status, Status::Bad);
}

TEST_F(CacheFilesTest, OtherKeyOtherVersionAndOversizeAreBad) {
  const std::string file = path("c.cubin");
  ASSERT_EQ(write_cache_entry(file, "key one", "payload"), "");
  EXPECT_EQ(read_cache_entry(file, "key two", kLimit).reason, "was written for another key");
  EXPECT_NE(read_cache_entry(file, "key one", 20).reason.find("over the limit of 20 bytes"), std::string::npos);
  std::string other_version = bytes_of(file);
  other_version[8] = 7;
  overwrite(file, other_version);
  EXPECT_EQ(read_cache_entry(file, "key one", kLimit).reason, "has format version 7, expected 1");
  overwrite(file, "an old-format entry: key\0\x7f" "ELF");
  EXPECT_EQ(read_cache_entry(file, "key one", kLimit).status, Status::Bad);
}

TEST_F(CacheFilesTest, FifoSymlinkAndDirectoryAreRefusedWithoutBlocking) {
  const std::string fifo = path("fifo.cubin");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(read_cache_entry(fifo, "k", kLimit).reason, "is a FIFO, not a regular file");
  EXPECT_EQ(evict_cache_entry(fifo), "");
  EXPECT_FALSE(fs::exists(fs::symlink_status(fifo)));

  const std::string link = path("zero.cubin");
  fs::create_symlink("/dev/zero", link);
  EXPECT_EQ(read_cache_entry(link, "k", kLimit).reason, "is a symbolic link");
  EXPECT_EQ(evict_cache_entry(link), "");
  EXPECT_FALSE(fs::exists(fs::symlink_status(link)));
  EXPECT_TRUE(fs::exists("/dev/zero"));  // the link went, never its target

  const std::string empty = path("empty.cubin");
  fs::create_directory(empty);
  EXPECT_EQ(read_cache_entry(empty, "k", kLimit).reason, "is a directory, not a regular file");
  EXPECT_EQ(evict_cache_entry(empty), "");
  EXPECT_FALSE(fs::exists(empty));

  const std::string full = path("full.cubin");
  fs::create_directory(full);
  overwrite(full + "/inside", "user data");
  EXPECT_EQ(read_cache_entry(full, "k", kLimit).status, Status::Bad);
  EXPECT_NE(evict_cache_entry(full), "");  // left in place: not ours to delete
  EXPECT_TRUE(fs::exists(full + "/inside"));
  EXPECT_NE(write_cache_entry(full, "k", "payload"), "");  // the write fails cleanly
}

TEST_F(CacheFilesTest, RacingWritersAndReadersSeeWholeEntries) {
  const std::string file = path("race.cubin");
  std::atomic<int> bad{0};
  std::atomic<int> hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string payload(1000 + 997 * t, static_cast<char>('a' + t));
      for (int i = 0; i < 200; ++i) {
        EXPECT_EQ(write_cache_entry(file, "shared key", payload), "");
        const CacheEntryRead read = read_cache_entry(file, "shared key", kLimit);
        if (read.status != Status::Hit) {
          ++bad;
          continue;
        }
        ++hits;
        const size_t length = read.payload.size();
        // A whole payload of one writer: its length and its fill byte agree.
        if ((length - 1000) % 997 != 0 || read.payload != std::string(length, read.payload[0])) ++bad;
        if (read.payload[0] - 'a' != static_cast<int>((length - 1000) / 997)) ++bad;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(hits.load(), 800);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);  // no temporaries left
}

// Sets an environment variable for one scope (nullopt: unset), and has the core read the
// environment again (common/config.h) when it is set and when it is restored.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_, value->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
    reload_config();
  }
  const char* name_;
  std::optional<std::string> old_;
};

bool has_notice_containing(const std::vector<Notice>& notices, const std::string& text) {
  for (const Notice& notice : notices) {
    if (notice.kind == "cache" && notice.message.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST_F(CacheFilesTest, CacheDirectoryExpandsHomeAndRefusesUnusableValues) {
  const ScopedEnv home("HOME", dir_);
  take_notices();
  {
    const ScopedEnv cache("LUMINAL_CACHE_DIR", "~");
    EXPECT_EQ(cache_root(), fs::path(dir_).lexically_normal().string());
  }
  {
    const ScopedEnv cache("LUMINAL_CACHE_DIR", "~/sub/luminal");
    EXPECT_EQ(cache_root(), path("sub/luminal"));
    EXPECT_TRUE(fs::is_directory(path("sub/luminal")));
  }
  {
    const ScopedEnv cache("LUMINAL_CACHE_DIR", "relative/dir");
    EXPECT_EQ(cache_root(), (fs::current_path() / "relative/dir").string());
    fs::remove_all(fs::current_path() / "relative");
  }
  {
    const ScopedEnv cache("LUMINAL_CACHE_DIR", "");
    EXPECT_EQ(cache_root(), "");
  }
  {
    const ScopedEnv cache("LUMINAL_CACHE_DIR", std::nullopt);
    const ScopedEnv xdg("XDG_CACHE_HOME", "not/absolute");  // invalid per XDG: ignored
    EXPECT_EQ(cache_root(), path(".cache/luminal"));
  }
  EXPECT_TRUE(take_notices().empty());
  {
    const ScopedEnv cache("LUMINAL_CACHE_DIR", "~nobody/x");
    EXPECT_EQ(cache_root(), "");
    EXPECT_TRUE(has_notice_containing(take_notices(), "'~user'"));
  }
  {
    overwrite(path("a-file"), "x");
    const ScopedEnv cache("LUMINAL_CACHE_DIR", path("a-file"));
    EXPECT_EQ(cache_root(), "");
    EXPECT_EQ(cache_root(), "");
    const std::vector<Notice> notices = take_notices();
    EXPECT_EQ(notices.size(), 1u);  // once
    EXPECT_TRUE(has_notice_containing(notices, path("a-file")));
  }
}

TEST_F(CacheFilesTest, JournalListsEntriesUsedSinceAPositionOnceInOrderOfLatestUse) {
  const size_t start = cache_journal_size();
  ASSERT_EQ(write_cache_entry(path("a"), "key a", "payload a"), "");
  ASSERT_EQ(write_cache_entry(path("b"), "key b", "payload b"), "");
  EXPECT_EQ(read_cache_entry(path("missing"), "key", 1 << 20).status, Status::Missing);  // not journaled
  EXPECT_EQ(read_cache_entry(path("b"), "another key", 1 << 20).status, Status::Bad);    // not journaled
  EXPECT_EQ(cache_journal_since(start), (std::vector<CacheJournalEntry>{{path("a"), true}, {path("b"), true}}));
  // Used again later: listed once, at its latest use, as read.
  const size_t later = cache_journal_size();
  EXPECT_EQ(read_cache_entry(path("a"), "key a", 1 << 20).status, Status::Hit);
  journal_cache_entry_read(path("c"));  // answered from memory
  EXPECT_EQ(cache_journal_since(later), (std::vector<CacheJournalEntry>{{path("a"), false}, {path("c"), false}}));
  EXPECT_EQ(cache_journal_since(start),
            (std::vector<CacheJournalEntry>{{path("b"), true}, {path("a"), false}, {path("c"), false}}));
  EXPECT_TRUE(cache_journal_since(cache_journal_size()).empty());
  EXPECT_TRUE(cache_journal_since(cache_journal_size() + 5).empty());
}

TEST(Notices, EachOnceKeyIsQueuedOnce) {
  take_notices();
  notify_once("cache", "test-key-1", "first");
  notify_once("cache", "test-key-1", "again");
  notify_once("dump", "test-key-2", "second");
  const std::vector<Notice> notices = take_notices();
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_EQ(notices[0].message, "first");
  EXPECT_EQ(notices[1].kind, "dump");
  EXPECT_TRUE(take_notices().empty());
}

}  // namespace
}  // namespace luminal
