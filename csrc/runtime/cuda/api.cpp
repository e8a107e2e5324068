#include "runtime/cuda/api.h"

#include <dlfcn.h>

#include <algorithm>
#include <mutex>

#include "common/error.h"

namespace luminal::cuda {

namespace {

std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::vector<std::string>& library_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

// Opens the first of `names` that is already loaded, then in the registered directories, then on
// the default search path. Returns nullptr and fills `tried` when none opens.
void* open_library(const std::vector<std::string>& names, std::string& tried) {
  for (const std::string& name : names) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return handle;
  }
  std::vector<std::string> dirs;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    dirs = library_dirs();
  }
  for (const std::string& dir : dirs) {
    for (const std::string& name : names) {
      const std::string path = dir + "/" + name;
      if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    }
  }
  for (const std::string& name : names) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* error = dlerror();
    tried += str_cat("\n  ", name, ": ", error ? error : "not found");
  }
  return nullptr;
}

template <typename Pointer>
void resolve(void* handle, const char* symbol, Pointer& out, std::string& missing) {
  out = reinterpret_cast<Pointer>(dlsym(handle, symbol));
  if (!out) missing += str_cat(" ", symbol);
}

#define LUMINAL_STRINGIFY_(x) #x
#define LUMINAL_STRINGIFY(x) LUMINAL_STRINGIFY_(x)  // expands versioning macros: cuMemAlloc -> "cuMemAlloc_v2"
#define LUMINAL_RESOLVE(name) resolve(handle, LUMINAL_STRINGIFY(name), api.name, missing);
#define LUMINAL_RESOLVE_OPTIONAL(name) resolve(handle, LUMINAL_STRINGIFY(name), api.name, optional_missing);

// Loads a library once; later calls rethrow the first failure's message.
template <typename Api, typename Fill>
const Api& load_once(const char* what, const std::vector<std::string>& names, Fill fill) {
  static std::once_flag once;
  static Api api;
  static std::string failure;
  std::call_once(once, [&] {
    std::string tried;
    void* handle = open_library(names, tried);
    if (!handle) {
      failure = str_cat("cannot load ", what, "; tried:", tried);
      return;
    }
    std::string missing;
    fill(handle, api, missing);
    if (!missing.empty()) failure = str_cat(what, " lacks the functions:", missing, " (too old?)");
  });
  if (!failure.empty()) throw Error(failure);
  return api;
}

}  // namespace

void add_library_dirs(const std::vector<std::string>& dirs) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (const std::string& dir : dirs) library_dirs().push_back(dir);
}

const DriverApi& driver() {
  return load_once<DriverApi>("the CUDA driver (libcuda)", {"libcuda.so.1", "libcuda.so"},
                              [](void* handle, DriverApi& api, std::string& missing) {
                                LUMINAL_DRIVER_FUNCTIONS(LUMINAL_RESOLVE)
                                std::string optional_missing;
                                LUMINAL_OPTIONAL_DRIVER_FUNCTIONS(LUMINAL_RESOLVE_OPTIONAL)
                              });
}

const NvrtcApi& nvrtc() {
  return load_once<NvrtcApi>("NVRTC (libnvrtc)", {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"},
                             [](void* handle, NvrtcApi& api, std::string& missing) {
                               LUMINAL_NVRTC_FUNCTIONS(LUMINAL_RESOLVE)
                             });
}

const CublasLtApi& cublaslt() {
  return load_once<CublasLtApi>("cuBLASLt (libcublasLt)",
                                {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
                                [](void* handle, CublasLtApi& api, std::string& missing) {
                                  LUMINAL_CUBLASLT_FUNCTIONS(LUMINAL_RESOLVE)
                                });
}

#if LUMINAL_HAVE_CUDNN
const CudnnApi& cudnn() {
  // libcudnn.so.9 is a small dispatcher that loads its engine libraries from its own directory.
  return load_once<CudnnApi>("cuDNN (libcudnn)", {"libcudnn.so.9", "libcudnn.so"},
                             [](void* handle, CudnnApi& api, std::string& missing) {
                               LUMINAL_CUDNN_FUNCTIONS(LUMINAL_RESOLVE)
                             });
}
#endif

bool device_available() {
  try {
    const DriverApi& api = driver();
    if (api.cuInit(0) != CUDA_SUCCESS) return false;
    CUdevice device;
    return api.cuDeviceGet(&device, 0) == CUDA_SUCCESS;
  } catch (const Error&) {
    return false;
  }
}

CUcontext use_primary_context(int device) {
  const DriverApi& api = driver();
  check(api.cuInit(0), "cuInit");
  CUdevice dev;
  check(api.cuDeviceGet(&dev, device), "cuDeviceGet");
  CUcontext primary = nullptr;
  check(api.cuDevicePrimaryCtxRetain(&primary, dev), "cuDevicePrimaryCtxRetain");
  CUcontext current = nullptr;
  check(api.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != primary) check(api.cuCtxSetCurrent(primary), "cuCtxSetCurrent");
  return primary;
}

bool stream_capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  LUMINAL_CU(driver().cuStreamIsCapturing(stream, &status));
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

CurrentContextGuard::CurrentContextGuard() {
  const DriverApi& api = driver();
  known_ = api.cuCtxGetCurrent(&saved_) == CUDA_SUCCESS;
}

CurrentContextGuard::~CurrentContextGuard() {
  if (!known_) return;
  try {
    const DriverApi& api = driver();
    CUcontext current = nullptr;
    if (api.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != saved_) api.cuCtxSetCurrent(saved_);
  } catch (const Error&) {
  }
}

int compute_capability(int device) {
  const DriverApi& api = driver();
  CUdevice dev;
  check(api.cuDeviceGet(&dev, device), "cuDeviceGet");
  int major = 0, minor = 0;
  check(api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  check(api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  return major * 10 + minor;  // minor versions are single digits
}

std::string device_arch(int device) { return str_cat("sm_", compute_capability(device)); }

size_t l2_cache_bytes(int device) {
  const DriverApi& api = driver();
  CUdevice dev;
  check(api.cuDeviceGet(&dev, device), "cuDeviceGet");
  int bytes = 0;
  check(api.cuDeviceGetAttribute(&bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev), "cuDeviceGetAttribute");
  return static_cast<size_t>(std::max(bytes, 0));
}

void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  try {
    driver().cuGetErrorName(result, &name);
    driver().cuGetErrorString(result, &text);
  } catch (const Error&) {
  }
  fail("CUDA error ", name ? name : "?", " (", static_cast<int>(result), ": ", text ? text : "unknown", ") in ",
       call);
}

void check(nvrtcResult result, const char* call) {
  if (result == NVRTC_SUCCESS) return;
  const char* text = nullptr;
  try {
    text = nvrtc().nvrtcGetErrorString(result);
  } catch (const Error&) {
  }
  fail("NVRTC error ", static_cast<int>(result), " (", text ? text : "unknown", ") in ", call);
}

void check(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail("cuBLASLt error ", static_cast<int>(status), " in ", call);
}

#if LUMINAL_HAVE_CUDNN
void check(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const char* text = nullptr;
  try {
    text = cudnn().cudnnGetErrorString(status);
  } catch (const Error&) {
  }
  fail("cuDNN error ", static_cast<int>(status), " (", text ? text : "unknown", ") in ", call);
}
#endif

}  // namespace luminal::cuda
