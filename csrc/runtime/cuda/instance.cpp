#include "runtime/cuda/instance.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include "common/checked.h"
#include "common/choice_cache.h"
#include "common/config.h"
#include "common/error.h"
#include "ir/simplify.h"
#include "passes/passes.h"
#include "runtime/cuda/cudnn_steps.h"
#include "runtime/cuda/gemv.h"
#include "runtime/cuda/launch_groups.h"
#include "runtime/cuda/swiglu.h"
#include "runtime/cuda/standalone_kernel.h"
#include "runtime/cuda/timing.h"

namespace luminal::runtime::gpu {

using codegen::Kernel;
using codegen::KernelParam;
using codegen::ParamKind;
using ir::Expr;
using ir::ExprOp;
using ir::Node;
using ir::NodeId;
using schedule::StepKind;

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

namespace {

// Element counts of evaluated shapes; every node's was checked when its shape was evaluated.
int64_t product(const std::vector<int64_t>& sizes) { return element_count(sizes, "evaluated shape"); }

// The node's bias/ReLU epilogue for cuBLASLt (the bias must be one contiguous vector).
cuda::MatmulEpilogue epilogue_of(const Node& node, const std::vector<Buffer>& buffers) {
  cuda::MatmulEpilogue epilogue;
  if (node.epilogue == ir::MatMulEpilogue::None) return epilogue;
  const Buffer& bias = buffers[node.inputs[2]];
  LUMINAL_CHECK(bias.sizes.size() == 1 && (bias.strides[0] == 1 || bias.sizes[0] <= 1), "the bias of ", node.origin,
                " has stride ", bias.strides.at(0), "; cuBLASLt needs a contiguous bias");
  // Before pointers are final (workspace sizing) any non-null address will do.
  epilogue.bias = bias.ptr ? reinterpret_cast<const void*>(bias.ptr) : reinterpret_cast<const void*>(kArenaAlignment);
  epilogue.relu = node.epilogue == ir::MatMulEpilogue::BiasRelu;
  epilogue.gelu_tanh = node.epilogue == ir::MatMulEpilogue::BiasGeluTanh;
  return epilogue;
}

int alignment_of(CUdeviceptr address) { return cuda::pointer_alignment(static_cast<uintptr_t>(address)); }

cuda::MatrixOperand matrix_of(const Buffer& b, size_t rank) {
  cuda::MatrixOperand m;
  m.data = reinterpret_cast<const void*>(b.ptr);
  m.batch_stride = rank == 3 ? b.strides[0] : 0;
  m.row_stride = b.strides[rank - 2];
  m.col_stride = b.strides[rank - 1];
  return m;
}

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

// Instantiates the program for one shape binding (and stream and TF32 setting): buffers, the
// arena, cuBLASLt plans, kernel parameters, then the recorded CUDA graph.
class InstanceBuilder {
 public:
  InstanceBuilder(const CudaProgram& program, const DeviceState& device, const SymbolValues& symbols,
                  const CallContext& context, const std::vector<TensorView>& inputs, size_t& host_syncs,
                  bool scatter_copies)
      : program_(program), device_(device), host_syncs_(host_syncs), g_(*program_.graph), buffers_(program_.buffers),
        symbols_(symbols), context_(context), inputs_(inputs), instance_(std::make_unique<Instance>()),
        in_(*instance_) {
    in_.scatter_copies_recorded = scatter_copies;
  }

  std::unique_ptr<Instance> build() {
    evaluate_shapes();
    arena_ = layout_arena(buffers_, node_bytes_, "the CUDA arena of intermediates");
    bind_buffers();
    const size_t matmul_workspace = plan_library_calls();
    const size_t workspace = std::max(matmul_workspace, plan_cudnn_steps());
    allocate_arena(workspace);
    prepare_error_record();
    for (size_t s = 0; s < steps().size(); ++s) {
      const schedule::Step& step = steps()[s];
      if (step.kind == StepKind::LibraryMatmul) continue;
      const StepKernels& kernels = program_.step_kernels[s];
      // A scatter that took over its base's memory needs no copy of it.
      if (kernels.copy_kernel >= 0 && buffers_.memory_of[step.node] == step.node) add_launch(s, kernels.copy_kernel);
      add_launch(s, kernels.kernel);
    }
    if (config()->group_kernels) in_.grouped_kernels = group_launches(program_, in_);
    choose_cudnn_steps();
    create_library_calls();
    record_graph();
    return std::move(instance_);
  }

 private:
  const std::vector<schedule::Step>& steps() const { return program_.plan.steps; }
  Placement placement(NodeId id) const { return buffers_.placement[id]; }
  int output_of(NodeId id) const { return buffers_.output_of[id]; }

  // Shapes, checked before any size or byte arithmetic.
  void evaluate_shapes() {
    in_.buffers.resize(g_.size());
    node_bytes_.assign(g_.size(), 0);
    for (const Node& node : g_.nodes()) {
      Buffer& b = in_.buffers[node.id];
      b.sizes = evaluate(node.shape, symbols_);
      node_bytes_[node.id] = tensor_bytes(b.sizes, node.dtype, node.origin);
      check_iteration_space(node, b.sizes, symbols_);
    }
  }

  // Buffers the steps read and write (arena pointers come once the arena is allocated).
  void bind_buffers() {
    for (const Node& node : g_.nodes()) {
      Buffer& b = in_.buffers[node.id];
      switch (placement(node.id)) {
        case Placement::Input: {
          const TensorView& view = inputs_.at(node.input_position);
          b.ptr = reinterpret_cast<CUdeviceptr>(view.data);
          b.strides = view.strides;
          break;
        }
        case Placement::Constant:
          b.ptr = reinterpret_cast<CUdeviceptr>(device_.constants[node.id].get()) +
                  node.constant->storage_offset * dtype_size(node.dtype);
          b.strides = node.constant->strides;
          break;
        case Placement::Arena:
        case Placement::Output: b.strides = contiguous_strides(b.sizes); break;
        case Placement::VirtualView:
        case Placement::Register: break;
      }
    }
  }

  // Virtual views: strides derived from their base (arena bases are resolved after allocation).
  void resolve_view(NodeId id, CUdeviceptr arena_base) {
    const auto view = passes::as_affine_view(g_, id);
    const Buffer& base = in_.buffers[view->base];
    passes::require_row_major_base(*view, base.sizes, base.strides);
    const CUdeviceptr base_ptr =
        placement(view->base) == Placement::Arena ? arena_base + arena_.offset[view->base] : base.ptr;
    Buffer& b = in_.buffers[id];
    b.strides.assign(g_.node(id).rank(), 0);
    int64_t elements = 0;
    for (size_t d = 0; d < base.strides.size(); ++d) {
      elements += evaluate(view->offset[d], symbols_) * base.strides[d];
      for (size_t j = 0; j < b.strides.size(); ++j) {
        b.strides[j] += evaluate(view->coefficients[d][j], symbols_) * base.strides[d];
      }
    }
    b.ptr = base_ptr + elements * static_cast<int64_t>(dtype_size(g_.node(id).dtype));
  }

  cuda::MatmulShape matmul_shape(const Node& node) const {
    const size_t rank = node.rank();
    const std::vector<int64_t>& out = in_.buffers[node.id].sizes;
    cuda::MatmulShape shape;
    shape.dtype = node.dtype;
    shape.batch = rank == 3 ? out[0] : 1;
    shape.m = out[rank - 2];
    shape.n = out[rank - 1];
    shape.k = in_.buffers[node.inputs[0]].sizes[rank - 1];
    shape.allow_tf32 = context_.allow_tf32;
    return shape;
  }

  std::unique_ptr<cuda::Matmul> make_matmul(const Node& node) const {
    const size_t rank = node.rank();
    cuda::MatmulShape shape = matmul_shape(node);
    cuda::MatrixOperand a = matrix_of(in_.buffers[node.inputs[0]], rank);
    cuda::fold_shared_batch(shape, a, matrix_of(in_.buffers[node.inputs[1]], rank));
    const bool with_generated = config()->gemv != GemvChoice::Library;
    return std::make_unique<cuda::Matmul>(shape, a, matrix_of(in_.buffers[node.inputs[1]], rank),
                                          epilogue_of(node, in_.buffers), with_generated);
  }

  // Library plans (need operand strides, which are known now). Returns the workspace they need.
  size_t plan_library_calls() {
    for (size_t s = 0; s < steps().size(); ++s) {
      if (steps()[s].kind != StepKind::LibraryMatmul) continue;
      const Node& node = g_.node(steps()[s].node);
      for (NodeId operand : node.inputs) {
        if (placement(operand) == Placement::VirtualView) resolve_view(operand, 0);  // strides only, for now
      }
      const size_t rank = node.rank();
      const cuda::MatmulShape shape = matmul_shape(node);
      for (int side = 0; side < 2; ++side) {
        const NodeId operand = node.inputs[side];
        const cuda::MatrixOperand m = matrix_of(in_.buffers[operand], rank);
        const int64_t rows = side == 0 ? shape.m : shape.k, cols = side == 0 ? shape.k : shape.n;
        LUMINAL_CHECK(cuda::blas_compatible(m, rows, cols), "matmul operand of ", node.origin, " (",
                      ir::node_signature(g_.node(operand)), ") has strides [", m.batch_stride, ", ", m.row_stride,
                      ", ", m.col_stride, "] that cuBLASLt cannot read; make the weight contiguous");
      }
      matmul_steps_.push_back(s);
      in_.matmuls.push_back(nullptr);  // created below, once pointers are final
    }
    // cuBLASLt's workspace need depends on the problem, not the pointers: plan with null data.
    size_t workspace = 0;
    for (size_t s : matmul_steps_) {
      workspace = std::max(workspace, make_matmul(g_.node(steps()[s].node))->workspace_bytes());
    }
    return workspace;
  }

  // The node in words for the record of choices: "%12 convolution (conv2d_3 (aten.convolution...))".
  std::string describe_step(const Node& node) const { return str_cat("%", node.id, " ", node.origin); }

  // cuDNN plans for the steps it may compute (convolutions unless LUMINAL_CONVOLUTION=generated;
  // fused attention without mask or causality, unless LUMINAL_ATTENTION=generated). Returns the
  // workspace they need. A step cuDNN declines runs its generated kernel.
  size_t plan_cudnn_steps() {
    const std::shared_ptr<const Config> settings = config();
    const CudnnStepContext context{g_, buffers_, in_.buffers, context_.allow_tf32_convolution, *settings};
    size_t workspace = 0;
    for (size_t s = 0; s < steps().size(); ++s) {
      const Node& node = g_.node(steps()[s].node);
      if (steps()[s].kind == StepKind::Kernel && node.kind == ir::NodeKind::Attention) {
        for (NodeId operand : node.inputs) {
          if (placement(operand) == Placement::VirtualView) resolve_view(operand, 0);  // strides and offsets
        }
      }
      std::string why_not;
      std::optional<CudnnCandidate> candidate;
      try {
        candidate = cudnn_candidate(context, steps()[s], why_not);
      } catch (const Error& error) {
        why_not = str_cat("cuDNN declined: ", first_line(error.what()));
      }
      if (!candidate) {
        if (!why_not.empty()) in_.choices.push_back(str_cat(describe_step(node), ": generated kernel (", why_not, ")"));
        continue;
      }
      try {
        if (std::optional<Instance::CudnnStep> call = planned_cudnn_step(s, node, *candidate, *settings)) {
          workspace = std::max(workspace, call->library->workspace_bytes());
          in_.cudnn_steps.push_back(std::move(*call));
        }
      } catch (const Error& error) {
        in_.choices.push_back(
            str_cat(describe_step(node), ": generated kernel (cuDNN declined: ", first_line(error.what()), ")"));
      }
    }
    return workspace;
  }

  static std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

  // The measured choice for step `s` stored in the cache, if any (rules only: none).
  CudnnLookup look_up_choice(size_t s, const CudnnCandidate& candidate, const Config& settings) const {
    if (!settings.search) return CudnnLookup{};
    const int k = program_.step_kernels[s].kernel;
    const std::string generated = k < 0 ? std::string("(none)") : generated_kernel_key(program_.kernels[k]);
    return look_up_cudnn_choice(
        cudnn_choice_key(candidate.problem, candidate.against_generated ? generated : "", device_key(device_.device)));
  }

  // The cuDNN plan step `s` needs: none when the cache says the generated kernel wins, the cached
  // engine alone when cuDNN does and still offers it, else cuDNN's candidate engines to time.
  std::optional<Instance::CudnnStep> planned_cudnn_step(size_t s, const Node& node, const CudnnCandidate& candidate,
                                                        const Config& settings) {
    CudnnLookup& cached = cudnn_lookups_[s] = look_up_choice(s, candidate, settings);
    against_generated_[s] = candidate.against_generated;
    if (cached.winner == CudnnLookup::Winner::Generated) {
      ++in_.choice_counts.hits;
      in_.choices.push_back(str_cat(describe_step(node), ": generated kernel (cached: ", cached.times, ")"));
      return std::nullopt;
    }
    if (cached.winner == CudnnLookup::Winner::Library) {
      try {
        return Instance::CudnnStep{s, candidate.make(1, cached.engine)};
      } catch (const Error& error) {
        forget_choice(cached.key, str_cat("names cuDNN engine ", cached.engine, ", which no longer takes the problem: ",
                                          error.what()));
        cached.winner = CudnnLookup::Winner::None;
      }
    }
    constexpr size_t kCandidates = 8;  // engines timed when searching; by rule: cuDNN's first
    return Instance::CudnnStep{s, candidate.make(settings.search ? kCandidates : 1, std::nullopt)};
  }

  // Milliseconds per run of step `s`'s generated kernels on the instance's buffers (a warm-up, then
  // 3 runs), or nullopt when a launch needs the caller's output pointers, unknown until a call.
  std::optional<float> time_generated(size_t s) {
    const cuda::DriverApi& api = cuda::driver();
    std::vector<std::pair<const Instance::Launch*, std::vector<uint64_t>>> runs;
    for (const Instance::Launch& launch : in_.launches) {
      if (launch.step != s) continue;
      std::vector<uint64_t> fields = launch.fields;
      for (const ExternalParam& e : launch.externals) {
        if (e.kind == ExternalParam::Kind::OutputPointer) return std::nullopt;
        fields[e.field] = external_value(e, inputs_, {});
      }
      runs.emplace_back(&launch, std::move(fields));
    }
    if (runs.empty()) return std::nullopt;
    const CUstream stream = static_cast<CUstream>(context_.stream);
    return cuda::time_on_stream(stream, 3, host_syncs_, [&] {
      for (auto& [launch, fields] : runs) {
        void* args[] = {fields.data()};
        const CUDA_KERNEL_NODE_PARAMS p =
            kernel_node(device_.functions[launch->kernel], program_.kernels[launch->kernel], launch->grid, args);
        LUMINAL_CU(api.cuLaunchKernel(p.func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                                      p.blockDimZ, 0, stream, p.kernelParams, nullptr));
      }
    });
  }

  // Keeps, for each step cuDNN took, cuDNN's fastest engine or the generated kernel, as measured
  // on this device with this call's shapes (LUMINAL_SEARCH=0: cuDNN's first engine by rule;
  // LUMINAL_CONVOLUTION=cudnn, LUMINAL_ATTENTION=cudnn: cuDNN's fastest). The timing runs write
  // only the step's own output and the workspace, before any call.
  void choose_cudnn_steps() {
    const std::shared_ptr<const Config> settings = config();
    std::vector<Instance::CudnnStep> planned = std::move(in_.cudnn_steps);
    in_.cudnn_steps.clear();
    for (Instance::CudnnStep& call : planned) choose_cudnn_step(call, *settings);
    // The timing runs read intermediates no step has written yet: a check they tripped is no error.
    LUMINAL_CU(cuda::driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(in_.error_record.get()), 0,
                                              4 * sizeof(int64_t), static_cast<CUstream>(context_.stream)));
  }

  // One step cuDNN took: keeps `call` in in_.cudnn_steps, or leaves the step to its generated
  // kernel. The choice text: "cuDNN (cuDNN engine 71 0.09 ms, generated kernel 14.3 ms)".
  void choose_cudnn_step(Instance::CudnnStep& call, const Config& settings) {
    const size_t step = call.step;
    const Node& node = g_.node(steps()[step].node);
    const CUstream stream = static_cast<CUstream>(context_.stream);
    if (product(in_.buffers[node.id].sizes) == 0) return;
    int alignment = alignment_of(in_.buffers[node.id].ptr);
    for (const void* operand : cudnn_operands(in_, node)) {
      alignment = std::min(alignment, alignment_of(reinterpret_cast<CUdeviceptr>(operand)));
    }
    const CudnnLookup& cached = cudnn_lookups_[step];
    if (cached.winner == CudnnLookup::Winner::Library) {
      reuse_cudnn_step(std::move(call), node, alignment, cached);
      return;
    }
    if (alignment < call.library->alignment()) {
      in_.choices.push_back(
          str_cat(describe_step(node), ": generated kernel (cuDNN's plans need more aligned operands)"));
      return;
    }
    std::string times;
    bool use_library = true;
    if (!settings.search) {
      times = str_cat(call.library->chosen_name(), ", by rule");
    } else {
      float library_ms = 0;
      try {
        library_ms =
            call.library->select_fastest(cudnn_operands(in_, node), reinterpret_cast<void*>(in_.buffers[node.id].ptr),
                                         in_.workspace, stream, host_syncs_);
      } catch (const Error& error) {  // every engine failed to run: the generated kernel does it
        in_.choices.push_back(
            str_cat(describe_step(node), ": generated kernel (cuDNN failed: ", first_line(error.what()), ")"));
        return;
      }
      times = str_cat(call.library->chosen_name(), " ", library_ms, " ms");
      if (against_generated_[step]) {
        if (const std::optional<float> generated_ms = time_generated(step)) {
          use_library = library_ms <= *generated_ms;
          times += str_cat(", generated kernel ", *generated_ms, " ms");
        }
      }
      ++in_.choice_counts.misses;  // measured: remembered for the next process
      store_cudnn_choice(cached.key, use_library, call.library->chosen_engine(), times);
    }
    const std::string choice = str_cat(use_library ? "cuDNN" : "generated kernel", " (", times, ")");
    if (use_library) {
      use_cudnn_step(std::move(call), node, choice);
    } else {
      in_.choices.push_back(str_cat(describe_step(node), ": ", choice));
    }
  }

  // A cached cuDNN winner (the one plan made for it): kept when the operands are as aligned as it
  // needs and it runs, else the generated kernel runs and the entry is forgotten.
  void reuse_cudnn_step(Instance::CudnnStep call, const Node& node, int alignment, const CudnnLookup& cached) {
    std::string failure;
    if (alignment < call.library->alignment()) {
      failure = str_cat("operands aligned to ", alignment, " bytes, not ", call.library->alignment());
    } else {
      try {
        run_cudnn_step(in_, call, node, static_cast<CUstream>(context_.stream));
      } catch (const Error& error) {
        failure = error.what();
      }
    }
    if (failure.empty()) {
      ++in_.choice_counts.hits;
      use_cudnn_step(std::move(call), node, str_cat("cuDNN (cached: ", cached.times, ")"));
      return;
    }
    forget_choice(cached.key, str_cat("names cuDNN engine ", cached.engine, ", which cannot run here: ", failure));
    in_.choices.push_back(str_cat(describe_step(node), ": generated kernel (the cached cuDNN engine ", cached.engine,
                                  " cannot run: ", failure, ")"));
  }

  // cuDNN computes `node` (step call.step): its generated kernels are dropped.
  void use_cudnn_step(Instance::CudnnStep call, const Node& node, const std::string& choice) {
    in_.choices.push_back(str_cat(describe_step(node), ": ", choice));
    const size_t step = call.step;
    in_.launches.erase(std::remove_if(in_.launches.begin(), in_.launches.end(),
                                      [&](const Instance::Launch& launch) { return launch.step == step; }),
                       in_.launches.end());
    for (const NodeId operand : node.inputs) {
      if (placement(operand) == Placement::Input) {
        in_.parameter_pointers.emplace_back(g_.node(operand).input_position, in_.buffers[operand].ptr);
      }
    }
    in_.cudnn_steps.push_back(std::move(call));
  }

  // Arena: intermediates by liveness, then the library workspace (live throughout).
  void allocate_arena(size_t workspace) {
    const size_t workspace_offset = arena_.total;
    const size_t arena_bytes =
        checked_add(workspace_offset, align_to_arena(workspace, "the CUDA arena"), "the CUDA arena");
    in_.arena = context_.allocator->allocate(std::max<size_t>(arena_bytes, kArenaAlignment), context_.device);
    const CUdeviceptr arena_base = reinterpret_cast<CUdeviceptr>(in_.arena.get());
    for (const Node& node : g_.nodes()) {
      if (placement(node.id) == Placement::Arena) in_.buffers[node.id].ptr = arena_base + arena_.offset[node.id];
    }
    for (const Node& node : g_.nodes()) {
      if (placement(node.id) == Placement::VirtualView) resolve_view(node.id, arena_base);
    }
    in_.workspace = reinterpret_cast<void*>(arena_base + workspace_offset);
  }

  void prepare_error_record() {
    const cuda::DriverApi& api = cuda::driver();
    in_.error_record = context_.allocator->allocate(4 * sizeof(int64_t), context_.device);
    const CUstream stream = static_cast<CUstream>(context_.stream);
    LUMINAL_CU(api.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(in_.error_record.get()), 0, 4 * sizeof(int64_t),
                                   stream));
    LUMINAL_CU(api.cuEventCreate(&in_.done, CU_EVENT_DISABLE_TIMING));
  }

  // A kernel parameter of `node`'s kernel: its value now, or where each call's value comes from.
  void bind_param(const KernelParam& p, const Node& node, int kernel_index, Instance::Launch& launch) {
    const size_t field = launch.fields.size();
    uint64_t value = 0;
    switch (p.kind) {
      case ParamKind::Output:
        if (placement(node.id) == Placement::Output) {
          launch.externals.push_back({field, ExternalParam::Kind::OutputPointer, output_of(node.id)});
        } else {
          value = in_.buffers[node.id].ptr;
        }
        break;
      case ParamKind::Input: {
        const NodeId input = node.inputs[p.slot];
        if (placement(input) == Placement::Input) {
          launch.externals.push_back({field, ExternalParam::Kind::InputPointer, g_.node(input).input_position});
        } else if (placement(input) == Placement::Output) {
          // Another output this kernel reads: the caller's tensor.
          launch.externals.push_back({field, ExternalParam::Kind::OutputPointer, output_of(input)});
        } else {
          value = in_.buffers[input].ptr;
        }
        break;
      }
      case ParamKind::ErrorFlag: value = reinterpret_cast<uint64_t>(in_.error_record.get()); break;
      case ParamKind::CheckBase: value = static_cast<uint64_t>(program_.check_base.at(kernel_index)); break;
      case ParamKind::Symbol: value = static_cast<uint64_t>(symbols_.at(p.symbol)); break;
      case ParamKind::InputStride: {
        const NodeId input = node.inputs[p.slot];
        if (placement(input) == Placement::Input) {
          launch.externals.push_back({field, ExternalParam::Kind::InputStride, g_.node(input).input_position, p.dim});
        } else {
          // Memory of this instance (arena, constants, views of them, the caller's contiguous
          // outputs): its strides are known now (attention reads every operand by strides).
          value = static_cast<uint64_t>(in_.buffers[input].strides.at(p.dim));
        }
        break;
      }
      case ParamKind::NodePointer:
        if (placement(p.slot) == Placement::Input) {
          launch.externals.push_back({field, ExternalParam::Kind::InputPointer, g_.node(p.slot).input_position});
        } else if (placement(p.slot) == Placement::Output) {
          launch.externals.push_back({field, ExternalParam::Kind::OutputPointer, output_of(p.slot)});
        } else {
          LUMINAL_CHECK(placement(p.slot) == Placement::Constant, "internal error: row kernel reads node %", p.slot);
          value = in_.buffers[p.slot].ptr;
        }
        break;
      case ParamKind::NodeStride:
        launch.externals.push_back({field, ExternalParam::Kind::InputStride, g_.node(p.slot).input_position, p.dim});
        break;
    }
    launch.fields.push_back(value);
  }

  // Bytes a step reads and writes (an estimate for stats): the row kernel touches every tensor in
  // memory, a node kernel its output and inputs.
  size_t step_bytes(const schedule::Step& step) const {
    const auto bytes_of = [&](const Node& n) {
      return static_cast<size_t>(product(in_.buffers[n.id].sizes)) * dtype_size(n.dtype);
    };
    size_t bytes = 0;
    if (step.kind == StepKind::RowKernel) {
      for (const Node& n : g_.nodes()) bytes += placement(n.id) == Placement::Register ? 0 : bytes_of(n);
      return bytes;
    }
    const Node& node = g_.node(step.node);
    bytes += bytes_of(node);
    for (NodeId input : node.inputs) bytes += bytes_of(g_.node(input));
    return bytes;
  }

  // One launch per kernel of a step (a scatter's base copy, then the scatter).
  void add_launch(size_t s, int kernel_index) {
    const schedule::Step& step = steps()[s];
    const Node& node = g_.node(step.node);
    const Kernel& kernel = program_.kernels[kernel_index];
    Instance::Launch launch;
    launch.step = s;
    launch.kernel = kernel_index;
    for (const KernelParam& p : kernel.params) bind_param(p, node, kernel_index, launch);
    const int64_t work = evaluate(kernel.outputs, symbols_) * kernel.threads_per_output;
    if (work == 0 || product(in_.buffers[node.id].sizes) == 0) return;  // nothing to compute
    if (kernel_index == program_.step_kernels[s].copy_kernel) {
      const NodeId base = node.inputs[0];
      launch.copy_bytes = static_cast<size_t>(product(in_.buffers[node.id].sizes)) * dtype_size(node.dtype);
      if (placement(node.id) == Placement::Output && placement(base) == Placement::Input) {
        launch.alias_output = output_of(node.id);
        launch.alias_input = g_.node(base).input_position;
      }
    }
    const int64_t block = kernel.block_size;
    const int64_t blocks = (work + block - 1) / block;
    // Node kernels loop over their elements; the row kernel has one thread per row.
    const bool row_kernel = step.kind == StepKind::RowKernel;
    LUMINAL_CHECK(!row_kernel || blocks <= 0x7fffffff, "batch of ", work, " rows is too large for one row-kernel launch");
    launch.grid = static_cast<unsigned>(row_kernel ? blocks : std::min<int64_t>(blocks, 65535 * 8));
    in_.bytes_per_call += step_bytes(step);
    in_.launches.push_back(std::move(launch));
  }

  // cuBLASLt plans with final pointers; parameter inputs they read must keep their address.
  void create_library_calls() {
    const std::shared_ptr<const Config> settings = config();
    L2FlushScratch l2_flush(*context_.allocator, context_.device);
    for (size_t m = 0; m < matmul_steps_.size(); ++m) {
      const Node& node = g_.node(steps()[matmul_steps_[m]].node);
      const std::vector<int64_t>& out = in_.buffers[node.id].sizes;
      in_.matmuls[m] = make_matmul(node);
      // cuBLASLt's heuristic ranks candidates by a model; timing them on this device picks better
      // kernels for the small and skinny shapes these graphs have (done once per instance).
      if (product(out) > 0) {
        const std::string choice = choose_matmul_algorithm(
            *in_.matmuls[m], reinterpret_cast<void*>(in_.buffers[node.id].ptr), in_.workspace,
            static_cast<CUstream>(context_.stream), device_key(device_.device), *settings, host_syncs_,
            in_.choice_counts, l2_flush);
        if (!choice.empty()) in_.choices.push_back(str_cat(describe_step(node), ": ", choice));
      }
      for (NodeId operand : node.inputs) {
        const NodeId base = memory_read_by_library(operand);
        if (placement(base) == Placement::Input) {
          in_.parameter_pointers.emplace_back(g_.node(base).input_position, in_.buffers[base].ptr);
        }
      }
      in_.bytes_per_call += static_cast<size_t>(product(out)) * dtype_size(node.dtype);
      for (NodeId operand : node.inputs) {
        in_.bytes_per_call += static_cast<size_t>(product(in_.buffers[operand].sizes)) * dtype_size(node.dtype);
      }
    }
  }

  // The node whose memory a library call reads for `operand`: a view's base when the operand is a
  // view read by strides, else the operand itself (a materialized copy of an input is arena memory,
  // even though it is an affine view of that input).
  NodeId memory_read_by_library(NodeId operand) const {
    if (placement(operand) != Placement::VirtualView) return operand;
    return passes::as_affine_view(g_, operand)->base;
  }

  // Adds `node` after the previous one (the graph is a chain).
  void chain(CUgraphNode node, bool is_kernel) {
    previous_ = node;
    previous_is_kernel_ = is_kernel;
    ++in_.graph_nodes;
  }

  // Whether kernels of this graph may start while the kernel before them finishes: LUMINAL_PDL
  // (on by default), sm_90 or newer, and a driver with edge data (CUDA 12.3+).
  bool programmatic_launch_available() const {
    return config()->programmatic_launch && cuda::compute_capability(device_.device) >= 90 &&
           cuda::driver().cuGraphAddDependencies_v2 != nullptr;
  }

  // Adds a kernel node after the previous node. `waits` says that the kernel runs
  // lm_kernel_entry() (codegen prelude) before it touches memory a predecessor may write: then,
  // after another kernel, the edge is programmatic and the kernel launches while that one is
  // finishing (its blocks wait for it to complete). Other edges wait for the whole node before.
  CUgraphNode add_kernel_node(const CUDA_KERNEL_NODE_PARAMS& params, bool waits) {
    const cuda::DriverApi& api = cuda::driver();
    CUgraphNode node = nullptr;
    if (waits && previous_is_kernel_ && programmatic_launch_) {
      LUMINAL_CU(api.cuGraphAddKernelNode(&node, in_.graph, nullptr, 0, &params));
      CUgraphEdgeData edge{};
      edge.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
      edge.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
      LUMINAL_CU(api.cuGraphAddDependencies_v2(in_.graph, &previous_, &node, &edge, 1));
      ++in_.programmatic_edges;
    } else {
      LUMINAL_CU(api.cuGraphAddKernelNode(&node, in_.graph, previous_ ? &previous_ : nullptr, previous_ ? 1 : 0,
                                          &params));
    }
    chain(node, /*is_kernel=*/true);
    return node;
  }

  // Captures a library call (`run` enqueues it on the stream it is given) into a child graph.
  template <typename Run>
  void record_library_call(const Run& run) {
    const cuda::DriverApi& api = cuda::driver();
    const CUstream capture = device_.capture_stream;
    CUgraph child = nullptr;
    LUMINAL_CU(api.cuStreamBeginCapture(capture, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    try {
      run(capture);
    } catch (...) {
      api.cuStreamEndCapture(capture, &child);
      if (child) api.cuGraphDestroy(child);
      throw;
    }
    LUMINAL_CU(api.cuStreamEndCapture(capture, &child));
    CUgraphNode added = nullptr;
    const CUresult result = api.cuGraphAddChildGraphNode(&added, in_.graph, previous_ ? &previous_ : nullptr,
                                                         previous_ ? 1 : 0, child);
    api.cuGraphDestroy(child);
    LUMINAL_CU(result);
    chain(added, /*is_kernel=*/false);
  }

  void record_export_errors() {
    CUDA_KERNEL_NODE_PARAMS params{};
    params.func = device_.export_errors;
    params.gridDimX = params.gridDimY = params.gridDimZ = 1;
    params.blockDimX = params.blockDimY = params.blockDimZ = 1;
    void* device_record = in_.error_record.get();
    void* host_record = in_.host_error.values;
    void* args[] = {&device_record, &host_record};
    params.kernelParams = args;
    add_kernel_node(params, /*waits=*/false);  // reads the record after every kernel has finished
  }

  // A matmul step: the generated GEMV as a kernel node of the graph (so that it may start early,
  // its first weights already requested when they are read-only), cuBLASLt as a captured call.
  void record_matmul(const Node& node, const cuda::Matmul& matmul) {
    void* out = reinterpret_cast<void*>(in_.buffers[node.id].ptr);
    cuda::KernelArgumentSlots slots;
    const bool early_weights = programmatic_launch_ && read_only_in_graph(memory_read_by_library(node.inputs[1]));
    if (const std::optional<CUDA_KERNEL_NODE_PARAMS> params = matmul.generated_node(out, early_weights, slots)) {
      add_kernel_node(*params, /*waits=*/true);
      return;
    }
    record_library_call([&](CUstream stream) { matmul.run(out, in_.workspace, stream); });
  }

  // Consecutive matmul steps from step `s` on (matmul `matmul_index` on) that run as the generated
  // GEMV, multiply the same a by weights nothing in the graph writes (a layer's q, k and v
  // projections; its gate and up projections) and may share a launch (cuda::gemv_groupable):
  // recorded as one kernel node (LUMINAL_GEMV_GROUP=0: never). Returns how many steps it took: 0
  // when fewer than two qualify.
  size_t record_gemv_group(size_t s, size_t matmul_index) {
    if (!config()->group_gemvs) return 0;
    std::vector<cuda::GemvGroupMember> members;
    for (size_t t = s; t < steps().size() && members.size() < static_cast<size_t>(codegen::kGemvMaxGroup); ++t) {
      if (steps()[t].kind != StepKind::LibraryMatmul) break;
      const Node& node = g_.node(steps()[t].node);
      cuda::GemvGroupMember member;
      member.gemv = in_.matmuls[matmul_index + members.size()]->chosen_gemv(member.config);
      member.out = reinterpret_cast<void*>(in_.buffers[node.id].ptr);
      const bool qualifies = member.gemv != nullptr && product(in_.buffers[node.id].sizes) != 0 &&
                             read_only_in_graph(memory_read_by_library(node.inputs[1])) &&
                             (members.empty() || cuda::gemv_groupable(members, member));
      if (!qualifies) break;
      members.push_back(member);
    }
    if (members.size() < 2) return 0;
    cuda::KernelArgumentSlots slots;
    if (members.size() == 2 && record_swiglu_pair(s, members, slots)) return 2;
    add_kernel_node(cuda::grouped_gemv_node(members, programmatic_launch_, slots), /*waits=*/true);
    in_.grouped_gemvs += members.size();
    return members.size();
  }

  // LUMINAL_GEMV_GLU: when the step after the products of steps s and s + 1 stores their SwiGLU
  // (swiglu_after_products), one paired launch (cuda::paired_swiglu_node) stores its values, and
  // that step is left out of the graph (skipped_step_). Returns whether it recorded it.
  bool record_swiglu_pair(size_t s, const std::vector<cuda::GemvGroupMember>& members,
                          cuda::KernelArgumentSlots& slots) {
    const auto values = config()->fuse_swiglu ? swiglu_after_products(program_, in_, uses_, s) : std::nullopt;
    if (!values) return false;
    const cuda::GemvGroupMember& gate = members[values->gate_first ? 0 : 1];
    const cuda::GemvGroupMember& up = members[values->gate_first ? 1 : 0];
    const auto params = cuda::paired_swiglu_node(gate, up, values->out, programmatic_launch_, slots);
    if (!params) return false;
    add_kernel_node(*params, /*waits=*/true);
    skipped_step_ = values->step;
    ++in_.swiglu_pairs;
    return true;
  }

  // Whether no step of the graph writes node `base`'s memory: the graph's weights, and inputs
  // that no output writes back into (an input updated in place, e.g. a KV cache, is written by
  // its scatter; inputs that share memory with an updated one never reach a compiled call).
  bool read_only_in_graph(NodeId base) const {
    const Placement where = placement(base);
    if (where == Placement::Constant) return true;
    if (where != Placement::Input) return false;
    const int position = g_.node(base).input_position;
    for (const ir::GraphOutput& output : g_.outputs) {
      if (output.mutated_input == position) return false;
    }
    return true;
  }

  // The CUDA graph: steps in order (a chain), then the error export; with programmatic edges where
  // they are available. A driver that refuses them (adding an edge or instantiating the graph) gets
  // the graph again with plain edges only: slower, never wrong. A failure that has nothing to do
  // with the edges happens again there, and is raised.
  void record_graph() {
    if (programmatic_launch_available()) {
      try {
        if (record_graph(true) == CUDA_SUCCESS) return;
      } catch (const Error&) {
      }
      if (in_.graph) cuda::driver().cuGraphDestroy(in_.graph);
      in_.graph = nullptr;
      in_.exec = nullptr;
      in_.graph_nodes = in_.programmatic_edges = in_.grouped_gemvs = in_.swiglu_pairs = 0;
      skipped_step_ = SIZE_MAX;
      previous_ = nullptr;
      previous_is_kernel_ = false;
    }
    LUMINAL_CU(record_graph(false));
  }

  // Records the chain and returns what instantiating it gave.
  CUresult record_graph(bool programmatic) {
    const cuda::DriverApi& api = cuda::driver();
    LUMINAL_CU(api.cuGraphCreate(&in_.graph, 0));
    programmatic_launch_ = programmatic;
    size_t launch_index = 0, matmul_index = 0, cudnn_index = 0;
    for (size_t s = 0; s < steps().size(); ++s) {
      const schedule::Step& step = steps()[s];
      if (step.kind == StepKind::LibraryMatmul) {
        const size_t grouped = record_gemv_group(s, matmul_index);
        if (grouped > 0) {
          s += grouped - 1;
          matmul_index += grouped;
          continue;
        }
        const Node& node = g_.node(step.node);
        if (product(in_.buffers[node.id].sizes) != 0) record_matmul(node, *in_.matmuls[matmul_index]);
        ++matmul_index;
        continue;
      }
      if (cudnn_index < in_.cudnn_steps.size() && in_.cudnn_steps[cudnn_index].step == s) {
        const Node& node = g_.node(step.node);
        const Instance::CudnnStep& call = in_.cudnn_steps[cudnn_index++];
        record_library_call([&](CUstream stream) { run_cudnn_step(in_, call, node, stream); });
        continue;
      }
      if (s == skipped_step_) {  // its values were stored by the products before it
        while (launch_index < in_.launches.size() && in_.launches[launch_index].step == s) ++launch_index;
        continue;
      }
      for (; launch_index < in_.launches.size() && in_.launches[launch_index].step == s; ++launch_index) {
        Instance::Launch& launch = in_.launches[launch_index];
        void* args[] = {launch.fields.data()};
        const CUDA_KERNEL_NODE_PARAMS params = kernel_node(device_.functions[launch.kernel],
                                                           program_.kernels[launch.kernel], launch.grid, args);
        // A node that some calls disable (Launch::alias_output) keeps plain edges on both sides: how a
        // programmatic edge behaves across a disabled node is not specified. Without scatter
        // copies it is left out (for calls that update their inputs in place, which skip it).
        const bool may_be_disabled = launch.alias_output >= 0;
        if (may_be_disabled && !in_.scatter_copies_recorded) {
          launch.enabled = false;
          continue;
        }
        launch.node = add_kernel_node(params, /*waits=*/!may_be_disabled);
        if (may_be_disabled) previous_is_kernel_ = false;
      }
    }
    record_export_errors();
    return api.cuGraphInstantiateWithFlags(&in_.exec, in_.graph, 0);
  }

  const CudaProgram& program_;
  const DeviceState& device_;
  size_t& host_syncs_;  // the executor's count of waits for the GPU
  const ir::Graph& g_;
  const BufferPlan& buffers_;
  const SymbolValues& symbols_;
  const CallContext& context_;
  const std::vector<TensorView>& inputs_;
  std::unique_ptr<Instance> instance_;
  Instance& in_;
  std::vector<size_t> node_bytes_;   // per node, evaluated
  ArenaLayout arena_;
  std::vector<size_t> matmul_steps_;  // the library steps, in order (index: in_.matmuls)
  std::map<size_t, CudnnLookup> cudnn_lookups_;  // per step cuDNN may take
  std::map<size_t, bool> against_generated_;     // per step cuDNN may take: is the generated kernel timed
  CUgraphNode previous_ = nullptr;    // the graph's last node so far
  bool previous_is_kernel_ = false;   // a kernel node (else a captured library call, or none)
  bool programmatic_launch_ = false;  // whether the recording under way uses programmatic edges
  size_t skipped_step_ = SIZE_MAX;    // a step whose values a paired launch stores (record_swiglu_pair)
  const std::vector<int> uses_ = g_.use_counts();  // per node, outputs included
};

}  // namespace

std::vector<const void*> cudnn_operands(const Instance& instance, const ir::Node& node) {
  std::vector<const void*> operands;
  for (const ir::NodeId input : node.inputs) {
    operands.push_back(reinterpret_cast<const void*>(instance.buffers[input].ptr));
  }
  return operands;
}

void run_cudnn_step(const Instance& instance, const Instance::CudnnStep& call, const ir::Node& node,
                    CUstream stream) {
  call.library->run(cudnn_operands(instance, node), reinterpret_cast<void*>(instance.buffers[node.id].ptr),
                    instance.workspace, stream);
}

std::unique_ptr<Instance> build_instance(const CudaProgram& program, const DeviceState& device,
                                         const SymbolValues& symbols, const CallContext& context,
                                         const std::vector<TensorView>& inputs, size_t& host_syncs,
                                         bool scatter_copies) {
  return InstanceBuilder(program, device, symbols, context, inputs, host_syncs, scatter_copies).build();
}

}  // namespace luminal::runtime::gpu
