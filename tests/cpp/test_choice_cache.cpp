// Tests of the store of measured choices (common/choice_cache.h): a stored choice comes back for
// its key only, a bad entry is evicted with a notice and reads as a miss, and caching off writes
// nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "common/cache_files.h"
#include "common/choice_cache.h"
#include "common/config.h"
#include "common/notices.h"

namespace luminal {
namespace {

namespace fs = std::filesystem;

// Points LUMINAL_CACHE_DIR at `value` (nullopt: unset) for one scope; the core reads the
// environment again when it is set and when it is restored.
class ScopedCacheDir {
 public:
  explicit ScopedCacheDir(std::optional<std::string> value) {
    if (const char* old = std::getenv(kName)) old_ = old;
    set(value);
  }
  ~ScopedCacheDir() { set(old_); }
  ScopedCacheDir(const ScopedCacheDir&) = delete;
  ScopedCacheDir& operator=(const ScopedCacheDir&) = delete;

 private:
  static constexpr const char* kName = "LUMINAL_CACHE_DIR";
  static void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(kName, value->c_str(), 1);
    } else {
      ::unsetenv(kName);
    }
    reload_config();
  }
  std::optional<std::string> old_;
};

class ChoiceCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "luminal-choice-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    cache_.emplace(dir_);
    take_notices();
  }
  void TearDown() override {
    cache_.reset();
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  size_t files_under(const std::string& dir) const {
    size_t count = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) count += entry.is_regular_file() ? 1 : 0;
    return count;
  }

  std::string dir_;
  std::optional<ScopedCacheDir> cache_;
};

const ChoiceFields kWinner = {{"winner", "cudnn"}, {"engine", "12"}, {"times", "engine 12 0.5 ms, generated 0.7 ms"}};
const std::string kKey = "convolution of f32 x [2, 8, 32, 32]...|device NVIDIA H100 sm_90|cudnn 90100";

TEST_F(ChoiceCacheTest, RoundTripUnderTheCacheRoot) {
  EXPECT_FALSE(load_choice(kKey).has_value());
  store_choice(kKey, kWinner);
  const std::string file = choice_file(kKey);
  EXPECT_EQ(fs::path(file).parent_path(), fs::path(dir_) / "choices");
  EXPECT_TRUE(fs::is_regular_file(file));
  const std::optional<ChoiceFields> loaded = load_choice(kKey);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, kWinner);
  // A new answer replaces the old one.
  store_choice(kKey, {{"winner", "generated"}});
  EXPECT_EQ(load_choice(kKey), (ChoiceFields{{"winner", "generated"}}));
  EXPECT_TRUE(take_notices().empty());
}

TEST_F(ChoiceCacheTest, AnotherKeyMisses) {
  store_choice(kKey, kWinner);
  EXPECT_FALSE(load_choice(kKey + " ").has_value());
  EXPECT_FALSE(load_choice("cublaslt 120000|" + kKey).has_value());
  EXPECT_TRUE(load_choice(kKey).has_value());  // still there: a different key names a different file
}

TEST_F(ChoiceCacheTest, AnEntryWrittenForAnotherKeyIsEvicted) {
  // A file-name collision (simulated: another key's entry at this key's path) is no answer.
  ASSERT_EQ(write_cache_entry(choice_file(kKey), "another key", encode_choice(kWinner)), "");
  EXPECT_FALSE(load_choice(kKey).has_value());
  EXPECT_FALSE(fs::exists(choice_file(kKey)));
}

TEST_F(ChoiceCacheTest, CorruptedEntryIsEvictedWithANoticeAndMisses) {
  store_choice(kKey, kWinner);
  const std::string file = choice_file(kKey);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('#');  // inside the payload: the checksum no longer matches
  }
  EXPECT_FALSE(load_choice(kKey).has_value());
  EXPECT_FALSE(fs::exists(file));
  const std::vector<Notice> notices = take_notices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].kind, "cache");
  EXPECT_NE(notices[0].message.find(file), std::string::npos) << notices[0].message;
  EXPECT_NE(notices[0].message.find("checksum"), std::string::npos) << notices[0].message;
  // Measured again and stored: a hit from then on.
  store_choice(kKey, kWinner);
  EXPECT_EQ(load_choice(kKey), kWinner);
}

TEST_F(ChoiceCacheTest, WellFormedEntryWithMalformedFieldsIsEvicted) {
  ASSERT_EQ(write_cache_entry(choice_file(kKey), kKey, "no fields here"), "");
  EXPECT_FALSE(load_choice(kKey).has_value());
  EXPECT_FALSE(fs::exists(choice_file(kKey)));
  const std::vector<Notice> notices = take_notices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].message.find("malformed"), std::string::npos) << notices[0].message;
}

TEST_F(ChoiceCacheTest, ForgottenChoiceMissesWithANotice) {
  store_choice(kKey, kWinner);
  forget_choice(kKey, "names engine 12, which cuDNN no longer offers");
  EXPECT_FALSE(fs::exists(choice_file(kKey)));
  EXPECT_FALSE(load_choice(kKey).has_value());
  const std::vector<Notice> notices = take_notices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].message.find("no longer offers"), std::string::npos) << notices[0].message;
}

TEST_F(ChoiceCacheTest, CachingOffWritesNothing) {
  {
    const ScopedCacheDir off(std::string(""));
    EXPECT_EQ(choice_file(kKey), "");
    store_choice(kKey, kWinner);
    EXPECT_FALSE(load_choice(kKey).has_value());
  }
  EXPECT_EQ(files_under(dir_), 0u);
  EXPECT_TRUE(take_notices().empty());
}

TEST(ChoiceFieldsTest, EncodingRoundTripsAndRefusesWhatItDoesNotWrite) {
  const ChoiceFields fields = {{"a", ""}, {"b", "x=y"}, {"times", "1 ms, 2 ms"}};
  EXPECT_EQ(decode_choice(encode_choice(fields)), fields);
  // Line breaks in values become spaces: one field per line whatever the caller passed.
  EXPECT_EQ(decode_choice(encode_choice({{"t", "one\ntwo"}})), (ChoiceFields{{"t", "one two"}}));
  for (const std::string bad : {"", "a=1", "=1\n", "a\n", "a=1\na=2\n"}) {
    EXPECT_FALSE(decode_choice(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace luminal
