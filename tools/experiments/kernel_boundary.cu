// What a dependent kernel boundary costs in a CUDA graph on this GPU: a chain of L kernels, each
// reading what the one before wrote, linked (0) by plain edges, (1) by programmatic edges with
// griddepcontrol (launch the next, then wait), (2) by programmatic edges with a counter per edge
// that each block of a kernel raises after its work (release) and the next kernel's blocks poll
// (acquire) instead of griddepcontrol.wait. Prints microseconds per kernel for a few grid sizes.
//
//   nvcc -O3 -arch=sm_90 -o kernel_boundary kernel_boundary.cu && ./kernel_boundary
// (on a lent H200: benchmarks/results/h200_kernel_boundary.txt, discussed in the README).
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e = (x);                                                            \
    if (e != cudaSuccess) {                                                         \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void add_release(unsigned long long* p, unsigned long long v) {
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// mode 0: plain; 1: griddepcontrol; 2: counters. `work` floats per block read from `in`, summed,
// stored to `out` (one value per block), so each kernel depends on the one before.
__global__ void link(int mode, const float* in, float* out, int work, unsigned long long* wait_on,
                     unsigned long long wait_target, unsigned long long* signal) {
  if (mode >= 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (mode == 1) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (mode == 2 && wait_on) {
    if (threadIdx.x == 0) {
      while (load_acquire(wait_on) < wait_target) {
      }
    }
    __syncthreads();
  }
  float s = 0.0f;
  for (int i = threadIdx.x; i < work; i += blockDim.x) s += in[(blockIdx.x * 97 + i) % 4096];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) out[(blockIdx.x * 4 + (threadIdx.x >> 5)) % 4096] = s * 0.5f + 1.0f;
  if (mode == 2) {
    __syncthreads();
    if (threadIdx.x == 0) add_release(signal, 1);
  }
}

__global__ void reset(unsigned long long* counters, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int i = threadIdx.x; i < n; i += blockDim.x) counters[i] = 0;
}

// A launch of `grid` blocks of `threads` on `stream`, linked to the kernel before it by a
// programmatic edge when `programmatic` (`attribute` holds that setting while the launch is made).
cudaLaunchConfig_t launch_config(int grid, int threads, cudaStream_t stream, bool programmatic,
                                 cudaLaunchAttribute& attribute) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.stream = stream;
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = programmatic ? 1 : 0;
  return config;
}

int run(int mode, int length, int grid, int work, float* buffers, unsigned long long* counters, float* us) {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < length; ++i) {
    cudaLaunchAttribute attribute;
    const cudaLaunchConfig_t config = launch_config(grid, 128, stream, mode >= 1 && i > 0, attribute);
    const float* in = buffers + (i % 2) * 4096;
    float* out = buffers + ((i + 1) % 2) * 4096;
    unsigned long long* wait_on = i > 0 ? counters + i - 1 : nullptr;
    CHECK(cudaLaunchKernelEx(&config, link, mode, in, out, work, wait_on, (unsigned long long)grid, counters + i));
  }
  if (mode == 2) {
    cudaLaunchAttribute attribute;
    const cudaLaunchConfig_t config = launch_config(1, 256, stream, true, attribute);
    CHECK(cudaLaunchKernelEx(&config, reset, counters, length));
  }
  CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 20; ++i) CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t begin, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  const int reps = 200;
  CHECK(cudaEventRecord(begin, stream));
  for (int i = 0; i < reps; ++i) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaEventRecord(end, stream));
  CHECK(cudaEventSynchronize(end));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, begin, end));
  *us = ms * 1000.0f / reps / length;
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const int length = 128;
  float* buffers;
  unsigned long long* counters;
  CHECK(cudaMalloc(&buffers, 2 * 4096 * sizeof(float)));
  CHECK(cudaMemset(buffers, 0, 2 * 4096 * sizeof(float)));
  CHECK(cudaMalloc(&counters, length * sizeof(unsigned long long)));
  CHECK(cudaMemset(counters, 0, length * sizeof(unsigned long long)));
  const char* names[] = {"plain edges", "griddepcontrol", "counters"};
  for (int work : {128, 2048}) {
    for (int grid : {1, 8, 132, 512, 1024}) {
      std::printf("grid %5d work %5d:", grid, work);
      for (int mode = 0; mode < 3; ++mode) {
        float us = 0;
        if (run(mode, length, grid, work, buffers, counters, &us)) return 1;
        std::printf("  %s %.2f us", names[mode], us);
      }
      std::printf("\n");
    }
  }
  return 0;
}
