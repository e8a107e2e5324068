// NVRTC compiles for the tests (no GPU needed): a module's PTX for sm_90, or ptxas's report on it.
#pragma once

#ifdef LUMINAL_HAVE_CUDA
#include <gtest/gtest.h>

#include <string>

#include "runtime/cuda/api.h"

namespace luminal::testing {

struct NvrtcOutput {
  std::string ptx;  // empty when the compile failed
  std::string log;  // NVRTC's log (with --ptxas-options=-v: registers, spills per entry point)
};

// Compiles `source` for sm_90; a failed compile fails the test with NVRTC's log.
inline NvrtcOutput compile_for_sm90(const std::string& source, bool ptxas_report = false) {
  const cuda::NvrtcApi& api = cuda::nvrtc();
  nvrtcProgram program = nullptr;
  cuda::check(api.nvrtcCreateProgram(&program, source.c_str(), "module.cu", 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  const char* options[] = {"--gpu-architecture=sm_90", "--std=c++17", "-default-device", "--ptxas-options=-v"};
  const nvrtcResult result = api.nvrtcCompileProgram(program, ptxas_report ? 4 : 3, options);
  NvrtcOutput output;
  size_t size = 0;
  api.nvrtcGetProgramLogSize(program, &size);
  output.log.assign(size, '\0');
  if (size) api.nvrtcGetProgramLog(program, output.log.data());
  if (result == NVRTC_SUCCESS) {
    api.nvrtcGetPTXSize(program, &size);
    output.ptx.assign(size, '\0');
    if (size) api.nvrtcGetPTX(program, output.ptx.data());
  }
  api.nvrtcDestroyProgram(&program);
  EXPECT_EQ(result, NVRTC_SUCCESS) << output.log;
  return output;
}

}  // namespace luminal::testing
#endif
