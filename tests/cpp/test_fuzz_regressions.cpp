// Runs the fuzz targets' entry function (fuzz/fuzz_entry.cpp) at every depth (parse, compile,
// run) over the seed corpus and every regression input, without libFuzzer: an input that once crashed, hung or leaked must now be
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

// The outcome at each depth (parse, compile, run). Anything but a luminal::Error escapes
// run_pt2_input and fails the test; a crash is caught by the sanitizers.
std::vector<Outcome> run_every_depth(const fs::path& path) {
  SCOPED_TRACE(path.string());
  const std::string bytes = read_bytes(path);
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  std::vector<Outcome> outcomes;
  for (const Depth depth : {Depth::Parse, Depth::Compile, Depth::Run}) {
    try {
      outcomes.push_back(run_pt2_input(data, bytes.size(), depth));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "an exception other than luminal::Error escaped: " << e.what();
    }
  }
  return outcomes;
}

// The seeds are real torch.export.save archives (fuzz/make_corpus.py): they must compile, and
// those with static input sizes run, or the fuzzer would start from inputs that stop at the first
// error and never reach the translators and kernels.
TEST(FuzzCorpus, SeedsCompileAndRun) {
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
    const std::vector<Outcome> outcomes = run_every_depth(seed);
    const bool dynamic = seed.filename().string().rfind("dynamic", 0) == 0;
    EXPECT_EQ(outcomes, (std::vector<Outcome>{Outcome::Accepted, Outcome::Accepted,
                                              dynamic ? Outcome::Accepted : Outcome::Ran}));
  }
}

TEST(FuzzRegressions, EveryInputIsAcceptedOrRejectedCleanly) {
  const std::vector<fs::path> regressions = inputs_in("regressions");
  for (const fs::path& input : regressions) run_every_depth(input);
  RecordProperty("inputs", static_cast<int>(regressions.size()));
}

}  // namespace
}  // namespace luminal::fuzz
