#include "runtime/cuda/cudnn_attention.h"

#include <algorithm>
#include <utility>

#include "common/checked.h"
#include "common/error.h"
#include "runtime/cuda/cudnn_backend.h"

namespace luminal::cuda {

std::string describe(const AttentionProblem& p) {
  return str_cat("attention of ", dtype_name(p.dtype), " q ", int_list(p.q_sizes), " (strides ",
                 int_list(p.q_strides), "), k ", int_list(p.k_sizes), " (strides ", int_list(p.k_strides), "), v ",
                 int_list(p.v_sizes), " (strides ", int_list(p.v_strides), ") -> o ", int_list(p.o_sizes),
                 " (strides ", int_list(p.o_strides), "), scale ", p.scale, ", pointers aligned to ", p.alignment,
                 " bytes");
}

std::optional<std::string> cudnn_attention_refusal(const AttentionProblem& p) {
  if (p.dtype != DType::BF16 && p.dtype != DType::F16) {
    return str_cat("cuDNN's fused attention takes no ", dtype_name(p.dtype));
  }
  for (const std::vector<int64_t>* v : {&p.q_sizes, &p.q_strides, &p.k_sizes, &p.k_strides, &p.v_sizes, &p.v_strides,
                                        &p.o_sizes, &p.o_strides}) {
    if (v->size() != 4) return std::string("operands are not of rank 4");
  }
  const int64_t batch = p.q_sizes[0], heads = p.q_sizes[1], kv_heads = p.k_sizes[1];
  const int64_t head = p.q_sizes[3], value_head = p.v_sizes[3];
  const bool shapes_match = p.k_sizes[0] == batch && p.v_sizes[0] == batch && p.v_sizes[1] == kv_heads &&
                            p.k_sizes[3] == head && p.v_sizes[2] == p.k_sizes[2] && p.o_sizes[0] == batch &&
                            p.o_sizes[1] == heads && p.o_sizes[2] == p.q_sizes[2] && p.o_sizes[3] == value_head;
  if (!shapes_match || kv_heads <= 0 || heads % kv_heads != 0) return std::string("shapes that do not pair up");
  for (const int64_t size : {batch, heads, p.q_sizes[2], p.k_sizes[2]}) {
    if (size <= 0) return std::string("an empty batch, head or sequence");
  }
  // cuDNN's flash kernels read and write rows of the head dimension with 16-byte vectors.
  if (head % 8 != 0 || value_head % 8 != 0 || head > 256 || value_head > 256) {
    return str_cat("head sizes ", head, " and ", value_head, " (cuDNN takes multiples of 8 up to 256)");
  }
  for (const std::vector<int64_t>* strides : {&p.q_strides, &p.k_strides, &p.v_strides, &p.o_strides}) {
    if ((*strides)[3] != 1) return std::string("a head dimension that is not contiguous");
  }
  if (p.alignment < 16) return str_cat("pointers aligned to ", p.alignment, " bytes, not 16");
  return std::nullopt;
}

#if LUMINAL_HAVE_CUDNN && defined(CUDNN_VERSION) && CUDNN_VERSION >= 91300

namespace {

using cudnn_backend::Descriptor;
using cudnn_backend::TensorSpec;

constexpr int64_t kQ = 1, kK = 2, kV = 3, kO = 4, kScale = 5;
constexpr int64_t kFirstVersion = 91300;  // cuDNN added the SDPA forward operation in 9.13

void operation_graph(const AttentionProblem& p, cudnnHandle_t handle, std::vector<Descriptor>& keep) {
  const int64_t alignment = p.alignment;
  Descriptor q = cudnn_backend::tensor(TensorSpec{kQ, p.dtype, p.q_sizes, p.q_strides, alignment});
  Descriptor k = cudnn_backend::tensor(TensorSpec{kK, p.dtype, p.k_sizes, p.k_strides, alignment});
  Descriptor v = cudnn_backend::tensor(TensorSpec{kV, p.dtype, p.v_sizes, p.v_strides, alignment});
  Descriptor o = cudnn_backend::tensor(TensorSpec{kO, p.dtype, p.o_sizes, p.o_strides, alignment});
  TensorSpec scale_spec{kScale, DType::F32, {1, 1, 1, 1}, {1, 1, 1, 1}, 4};
  scale_spec.by_value = true;
  Descriptor scale = cudnn_backend::tensor(scale_spec);

  Descriptor op(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, q);
  op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, k);
  op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, v);
  op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, o);
  op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale);
  op.finalize("cudnnBackendFinalize(SDPA forward)");
  Descriptor graph = cudnn_backend::operation_graph({&op}, handle);
  for (Descriptor* d : {&q, &k, &v, &o, &scale, &op, &graph}) keep.push_back(std::move(*d));
}

}  // namespace

CudnnAttention::CudnnAttention(const AttentionProblem& problem, size_t max_candidates,
                               std::optional<int64_t> only_engine)
    : CudnnCall(describe(problem), problem.alignment) {
  if (const std::optional<std::string> refusal = cudnn_attention_refusal(problem)) {
    fail("cuDNN's fused attention cannot take the ", description(), ": ", *refusal);
  }
  const int64_t version = static_cast<int64_t>(cudnn().cudnnGetVersion());
  LUMINAL_CHECK(version >= kFirstVersion, "cuDNN ", version, " has no fused attention operation (9.13 added it)");
  operation_graph(problem, plans_->slot->handle, plans_->keep);
  plans_->operand_uids = {kQ, kK, kV};
  plans_->out_uid = kO;
  plans_->host_floats = {{kScale, problem.scale}};
  plans_->add_candidates(cudnn_backend::Numerics{problem.dtype, false}, max_candidates, only_engine, description());
  for (const Plans::Candidate& c : plans_->candidates) {
    workspace_bytes_ = std::max(workspace_bytes_, static_cast<size_t>(c.workspace));
  }
}

#else  // no cuDNN headers at build time, or headers older than the operation

CudnnAttention::CudnnAttention(const AttentionProblem& problem, size_t, std::optional<int64_t>)
    : CudnnCall(describe(problem), problem.alignment) {
  fail("this build of luminal has no cuDNN fused attention (cuDNN 9.13 headers were not found at build time)");
}

#endif

}  // namespace luminal::cuda
