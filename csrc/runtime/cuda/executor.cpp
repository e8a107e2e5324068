#include "runtime/cuda/executor.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "common/cache_files.h"
#include "common/checked.h"
#include "common/env.h"
#include "common/error.h"
#include "common/notices.h"
#include "ir/check_label.h"
#include "ir/simplify.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/nvrtc.h"

namespace luminal::runtime::gpu {

using codegen::Kernel;
using codegen::KernelParam;
using codegen::ParamKind;
using ir::Expr;
using ir::ExprOp;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;

namespace {

constexpr size_t kAlignment = 256;
constexpr size_t kMaxInstances = 16;

size_t align_up(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Element counts of evaluated shapes; every node's was checked when its shape was evaluated (plan).
int64_t product(const std::vector<int64_t>& sizes) { return element_count(sizes, "evaluated shape"); }

// The launch configuration of one generated kernel, as a CUDA graph kernel node (also what a
// direct launch needs). `args` must outlive the use of the result.
CUDA_KERNEL_NODE_PARAMS kernel_node(CUfunction function, const codegen::Kernel& kernel, unsigned grid, void** args) {
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = function;
  params.gridDimX = grid;
  params.gridDimY = static_cast<unsigned>(kernel.grid_y);
  params.gridDimZ = 1;
  params.blockDimX = static_cast<unsigned>(kernel.block_size);
  params.blockDimY = params.blockDimZ = 1;
  params.kernelParams = args;
  return params;
}

// Register: a row-kernel intermediate, never in memory.
// Copies the device error record to pinned host memory and clears it (the last node of a replay).
constexpr const char* kExportErrorsKernel = R"(
extern "C" __global__ void lm_export_errors(lm_i64* device_record, volatile lm_i64* host_record) {
  for (int i = 0; i < 4; ++i) { host_record[i] = device_record[i]; device_record[i] = 0; }
}
)";

enum class Placement { Input, Constant, Arena, Output, VirtualView, Register };

// ---- library-call staging: user inputs and graph outputs feeding a matmul are copied into the
// arena, and a matmul that is a graph output writes the arena and is copied out, so that captured
// library calls only ever touch memory whose address is fixed for the instance (an output's memory
// is the caller's, new on every call).
Node identity_copy(const Node& source, NodeId source_id, const std::string& why) {
  Node copy;
  copy.kind = NodeKind::Pointwise;
  copy.dtype = source.dtype;
  copy.shape = source.shape;
  copy.inputs = {source_id};
  std::vector<Expr> index;
  for (size_t d = 0; d < source.rank(); ++d) index.push_back(ir::loop_var(static_cast<int>(d)));
  copy.body = ir::load(0, source.dtype, std::move(index));
  copy.origin = why;
  return copy;
}

NodeId view_base(const ir::Graph& g, NodeId id) {
  if (const auto view = passes::as_affine_view(g, id)) return view->base;
  return id;
}

// A view that repeats rows or columns of its base (expand of a [1, k] parameter: stride 0 in a
// matrix dim) has no leading dimension cuBLASLt can take, whatever the base's strides.
bool broadcasts_a_matrix_dim(const ir::Graph& g, NodeId operand) {
  const auto view = passes::as_affine_view(g, operand);
  if (!view) return false;
  const auto& shape = g.node(operand).shape;
  for (size_t j = shape.size() >= 2 ? shape.size() - 2 : 0; j < shape.size(); ++j) {
    if (shape[j]->is_int_const(1)) continue;
    const bool repeated = std::all_of(view->coefficients.begin(), view->coefficients.end(),
                                      [&](const std::vector<Expr>& row) { return row[j]->is_int_const(0); });
    if (repeated) return true;
  }
  return false;
}

ir::Graph stage_library_operands(const ir::Graph& in, size_t& staged) {
  ir::Graph out;
  out.symbols = in.symbols;
  out.shape_assertions = in.shape_assertions;
  out.inputs.resize(in.inputs.size());
  std::vector<NodeId> remap(in.size(), -1);
  std::vector<bool> is_output(in.size(), false);
  for (const ir::GraphOutput& o : in.outputs) {
    if (o.kind == ir::GraphOutput::Kind::Tensor) is_output[o.node] = true;
  }
  std::vector<NodeId> output_copy(in.size(), -1);
  std::vector<bool> written_by_caller;  // per node of `out`: its memory is a graph output's
  for (const Node& node : in.nodes()) {
    Node copy = node;
    for (NodeId& input : copy.inputs) input = remap[input];
    if (node.kind == NodeKind::MatMul) {
      for (NodeId& operand : copy.inputs) {
        const NodeId base_id = view_base(out, operand);
        const Node& base = out.node(base_id);
        if ((base.kind == NodeKind::Input && base.role == ir::InputRole::User) || written_by_caller[base_id] ||
            broadcasts_a_matrix_dim(out, operand)) {
          const Node& source = out.node(operand);
          operand = out.add(identity_copy(source, operand, str_cat("stage matmul operand of ", node.origin)));
          written_by_caller.push_back(false);
          ++staged;
        }
      }
    }
    remap[node.id] = out.add(std::move(copy));
    // A matmul output is redirected to the arena below; any other output is the caller's memory.
    written_by_caller.push_back(is_output[node.id] && node.kind != NodeKind::MatMul);
    if (node.kind == NodeKind::Input) out.inputs[node.input_position] = remap[node.id];
    if (node.kind == NodeKind::MatMul && is_output[node.id]) {
      output_copy[node.id] = out.add(identity_copy(out.node(remap[node.id]), remap[node.id],
                                                   str_cat("copy out matmul output of ", node.origin)));
      written_by_caller.push_back(true);
      ++staged;
    }
  }
  out.outputs = in.outputs;
  for (ir::GraphOutput& o : out.outputs) {
    if (o.kind != ir::GraphOutput::Kind::Tensor) continue;
    o.node = output_copy[o.node] >= 0 ? output_copy[o.node] : remap[o.node];
  }
  out.verify();
  return out;
}

codegen::OperandInfo operand_info(const Node& producer) {
  codegen::OperandInfo info;
  info.dtype = producer.dtype;
  info.shape = producer.shape;
  switch (producer.kind) {
    case NodeKind::Input: info.layout = codegen::Layout::Strided; break;
    case NodeKind::Constant:
      info.layout = codegen::Layout::Fixed;
      info.fixed_strides = producer.constant->strides;
      break;
    default: info.layout = codegen::Layout::Contiguous; break;
  }
  return info;
}

std::string arch_of(int device) {
  const cuda::DriverApi& api = cuda::driver();
  CUdevice dev;
  LUMINAL_CU(api.cuDeviceGet(&dev, device));
  int major = 0, minor = 0;
  LUMINAL_CU(api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  LUMINAL_CU(api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  return str_cat("sm_", major, minor);
}

// Makes the device's primary context (the one torch uses) current on this thread.
CUcontext use_primary_context(int device) {
  const cuda::DriverApi& api = cuda::driver();
  LUMINAL_CU(api.cuInit(0));
  CUdevice dev;
  LUMINAL_CU(api.cuDeviceGet(&dev, device));
  CUcontext primary = nullptr;
  LUMINAL_CU(api.cuDevicePrimaryCtxRetain(&primary, dev));  // torch keeps it alive; so do we
  CUcontext current = nullptr;
  LUMINAL_CU(api.cuCtxGetCurrent(&current));
  if (current != primary) LUMINAL_CU(api.cuCtxSetCurrent(primary));
  return primary;
}

// LUMINAL_DUMP_KERNELS=<dir>: keeps every generated module (a debugging aid: a directory that
// cannot be written gives one notice, never a failed compile).
void dump_kernels(const std::string& source) {
  const char* value = std::getenv("LUMINAL_DUMP_KERNELS");
  if (!value || !*value) return;
  std::string problem;
  const std::string dir = resolve_user_directory(value, problem);
  std::error_code ec;
  if (problem.empty()) std::filesystem::create_directories(dir, ec);
  if (problem.empty() && ec) problem = str_cat("cannot create ", dir, ": ", ec.message());
  const std::filesystem::path file =
      std::filesystem::path(dir) / str_cat("module_", std::hex, fnv1a64(source), ".cu");
  if (problem.empty()) {
    std::ofstream out(file, std::ios::binary);
    out << source;
    out.close();
    if (!out) problem = str_cat("cannot write ", file.string());
  }
  if (!problem.empty()) {
    notify_once("dump", str_cat("dump-kernels:", value),
                str_cat("luminal: LUMINAL_DUMP_KERNELS='", value, "' is not usable (", problem,
                        "); generated CUDA modules are not dumped"));
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Plan
// ------------------------------------------------------------------------------------------------
struct Executor::Step {
  NodeId node = -1;
  bool is_matmul = false;
  int kernel = -1;       // index into kernels_
  int copy_kernel = -1;  // scatters: copies the base into the output first (skipped when they alias)
};

// The module and the constants, loaded on the first device that runs the graph.
struct Executor::DeviceState {
  int device = 0;
  CUcontext context = nullptr;  // the device's primary context (retained once)
  std::string arch;
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;  // per kernel
  CUfunction export_errors = nullptr;
  CUstream capture_stream = nullptr;
  std::vector<std::shared_ptr<void>> constants;  // per node id (Constant nodes only)

  ~DeviceState() {
    // Best effort: at interpreter exit the context may already be gone.
    try {
      const cuda::DriverApi& api = cuda::driver();
      if (capture_stream) api.cuStreamDestroy(capture_stream);
      if (module) api.cuModuleUnload(module);
    } catch (const Error&) {
    }
  }
};

void Executor::plan() {
  const ir::Graph& g = *graph_;
  const auto users = g.users();
  for (const Node& node : g.nodes()) {
    if (node.kind == NodeKind::MatMul) {
      steps_.push_back(Step{node.id, true, -1});
      continue;
    }
    if (node.kind == NodeKind::Scatter) {
      std::vector<codegen::OperandInfo> operands;
      for (NodeId input : node.inputs) operands.push_back(operand_info(g.node(input)));
      kernels_.push_back(codegen::generate_kernel(identity_copy(g.node(node.inputs[0]), node.inputs[0], node.origin),
                                                  {operands[0]}));
      kernels_.push_back(codegen::generate_kernel(node, operands));
      const int scatter = static_cast<int>(kernels_.size()) - 1;
      steps_.push_back(Step{node.id, false, scatter, scatter - 1});
      continue;
    }
    if (node.kind != NodeKind::Pointwise && node.kind != NodeKind::Reduce) continue;
    const bool only_matmul_users =
        node.kind == NodeKind::Pointwise && !users[node.id].empty() &&
        std::all_of(users[node.id].begin(), users[node.id].end(),
                    [&](NodeId u) { return g.node(u).kind == NodeKind::MatMul; });
    bool is_output = false;
    for (const ir::GraphOutput& o : g.outputs) is_output = is_output || (o.kind == ir::GraphOutput::Kind::Tensor && o.node == node.id);
    if (only_matmul_users && !is_output && passes::as_affine_view(g, node.id)) continue;  // read by strides
    std::vector<codegen::OperandInfo> operands;
    for (NodeId input : node.inputs) operands.push_back(operand_info(g.node(input)));
    kernels_.push_back(codegen::generate_kernel(node, operands));
    steps_.push_back(Step{node.id, false, static_cast<int>(kernels_.size()) - 1});
  }
  module_source_ = codegen::module_source(kernels_) + kExportErrorsKernel;
}

void Executor::plan_row_kernel() {
  const ir::Graph& g = *graph_;
  NodeId first_output = -1;
  for (const ir::GraphOutput& o : g.outputs) {
    if (o.kind == ir::GraphOutput::Kind::Tensor && first_output < 0) first_output = o.node;
  }
  LUMINAL_CHECK(first_output >= 0, "internal error: a row kernel without tensor outputs");
  kernels_.push_back(codegen::generate_row_kernel(g, rows_));
  // The step is named after an output: its size tells whether there is any row to compute.
  steps_.push_back(Step{first_output, false, 0});
}

Executor::Executor(std::shared_ptr<const ir::Graph> graph, ir::Expr rows) : rows_(std::move(rows)) {
  if (rows_) {
    graph_ = std::move(graph);
    plan_row_kernel();
    module_source_ = codegen::module_source(kernels_) + kExportErrorsKernel;
  } else {
    graph_ = std::make_shared<const ir::Graph>(stage_library_operands(*graph, staging_copies_));
    plan();
  }
  index_check_labels();
  const std::vector<int> uses = graph_->use_counts();
  for (NodeId input : graph_->inputs) input_read_.push_back(uses[input] > 0);
  stats_.kernels = kernels_.size();
  stats_.staging_copies = staging_copies_;
  stats_.megakernel = rows_ != nullptr;
}

Executor::~Executor() = default;

void Executor::index_check_labels() {
  std::vector<std::string> origin_of(kernels_.size(), rows_ ? "the row kernel" : "");
  for (const Step& step : steps_) {
    const std::string& origin = graph_->node(step.node).origin;
    if (step.kernel >= 0 && !rows_) origin_of[step.kernel] = origin;
    if (step.copy_kernel >= 0) origin_of[step.copy_kernel] = origin;
  }
  for (size_t k = 0; k < kernels_.size(); ++k) {
    check_base_.push_back(static_cast<int64_t>(check_labels_.size()));
    for (const std::string& label : kernels_[k].check_labels) check_labels_.push_back({label, origin_of[k]});
  }
}

// ------------------------------------------------------------------------------------------------
// Instances
// ------------------------------------------------------------------------------------------------
namespace {

struct Buffer {
  CUdeviceptr ptr = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

// A kernel parameter whose value comes from the caller (input/output pointers, input strides).
struct ExternalParam {
  enum class Kind { InputPointer, InputStride, OutputPointer };
  size_t field;  // index in the packed parameter struct
  Kind kind;
  int position;  // call input or output index
  int dim = -1;
};

uint64_t external_value(const ExternalParam& e, const std::vector<TensorView>& inputs,
                        const std::vector<TensorView>& outputs) {
  switch (e.kind) {
    case ExternalParam::Kind::InputPointer: return reinterpret_cast<uint64_t>(inputs[e.position].data);
    case ExternalParam::Kind::InputStride: return static_cast<uint64_t>(inputs[e.position].strides[e.dim]);
    case ExternalParam::Kind::OutputPointer: return reinterpret_cast<uint64_t>(outputs[e.position].data);
  }
  return 0;
}

// Page-locked host memory the GPU writes the error record into.
struct PinnedRecord {
  int64_t* values = nullptr;
  PinnedRecord() {
    void* p = nullptr;
    LUMINAL_CU(cuda::driver().cuMemAllocHost(&p, 4 * sizeof(int64_t)));
    values = static_cast<int64_t*>(p);
    std::fill(values, values + 4, 0);
  }
  ~PinnedRecord() {
    try {
      if (values) cuda::driver().cuMemFreeHost(values);
    } catch (const Error&) {
    }
  }
  PinnedRecord(const PinnedRecord&) = delete;
  PinnedRecord& operator=(const PinnedRecord&) = delete;
};

}  // namespace

struct Executor::Instance {
  std::shared_ptr<void> arena;
  void* workspace = nullptr;  // cuBLASLt's, inside the arena
  std::shared_ptr<void> error_record;  // device int64[4]
  PinnedRecord host_error;
  CUevent done = nullptr;
  bool launched = false;
  std::vector<Buffer> buffers;  // per node
  std::vector<std::unique_ptr<cuda::Matmul>> matmuls;

  struct Launch {
    size_t step = 0;
    int kernel = -1;
    unsigned grid = 1;
    std::vector<uint64_t> fields;
    std::vector<ExternalParam> externals;
    CUgraphNode node = nullptr;
    // A scatter's base copy: skipped (its graph node disabled) on calls whose output is the base
    // input's own memory. -1: always runs.
    int alias_output = -1, alias_input = -1;
    bool enabled = true;
    size_t copy_bytes = 0;
  };
  std::vector<Launch> launches;
  std::vector<std::pair<int, uint64_t>> parameter_pointers;  // (input, pointer) read by library calls
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  size_t bytes_per_call = 0;
  size_t graph_nodes = 0;

  ~Instance() {
    try {
      const cuda::DriverApi& api = cuda::driver();
      if (exec) api.cuGraphExecDestroy(exec);
      if (graph) api.cuGraphDestroy(graph);
      if (done) api.cuEventDestroy(done);
    } catch (const Error&) {
    }
  }
};

namespace {

// Liveness-based offsets for the arena: buffers whose lifetimes do not overlap share memory.
// The graph replays the steps in order on one stream, so reuse after the last reader is safe.
class ArenaPlanner {
 public:
  size_t place(size_t bytes, int begin, int end) {
    // Byte counts are at most 2**63 each (tensor_bytes), but their sum may not fit: checked.
    bytes = align_up(std::max<size_t>(bytes, 1));
    // First fit among the regions free during [begin, end].
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Block& b : blocks_) {
      if (b.begin <= end && begin <= b.end) busy.emplace_back(b.offset, b.offset + b.bytes);
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset <= lo && lo - offset >= bytes) break;  // (offset + bytes could wrap)
      offset = std::max(offset, hi);
    }
    const size_t end_offset = checked_add(offset, bytes, "the CUDA arena of intermediates");
    blocks_.push_back(Block{offset, bytes, begin, end});
    total_ = std::max(total_, end_offset);
    return offset;
  }
  size_t total() const { return total_; }

 private:
  struct Block {
    size_t offset, bytes;
    int begin, end;
  };
  std::vector<Block> blocks_;
  size_t total_ = 0;
};

// The node's bias/ReLU epilogue for cuBLASLt (the bias must be one contiguous vector).
cuda::MatmulEpilogue epilogue_of(const Node& node, const std::vector<Buffer>& buffers) {
  cuda::MatmulEpilogue epilogue;
  if (node.epilogue == ir::MatMulEpilogue::None) return epilogue;
  const Buffer& bias = buffers[node.inputs[2]];
  LUMINAL_CHECK(bias.sizes.size() == 1 && (bias.strides[0] == 1 || bias.sizes[0] <= 1), "the bias of ", node.origin,
                " has stride ", bias.strides.at(0), "; cuBLASLt needs a contiguous bias");
  // Before pointers are final (workspace sizing) any non-null address will do.
  epilogue.bias = bias.ptr ? reinterpret_cast<const void*>(bias.ptr) : reinterpret_cast<const void*>(kAlignment);
  epilogue.relu = node.epilogue == ir::MatMulEpilogue::BiasRelu;
  epilogue.gelu_tanh = node.epilogue == ir::MatMulEpilogue::BiasGeluTanh;
  return epilogue;
}

cuda::MatrixOperand matrix_of(const Buffer& b, size_t rank) {
  cuda::MatrixOperand m;
  m.data = reinterpret_cast<const void*>(b.ptr);
  m.batch_stride = rank == 3 ? b.strides[0] : 0;
  m.row_stride = b.strides[rank - 2];
  m.col_stride = b.strides[rank - 1];
  return m;
}

}  // namespace

namespace {

// An extent the host can evaluate: sizes and symbols only (no loop variables or loads).
bool is_size_expression(const Expr& e) {
  bool size_only = true;
  ir::visit(e, [&](const Expr& v) {
    if (v->op == ExprOp::LoopVar || v->op == ExprOp::ReduceVar || v->op == ExprOp::Load || v->op == ExprOp::Fold) {
      size_only = false;
    }
  });
  return size_only;
}

// The iterations of an element's folds: nested folds multiply, siblings (the pieces of a
// concatenation) take the largest. Ragged extents (of loop variables) are bounded elsewhere.
int64_t fold_iterations(const Expr& e, const SymbolValues& symbols, std::unordered_map<const void*, int64_t>& memo) {
  if (const auto known = memo.find(e.get()); known != memo.end()) return known->second;
  int64_t inner = 1;
  for (const Expr& arg : e->args) inner = std::max(inner, fold_iterations(arg, symbols, memo));
  if (e->op == ExprOp::Fold && is_size_expression(e->args[0])) {
    inner = checked_mul(std::max<int64_t>(evaluate(e->args[0], symbols), 1), inner, "fold iterations");
  }
  memo.emplace(e.get(), inner);
  return inner;
}

// The kernels compute their loop bounds on the device, where int64 products wrap silently: the
// host checks each node's iteration space (elements x reduction extents x inlined folds) first.
// Expanded inputs cost no memory, so only this catches an [n, n] product of huge n fused into a
// reduction (it returned a wrapped, wrong sum).
void check_iteration_space(const Node& node, const std::vector<int64_t>& sizes, const SymbolValues& symbols) {
  std::vector<int64_t> space = sizes;
  for (const Expr& extent : node.reduce_extents) {
    if (is_size_expression(extent)) space.push_back(evaluate(extent, symbols));
  }
  if (node.body) {
    std::unordered_map<const void*, int64_t> memo;
    space.push_back(fold_iterations(node.body, symbols, memo));
  }
  element_count(space, str_cat("the iterations of ", node.origin));
}

}  // namespace

std::unique_ptr<Executor::Instance> Executor::build_instance(const SymbolValues& symbols, const CallContext& context,
                                                             const std::vector<TensorView>& inputs) {
  const ir::Graph& g = *graph_;
  const cuda::DriverApi& api = cuda::driver();
  auto instance = std::make_unique<Instance>();
  Instance& in = *instance;
  in.buffers.resize(g.size());

  // Shapes, placements and lifetimes (in step order).
  std::vector<Placement> placement(g.size(), Placement::Arena);
  std::vector<int> output_of(g.size(), -1);
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    if (g.outputs[k].kind == ir::GraphOutput::Kind::Tensor) output_of[g.outputs[k].node] = static_cast<int>(k);
  }
  std::vector<int> step_of(g.size(), -1);
  for (size_t s = 0; s < steps_.size(); ++s) step_of[steps_[s].node] = static_cast<int>(s);
  std::vector<int> last_use(g.size(), -1);
  for (const Node& node : g.nodes()) {
    in.buffers[node.id].sizes = evaluate(node.shape, symbols);
    tensor_bytes(in.buffers[node.id].sizes, node.dtype, node.origin);  // before any size or byte arithmetic
    check_iteration_space(node, in.buffers[node.id].sizes, symbols);
    if (node.kind == NodeKind::Input) placement[node.id] = Placement::Input;
    if (node.kind == NodeKind::Constant) placement[node.id] = Placement::Constant;
    if (node.is_compute() && step_of[node.id] < 0) placement[node.id] = rows_ ? Placement::Register : Placement::VirtualView;
    if (output_of[node.id] >= 0) placement[node.id] = Placement::Output;
  }
  for (const Step& step : steps_) {
    const int s = step_of[step.node];
    for (NodeId input : g.node(step.node).inputs) {
      last_use[input] = std::max(last_use[input], s);
      if (placement[input] == Placement::VirtualView) {
        const NodeId base = view_base(g, input);
        last_use[base] = std::max(last_use[base], s);
      }
    }
  }

  // A scatter into an intermediate that nothing reads afterwards takes over the base's memory:
  // no copy, one buffer (a chain of scatters shares it). memory_of[n]: whose arena slot n uses.
  std::vector<NodeId> memory_of(g.size());
  std::iota(memory_of.begin(), memory_of.end(), 0);
  for (const Step& step : steps_) {
    const Node& node = g.node(step.node);
    if (node.kind != NodeKind::Scatter || placement[node.id] != Placement::Arena) continue;
    const NodeId base = node.inputs[0];
    if (placement[base] != Placement::Arena || last_use[base] != step_of[node.id]) continue;
    memory_of[node.id] = memory_of[base];
    last_use[memory_of[base]] = std::max({last_use[memory_of[base]], last_use[node.id], step_of[node.id]});
  }

  // Arena: intermediates by liveness, then the library workspace (live throughout).
  ArenaPlanner arena;
  std::vector<size_t> offset(g.size(), 0);
  for (const Step& step : steps_) {
    const Node& node = g.node(step.node);
    if (placement[node.id] != Placement::Arena || memory_of[node.id] != node.id) continue;
    const size_t bytes = tensor_bytes(in.buffers[node.id].sizes, node.dtype, node.origin);
    offset[node.id] = arena.place(bytes, step_of[node.id], std::max(last_use[node.id], step_of[node.id]));
  }

  // Buffers the steps read and write.
  for (const Node& node : g.nodes()) {
    Buffer& b = in.buffers[node.id];
    switch (placement[node.id]) {
      case Placement::Input: {
        const TensorView& view = inputs.at(node.input_position);
        b.ptr = reinterpret_cast<CUdeviceptr>(view.data);
        b.strides = view.strides;
        break;
      }
      case Placement::Constant:
        b.ptr = reinterpret_cast<CUdeviceptr>(device_->constants[node.id].get()) +
                node.constant->storage_offset * dtype_size(node.dtype);
        b.strides = node.constant->strides;
        break;
      case Placement::Arena:
      case Placement::Output: b.strides = contiguous_strides(b.sizes); break;
      case Placement::VirtualView:
      case Placement::Register: break;
    }
  }
  // Virtual views: strides derived from their base (arena bases are resolved after allocation).
  auto resolve_view = [&](NodeId id, CUdeviceptr arena_base) {
    const auto view = passes::as_affine_view(g, id);
    const Buffer& base = in.buffers[view->base];
    const CUdeviceptr base_ptr =
        placement[view->base] == Placement::Arena ? arena_base + offset[view->base] : base.ptr;
    Buffer& b = in.buffers[id];
    b.strides.assign(g.node(id).rank(), 0);
    int64_t elements = 0;
    for (size_t d = 0; d < base.strides.size(); ++d) {
      elements += evaluate(view->offset[d], symbols) * base.strides[d];
      for (size_t j = 0; j < b.strides.size(); ++j) {
        b.strides[j] += evaluate(view->coefficients[d][j], symbols) * base.strides[d];
      }
    }
    b.ptr = base_ptr + elements * static_cast<int64_t>(dtype_size(g.node(id).dtype));
  };

  // Library plans (need operand strides, which are known now).
  size_t workspace = 0;
  std::vector<int> matmul_of_step(steps_.size(), -1);
  std::vector<std::pair<NodeId, NodeId>> matmul_operands;
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (!steps_[s].is_matmul) continue;
    const Node& node = g.node(steps_[s].node);
    for (NodeId operand : node.inputs) {
      if (placement[operand] == Placement::VirtualView) resolve_view(operand, 0);  // strides only, for now
    }
    const size_t rank = node.rank();
    const std::vector<int64_t>& out = in.buffers[node.id].sizes;
    cuda::MatmulShape shape;
    shape.dtype = node.dtype;
    shape.batch = rank == 3 ? out[0] : 1;
    shape.m = out[rank - 2];
    shape.n = out[rank - 1];
    shape.k = in.buffers[node.inputs[0]].sizes[rank - 1];
    shape.allow_tf32 = context.allow_tf32;
    for (int side = 0; side < 2; ++side) {
      const NodeId operand = node.inputs[side];
      const cuda::MatrixOperand m = matrix_of(in.buffers[operand], rank);
      const int64_t rows = side == 0 ? shape.m : shape.k, cols = side == 0 ? shape.k : shape.n;
      LUMINAL_CHECK(cuda::blas_compatible(m, rows, cols), "matmul operand of ", node.origin, " (",
                    ir::node_signature(g.node(operand)), ") has strides [", m.batch_stride, ", ", m.row_stride, ", ",
                    m.col_stride, "] that cuBLASLt cannot read; make the weight contiguous");
    }
    matmul_of_step[s] = static_cast<int>(in.matmuls.size());
    in.matmuls.push_back(nullptr);  // created below, once pointers are final
    matmul_operands.emplace_back(node.inputs[0], node.inputs[1]);
  }
  // cuBLASLt's workspace need depends on the problem, not the pointers: plan with null data.
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (matmul_of_step[s] < 0) continue;
    const Node& node = g.node(steps_[s].node);
    const size_t rank = node.rank();
    const std::vector<int64_t>& out = in.buffers[node.id].sizes;
    cuda::MatmulShape shape{node.dtype, rank == 3 ? out[0] : 1, out[rank - 2], out[rank - 1],
                            in.buffers[node.inputs[0]].sizes[rank - 1], context.allow_tf32};
    workspace = std::max(workspace, cuda::Matmul(shape, matrix_of(in.buffers[node.inputs[0]], rank),
                                                 matrix_of(in.buffers[node.inputs[1]], rank), epilogue_of(node, in.buffers))
                                        .workspace_bytes());
  }
  const size_t workspace_offset = arena.total();
  const size_t arena_bytes = checked_add(workspace_offset, align_up(workspace), "the CUDA arena");
  in.arena = context.allocator->allocate(std::max<size_t>(arena_bytes, kAlignment), context.device);
  const CUdeviceptr arena_base = reinterpret_cast<CUdeviceptr>(in.arena.get());
  for (const Node& node : g.nodes()) {
    if (placement[node.id] == Placement::Arena) in.buffers[node.id].ptr = arena_base + offset[memory_of[node.id]];
  }
  for (const Node& node : g.nodes()) {
    if (placement[node.id] == Placement::VirtualView) resolve_view(node.id, arena_base);
  }
  void* const workspace_ptr = reinterpret_cast<void*>(arena_base + workspace_offset);
  in.workspace = workspace_ptr;

  in.error_record = context.allocator->allocate(4 * sizeof(int64_t), context.device);
  const CUstream stream = static_cast<CUstream>(context.stream);
  LUMINAL_CU(api.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(in.error_record.get()), 0, 4 * sizeof(int64_t), stream));
  LUMINAL_CU(api.cuEventCreate(&in.done, CU_EVENT_DISABLE_TIMING));

  // Kernel parameters: one launch per kernel of a step (a scatter's base copy, then the scatter).
  const auto add_launch = [&](size_t s, int kernel_index) {
    const Step& step = steps_[s];
    const Node& node = g.node(step.node);
    const Kernel& kernel = kernels_[kernel_index];
    Instance::Launch launch;
    launch.step = s;
    launch.kernel = kernel_index;
    for (const KernelParam& p : kernel.params) {
      const size_t field = launch.fields.size();
      uint64_t value = 0;
      switch (p.kind) {
        case ParamKind::Output:
          if (placement[node.id] == Placement::Output) {
            launch.externals.push_back({field, ExternalParam::Kind::OutputPointer, output_of[node.id]});
          } else {
            value = in.buffers[node.id].ptr;
          }
          break;
        case ParamKind::Input: {
          const NodeId input = node.inputs[p.slot];
          if (placement[input] == Placement::Input) {
            launch.externals.push_back({field, ExternalParam::Kind::InputPointer, g.node(input).input_position});
          } else if (placement[input] == Placement::Output) {
            // Another output this kernel reads: the caller's tensor.
            launch.externals.push_back({field, ExternalParam::Kind::OutputPointer, output_of[input]});
          } else {
            value = in.buffers[input].ptr;
          }
          break;
        }
        case ParamKind::ErrorFlag: value = reinterpret_cast<uint64_t>(in.error_record.get()); break;
        case ParamKind::CheckBase: value = static_cast<uint64_t>(check_base_.at(kernel_index)); break;
        case ParamKind::Symbol: value = static_cast<uint64_t>(symbols.at(p.symbol)); break;
        case ParamKind::InputStride: {
          const NodeId input = node.inputs[p.slot];
          launch.externals.push_back(
              {field, ExternalParam::Kind::InputStride, g.node(input).input_position, p.dim});
          break;
        }
        case ParamKind::NodePointer:
          if (placement[p.slot] == Placement::Input) {
            launch.externals.push_back({field, ExternalParam::Kind::InputPointer, g.node(p.slot).input_position});
          } else if (placement[p.slot] == Placement::Output) {
            launch.externals.push_back({field, ExternalParam::Kind::OutputPointer, output_of[p.slot]});
          } else {
            LUMINAL_CHECK(placement[p.slot] == Placement::Constant, "internal error: row kernel reads node %", p.slot);
            value = in.buffers[p.slot].ptr;
          }
          break;
        case ParamKind::NodeStride:
          launch.externals.push_back(
              {field, ExternalParam::Kind::InputStride, g.node(p.slot).input_position, p.dim});
          break;
      }
      launch.fields.push_back(value);
    }
    const int64_t work = evaluate(kernel.outputs, symbols) * kernel.threads_per_output;
    if (work == 0 || product(in.buffers[node.id].sizes) == 0) return;  // nothing to compute
    if (kernel_index == step.copy_kernel) {
      const NodeId base = node.inputs[0];
      launch.copy_bytes = static_cast<size_t>(product(in.buffers[node.id].sizes)) * dtype_size(node.dtype);
      if (placement[node.id] == Placement::Output && placement[base] == Placement::Input) {
        launch.alias_output = output_of[node.id];
        launch.alias_input = g.node(base).input_position;
      }
    }
    const int64_t block = kernel.block_size;
    const int64_t blocks = (work + block - 1) / block;
    // Node kernels loop over their elements; the row kernel has one thread per row.
    LUMINAL_CHECK(!rows_ || blocks <= 0x7fffffff, "batch of ", work, " rows is too large for one row-kernel launch");
    launch.grid = static_cast<unsigned>(rows_ ? blocks : std::min<int64_t>(blocks, 65535 * 8));
    if (rows_) {
      for (const Node& n : g.nodes()) {
        if (placement[n.id] == Placement::Register) continue;
        in.bytes_per_call += static_cast<size_t>(product(in.buffers[n.id].sizes)) * dtype_size(n.dtype);
      }
    } else {
      in.bytes_per_call += static_cast<size_t>(product(in.buffers[node.id].sizes)) * dtype_size(node.dtype);
      for (NodeId input : node.inputs) {
        in.bytes_per_call += static_cast<size_t>(product(in.buffers[input].sizes)) * dtype_size(g.node(input).dtype);
      }
    }
    in.launches.push_back(std::move(launch));
  };
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    if (step.is_matmul) continue;
    // A scatter that took over its base's memory needs no copy of it.
    if (step.copy_kernel >= 0 && memory_of[step.node] == step.node) add_launch(s, step.copy_kernel);
    add_launch(s, step.kernel);
  }

  // cuBLASLt plans with final pointers; parameter inputs they read must keep their address.
  {
    size_t m = 0;
    for (size_t s = 0; s < steps_.size(); ++s) {
      if (matmul_of_step[s] < 0) continue;
      const Node& node = g.node(steps_[s].node);
      const size_t rank = node.rank();
      const std::vector<int64_t>& out = in.buffers[node.id].sizes;
      cuda::MatmulShape shape{node.dtype, rank == 3 ? out[0] : 1, out[rank - 2], out[rank - 1],
                              in.buffers[node.inputs[0]].sizes[rank - 1], context.allow_tf32};
      in.matmuls[m] = std::make_unique<cuda::Matmul>(shape, matrix_of(in.buffers[node.inputs[0]], rank),
                                                     matrix_of(in.buffers[node.inputs[1]], rank),
                                                     epilogue_of(node, in.buffers));
      // cuBLASLt's heuristic ranks candidates by a model; timing them on this device picks better
      // kernels for the small and skinny shapes these graphs have (done once per instance).
      if (product(out) > 0) {
        stats_.host_syncs += in.matmuls[m]->select_fastest(reinterpret_cast<void*>(in.buffers[node.id].ptr),
                                                           workspace_ptr, static_cast<CUstream>(context.stream));
      }
      ++m;
      for (NodeId operand : node.inputs) {
        const NodeId base = view_base(g, operand);
        if (placement[base] == Placement::Input) {
          in.parameter_pointers.emplace_back(g.node(base).input_position, in.buffers[base].ptr);
        }
      }
      in.bytes_per_call += static_cast<size_t>(product(out)) * dtype_size(node.dtype);
      for (NodeId operand : node.inputs) {
        in.bytes_per_call += static_cast<size_t>(product(in.buffers[operand].sizes)) * dtype_size(node.dtype);
      }
    }
  }

  // The CUDA graph: steps in order (a chain), then the error export.
  LUMINAL_CU(api.cuGraphCreate(&in.graph, 0));
  CUgraphNode previous = nullptr;
  auto add_dependency = [&](CUgraphNode node) {
    previous = node;
    ++in.graph_nodes;
  };
  size_t launch_index = 0, matmul_index = 0;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    if (step.is_matmul) {
      const Node& node = g.node(step.node);
      if (product(in.buffers[node.id].sizes) == 0) {
        ++matmul_index;
        continue;
      }
      // Capture the library call into a child graph.
      CUgraph child = nullptr;
      LUMINAL_CU(api.cuStreamBeginCapture(device_->capture_stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
      try {
        in.matmuls[matmul_index]->run(reinterpret_cast<void*>(in.buffers[node.id].ptr), workspace_ptr,
                                      device_->capture_stream);
      } catch (...) {
        api.cuStreamEndCapture(device_->capture_stream, &child);
        if (child) api.cuGraphDestroy(child);
        throw;
      }
      LUMINAL_CU(api.cuStreamEndCapture(device_->capture_stream, &child));
      CUgraphNode added = nullptr;
      const CUresult result = api.cuGraphAddChildGraphNode(&added, in.graph, previous ? &previous : nullptr,
                                                           previous ? 1 : 0, child);
      api.cuGraphDestroy(child);
      LUMINAL_CU(result);
      add_dependency(added);
      ++matmul_index;
      continue;
    }
    for (; launch_index < in.launches.size() && in.launches[launch_index].step == s; ++launch_index) {
      Instance::Launch& launch = in.launches[launch_index];
      void* args[] = {launch.fields.data()};
      const CUDA_KERNEL_NODE_PARAMS params =
          kernel_node(device_->functions[launch.kernel], kernels_[launch.kernel], launch.grid, args);
      LUMINAL_CU(api.cuGraphAddKernelNode(&launch.node, in.graph, previous ? &previous : nullptr, previous ? 1 : 0,
                                          &params));
      add_dependency(launch.node);
    }
  }
  {
    CUDA_KERNEL_NODE_PARAMS params{};
    params.func = device_->export_errors;
    params.gridDimX = params.gridDimY = params.gridDimZ = 1;
    params.blockDimX = params.blockDimY = params.blockDimZ = 1;
    void* device_record = in.error_record.get();
    void* host_record = in.host_error.values;
    void* args[] = {&device_record, &host_record};
    params.kernelParams = args;
    CUgraphNode node = nullptr;
    LUMINAL_CU(api.cuGraphAddKernelNode(&node, in.graph, previous ? &previous : nullptr, previous ? 1 : 0, &params));
    add_dependency(node);
  }
  LUMINAL_CU(api.cuGraphInstantiateWithFlags(&in.exec, in.graph, 0));
  return instance;
}

Executor::Instance& Executor::instance_for(const SymbolValues& symbols, const CallContext& context,
                                           const std::vector<TensorView>& inputs) {
  // Most calls repeat the previous one's key: search from the most recently used.
  for (auto it = instances_.rbegin(); it != instances_.rend(); ++it) {
    const InstanceKey& key = it->first;
    if (key.stream != context.stream || key.allow_tf32 != context.allow_tf32 || key.symbols != symbols) continue;
    // Library calls captured the parameters' addresses: a parameter that moved needs a rebuild.
    bool moved = false;
    for (const auto& [position, pointer] : it->second->parameter_pointers) {
      moved = moved || reinterpret_cast<uint64_t>(inputs[position].data) != pointer;
    }
    const auto position = std::prev(it.base());
    if (moved) {
      raise_pending_errors(*position->second, /*wait=*/true);
      instances_.erase(position);
      break;
    }
    if (position + 1 != instances_.end()) std::rotate(position, position + 1, instances_.end());
    return *instances_.back().second;
  }
  if (instances_.size() >= kMaxInstances) {
    raise_pending_errors(*instances_.front().second, /*wait=*/true);
    instances_.erase(instances_.begin());
  }
  auto built = build_instance(symbols, context, inputs);
  ++stats_.instances;
  ++stats_.graph_builds;
  instances_.emplace_back(InstanceKey{context.stream, context.allow_tf32, symbols}, std::move(built));
  return *instances_.back().second;
}

void Executor::make_context_current(int device) {
  if (!device_ || device_->device != device) {
    use_primary_context(device);  // first call, or a wrong device that run() reports
    return;
  }
  const cuda::DriverApi& api = cuda::driver();
  CUcontext current = nullptr;
  LUMINAL_CU(api.cuCtxGetCurrent(&current));
  if (current != device_->context) LUMINAL_CU(api.cuCtxSetCurrent(device_->context));
}

void Executor::raise_pending_errors(Instance& instance, bool wait) {
  if (!instance.launched) return;
  const cuda::DriverApi& api = cuda::driver();
  if (wait) {
    ++stats_.host_syncs;
    LUMINAL_CU(api.cuEventSynchronize(instance.done));
  } else {
    const CUresult status = api.cuEventQuery(instance.done);
    if (status == CUDA_ERROR_NOT_READY) return;
    LUMINAL_CU(status);
  }
  volatile int64_t* record = instance.host_error.values;
  const int64_t code = record[0];
  if (code == 0) return;
  const int64_t value = record[1], bound = record[2], check = record[3];
  for (int i = 0; i < 4; ++i) record[i] = 0;
  if (code == static_cast<int64_t>(codegen::DeviceError::IndexOutOfBounds)) {
    const bool labelled = check >= 0 && check < static_cast<int64_t>(check_labels_.size());
    const std::string message =
        labelled ? ir::check_failure_message(check_labels_[check].label, value, bound, check_labels_[check].origin)
                 : str_cat("index ", value, " is out of bounds for a dimension of size ", bound);
    fail(message, " (detected on the GPU during an earlier call of this compiled graph; set LUMINAL_SYNC_CHECK=1 to "
         "raise in the failing call)");
  }
  fail("integer division by zero (detected on the GPU during an earlier call of this compiled graph)");
}

void Executor::run(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                   const SymbolValues& symbols, const CallContext& context) {
  std::lock_guard<std::mutex> lock(mutex_);
  LUMINAL_CHECK(context.allocator != nullptr, "internal error: no device allocator");
  make_context_current(context.device);
  const cuda::DriverApi& api = cuda::driver();
  if (!device_) {
    auto state = std::make_unique<DeviceState>();
    state->device = context.device;
    state->context = use_primary_context(context.device);
    state->arch = arch_of(context.device);
    dump_kernels(module_source_);
    const std::string cubin = cuda::compile_to_cubin(module_source_, state->arch);
    LUMINAL_CU(api.cuModuleLoadData(&state->module, cubin.data()));
    for (const Kernel& kernel : kernels_) {
      CUfunction f = nullptr;
      LUMINAL_CU(api.cuModuleGetFunction(&f, state->module, kernel.name.c_str()));
      state->functions.push_back(f);
    }
    LUMINAL_CU(api.cuModuleGetFunction(&state->export_errors, state->module, "lm_export_errors"));
    LUMINAL_CU(api.cuStreamCreate(&state->capture_stream, CU_STREAM_NON_BLOCKING));
    // Constants are uploaded once (synchronously, at first use).
    // Views of one storage (aliased weights) share one upload.
    state->constants.resize(graph_->size());
    std::map<const std::string*, std::shared_ptr<void>> uploaded;
    for (const Node& node : graph_->nodes()) {
      if (node.kind != NodeKind::Constant) continue;
      const std::string& bytes = *node.constant->bytes;
      std::shared_ptr<void>& memory = uploaded[&bytes];
      if (!memory) {
        memory = context.allocator->allocate(std::max<size_t>(bytes.size(), 1), context.device);
        if (!bytes.empty()) {
          LUMINAL_CU(api.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(memory.get()), bytes.data(), bytes.size()));
        }
      }
      state->constants[node.id] = memory;
    }
    device_ = std::move(state);
  }
  LUMINAL_CHECK(device_->device == context.device, "this compiled graph runs on cuda:", device_->device,
                "; it was called with tensors on cuda:", context.device);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!input_read_.at(k)) continue;
    LUMINAL_CHECK(inputs[k].device.type == DeviceType::CUDA && inputs[k].device.index == context.device,
                  "input #", k, " must be on cuda:", context.device, ", got ", describe(inputs[k]));
  }

  Instance& instance = instance_for(symbols, context, inputs);
  raise_pending_errors(instance, /*wait=*/false);

  // Point the kernels at this call's tensors (only nodes whose values changed are updated).
  for (Instance::Launch& launch : instance.launches) {
    bool changed = false;
    for (const ExternalParam& e : launch.externals) {
      const uint64_t value = external_value(e, inputs, outputs);
      if (launch.fields[e.field] != value) {
        launch.fields[e.field] = value;
        changed = true;
      }
    }
    if (launch.alias_output >= 0) {
      const bool enabled = outputs[launch.alias_output].data != inputs[launch.alias_input].data;
      if (enabled != launch.enabled && launch.node) {
        LUMINAL_CU(api.cuGraphNodeSetEnabled(instance.exec, launch.node, enabled ? 1 : 0));
        launch.enabled = enabled;
      }
    }
    if (!changed || !launch.node) continue;
    void* args[] = {launch.fields.data()};
    const CUDA_KERNEL_NODE_PARAMS params =
        kernel_node(device_->functions[launch.kernel], kernels_[launch.kernel], launch.grid, args);
    LUMINAL_CU(api.cuGraphExecKernelNodeSetParams(instance.exec, launch.node, &params));
    ++stats_.pointer_updates;
  }
  stats_.scatter_copy_bytes = 0;
  for (const Instance::Launch& launch : instance.launches) stats_.scatter_copy_bytes += launch.enabled ? launch.copy_bytes : 0;
  const CUstream stream = static_cast<CUstream>(context.stream);
  if (env_flag("LUMINAL_PROFILE")) {
    run_steps_one_by_one(instance, stream);
    return;
  }
  LUMINAL_CU(api.cuGraphLaunch(instance.exec, stream));
  LUMINAL_CU(api.cuEventRecord(instance.done, stream));
  instance.launched = true;
  ++stats_.calls;
  stats_.library_calls = instance.matmuls.size();
  stats_.graph_nodes = instance.graph_nodes;
  stats_.bytes_per_call = instance.bytes_per_call;
  if (env_flag("LUMINAL_SYNC_CHECK")) raise_pending_errors(instance, /*wait=*/true);
}

// LUMINAL_PROFILE=1: every step is launched on its own between its own pair of events and the times
// printed after one synchronization at the end: slow, for finding slow or failing kernels. The times
// are GPU times only when the host runs ahead of the GPU (benchmarks/profile_steps.py queues a sleep
// kernel first); otherwise a step's time also holds the host's launch latency.
void Executor::run_steps_one_by_one(Instance& instance, void* raw_stream) {
  const CUstream stream = static_cast<CUstream>(raw_stream);
  const cuda::DriverApi& api = cuda::driver();
  struct Timed {
    int node;
    std::string what;
    CUevent start = nullptr, end = nullptr;
  };
  std::vector<Timed> timed;
  timed.reserve(steps_.size());
  const auto destroy_events = [&] {
    for (const Timed& t : timed) {
      if (t.start) api.cuEventDestroy(t.start);
      if (t.end) api.cuEventDestroy(t.end);
    }
  };
  try {
    size_t launch_index = 0, matmul_index = 0;
    for (size_t s = 0; s < steps_.size(); ++s) {
      const Step& step = steps_[s];
      const Node& node = graph_->node(step.node);
      if (step.is_matmul && product(instance.buffers[node.id].sizes) == 0) {
        ++matmul_index;
        continue;
      }
      const auto timed_step = [&](const std::string& what, const auto& launch_it) {
        Timed& t = timed.emplace_back(Timed{node.id, what});
        LUMINAL_CU(api.cuEventCreate(&t.start, CU_EVENT_DEFAULT));
        LUMINAL_CU(api.cuEventCreate(&t.end, CU_EVENT_DEFAULT));
        LUMINAL_CU(api.cuEventRecord(t.start, stream));
        launch_it();
        LUMINAL_CU(api.cuEventRecord(t.end, stream));
      };
      if (step.is_matmul) {
        timed_step("cublasLt", [&] {
          instance.matmuls[matmul_index++]->run(reinterpret_cast<void*>(instance.buffers[node.id].ptr),
                                                instance.workspace, stream);
        });
        continue;
      }
      for (; launch_index < instance.launches.size() && instance.launches[launch_index].step == s; ++launch_index) {
        Instance::Launch& launch = instance.launches[launch_index];
        if (!launch.enabled) continue;
        timed_step(kernels_[launch.kernel].name, [&] {
          void* args[] = {launch.fields.data()};
          const CUDA_KERNEL_NODE_PARAMS p =
              kernel_node(device_->functions[launch.kernel], kernels_[launch.kernel], launch.grid, args);
          LUMINAL_CU(api.cuLaunchKernel(p.func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                                        p.blockDimZ, 0, stream, p.kernelParams, nullptr));
        });
      }
    }
    ++stats_.host_syncs;
    if (!timed.empty()) LUMINAL_CU(api.cuEventSynchronize(timed.back().end));
    float total = 0;
    for (const Timed& t : timed) {
      float ms = 0;
      LUMINAL_CU(api.cuEventElapsedTime(&ms, t.start, t.end));
      total += ms;
      std::fprintf(stderr, "[luminal cuda] %%%d %-24s %9.1f us  %s\n", t.node, t.what.c_str(), ms * 1000.0f,
                   graph_->node(t.node).origin.c_str());
    }
    std::fprintf(stderr, "[luminal cuda] total %.1f us over %zu steps\n", total * 1000.0f, timed.size());
  } catch (...) {
    destroy_events();
    throw;
  }
  destroy_events();
  raise_pending_errors(instance, /*wait=*/false);
}

Stats Executor::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string check_codegen(const ir::Graph& graph, const std::string& arch, ir::Expr rows) {
  Executor executor(std::make_shared<const ir::Graph>(graph), std::move(rows));
  dump_kernels(executor.module_source());
  cuda::compile_to_cubin(executor.module_source(), arch);
  return executor.module_source();
}

}  // namespace luminal::runtime::gpu
