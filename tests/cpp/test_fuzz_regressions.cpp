// Runs the fuzz targets' entry function (fuzz/fuzz_entry.cpp) over the seed corpus and every
// regression input, without libFuzzer: an input that once crashed, hung or leaked must now be
// accepted or rejected with a luminal::Error. Under `make test-sanitize` this runs with ASan and
// UBSan, so memory errors in these paths fail the suite even where the fuzzer is not built.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "fuzz_entry.h"
#include "runtime/compiled.h"

namespace luminal::fuzz {
namespace {

namespace fs = std::filesystem;

// The files of fuzz/<folder>, sorted; notes (*.md) are skipped.
std::vector<fs::path> inputs_in(const std::string& folder) {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(LUMINAL_FUZZ_DIR) / folder;
  if (!fs::is_directory(dir)) return out;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() != ".md") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void run_both_depths(const fs::path& path) {
  SCOPED_TRACE(path.string());
  const std::string bytes = read_bytes(path);
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  // Anything but a luminal::Error escapes run_pt2_input; a crash is caught by the sanitizers.
  EXPECT_NO_THROW(run_pt2_input(data, bytes.size(), Depth::Parse));
  EXPECT_NO_THROW(run_pt2_input(data, bytes.size(), Depth::Compile));
}

// The seeds are real torch.export.save archives (fuzz/make_corpus.py): they must compile, or the
// fuzzer would start from inputs that stop at the first error and never reach the translators.
TEST(FuzzCorpus, SeedsCompile) {
  const std::vector<fs::path> seeds = inputs_in("corpus");
  ASSERT_GE(seeds.size(), 5u) << "fuzz/corpus is missing its seeds (fuzz/make_corpus.py)";
  for (const fs::path& seed : seeds) {
    SCOPED_TRACE(seed.string());
    try {
      const auto graph = runtime::CompiledGraph::from_archive_bytes(read_bytes(seed));
      EXPECT_GT(graph->num_inputs(), 0u);
    } catch (const Error& e) {
      ADD_FAILURE() << "seed does not compile: " << e.what();
    }
    run_both_depths(seed);
  }
}

TEST(FuzzRegressions, EveryInputIsAcceptedOrRejectedCleanly) {
  const std::vector<fs::path> regressions = inputs_in("regressions");
  for (const fs::path& input : regressions) run_both_depths(input);
  RecordProperty("inputs", static_cast<int>(regressions.size()));
}

}  // namespace
}  // namespace luminal::fuzz
