#include "runtime/compiled.h"

#include <algorithm>
#include <limits>

#include "common/checked.h"
#include "common/error.h"
#include "passes/passes.h"
#include "passes/row_plan.h"
#include "passes/stage_library_operands.h"
#include "pt2/archive.h"
#include "schedule/plan.h"

#if LUMINAL_HAVE_CUDA
#include "runtime/cuda/api.h"
#include "runtime/cuda/choices.h"
#include "runtime/cuda/timing.h"
#endif

namespace luminal::runtime {

namespace {

frontend::TranslateOptions translate_options(const CompileOptions& options) {
  frontend::TranslateOptions out;
  out.input_roles = options.input_roles;
  return out;
}

pt2::ReadLimits read_limits(const CompileOptions& options) {
  return pt2::ReadLimits::with_max_archive_bytes(options.max_archive_bytes);
}

}  // namespace

std::vector<frontend::Refusal> refused_nodes(std::string archive_bytes, const CompileOptions& options) {
  const pt2::Archive archive = pt2::Archive::from_buffer(std::move(archive_bytes), read_limits(options));
  return frontend::find_refusals(pt2::load_package(archive), translate_options(options));
}

std::shared_ptr<CompiledGraph> CompiledGraph::from_archive_bytes(std::string bytes, const CompileOptions& options) {
  const pt2::Archive archive = pt2::Archive::from_buffer(std::move(bytes), read_limits(options));
  const pt2::Package package = pt2::load_package(archive);
  return std::shared_ptr<CompiledGraph>(new CompiledGraph(frontend::translate(package, translate_options(options)), options));
}

std::shared_ptr<CompiledGraph> CompiledGraph::from_archive_file(const std::string& path, const CompileOptions& options) {
  const pt2::Archive archive = pt2::Archive::from_file(path, read_limits(options));
  const pt2::Package package = pt2::load_package(archive);
  return std::shared_ptr<CompiledGraph>(new CompiledGraph(frontend::translate(package, translate_options(options)), options));
}

CompiledGraph::CompiledGraph(ir::Graph translated, const CompileOptions& options)
    : translated_text_(translated.to_string()) {
  for (const ir::Node& node : translated.nodes()) {
    std::vector<int64_t> sizes;
    for (const ir::Expr& dim : node.shape) {
      if (dim->op == ir::ExprOp::Const) sizes.push_back(dim->int_value);
    }
    if (sizes.size() != node.shape.size()) continue;  // symbolic: checked when evaluated
    const size_t bytes = tensor_bytes(sizes, node.dtype, node.origin);
    if (bytes > largest_static_tensor_bytes_) {
      largest_static_tensor_bytes_ = bytes;
      largest_static_tensor_ = str_cat("node '", node.origin, "' (", dtype_name(node.dtype), int_list(sizes), ")");
    }
  }
  // The matcher runs its own pass pipeline: only when its plan may be used.
  if (options.megakernel) {
    passes::RowPlan row = passes::plan_row_kernel(translated);
    megakernel_reason_ = row.reason;
    if (row.accepted) row_ = RowCandidate{std::make_shared<const ir::Graph>(std::move(row.graph)), row.rows};
  } else {
    megakernel_reason_ = "disabled by the megakernel option";
  }
  graph_ = std::make_shared<const ir::Graph>(passes::optimize(std::move(translated), options.optimize));
  const std::vector<int> uses = graph_->use_counts();
  for (ir::NodeId input : graph_->inputs) input_read_.push_back(uses[input] > 0);
  const auto users = graph_->users();
  const std::vector<bool> updates_last = elementwise_updates_in_place();
  for (size_t k = 0; k < graph_->outputs.size(); ++k) {
    const ir::GraphOutput& out = graph_->outputs[k];
    OutputInfo info;
    info.is_tensor = out.kind == ir::GraphOutput::Kind::Tensor;
    info.dtype = info.is_tensor ? graph_->node(out.node).dtype : DType::I64;
    info.mutated_input = out.mutated_input;
    info.check = out.check;
    if (info.is_tensor && out.mutated_input >= 0) {
      const ir::Node& node = graph_->node(out.node);
      const ir::NodeId base = graph_->inputs[out.mutated_input];
      const bool scatter_into_base = node.kind == ir::NodeKind::Scatter && node.inputs[0] == base && uses[base] == 1;
      info.in_place = scatter_into_base || updates_last[k];
    }
    info.name = out.name;
    info.device = out.device;
    outputs_.push_back(info);
  }
  cpu_ = std::make_unique<cpu::Executor>(options.cpu_runs_row_graph && row_ ? row_->graph : graph_);
  if (!options.check_cuda_arch.empty()) {
#if LUMINAL_HAVE_CUDA
    // With a megakernel candidate, either path may run (whichever measures faster): both compile.
    if (row_) gpu::check_codegen(cuda_executor(kRowKernel).program(), options.check_cuda_arch);
    gpu::check_codegen(cuda_executor(kGeneral).program(), options.check_cuda_arch);
#else
    fail("cannot check CUDA code generation: luminal was built without the CUDA toolkit headers");
#endif
  }
}

std::vector<bool> CompiledGraph::elementwise_updates_in_place() const {
  std::vector<bool> in_place = passes::input_updates_written_last(*graph_);
  if (!row_) return in_place;
  const std::vector<bool> in_row_kernel = passes::input_updates_written_last(*row_->graph);
  for (size_t k = 0; k < in_place.size(); ++k) {
    in_place[k] = in_place[k] && k < in_row_kernel.size() && in_row_kernel[k];
  }
  return in_place;
}

#if LUMINAL_HAVE_CUDA
namespace {

// The general plan: row broadcasts fused (passes::fuse_row_broadcasts), library operands staged,
// then node by node.
std::shared_ptr<const gpu::CudaProgram> general_program(const ir::Graph& graph) {
  return std::make_shared<const gpu::CudaProgram>(gpu::build_general_cuda_program(passes::fuse_row_broadcasts(graph)));
}

}  // namespace

gpu::Executor& CompiledGraph::cuda_executor(CudaCandidate candidate) const {
  std::lock_guard<std::mutex> lock(cuda_mutex_);
  std::unique_ptr<gpu::Executor>& executor = cuda_[candidate];
  if (executor) return *executor;
  if (candidate == kRowKernel) {
    LUMINAL_CHECK(row_.has_value(), "internal error: no row-kernel candidate");
    executor = std::make_unique<gpu::Executor>(std::make_shared<const gpu::CudaProgram>(
        gpu::build_cuda_program(row_->graph, schedule::plan_row_kernel_steps(*row_->graph, row_->rows))));
  } else {
    std::shared_ptr<const gpu::CudaProgram> program = general_program(*graph_);
    // Its passes must have kept the updates written in place behind every other node.
    const std::vector<bool> last = passes::input_updates_written_last(*program->graph);
    for (size_t k = 0; k < outputs_.size(); ++k) {
      if (!outputs_[k].in_place || graph_->node(graph_->outputs[k].node).kind != ir::NodeKind::Pointwise) continue;
      LUMINAL_CHECK(k < last.size() && last[k], "internal error: the CUDA plan moved the in-place update of input #",
                    outputs_[k].mutated_input, " before another node");
    }
    executor = std::make_unique<gpu::Executor>(std::move(program));
  }
  return *executor;
}
#endif

void CompiledGraph::prepare_cuda(const CudaCallContext& cuda) const {
#if LUMINAL_HAVE_CUDA
  const cuda::CurrentContextGuard callers;
  cuda_executor(row_ ? kRowKernel : kGeneral).prepare(cuda);
#else
  fail("this build of luminal has no CUDA engine (it was built without the CUDA toolkit headers)");
#endif
}

void CompiledGraph::finish_cuda() const {
#if LUMINAL_HAVE_CUDA
  const cuda::CurrentContextGuard callers;
  for (const CudaCandidate candidate : {kGeneral, kRowKernel}) {
    gpu::Executor* executor = nullptr;
    {
      std::lock_guard<std::mutex> lock(cuda_mutex_);
      executor = cuda_[candidate].get();
    }
    if (executor) executor->finish();
  }
#endif
}

#if LUMINAL_HAVE_CUDA
namespace {

bool stream_is_capturing(const gpu::CallContext& context) {
  cuda::use_primary_context(context.device);
  return cuda::stream_capturing(static_cast<CUstream>(context.stream));
}

constexpr const char* kRowChoice = "megakernel or general path: ";
// Timing: rounds of back-to-back runs, the two candidates alternating, the fastest round of each kept.
constexpr int kTimingRounds = 3;
constexpr int kRunsPerRound = 10;

}  // namespace

CompiledGraph::CudaCandidate CompiledGraph::choose_row_or_general(const std::vector<TensorView>& inputs,
                                                                  const std::vector<TensorView>& outputs,
                                                                  const SymbolValues& symbols,
                                                                  const CudaCallContext& context) const {
  // Built once: this runs on every call.
  static const std::string rules_only = str_cat(kRowChoice, "megakernel (by rule: LUMINAL_SEARCH=0)");
  static const std::string updates = str_cat(kRowChoice, "megakernel (by rule: the graph updates inputs in place, "
                                             "so it is not run more than once to time it)");
  const auto by_rule = [&](const std::string& record) {
    std::lock_guard<std::mutex> lock(row_choice_mutex_);
    if (row_choice_record_ != record) row_choice_record_ = record;
    return kRowKernel;
  };
  if (!config()->search) return by_rule(rules_only);
  const bool updates_inputs =
      std::any_of(outputs_.begin(), outputs_.end(), [](const OutputInfo& info) { return info.mutated_input >= 0; });
  if (updates_inputs) return by_rule(updates);
  std::lock_guard<std::mutex> lock(row_choice_mutex_);
  const auto same = [&](const RowBinding& b) {
    return b.device == context.device && b.allow_tf32 == context.allow_tf32 &&
           b.allow_tf32_convolution == context.allow_tf32_convolution && b.symbols == symbols;
  };
  // Calls mostly repeat the last binding: compared in place, nothing copied.
  auto known = last_decision_ != row_decisions_.end() && same(last_decision_->first) ? last_decision_
                                                                                    : row_decisions_.end();
  RowBinding binding;
  if (known == row_decisions_.end()) {
    binding = RowBinding{context.device, context.allow_tf32, context.allow_tf32_convolution, symbols};
    known = row_decisions_.find(binding);
  }
  if (known != row_decisions_.end()) {
    last_decision_ = known;
    if (row_choice_record_ != known->second.record) row_choice_record_ = known->second.record;
    return known->second.candidate;
  }
  if (stream_is_capturing(context)) {
    row_choice_record_ = str_cat(kRowChoice, "megakernel (by rule: the call is being captured into a CUDA graph)");
    return kRowKernel;  // not remembered: a later call outside the capture measures
  }
  RowDecision decision;
  std::string general_source;
  try {
    general_source = cuda_executor(kGeneral).module_source();
  } catch (const Error& error) {
    // The megakernel runs what the rule would run; the general path is no alternative here.
    decision.record = str_cat(kRowChoice, "megakernel (the general path cannot be built: ", error.what(), ")");
    row_choice_record_ = decision.record;
    last_decision_ = row_decisions_.emplace(std::move(binding), decision).first;
    return kRowKernel;
  }
  const std::string key =
      gpu::row_kernel_choice_key(cuda_executor(kRowKernel).module_source(), general_source, symbols,
                                 context.allow_tf32, context.allow_tf32_convolution, gpu::device_key(context.device));
  const gpu::RowKernelLookup cached = gpu::look_up_row_kernel_choice(key);
  if (cached.winner != gpu::RowKernelLookup::Winner::None) {
    ++row_choice_hits_;
    const bool megakernel = cached.winner == gpu::RowKernelLookup::Winner::Megakernel;
    decision.candidate = megakernel ? kRowKernel : kGeneral;
    decision.record = str_cat(kRowChoice, megakernel ? "megakernel" : "general path", " (cached: ", cached.times, ")");
  } else {
    decision.candidate = measure_row_or_general(inputs, outputs, symbols, context, key, decision.record);
  }
  row_choice_record_ = decision.record;
  last_decision_ = row_decisions_.emplace(std::move(binding), decision).first;
  return decision.candidate;
}

// Called with row_choice_mutex_ held.
CompiledGraph::CudaCandidate CompiledGraph::measure_row_or_general(const std::vector<TensorView>& inputs,
                                                                   const std::vector<TensorView>& outputs,
                                                                   const SymbolValues& symbols,
                                                                   const CudaCallContext& context,
                                                                   const std::string& key, std::string& record) const {
  const CUstream stream = static_cast<CUstream>(context.stream);
  const auto time_ms = [&](CudaCandidate candidate) {
    gpu::Executor& executor = cuda_executor(candidate);
    return cuda::time_on_stream(stream, kRunsPerRound, row_choice_syncs_,
                                [&] { executor.run(inputs, outputs, symbols, context); });
  };
  float megakernel_ms = std::numeric_limits<float>::max(), general_ms = megakernel_ms;
  std::string general_failure;
  for (int round = 0; round < kTimingRounds; ++round) {
    // The megakernel is the rule's choice: what fails there fails the call, as it would by rule.
    megakernel_ms = std::min(megakernel_ms, time_ms(kRowKernel));
    if (!general_failure.empty()) continue;
    try {
      general_ms = std::min(general_ms, time_ms(kGeneral));
    } catch (const Error& error) {
      general_failure = error.what();
    }
  }
  if (!general_failure.empty()) {
    // Not stored: the failure may be this call's alone.
    record = str_cat(kRowChoice, "megakernel (the general path failed: ", general_failure, ")");
    return kRowKernel;
  }
  ++row_choice_misses_;
  const bool megakernel = megakernel_ms <= general_ms;
  const std::string times = str_cat("megakernel ", megakernel_ms * 1000.0f, " us, general path ", general_ms * 1000.0f,
                                    " us per call, timed");
  gpu::store_row_kernel_choice(key, megakernel, times);
  record = str_cat(kRowChoice, megakernel ? "megakernel" : "general path", " (", times, ")");
  return megakernel ? kRowKernel : kGeneral;
}
#endif

std::string CompiledGraph::cuda_source() const {
#if LUMINAL_HAVE_CUDA
  return cuda_executor(row_ ? kRowKernel : kGeneral).module_source();
#else
  return "";
#endif
}

SymbolValues CompiledGraph::bind(const std::vector<TensorView>& inputs) const {
  const auto same_layout = [](const InputLayout& layout, const TensorView& view) {
    return layout.dtype == view.dtype && layout.sizes == view.sizes && layout.strides == view.strides;
  };
  {
    const std::lock_guard<std::mutex> lock(bind_mutex_);
    if (bound_ && bound_layouts_.size() == inputs.size() &&
        std::equal(bound_layouts_.begin(), bound_layouts_.end(), inputs.begin(), same_layout)) {
      return bound_symbols_;
    }
  }
  SymbolValues symbols = bind_inputs(*graph_, inputs);  // raises on any mismatch: nothing is cached
  const std::lock_guard<std::mutex> lock(bind_mutex_);
  bound_layouts_.resize(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    bound_layouts_[k].dtype = inputs[k].dtype;
    bound_layouts_[k].sizes = inputs[k].sizes;
    bound_layouts_[k].strides = inputs[k].strides;
  }
  bound_symbols_ = symbols;
  bound_ = true;
  return symbols;
}

std::vector<int64_t> CompiledGraph::output_shape(size_t k, const SymbolValues& symbols) const {
  const ir::GraphOutput& out = graph_->outputs.at(k);
  LUMINAL_CHECK(out.kind == ir::GraphOutput::Kind::Tensor, "output ", k, " is not a tensor");
  const ir::Node& node = graph_->node(out.node);
  std::vector<int64_t> shape = evaluate(node.shape, symbols);
  tensor_bytes(shape, node.dtype, str_cat("output #", k, " '", out.name, "'"));  // the caller allocates it
  return shape;
}

std::shared_ptr<const std::vector<std::vector<int64_t>>> CompiledGraph::output_shapes(
    const SymbolValues& symbols) const {
  {
    const std::lock_guard<std::mutex> lock(bind_mutex_);
    if (shapes_ && shapes_symbols_ == symbols) return shapes_;
  }
  auto shapes = std::make_shared<std::vector<std::vector<int64_t>>>(outputs_.size());
  for (size_t k = 0; k < outputs_.size(); ++k) {
    if (outputs_[k].is_tensor) (*shapes)[k] = output_shape(k, symbols);
  }
  const std::lock_guard<std::mutex> lock(bind_mutex_);
  shapes_symbols_ = symbols;
  shapes_ = shapes;
  return shapes;
}

int64_t CompiledGraph::int_output(size_t k, const SymbolValues& symbols) const {
  const ir::GraphOutput& out = graph_->outputs.at(k);
  LUMINAL_CHECK(out.kind == ir::GraphOutput::Kind::Int, "output ", k, " is not an integer");
  return evaluate(out.value, symbols);
}

void CompiledGraph::run(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                        const SymbolValues& symbols, const CudaCallContext* cuda) const {
  const bool on_cuda = cuda != nullptr;
  for (size_t k = 0; k < inputs.size() && k < input_read_.size(); ++k) {
    if (!input_read_[k]) continue;  // never read: its device does not matter
    LUMINAL_CHECK((inputs[k].device.type == DeviceType::CUDA) == on_cuda, "input #", k, " '", input(k).name, "' (",
                  describe(inputs[k]), ") is not on ", on_cuda ? "the CUDA device of this call" : "the CPU",
                  "; the compiled graph reads it");
  }
  if (!on_cuda) {
    // Graph::add let through tensors up to max_tensor_bytes() for the sake of accelerators; on the
    // CPU, what exceeds this machine's memory is what eager could not allocate either.
    LUMINAL_CHECK(static_cast<int64_t>(largest_static_tensor_bytes_) <= physical_memory_bytes(), largest_static_tensor_,
                  " needs ", largest_static_tensor_bytes_, " bytes, more than this machine's memory (",
                  physical_memory_bytes(), " bytes)");
    cpu_scatter_copy_bytes_ = cpu_->run(inputs, outputs, symbols);
    return;
  }
#if LUMINAL_HAVE_CUDA
  const cuda::CurrentContextGuard callers;  // the caller's current device stays theirs
  // The megakernel assumes contiguous inputs; other layouts take the general path.
  const bool contiguous = std::all_of(inputs.begin(), inputs.end(), [](const TensorView& t) { return t.is_contiguous(); });
  CudaCandidate candidate = kGeneral;
  if (row_ && contiguous) candidate = choose_row_or_general(inputs, outputs, symbols, *cuda);
  {
    std::lock_guard<std::mutex> lock(cuda_mutex_);
    megakernel_fallbacks_ += row_ && !contiguous;
    last_candidate_ = candidate;
  }
  cuda_executor(candidate).run(inputs, outputs, symbols, *cuda);
#else
  fail("tensor on ", device_name(inputs.front().device),
       ": this build of luminal has no CUDA engine (it was built without the CUDA toolkit headers)");
#endif
}

std::string CompiledGraph::ir_text(bool optimized) const { return optimized ? graph_->to_string() : translated_text_; }

Stats CompiledGraph::stats() const {
  Stats s;
  s.ir_nodes = graph_->size();
  s.kernels = cpu_->kernel_count();
  s.megakernel = row_.has_value();
  s.megakernel_reason = megakernel_reason_;
  s.scatter_copy_bytes = cpu_scatter_copy_bytes_;
#if LUMINAL_HAVE_CUDA
  {
    std::lock_guard<std::mutex> lock(cuda_mutex_);
    // The numbers of the path the last call took, else of the one built.
    const CudaCandidate other = last_candidate_ == kRowKernel ? kGeneral : kRowKernel;
    const std::unique_ptr<gpu::Executor>& used = cuda_[last_candidate_] ? cuda_[last_candidate_] : cuda_[other];
    if (used) {
      s.cuda_used = true;
      s.cuda = used->stats();
      s.scatter_copy_bytes = s.cuda.scatter_copy_bytes;
    }
    s.megakernel_fallbacks = megakernel_fallbacks_;
  }
  {
    std::lock_guard<std::mutex> lock(row_choice_mutex_);
    if (!row_choice_record_.empty()) s.cuda.choices.insert(s.cuda.choices.begin(), row_choice_record_);
    s.cuda.choice_cache_hits += row_choice_hits_;
    s.cuda.choice_cache_misses += row_choice_misses_;
    s.cuda.host_syncs += row_choice_syncs_;
  }
#endif
  for (const ir::Node& node : graph_->nodes()) {
    s.matmuls += node.kind == ir::NodeKind::MatMul;
    s.attentions += node.kind == ir::NodeKind::Attention;
    s.inputs += node.kind == ir::NodeKind::Input;
    s.constants += node.kind == ir::NodeKind::Constant;
  }
  return s;
}

}  // namespace luminal::runtime
