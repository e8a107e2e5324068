// common/config.h: how the environment becomes the one Config snapshot.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "common/config.h"
#include "config_helpers.h"

using namespace luminal;

using luminal::test::read;

TEST(Config, UnsetMeansDefaults) {
  const Config c = read({});
  EXPECT_FALSE(c.poison_outputs || c.profile || c.sync_check || c.cpu_runs_row_graph);
  EXPECT_EQ(c.check_cuda_arch, "");
  EXPECT_EQ(c.dump_kernels_dir, "");
  EXPECT_FALSE(c.cache_dir.has_value());
  EXPECT_FALSE(c.max_archive_bytes.bytes.has_value());
  EXPECT_EQ(c.max_archive_bytes.problem, "");
}

TEST(Config, FlagsAreOnUnlessEmptyOrZero) {
  EXPECT_TRUE(read({{"LUMINAL_PROFILE", "1"}}).profile);
  EXPECT_TRUE(read({{"LUMINAL_PROFILE", "yes"}}).profile);
  EXPECT_FALSE(read({{"LUMINAL_PROFILE", "0"}}).profile);
  EXPECT_FALSE(read({{"LUMINAL_PROFILE", ""}}).profile);
  EXPECT_TRUE(read({{"LUMINAL_POISON_OUTPUTS", "1"}, {"LUMINAL_SYNC_CHECK", "1"}, {"LUMINAL_CPU_ROW_GRAPH", "1"}})
                  .cpu_runs_row_graph);
}

TEST(Config, CudaCheckArchitecture) {
  EXPECT_EQ(read({{"LUMINAL_CHECK_CUDA_CODEGEN", "1"}}).check_cuda_arch, "sm_90");
  EXPECT_EQ(read({{"LUMINAL_CHECK_CUDA_CODEGEN", "sm_80"}}).check_cuda_arch, "sm_80");
  EXPECT_EQ(read({{"LUMINAL_CHECK_CUDA_CODEGEN", "0"}}).check_cuda_arch, "");
}

TEST(Config, EmptyCacheDirIsSetAndTurnsCachingOff) {
  const Config c = read({{"LUMINAL_CACHE_DIR", ""}, {"HOME", "/home/x"}});
  ASSERT_TRUE(c.cache_dir.has_value());
  EXPECT_EQ(*c.cache_dir, "");
  EXPECT_EQ(c.home.value_or("?"), "/home/x");
  EXPECT_FALSE(c.xdg_cache_home.has_value());
}

TEST(Config, ByteLimitsAreParsedOnceWithTheirProblem) {
  const Config good = read({{"LUMINAL_MAX_ARCHIVE_BYTES", "1048576"}});
  EXPECT_EQ(good.max_archive_bytes.bytes.value_or(0), 1048576u);
  for (const char* bad : {"abc", "0", "-5", "1e9", "12 MiB"}) {
    const Config c = read({{"LUMINAL_MAX_ARCHIVE_JSON_BYTES", bad}});
    EXPECT_FALSE(c.max_archive_json_bytes.bytes.has_value()) << bad;
    EXPECT_EQ(c.max_archive_json_bytes.problem,
              std::string("LUMINAL_MAX_ARCHIVE_JSON_BYTES=\"") + bad + "\" is not a positive integer number of bytes");
  }
}

TEST(Config, ReloadTakesANewSnapshotAndKeepsOldOnesValid) {
  ::setenv("LUMINAL_SYNC_CHECK", "1", 1);
  reload_config();
  const std::shared_ptr<const Config> before = config();
  EXPECT_TRUE(before->sync_check);
  ::setenv("LUMINAL_SYNC_CHECK", "0", 1);
  EXPECT_TRUE(config()->sync_check);  // read once: a change needs a reload
  reload_config();
  EXPECT_FALSE(config()->sync_check);
  EXPECT_TRUE(before->sync_check);
  ::unsetenv("LUMINAL_SYNC_CHECK");
  reload_config();
}
