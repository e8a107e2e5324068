// The CUDA driver API, NVRTC, cuBLASLt and cuDNN, loaded at run time with dlopen.
//
// Nothing links against CUDA: the package imports and runs on machines without a GPU, a driver
// or the toolkit. Libraries that torch already loaded are preferred (RTLD_NOLOAD), then the
// directories registered with add_library_dirs() (torch's bundled NVIDIA libraries), then the
// default search path. Every call is checked; failures raise luminal::Error naming the call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cuda.h>
#include <nvrtc.h>

// cuDNN's backend (graph) API, where its headers were found at build time (the toolkit's include
// directory or the nvidia-cudnn wheel torch depends on); without them convolutions are generated.
#if __has_include(<cudnn_graph.h>)
#include <cudnn_graph.h>
#define LUMINAL_HAVE_CUDNN 1
#else
#define LUMINAL_HAVE_CUDNN 0
#endif

namespace luminal::cuda {

void add_library_dirs(const std::vector<std::string>& dirs);

#define LUMINAL_DRIVER_FUNCTIONS(X)    \
  X(cuInit)                            \
  X(cuGetErrorName)                    \
  X(cuGetErrorString)                  \
  X(cuDriverGetVersion)                \
  X(cuDeviceGet)                       \
  X(cuDeviceGetCount)                  \
  X(cuDeviceGetAttribute)              \
  X(cuDeviceGetName)                   \
  X(cuDevicePrimaryCtxRetain)          \
  X(cuCtxGetCurrent)                   \
  X(cuCtxSetCurrent)                   \
  X(cuCtxGetDevice)                    \
  X(cuModuleLoadData)                  \
  X(cuModuleUnload)                    \
  X(cuModuleGetFunction)               \
  X(cuFuncSetAttribute)                \
  X(cuLaunchKernel)                    \
  X(cuMemAlloc)                        \
  X(cuMemFree)                         \
  X(cuMemAllocHost)                    \
  X(cuMemFreeHost)                     \
  X(cuMemcpyHtoD)                      \
  X(cuMemcpyHtoDAsync)                 \
  X(cuMemcpyDtoHAsync)                 \
  X(cuMemcpyDtoDAsync)                 \
  X(cuMemsetD8Async)                   \
  X(cuStreamCreate)                    \
  X(cuStreamDestroy)                   \
  X(cuStreamSynchronize)               \
  X(cuStreamWaitEvent)                 \
  X(cuStreamBeginCapture)              \
  X(cuStreamEndCapture)                \
  X(cuStreamIsCapturing)               \
  X(cuEventCreate)                     \
  X(cuEventDestroy)                    \
  X(cuEventRecord)                     \
  X(cuEventQuery)                      \
  X(cuEventSynchronize)                \
  X(cuEventElapsedTime)                \
  X(cuGraphCreate)                     \
  X(cuGraphDestroy)                    \
  X(cuGraphAddKernelNode)              \
  X(cuGraphAddChildGraphNode)          \
  X(cuGraphAddMemcpyNode)              \
  X(cuGraphInstantiateWithFlags)       \
  X(cuGraphExecDestroy)                \
  X(cuGraphExecKernelNodeSetParams)    \
  X(cuGraphNodeSetEnabled)             \
  X(cuGraphLaunch)

// Driver functions luminal runs without where the driver lacks them (null then): programmatic
// edges between a CUDA graph's kernels (CUDA 12.3+; instance.cpp); adding a compiled graph to the
// caller's stream capture (CUDA 12.3+; capture.cpp). Named with their suffixes: in CUDA 12's
// headers the plain names are the older functions, without edge data.
#define LUMINAL_OPTIONAL_DRIVER_FUNCTIONS(X) \
  X(cuGraphAddDependencies_v2)               \
  X(cuStreamGetCaptureInfo_v3)               \
  X(cuStreamUpdateCaptureDependencies_v2)    \
  X(cuGraphKernelNodeSetParams_v2)

#define LUMINAL_NVRTC_FUNCTIONS(X) \
  X(nvrtcGetErrorString)           \
  X(nvrtcVersion)                  \
  X(nvrtcCreateProgram)            \
  X(nvrtcDestroyProgram)           \
  X(nvrtcCompileProgram)           \
  X(nvrtcGetProgramLogSize)        \
  X(nvrtcGetProgramLog)            \
  X(nvrtcGetCUBINSize)             \
  X(nvrtcGetCUBIN)                 \
  X(nvrtcGetPTXSize)               \
  X(nvrtcGetPTX)

#define LUMINAL_CUBLASLT_FUNCTIONS(X)     \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtGetVersion)                   \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatrixLayoutSetAttribute)     \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulAlgoConfigGetAttribute) \
  X(cublasLtMatmul)

#define LUMINAL_CUDNN_FUNCTIONS(X) \
  X(cudnnGetVersion)               \
  X(cudnnGetErrorString)           \
  X(cudnnCreate)                   \
  X(cudnnDestroy)                  \
  X(cudnnSetStream)                \
  X(cudnnBackendCreateDescriptor)  \
  X(cudnnBackendDestroyDescriptor) \
  X(cudnnBackendFinalize)          \
  X(cudnnBackendSetAttribute)      \
  X(cudnnBackendGetAttribute)      \
  X(cudnnBackendExecute)

#define LUMINAL_DECLARE_POINTER(name) decltype(&::name) name = nullptr;

struct DriverApi {
  LUMINAL_DRIVER_FUNCTIONS(LUMINAL_DECLARE_POINTER)
  LUMINAL_OPTIONAL_DRIVER_FUNCTIONS(LUMINAL_DECLARE_POINTER)
};
struct NvrtcApi {
  LUMINAL_NVRTC_FUNCTIONS(LUMINAL_DECLARE_POINTER)
};
struct CublasLtApi {
  LUMINAL_CUBLASLT_FUNCTIONS(LUMINAL_DECLARE_POINTER)
};

#if LUMINAL_HAVE_CUDNN
struct CudnnApi {
  LUMINAL_CUDNN_FUNCTIONS(LUMINAL_DECLARE_POINTER)
};
#endif

#undef LUMINAL_DECLARE_POINTER

// Each raises luminal::Error saying what is missing when the library cannot be loaded.
const DriverApi& driver();
const NvrtcApi& nvrtc();
const CublasLtApi& cublaslt();
#if LUMINAL_HAVE_CUDNN
const CudnnApi& cudnn();
#endif

// The largest power of two, up to 256, that divides the address: the alignment a library's kernels
// (cuBLASLt, cuDNN) may assume for it.
inline int pointer_alignment(uintptr_t address) {
  int alignment = 1;
  while (alignment < 256 && address % (alignment * 2) == 0) alignment *= 2;
  return alignment;
}

// True when the driver loads and reports at least one device (never raises).
bool device_available();

// Makes the device's primary context (the one torch uses) current on this thread, retained once
// more (torch keeps it alive; so does luminal), and returns it.
CUcontext use_primary_context(int device);

// Whether `stream` is being captured into a CUDA graph (any capture status but none). Through the
// driver luminal loads itself: the CUDA runtime's function would make the extension need
// libcudart, which torch does not promise (tests/test_wheel.py).
bool stream_capturing(CUstream stream);

// Puts back, when it leaves scope, the context that was current on this thread when it was made.
// luminal makes the call's device's primary context current, and the CUDA runtime (torch) takes
// its current device from the current context: without this, a call on cuda:1 would leave
// torch's current device at 1, and a later `.cuda()` or `device="cuda"` of the caller's would
// allocate there. Every entry point of the core that makes CUDA calls holds one.
class CurrentContextGuard {
 public:
  CurrentContextGuard();
  ~CurrentContextGuard();  // best effort: never raises
  CurrentContextGuard(const CurrentContextGuard&) = delete;
  CurrentContextGuard& operator=(const CurrentContextGuard&) = delete;

 private:
  CUcontext saved_ = nullptr;
  bool known_ = false;  // whether the saved context was read (the driver may be missing)
};

// The device's compute capability as major * 10 + minor: 90 for an H100.
int compute_capability(int device);
// The device's architecture for NVRTC: "sm_90".
std::string device_arch(int device);
// The device's L2 cache in bytes (50 MiB on an H100).
size_t l2_cache_bytes(int device);

// Raise luminal::Error naming the call and the library's error text.
void check(CUresult result, const char* call);
void check(nvrtcResult result, const char* call);
void check(cublasStatus_t status, const char* call);
#if LUMINAL_HAVE_CUDNN
void check(cudnnStatus_t status, const char* call);
#endif

}  // namespace luminal::cuda

#define LUMINAL_CU(call) ::luminal::cuda::check((call), #call)
