// The megakernel-or-general-path choice in the choice cache (runtime/cuda/choices.h): its key
// tells apart what the answer depends on, a stored entry parses back to its winner, an entry that
// names none is evicted and reads as a miss. The measuring itself needs a GPU
// (tests/test_megakernel.py).
#if LUMINAL_HAVE_CUDA
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "common/cache_files.h"
#include "common/choice_cache.h"
#include "common/config.h"
#include "common/notices.h"
#include "runtime/cuda/choices.h"

namespace luminal {
namespace {

namespace fs = std::filesystem;
using runtime::gpu::RowKernelLookup;

const std::map<std::string, int64_t> kBatch2048 = {{"s0", 2048}};
const std::string kDevice = "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, driver 12080";

std::string key_of(const std::string& megakernel, const std::string& general,
                   const std::map<std::string, int64_t>& symbols = kBatch2048, bool tf32 = false,
                   bool tf32_convolution = false, const std::string& device = kDevice) {
  return runtime::gpu::row_kernel_choice_key(megakernel, general, symbols, tf32, tf32_convolution, device);
}

TEST(RowKernelChoiceKey, DependsOnBothModulesTheBindingAndTheDevice) {
  const std::set<std::string> keys = {
      key_of("row module", "general module"),
      key_of("row module v2", "general module"),
      key_of("row module", "general module v2"),
      key_of("general module", "row module"),  // the roles matter, not only the pair
      key_of("row module", "general module", {{"s0", 2047}}),
      key_of("row module", "general module", {{"s0", 2048}, {"s1", 3}}),
      key_of("row module", "general module", kBatch2048, /*tf32=*/true),
      key_of("row module", "general module", kBatch2048, false, /*tf32_convolution=*/true),
      key_of("row module", "general module", kBatch2048, false, false, "NVIDIA H200, sm_90, 132 SMs, driver 12080"),
  };
  EXPECT_EQ(keys.size(), 9u);
  EXPECT_EQ(key_of("row module", "general module"), key_of("row module", "general module"));  // deterministic
  const std::string key = key_of("row module", "general module");
  EXPECT_NE(key.find("s0=2048"), std::string::npos) << key;
  EXPECT_NE(key.find(kDevice), std::string::npos) << key;
}

TEST(RowKernelChoiceParse, ReadsTheWinnerAndTimes) {
  const RowKernelLookup megakernel = runtime::gpu::parse_row_kernel_choice(
      {{"winner", "megakernel"}, {"times", "megakernel 5 us, general path 9 us per call, timed"}});
  EXPECT_EQ(megakernel.winner, RowKernelLookup::Winner::Megakernel);
  EXPECT_EQ(megakernel.times, "megakernel 5 us, general path 9 us per call, timed");
  const RowKernelLookup general = runtime::gpu::parse_row_kernel_choice({{"winner", "general"}});
  EXPECT_EQ(general.winner, RowKernelLookup::Winner::General);
  EXPECT_EQ(general.times, "");
  for (const ChoiceFields& bad : {ChoiceFields{}, ChoiceFields{{"times", "1 us"}}, ChoiceFields{{"winner", "cudnn"}},
                                  ChoiceFields{{"winner", "Megakernel"}}, ChoiceFields{{"winner", ""}}}) {
    EXPECT_EQ(runtime::gpu::parse_row_kernel_choice(bad).winner, RowKernelLookup::Winner::None);
  }
}

class RowKernelChoiceStore : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* old = std::getenv("LUMINAL_CACHE_DIR")) old_ = old;
    std::string pattern = (fs::temp_directory_path() / "luminal-row-choice-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    ::setenv("LUMINAL_CACHE_DIR", dir_.c_str(), 1);
    reload_config();
    take_notices();
  }
  void TearDown() override {
    if (old_) {
      ::setenv("LUMINAL_CACHE_DIR", old_->c_str(), 1);
    } else {
      ::unsetenv("LUMINAL_CACHE_DIR");
    }
    reload_config();
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string dir_;
  std::optional<std::string> old_;
};

TEST_F(RowKernelChoiceStore, StoredWinnerComesBackForItsKeyOnly) {
  const std::string key = key_of("row", "general");
  EXPECT_EQ(runtime::gpu::look_up_row_kernel_choice(key).winner, RowKernelLookup::Winner::None);
  runtime::gpu::store_row_kernel_choice(key, /*megakernel=*/false, "megakernel 9 us, general path 5 us per call, timed");
  const RowKernelLookup lookup = runtime::gpu::look_up_row_kernel_choice(key);
  EXPECT_EQ(lookup.winner, RowKernelLookup::Winner::General);
  EXPECT_EQ(lookup.times, "megakernel 9 us, general path 5 us per call, timed");
  EXPECT_EQ(runtime::gpu::look_up_row_kernel_choice(key_of("row", "general", {{"s0", 7}})).winner,
            RowKernelLookup::Winner::None);
  runtime::gpu::store_row_kernel_choice(key, /*megakernel=*/true, "remeasured");
  EXPECT_EQ(runtime::gpu::look_up_row_kernel_choice(key).winner, RowKernelLookup::Winner::Megakernel);
  EXPECT_TRUE(take_notices().empty());
}

TEST_F(RowKernelChoiceStore, EntryNamingNoWinnerIsEvictedWithANotice) {
  const std::string key = key_of("row", "general");
  store_choice(key, {{"winner", "cudnn"}, {"engine", "3"}});  // another choice's fields under this key
  EXPECT_EQ(runtime::gpu::look_up_row_kernel_choice(key).winner, RowKernelLookup::Winner::None);
  EXPECT_FALSE(fs::exists(choice_file(key)));
  const std::vector<Notice> notices = take_notices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].message.find("names no winner"), std::string::npos) << notices[0].message;
}

}  // namespace
}  // namespace luminal
#endif
