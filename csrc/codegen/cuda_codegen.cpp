// The public entry points of CUDA code generation (cuda_codegen.h); the kernel writer is in
// kernel_writer.h and the files it names.
#include "codegen/cuda_codegen.h"

#include <algorithm>

#include "codegen/kernel_writer.h"

namespace luminal::codegen {

using detail::KernelWriter;
using ir::Node;
using ir::NodeKind;

Kernel generate_kernel(const Node& node, const std::vector<OperandInfo>& operands) {
  if (node.contraction != ir::Contraction::None) {
    LUMINAL_CHECK(operands.size() == 3, "internal error: grouped-rows operands of ", node.origin);
    try {
      return KernelWriter(node, operands).write_grouped_rows();
    } catch (const Error& error) {
      fail("CUDA code generation failed for ", node.origin, ": ", error.what());
    }
  }
  LUMINAL_CHECK(node.kind == NodeKind::Pointwise || node.kind == NodeKind::Reduce || node.kind == NodeKind::Scatter,
                "internal error: no kernel for ", ir::node_kind_name(node.kind), " node ", node.origin);
  LUMINAL_CHECK(operands.size() == node.inputs.size(), "internal error: operand info for ", node.origin);
  try {
    KernelWriter writer(node, operands);
    return node.kind == NodeKind::Scatter ? writer.write_scatter() : writer.write();
  } catch (const Error& error) {
    fail("CUDA code generation failed for ", node.origin, ": ", error.what());
  }
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
