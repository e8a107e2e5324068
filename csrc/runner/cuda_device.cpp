#include "runner/cuda_device.h"

#include "common/error.h"

#if LUMINAL_HAVE_CUDA
#include <dlfcn.h>

#include <algorithm>

#include "runtime/cuda/api.h"
#include "runtime/cuda/executor.h"
#endif

namespace luminal::runner {

#if LUMINAL_HAVE_CUDA
namespace {

// The engine's intermediates and constants: plain cuMemAlloc memory (the device's memory, never
// managed memory), freed under its own context whatever the thread.
class DriverAllocator : public runtime::gpu::DeviceAllocator {
 public:
  explicit DriverAllocator(CUcontext context) : context_(context) {}

  std::shared_ptr<void> allocate(size_t bytes, int device) override {
    const cuda::DriverApi& api = cuda::driver();
    LUMINAL_CU(api.cuCtxSetCurrent(context_));
    CUdeviceptr pointer = 0;
    LUMINAL_CU(api.cuMemAlloc(&pointer, std::max<size_t>(bytes, 1)));
    const CUcontext context = context_;
    return std::shared_ptr<void>(reinterpret_cast<void*>(pointer), [context](void* memory) {
      try {
        const cuda::DriverApi& driver = cuda::driver();
        driver.cuCtxSetCurrent(context);
        driver.cuMemFree(reinterpret_cast<CUdeviceptr>(memory));  // best effort: at exit the context may be gone
      } catch (const Error&) {
      }
    });
  }

 private:
  CUcontext context_;
};

CUstream as_stream(void* stream) { return static_cast<CUstream>(stream); }
CUdeviceptr as_device(const void* pointer) { return reinterpret_cast<CUdeviceptr>(pointer); }

// The file a loaded library function lives in ("" when unknown).
std::string library_file(const void* function) {
  Dl_info info{};
  if (function == nullptr || dladdr(function, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

}  // namespace

struct CudaDevice::Impl {
  CUcontext context = nullptr;
  std::unique_ptr<DriverAllocator> allocator;
};

void register_cuda_library_dirs(std::vector<std::string> dirs) {
  dirs.push_back("/usr/local/cuda/lib64");
  cuda::add_library_dirs(dirs);
}

CudaDevice::CudaDevice(int index) : index_(index), impl_(std::make_unique<Impl>()) {
  LUMINAL_CHECK(index >= 0, "cuda:", index, " is not a device");
  const cuda::DriverApi* api = nullptr;
  try {
    api = &cuda::driver();
  } catch (const Error& error) {
    fail("no CUDA device is available: ", error.what());
  }
  const CUresult init = api->cuInit(0);
  LUMINAL_CHECK(init == CUDA_SUCCESS, "no CUDA device is available: cuInit failed with error ",
                static_cast<int>(init), " (no GPU, or no driver for it)");
  int count = 0;
  LUMINAL_CU(api->cuDeviceGetCount(&count));
  LUMINAL_CHECK(index < count, "cuda:", index, " is not available: this machine has ", count, " CUDA device",
                count == 1 ? "" : "s");
  CUdevice device = 0;
  LUMINAL_CU(api->cuDeviceGet(&device, index));
  LUMINAL_CU(api->cuDevicePrimaryCtxRetain(&impl_->context, device));
  impl_->allocator = std::make_unique<DriverAllocator>(impl_->context);
  make_current();
}

CudaDevice::~CudaDevice() = default;  // the primary context stays retained, as the engine keeps it

void CudaDevice::make_current() const {
  const cuda::DriverApi& api = cuda::driver();
  CUcontext current = nullptr;
  LUMINAL_CU(api.cuCtxGetCurrent(&current));
  if (current != impl_->context) LUMINAL_CU(api.cuCtxSetCurrent(impl_->context));
}

DeviceMemory CudaDevice::allocate(size_t bytes) const { return impl_->allocator->allocate(bytes, index_); }

runtime::CudaCallContext CudaDevice::context(void* stream, bool allow_tf32_matmul, bool allow_tf32_convolution) const {
  runtime::CudaCallContext context;
  context.stream = stream;
  context.device = index_;
  context.allow_tf32 = allow_tf32_matmul;
  context.allow_tf32_convolution = allow_tf32_convolution;
  context.allocator = impl_->allocator.get();
  return context;
}

void CudaDevice::copy_to_device(void* device, const void* host, size_t bytes, void* stream) const {
  if (bytes == 0) return;
  LUMINAL_CU(cuda::driver().cuMemcpyHtoDAsync(as_device(device), host, bytes, as_stream(stream)));
}

void CudaDevice::copy_to_host(void* host, const void* device, size_t bytes, void* stream) const {
  if (bytes == 0) return;
  LUMINAL_CU(cuda::driver().cuMemcpyDtoHAsync(host, as_device(device), bytes, as_stream(stream)));
}

void CudaDevice::copy_on_device(void* to, const void* from, size_t bytes, void* stream) const {
  if (bytes == 0 || to == from) return;
  LUMINAL_CU(cuda::driver().cuMemcpyDtoDAsync(as_device(to), as_device(from), bytes, as_stream(stream)));
}

void CudaDevice::fill(void* device, unsigned char value, size_t bytes, void* stream) const {
  if (bytes == 0) return;
  LUMINAL_CU(cuda::driver().cuMemsetD8Async(as_device(device), value, bytes, as_stream(stream)));
}

void CudaDevice::synchronize(void* stream) const { LUMINAL_CU(cuda::driver().cuStreamSynchronize(as_stream(stream))); }

struct CallerContext::Saved {
  cuda::CurrentContextGuard guard;
};
CallerContext::CallerContext() {
  try {
    saved_ = std::make_unique<Saved>();
  } catch (const Error&) {
    // No driver: nothing was made current, and the CudaDevice that follows says what is missing.
  }
}
CallerContext::~CallerContext() = default;

bool CudaDevice::capturing(void* stream) const { return cuda::stream_capturing(as_stream(stream)); }

std::string CudaDevice::loaded_libraries() {
  std::string text;
  const auto add = [&](const char* name, auto load) {
    try {
      const std::string file = library_file(load());
      if (!file.empty()) text += str_cat(name, ": ", file, "\n");
    } catch (const Error&) {
      text += str_cat(name, ": not loaded\n");
    }
  };
  add("libcuda", [] { return reinterpret_cast<const void*>(cuda::driver().cuInit); });
  add("libnvrtc", [] { return reinterpret_cast<const void*>(cuda::nvrtc().nvrtcVersion); });
  add("libcublasLt", [] { return reinterpret_cast<const void*>(cuda::cublaslt().cublasLtCreate); });
#if LUMINAL_HAVE_CUDNN
  add("libcudnn", [] { return reinterpret_cast<const void*>(cuda::cudnn().cudnnGetVersion); });
#endif
  return text;
}

#else  // no CUDA toolkit headers at build time

namespace {
[[noreturn]] void no_cuda() {
  fail("this luminal-run was built without the CUDA engine (no CUDA toolkit headers at build time)");
}
}  // namespace

struct CudaDevice::Impl {};

void register_cuda_library_dirs(std::vector<std::string>) {}
CudaDevice::CudaDevice(int index) : index_(index) { no_cuda(); }
CudaDevice::~CudaDevice() = default;
void CudaDevice::make_current() const { no_cuda(); }
DeviceMemory CudaDevice::allocate(size_t) const { no_cuda(); }
runtime::CudaCallContext CudaDevice::context(void*, bool, bool) const { no_cuda(); }
void CudaDevice::copy_to_device(void*, const void*, size_t, void*) const { no_cuda(); }
void CudaDevice::copy_to_host(void*, const void*, size_t, void*) const { no_cuda(); }
void CudaDevice::copy_on_device(void*, const void*, size_t, void*) const { no_cuda(); }
void CudaDevice::fill(void*, unsigned char, size_t, void*) const { no_cuda(); }
void CudaDevice::synchronize(void*) const { no_cuda(); }
bool CudaDevice::capturing(void*) const { no_cuda(); }
struct CallerContext::Saved {};
CallerContext::CallerContext() = default;
CallerContext::~CallerContext() = default;
std::string CudaDevice::loaded_libraries() { return ""; }

#endif

}  // namespace luminal::runner
