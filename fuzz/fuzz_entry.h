// The fuzz targets' entry points, compiled as plain functions so that the GoogleTest suite can run
// the seed corpus and every regression input through exactly the code the fuzzers exercise
// (tests/cpp/test_fuzz_regressions.cpp), without libFuzzer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminal::fuzz {

// How far an input is taken.
enum class Depth {
  // What luminal.load does before translation: open the bytes as a zip, read the package (model
  // JSON, weights, constants) and parse every symbolic size expression it declares.
  Parse,
  // Parse, then translate to the IR, run the passes and plan the CPU executor, as
  // luminal.load does (and, when a node is refused, list every refused node as the torch.compile
  // backend does): nothing is executed and no declared tensor size is ever allocated.
  Compile,
  // Compile, then run on the CPU with made-up inputs of the graph's static input sizes (up to
  // 1 MiB each; graphs with symbolic or larger inputs are only compiled). Finds what a
  // self-consistent archive does at call time: intermediates sized from declared shapes, kernels.
  Run,
};

enum class Outcome {
  Rejected,  // a luminal::Error: the expected outcome for most hostile bytes
  Accepted,  // read (and compiled) without error
  Ran,       // Depth::Run only: compiled and ran on the CPU
};

// Feeds `size` bytes to the archive reader. Returns normally when the input is accepted or
// rejected with a luminal::Error. Any other exception escapes, and a crash, hang, leak or
// sanitizer report is a finding.
Outcome run_pt2_input(const uint8_t* data, size_t size, Depth depth);

}  // namespace luminal::fuzz
