#include "runtime/cuda/program.h"

#include <algorithm>

#include "common/config.h"
#include "common/error.h"
#include "passes/passes.h"
#include "passes/stage_library_operands.h"

namespace luminal::runtime::gpu {

using ir::Node;
using ir::NodeId;
using ir::NodeKind;
using schedule::StepKind;

namespace {

// Moves an error of the replay from the device record to pinned host memory (the last node of a
// replay), unless the host record still holds one no call has raised yet: replays queue up
// without waiting, and a call raises what it finds only once the latest replay has finished, so a
// later replay without error must not erase an earlier one (it did: an out-of-range index went
// unraised when the next call was queued before it finished). The host clears the record when it
// raises. Its edge is a plain one, so lm_kernel_entry() is a no-op here: kept so that every kernel
// starts alike.
constexpr const char* kExportErrorsKernel = R"(
extern "C" __global__ void lm_export_errors(lm_i64* device_record, volatile lm_i64* host_record) {
  lm_kernel_entry();
  if (device_record[0] == 0) return;
  if (host_record[0] == 0) {
    for (int i = 1; i < 4; ++i) host_record[i] = device_record[i];
    __threadfence_system();
    host_record[0] = device_record[0];  // last: the code says the rest is there
  }
  for (int i = 0; i < 4; ++i) device_record[i] = 0;
}

// After a compiled graph that the caller's CUDA graph replays (runtime/cuda/capture.cpp): no later
// call reads what lm_export_errors exported, so an error (an index out of range) ends the CUDA
// context here, as eager's device-side assert does in a replay, instead of passing unseen.
extern "C" __global__ void lm_trap_errors(const volatile lm_i64* host_record) {
  lm_kernel_entry();
  if (host_record[0] != 0) __trap();
}
)";

// The schedule decided for a step's kernel (schedule::schedule_kernels; row kernels: their plan).
const schedule::KernelSchedule& decided(const std::optional<schedule::KernelSchedule>& schedule, const Node& node) {
  LUMINAL_CHECK(schedule.has_value(), "internal error: no schedule was decided for the kernel of ", node.origin);
  return *schedule;
}

// Generates the kernels of every step, in step order (a scatter: its base copy, then itself).
void generate_kernels(CudaProgram& program) {
  const ir::Graph& g = *program.graph;
  for (const schedule::Step& step : program.plan.steps) {
    const Node& node = g.node(step.node);
    StepKernels kernels;
    switch (step.kind) {
      case StepKind::LibraryMatmul: break;
      case StepKind::Scatter: {
        const std::vector<codegen::OperandInfo> operands = schedule::kernel_operands(g, node);
        const Node copy = passes::identity_copy(g.node(node.inputs[0]), node.inputs[0], node.origin);
        program.kernels.push_back(codegen::render_kernel(copy, {operands[0]}, decided(step.copy_schedule, node)));
        kernels.copy_kernel = static_cast<int>(program.kernels.size()) - 1;
        program.kernels.push_back(codegen::render_kernel(node, operands, decided(step.schedule, node)));
        kernels.kernel = static_cast<int>(program.kernels.size()) - 1;
        break;
      }
      case StepKind::Kernel:
      case StepKind::Convolution:  // the generated kernel: run when it measures faster than cuDNN's
        program.kernels.push_back(
            codegen::render_kernel(node, schedule::kernel_operands(g, node), decided(step.schedule, node)));
        kernels.kernel = static_cast<int>(program.kernels.size()) - 1;
        break;
      case StepKind::RowKernel:
        program.kernels.push_back(codegen::render_row_kernel(g, program.plan.rows, decided(step.schedule, node)));
        kernels.kernel = static_cast<int>(program.kernels.size()) - 1;
        break;
    }
    program.step_kernels.push_back(kernels);
  }
}

// What a step's kernel may write: its node, a scatter's base (whose memory it may update in
// place), and the inputs the node's outputs update in place.
std::vector<NodeId> written_by(const ir::Graph& g, const Node& node) {
  std::vector<NodeId> written{node.id};
  if (node.kind == NodeKind::Scatter) written.push_back(node.inputs.at(0));
  for (const ir::GraphOutput& out : g.outputs) {
    if (out.kind == ir::GraphOutput::Kind::Tensor && out.node == node.id && out.mutated_input >= 0) {
      written.push_back(g.inputs.at(out.mutated_input));
    }
  }
  return written;
}

// What it reads: its inputs, and the memory of those that are views.
std::vector<NodeId> read_by(const ir::Graph& g, const Node& node) {
  std::vector<NodeId> read;
  for (const NodeId input : node.inputs) {
    read.push_back(input);
    read.push_back(passes::affine_view_base(g, input));
  }
  return read;
}

bool shares_any(const std::vector<NodeId>& a, const std::vector<NodeId>& b) {
  return std::any_of(a.begin(), a.end(), [&](NodeId x) { return std::find(b.begin(), b.end(), x) != b.end(); });
}

// Whether step `s`'s kernel may join the steps `members` in one launch: a node kernel with a
// device function, of their block size, that reads nothing they write and writes nothing they
// read or write (their order in the launch is not kept), within the parameter limits.
bool joins_group(const CudaProgram& program, const std::vector<size_t>& members, size_t s, size_t& param_bytes) {
  const schedule::Step& step = program.plan.steps[s];
  if (step.kind != StepKind::Kernel && step.kind != StepKind::Scatter) return false;
  const codegen::Kernel& kernel = program.kernels.at(program.step_kernels[s].kernel);
  if (kernel.group_entry.empty()) return false;
  const size_t bytes = 8 * (kernel.params.size() + 1);  // its fields and its block count
  if (members.size() >= kMaxGroupMembers || param_bytes + bytes > kMaxGroupParamBytes) return false;
  const ir::Graph& g = *program.graph;
  const Node& node = g.node(step.node);
  const std::vector<NodeId> reads = read_by(g, node), writes = written_by(g, node);
  for (const size_t m : members) {
    const Node& other = g.node(program.plan.steps[m].node);
    const codegen::Kernel& member = program.kernels.at(program.step_kernels[m].kernel);
    const std::vector<NodeId> other_writes = written_by(g, other);
    if (member.block_size != kernel.block_size || shares_any(reads, other_writes) ||
        shares_any(writes, other_writes) || shares_any(writes, read_by(g, other))) {
      return false;
    }
  }
  param_bytes += bytes;
  return true;
}

// Runs of consecutive steps that may share a launch, each with its group kernel.
void plan_kernel_groups(CudaProgram& program) {
  const size_t count = program.plan.steps.size();
  for (size_t s = 0; s < count;) {
    std::vector<size_t> members;
    size_t param_bytes = 0;
    while (s + members.size() < count && joins_group(program, members, s + members.size(), param_bytes)) {
      members.push_back(s + members.size());
    }
    if (members.size() < 2) {
      ++s;
      continue;
    }
    std::vector<int> kernels;
    for (const size_t m : members) kernels.push_back(program.step_kernels[m].kernel);
    program.kernels.push_back(codegen::render_kernel_group(program.kernels, kernels));
    program.kernel_groups.push_back({s, members.size(), static_cast<int>(program.kernels.size()) - 1});
    s += members.size();
  }
}

// A group's members run at once, in no set order: every buffer a member reads or writes stays
// allocated until the group's last step. Planned one step at a time, a member's output could get
// the memory of an input that only an earlier member reads (layer 0 of a Llama decode step: the
// attention mask's slot was the q projection's, which the RoPE beside it was reading), and the
// launch would be refused as overlapping.
void hold_group_buffers(CudaProgram& program) {
  const ir::Graph& g = *program.graph;
  for (const KernelGroup& group : program.kernel_groups) {
    const int last = static_cast<int>(group.first_step + group.steps - 1);
    for (size_t s = group.first_step; s < group.first_step + group.steps; ++s) {
      const Node& node = g.node(program.plan.steps[s].node);
      // A scatter that took over its base writes the base's slot as its own output: the base ends
      // where the scatter begins (memory_plan checks it), and the scatter holds the slot.
      const NodeId taken = program.buffers.takes_over[node.id];
      for (const std::vector<NodeId>& ids : {read_by(g, node), written_by(g, node)}) {
        for (const NodeId id : ids) {
          if (id != taken) hold_through(program.buffers, id, last);
        }
      }
    }
  }
}

void index_check_labels(CudaProgram& program) {
  std::vector<std::string> origin_of(program.kernels.size());
  for (size_t s = 0; s < program.plan.steps.size(); ++s) {
    const schedule::Step& step = program.plan.steps[s];
    const StepKernels& kernels = program.step_kernels[s];
    const std::string& origin =
        step.kind == StepKind::RowKernel ? std::string("the row kernel") : program.graph->node(step.node).origin;
    if (kernels.kernel >= 0) origin_of[kernels.kernel] = origin;
    if (kernels.copy_kernel >= 0) origin_of[kernels.copy_kernel] = origin;
  }
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    program.check_base.push_back(static_cast<int64_t>(program.check_labels.size()));
    for (const std::string& label : program.kernels[k].check_labels) {
      program.check_labels.push_back({label, origin_of[k]});
    }
  }
}

}  // namespace

CudaProgram build_cuda_program(std::shared_ptr<const ir::Graph> graph, schedule::Plan plan, size_t staging_copies) {
  LUMINAL_CHECK(graph != nullptr, "internal error: a CUDA program without a graph");
  CudaProgram program;
  program.graph = std::move(graph);
  program.plan = std::move(plan);
  program.staging_copies = staging_copies;
  if (!config()->split_attention_keys) {  // LUMINAL_ATTENTION_SPLIT=0: one block per decode row
    for (schedule::Step& step : program.plan.steps) {
      if (step.schedule && step.schedule->mapping == schedule::Mapping::Attention) step.schedule->key_split = 1;
    }
  }
  program.buffers = plan_buffers(*program.graph, program.plan);
  generate_kernels(program);
  plan_kernel_groups(program);
  hold_group_buffers(program);
  index_check_labels(program);
  program.module_source = codegen::module_source(program.kernels) + kExportErrorsKernel;
  return program;
}

CudaProgram build_general_cuda_program(const ir::Graph& graph) {
  passes::StagedGraph staged = passes::stage_library_operands(graph);
  auto run_graph = std::make_shared<const ir::Graph>(std::move(staged.graph));
  schedule::Plan plan = schedule::plan_steps(*run_graph, /*stable_library_operands=*/true);
  schedule::schedule_kernels(plan, *run_graph);
  return build_cuda_program(run_graph, std::move(plan), staged.copies);
}

}  // namespace luminal::runtime::gpu
