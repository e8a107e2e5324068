#include "runtime/cuda/standalone_kernel.h"

#include <dlfcn.h>

#include <cstring>

#include "common/error.h"
#include "runtime/cuda/nvrtc.h"

namespace luminal::cuda {

KernelArgument KernelArgument::pointer(const void* address) {
  return {Kind::Pointer, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(address))};
}

KernelArgument KernelArgument::int64(int64_t value) { return {Kind::Int64, static_cast<uint64_t>(value)}; }

KernelArgument KernelArgument::float32(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return {Kind::Float32, bits};
}

namespace {

// cuFuncGetParamInfo where the driver has it (CUDA 12.4 and newer); not part of DriverApi, which
// lists what luminal cannot run without.
using ParamInfoFunction = CUresult (*)(CUfunction, size_t, size_t*, size_t*);

ParamInfoFunction param_info_function() {
  static const ParamInfoFunction function = [] {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!handle) handle = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    return handle ? reinterpret_cast<ParamInfoFunction>(dlsym(handle, "cuFuncGetParamInfo")) : nullptr;
  }();
  return function;
}

// The kernel's parameter sizes in order; empty when the driver cannot say.
std::vector<size_t> parameter_sizes(CUfunction function) {
  const ParamInfoFunction info = param_info_function();
  std::vector<size_t> sizes;
  if (!info) return sizes;
  for (size_t index = 0;; ++index) {
    size_t offset = 0, size = 0;
    const CUresult result = info(function, index, &offset, &size);
    if (result == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
    if (result != CUDA_SUCCESS) return {};          // e.g. not supported: no check
    sizes.push_back(size);
  }
  return sizes;
}

const char* kind_name(KernelArgument::Kind kind) {
  switch (kind) {
    case KernelArgument::Kind::Pointer: return "pointer";
    case KernelArgument::Kind::Int64: return "long long";
    case KernelArgument::Kind::Float32: return "float";
  }
  return "?";
}

}  // namespace

StandaloneKernel::StandaloneKernel(std::string source, std::string name)
    : source_(std::move(source)), name_(std::move(name)) {
  LUMINAL_CHECK(!name_.empty(), "a standalone kernel needs the name of its entry point");
}

StandaloneKernel::~StandaloneKernel() {
  // Best effort: at interpreter exit the context may already be gone.
  try {
    for (auto& [device, loaded] : loaded_) {
      if (loaded.module) driver().cuModuleUnload(loaded.module);
    }
  } catch (const Error&) {
  }
}

StandaloneKernel::Loaded& StandaloneKernel::loaded_on(int device) {
  if (const auto found = loaded_.find(device); found != loaded_.end()) {
    const DriverApi& api = driver();
    CUcontext current = nullptr;
    LUMINAL_CU(api.cuCtxGetCurrent(&current));
    if (current != found->second.context) LUMINAL_CU(api.cuCtxSetCurrent(found->second.context));
    return found->second;
  }
  Loaded loaded;
  loaded.context = use_primary_context(device);
  const std::string cubin = compile_to_cubin(source_, device_arch(device));
  const DriverApi& api = driver();
  LUMINAL_CU(api.cuModuleLoadData(&loaded.module, cubin.data()));
  const CUresult found = api.cuModuleGetFunction(&loaded.function, loaded.module, name_.c_str());
  if (found != CUDA_SUCCESS) {
    api.cuModuleUnload(loaded.module);
    fail("the standalone kernel's source has no entry point '", name_, "' (declare it extern \"C\" __global__)");
  }
  loaded.parameter_sizes = parameter_sizes(loaded.function);
  return loaded_.emplace(device, loaded).first->second;
}

CUDA_KERNEL_NODE_PARAMS StandaloneKernel::node_params(int device, const LaunchShape& shape,
                                                      const std::vector<KernelArgument>& arguments,
                                                      KernelArgumentSlots& slots) {
  for (int d = 0; d < 3; ++d) {
    LUMINAL_CHECK(shape.grid[d] > 0 && shape.block[d] > 0, "kernel ", name_, ": the grid and block sizes must be "
                  "positive, got grid (", shape.grid[0], ", ", shape.grid[1], ", ", shape.grid[2], ") and block (",
                  shape.block[0], ", ", shape.block[1], ", ", shape.block[2], ")");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const Loaded& loaded = loaded_on(device);
  const std::vector<size_t>& expected = loaded.parameter_sizes;
  if (!expected.empty()) {
    LUMINAL_CHECK(expected.size() == arguments.size(), "kernel ", name_, " takes ", expected.size(),
                  " parameters, given ", arguments.size(), " arguments");
    for (size_t k = 0; k < arguments.size(); ++k) {
      LUMINAL_CHECK(expected[k] == arguments[k].size(), "kernel ", name_, ": parameter ", k, " has ", expected[k],
                    " bytes, given a ", kind_name(arguments[k].kind), " (", arguments[k].size(), " bytes)");
    }
  }
  // The driver copies each parameter's declared size from these addresses (a float from the low
  // bytes of its slot: little-endian hosts only, like every platform CUDA runs on).
  slots.values.resize(arguments.size());
  slots.pointers.resize(arguments.size());
  for (size_t k = 0; k < arguments.size(); ++k) {
    slots.values[k] = arguments[k].bits;
    slots.pointers[k] = &slots.values[k];
  }
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = loaded.function;
  params.gridDimX = shape.grid[0];
  params.gridDimY = shape.grid[1];
  params.gridDimZ = shape.grid[2];
  params.blockDimX = shape.block[0];
  params.blockDimY = shape.block[1];
  params.blockDimZ = shape.block[2];
  params.sharedMemBytes = shape.shared_bytes;
  params.kernelParams = slots.pointers.empty() ? nullptr : slots.pointers.data();
  return params;
}

void StandaloneKernel::launch(int device, const LaunchShape& shape, CUstream stream,
                              const std::vector<KernelArgument>& arguments) {
  const CurrentContextGuard callers;
  thread_local KernelArgumentSlots slots;
  const CUDA_KERNEL_NODE_PARAMS p = node_params(device, shape, arguments, slots);
  LUMINAL_CU(driver().cuLaunchKernel(p.func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                                     p.blockDimZ, p.sharedMemBytes, stream, p.kernelParams, nullptr));
}

size_t StandaloneKernel::check_compiles(const std::string& source, const std::string& name, const std::string& arch) {
  const std::string cubin = compile_to_cubin(source, arch);
  // The ELF string table holds every symbol's name between NUL bytes.
  const std::string symbol = std::string(1, '\0') + name + std::string(1, '\0');
  LUMINAL_CHECK(cubin.find(symbol) != std::string::npos, "the standalone kernel's source compiles for ", arch,
                " but has no symbol '", name, "' (declare the kernel extern \"C\" __global__)");
  return cubin.size();
}

}  // namespace luminal::cuda
