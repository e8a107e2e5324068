// The public entry points of CUDA code generation (cuda_codegen.h); the kernel writer is in
// kernel_writer.h and the files it names.
#include "codegen/cuda_codegen.h"

#include <algorithm>

#include "codegen/kernel_writer.h"

namespace luminal::codegen {

using detail::KernelWriter;
using ir::Node;
using ir::NodeKind;

namespace {

void check_request(const Node& node, const std::vector<OperandInfo>& operands) {
  const bool grouped_rows = node.contraction != ir::Contraction::None;
  LUMINAL_CHECK(grouped_rows || node.kind == NodeKind::Pointwise || node.kind == NodeKind::Reduce ||
                    node.kind == NodeKind::Scatter || node.kind == NodeKind::Attention,
                "internal error: no kernel for ", ir::node_kind_name(node.kind), " node ", node.origin);
  LUMINAL_CHECK(operands.size() == (grouped_rows ? 3 : node.inputs.size()), "internal error: operand info for ",
                node.origin);
}

}  // namespace

Kernel render_kernel(const Node& node, const std::vector<OperandInfo>& operands,
                     const schedule::KernelSchedule& schedule) {
  check_request(node, operands);
  detail::check_renderable(node, operands, schedule);  // outside the try: a ScheduleError stays typed
  try {
    KernelWriter writer(node, operands, schedule);
    if (node.contraction != ir::Contraction::None) return writer.write_grouped_rows();
    if (node.kind == NodeKind::Attention) return writer.write_attention();
    return node.kind == NodeKind::Scatter ? writer.write_scatter() : writer.write();
  } catch (const Error& error) {
    fail("CUDA code generation failed for ", node.origin, ": ", error.what());
  }
}

Kernel generate_kernel(const Node& node, const std::vector<OperandInfo>& operands) {
  check_request(node, operands);
  schedule::KernelSchedule chosen;
  try {
    chosen = schedule::choose_schedule(node, operands);
  } catch (const Error& error) {
    fail("CUDA code generation failed for ", node.origin, ": ", error.what());
  }
  return render_kernel(node, operands, chosen);
}

std::string module_source(const std::vector<Kernel>& kernels) {
  std::string source = prelude();
  std::vector<std::string> seen;
  for (const Kernel& kernel : kernels) {
    if (std::find(seen.begin(), seen.end(), kernel.name) != seen.end()) continue;
    seen.push_back(kernel.name);
    source += "\n" + kernel.source;
  }
  return source;
}

}  // namespace luminal::codegen
