#include "runtime/cuda/cudnn_conv.h"

#include <algorithm>
#include <utility>

#include "common/checked.h"
#include "common/error.h"
#include "runtime/cuda/cudnn_backend.h"

namespace luminal::cuda {

std::string describe(const ConvolutionProblem& p) {
  return str_cat("convolution of ", dtype_name(p.dtype), " x ", int_list(p.x_sizes), " (strides ",
                 int_list(p.x_strides), ") by w ", int_list(p.w_sizes), " (strides ", int_list(p.w_strides), ") -> ",
                 dtype_name(p.dtype), " ", int_list(p.y_sizes), ", stride ", int_list(p.stride), ", padding ",
                 int_list(p.padding), ", dilation ", int_list(p.dilation), ", pointers aligned to ", p.alignment,
                 " bytes");
}

#if LUMINAL_HAVE_CUDNN

namespace {

using cudnn_backend::Descriptor;
using cudnn_backend::TensorSpec;

constexpr int64_t kX = 1, kW = 2, kY = 3;

// conv(x, w) -> y, all of one dtype, accumulated in float32 (float64 for float64). Appends the
// descriptors to keep to `keep`, the operation graph last.
void operation_graph(const ConvolutionProblem& p, cudnnHandle_t handle, std::vector<Descriptor>& keep) {
  const int64_t alignment = p.alignment;
  Descriptor x = cudnn_backend::tensor(TensorSpec{kX, p.dtype, p.x_sizes, p.x_strides, alignment});
  Descriptor w = cudnn_backend::tensor(TensorSpec{kW, p.dtype, p.w_sizes, p.w_strides, alignment});
  Descriptor y = cudnn_backend::tensor(TensorSpec{kY, p.dtype, p.y_sizes, p.y_strides, alignment});

  Descriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = p.dtype == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute, 1);
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode, 1);
  const int64_t spatial = static_cast<int64_t>(p.stride.size());
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial, 1);
  conv.set_ints(CUDNN_ATTR_CONVOLUTION_DILATIONS, p.dilation);
  conv.set_ints(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, p.stride);
  conv.set_ints(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, p.padding);
  conv.set_ints(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, p.padding);
  conv.finalize("cudnnBackendFinalize(convolution)");

  Descriptor op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
  if (p.dtype == DType::F64) {
    const double alpha = 1.0, beta = 0.0;
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_DOUBLE, &alpha, 1);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_DOUBLE, &beta, 1);
  } else {
    const float alpha = 1.0f, beta = 0.0f;
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &alpha, 1);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &beta, 1);
  }
  op.finalize("cudnnBackendFinalize(convolution forward)");
  Descriptor graph = cudnn_backend::operation_graph({&op}, handle);
  for (Descriptor* d : {&x, &w, &y, &conv, &op, &graph}) keep.push_back(std::move(*d));
}

}  // namespace

CudnnConvolution::CudnnConvolution(const ConvolutionProblem& problem, size_t max_candidates,
                                   std::optional<int64_t> only_engine)
    : CudnnCall(describe(problem), problem.alignment) {
  const size_t rank = problem.stride.size() + 2;
  LUMINAL_CHECK(problem.stride.size() >= 2 && problem.x_sizes.size() == rank && problem.w_sizes.size() == rank &&
                    problem.y_sizes.size() == rank && problem.x_strides.size() == rank &&
                    problem.w_strides.size() == rank && problem.y_strides.size() == rank,
                "internal error: malformed ", describe(problem));
  operation_graph(problem, plans_->slot->handle, plans_->keep);
  plans_->operand_uids = {kX, kW};
  plans_->out_uid = kY;
  plans_->add_candidates(cudnn_backend::Numerics{problem.dtype, problem.allow_tf32}, max_candidates, only_engine,
                         description());
  for (const Plans::Candidate& c : plans_->candidates) {
    workspace_bytes_ = std::max(workspace_bytes_, static_cast<size_t>(c.workspace));
  }
}

#else  // no cuDNN headers at build time: CudnnCall's constructor raises

CudnnConvolution::CudnnConvolution(const ConvolutionProblem& problem, size_t, std::optional<int64_t>)
    : CudnnCall(describe(problem), problem.alignment) {}

#endif

}  // namespace luminal::cuda
