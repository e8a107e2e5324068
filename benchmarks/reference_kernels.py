"""Hand-written CUDA kernels that luminal's generated code is measured against.

MiniDLRMReference is the mini DLRM's forward (examples/dlrm/model.py, config MINI: bottom MLP
13-8-4 with ReLUs, three EmbeddingBag(sum) tables of dimension 4, the dot products of the six
strictly-lower-triangular feature pairs, top MLP 10-8-1 and a sigmoid) as one register-resident
kernel: one thread per sample, the 245 MLP weights staged once per block in shared memory (every
thread of a warp reads the same weight: a broadcast), embedding rows read as float4 through the
read-only cache, everything else in registers. It reads the model's own parameter tensors by
pointer (nothing is repacked per call) and is launched from Python through luminal's private
binding (_C._ReferenceKernel: NVRTC, the driver API, torch's current stream), so no nvcc is needed.

An index outside its table makes that sample's output NaN (eager raises; a reference kernel has
no error channel, and NaN cannot pass for a result).
"""

from __future__ import annotations

from typing import Any

import torch

from luminal import _C

KERNEL_NAME = "mini_dlrm_forward"

# Sizes of the mini DLRM; the kernel is written for exactly these (MiniDLRMReference checks the model).
DENSE, HIDDEN, DIM, TABLES, TOP_IN, TOP_HIDDEN = 13, 8, 4, 3, 10, 8

_SOURCE = r"""
#define DENSE 13
#define HIDDEN 8
#define DIM 4
#define TOP_IN 10
#define TOP_HIDDEN 8
// Offsets of the weights staged in shared memory (floats).
#define S_W1 0                                  // bottom[0].weight [HIDDEN, DENSE]
#define S_B1 (S_W1 + HIDDEN * DENSE)            // bottom[0].bias [HIDDEN]
#define S_W2 (S_B1 + HIDDEN)                    // bottom[2].weight [DIM, HIDDEN]
#define S_B2 (S_W2 + DIM * HIDDEN)              // bottom[2].bias [DIM]
#define S_W3 (S_B2 + DIM)                       // top[0].weight [TOP_HIDDEN, TOP_IN]
#define S_B3 (S_W3 + TOP_HIDDEN * TOP_IN)       // top[0].bias [TOP_HIDDEN]
#define S_W4 (S_B3 + TOP_HIDDEN)                // top[2].weight [1, TOP_HIDDEN]
#define S_B4 (S_W4 + TOP_HIDDEN)                // top[2].bias [1]
#define S_TOTAL (S_B4 + 1)

typedef INDEX_T index_t;

__device__ __forceinline__ void stage(float* shared, int at, const float* __restrict__ source, int count) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) shared[at + i] = __ldg(source + i);
}

// The pooled (summed) bag of sample b: indices[offsets[b] .. offsets[b + 1]) (the last bag ends at
// `count`, the number of indices). Sets *bad when an index is outside the table.
__device__ __forceinline__ float4 bag_sum(const index_t* __restrict__ indices, const index_t* __restrict__ offsets,
                                          long long count, const float* __restrict__ table, long long rows,
                                          long long b, long long batch, bool* bad) {
  const long long start = offsets[b];
  const long long end = b + 1 < batch ? (long long)offsets[b + 1] : count;
  float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
  for (long long i = start; i < end; ++i) {
    const long long row = indices[i];
    if (row < 0 || row >= rows) {
      *bad = true;
      continue;
    }
    const float4 v = __ldg(reinterpret_cast<const float4*>(table) + row);
    sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w;
  }
  return sum;
}

__device__ __forceinline__ float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

extern "C" __global__ void mini_dlrm_forward(
    const float* __restrict__ dense,
    const index_t* __restrict__ indices0, const index_t* __restrict__ offsets0, long long count0,
    const index_t* __restrict__ indices1, const index_t* __restrict__ offsets1, long long count1,
    const index_t* __restrict__ indices2, const index_t* __restrict__ offsets2, long long count2,
    const float* __restrict__ table0, long long rows0,
    const float* __restrict__ table1, long long rows1,
    const float* __restrict__ table2, long long rows2,
    const float* __restrict__ w1, const float* __restrict__ b1,
    const float* __restrict__ w2, const float* __restrict__ b2,
    const float* __restrict__ w3, const float* __restrict__ b3,
    const float* __restrict__ w4, const float* __restrict__ b4,
    float* __restrict__ out, long long batch) {
  __shared__ float s[S_TOTAL];
  stage(s, S_W1, w1, HIDDEN * DENSE);
  stage(s, S_B1, b1, HIDDEN);
  stage(s, S_W2, w2, DIM * HIDDEN);
  stage(s, S_B2, b2, DIM);
  stage(s, S_W3, w3, TOP_HIDDEN * TOP_IN);
  stage(s, S_B3, b3, TOP_HIDDEN);
  stage(s, S_W4, w4, TOP_HIDDEN);
  stage(s, S_B4, b4, 1);
  __syncthreads();
  const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;

  // Bottom MLP: 13 -> 8 (ReLU) -> 4 (ReLU).
  float x[DENSE];
  const float* row = dense + b * DENSE;
#pragma unroll
  for (int i = 0; i < DENSE; ++i) x[i] = __ldg(row + i);
  float h[HIDDEN];
#pragma unroll
  for (int o = 0; o < HIDDEN; ++o) {
    float acc = s[S_B1 + o];
#pragma unroll
    for (int i = 0; i < DENSE; ++i) acc = fmaf(s[S_W1 + o * DENSE + i], x[i], acc);
    h[o] = fmaxf(acc, 0.f);
  }
  float bottom[DIM];
#pragma unroll
  for (int o = 0; o < DIM; ++o) {
    float acc = s[S_B2 + o];
#pragma unroll
    for (int i = 0; i < HIDDEN; ++i) acc = fmaf(s[S_W2 + o * HIDDEN + i], h[i], acc);
    bottom[o] = fmaxf(acc, 0.f);
  }

  // Embedding bags (sum) and the interaction: features f0 = bottom, f1..f3 = the pooled bags; the
  // top MLP reads [f0, f1.f0, f2.f0, f2.f1, f3.f0, f3.f1, f3.f2] (pairs (i, j), j < i, i-major).
  bool bad = false;
  const float4 f0 = make_float4(bottom[0], bottom[1], bottom[2], bottom[3]);
  const float4 f1 = bag_sum(indices0, offsets0, count0, table0, rows0, b, batch, &bad);
  const float4 f2 = bag_sum(indices1, offsets1, count1, table1, rows1, b, batch, &bad);
  const float4 f3 = bag_sum(indices2, offsets2, count2, table2, rows2, b, batch, &bad);
  const float t[TOP_IN] = {f0.x, f0.y, f0.z, f0.w, dot4(f1, f0), dot4(f2, f0), dot4(f2, f1),
                           dot4(f3, f0), dot4(f3, f1), dot4(f3, f2)};

  // Top MLP: 10 -> 8 (ReLU) -> 1, sigmoid.
  float y = s[S_B4];
#pragma unroll
  for (int o = 0; o < TOP_HIDDEN; ++o) {
    float acc = s[S_B3 + o];
#pragma unroll
    for (int i = 0; i < TOP_IN; ++i) acc = fmaf(s[S_W3 + o * TOP_IN + i], t[i], acc);
    y = fmaf(s[S_W4 + o], fmaxf(acc, 0.f), y);
  }
  out[b] = bad ? __int_as_float(0x7fc00000) : 1.f / (1.f + expf(-y));
}
"""

INDEX_TYPES = {torch.int64: "long long", torch.int32: "int"}


def mini_dlrm_source(index_dtype: torch.dtype) -> str:
    """The kernel's CUDA source for indices and offsets of `index_dtype` (int64 or int32)."""
    if index_dtype not in INDEX_TYPES:
        raise ValueError(f"the mini DLRM kernel takes int64 or int32 indices, not {index_dtype}")
    return f"#define INDEX_T {INDEX_TYPES[index_dtype]}\n" + _SOURCE


def _linear_shapes(layers: torch.nn.Sequential) -> list[tuple[int, int]]:
    return [(m.in_features, m.out_features) for m in layers if isinstance(m, torch.nn.Linear)]


class MiniDLRMReference:
    """The mini DLRM forward as one hand-written kernel, reading `model`'s parameters by pointer.

    Call it like the model: ``reference(dense, indices, offsets)`` returns the [batch, 1] output.
    The call itself checks nothing (it is the reference for per-call cost); `validate` checks the
    inputs once."""

    def __init__(self, model: torch.nn.Module, block: int = 128) -> None:
        self._check_model(model)
        bottom, top = model.bottom, model.top
        tables = [bag.weight for bag in model.embeddings]
        self.tables: list[tuple[torch.Tensor, int]] = [(t, t.shape[0]) for t in tables]
        self.weights = [bottom[0].weight, bottom[0].bias, bottom[2].weight, bottom[2].bias]
        self.weights += [top[0].weight, top[0].bias, top[2].weight, top[2].bias]
        for tensor in [*tables, *self.weights]:
            if not (tensor.is_cuda and tensor.dtype == torch.float32 and tensor.is_contiguous()):
                raise ValueError("the mini DLRM kernel reads contiguous float32 CUDA parameters")
        for table in tables:
            if table.data_ptr() % 16:
                raise ValueError("the mini DLRM kernel reads embedding rows as float4: tables must be 16-byte aligned")
        self.block = block
        self._kernels: dict[torch.dtype, Any] = {}

    @staticmethod
    def _check_model(model: torch.nn.Module) -> None:
        config = getattr(model, "config", None)
        bags = getattr(model, "embeddings", [])
        shapes_match = (
            _linear_shapes(model.bottom) == [(DENSE, HIDDEN), (HIDDEN, DIM)]
            and _linear_shapes(model.top) == [(TOP_IN, TOP_HIDDEN), (TOP_HIDDEN, 1)]
            and len(bags) == TABLES
            and all(bag.embedding_dim == DIM and bag.mode == "sum" for bag in bags)
            and all(bag.max_norm is None and bag.padding_idx is None and not bag.include_last_offset for bag in bags)
            and [type(m) for m in model.bottom] == [torch.nn.Linear, torch.nn.ReLU, torch.nn.Linear, torch.nn.ReLU]
            and [type(m) for m in model.top] == [torch.nn.Linear, torch.nn.ReLU, torch.nn.Linear, torch.nn.Sigmoid]
        )
        if config is None or not shapes_match:
            raise ValueError("MiniDLRMReference is written for examples/dlrm/model.py's DLRM(MINI)")

    def kernel(self, index_dtype: torch.dtype) -> Any:
        if index_dtype not in self._kernels:
            self._kernels[index_dtype] = _C._ReferenceKernel(mini_dlrm_source(index_dtype), KERNEL_NAME)
        return self._kernels[index_dtype]

    def validate(self, dense: torch.Tensor, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> None:
        """Raises ValueError unless the inputs are what the kernel reads: contiguous float32 [batch,
        13] dense features, and per table contiguous int64 or int32 indices and [batch] offsets."""
        if dense.dtype != torch.float32 or dense.dim() != 2 or dense.shape[1] != DENSE or not dense.is_contiguous():
            raise ValueError(
                f"dense must be contiguous float32 [batch, {DENSE}], got {dense.dtype} {list(dense.shape)}"
            )
        if len(indices) != TABLES or len(offsets) != TABLES:
            raise ValueError(f"expected {TABLES} index and offset tensors")
        index_dtype = indices[0].dtype
        for tensor in [*indices, *offsets]:
            if tensor.dtype != index_dtype or tensor.dim() != 1 or not tensor.is_contiguous():
                raise ValueError("indices and offsets must be contiguous 1-D tensors of one dtype (int64 or int32)")
            if tensor.device != dense.device:
                raise ValueError("every input must be on the parameters' device")
        if any(o.shape[0] != dense.shape[0] for o in offsets):
            raise ValueError("offsets must hold one start per sample")
        mini_dlrm_source(index_dtype)  # raises for other index dtypes

    def __call__(self, dense: torch.Tensor, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        batch = dense.shape[0]
        out = torch.empty((batch, 1), device=dense.device)
        if batch == 0:
            return out
        args: list[Any] = [dense]
        for k in range(TABLES):
            args += [indices[k], offsets[k], indices[k].shape[0]]
        for table, rows in self.tables:
            args += [table, rows]
        args += self.weights
        args += [out, batch]
        self.kernel(indices[0].dtype).launch((batch + self.block - 1) // self.block, self.block, 0, args)
        return out
