// Grouped launches of independent node kernels (cuda_codegen.h, render_kernel_group).
//
// A decode step runs several tiny kernels that do not depend on each other between its larger
// ones (a layer's RoPE of the queries and its two cache writes; the caches' step counters at the
// end): each one launch, each paying a launch's latency in the chain of the step. One launch for
// all of them pays it once. The runtime decides which steps share a launch (runtime/cuda/program.cpp)
// and checks that their memory does not overlap (runtime/cuda/instance.cpp).
#include <functional>
#include <sstream>

#include "codegen/cuda_codegen.h"
#include "common/error.h"

namespace luminal::codegen {

Kernel render_kernel_group(const std::vector<Kernel>& kernels, const std::vector<int>& members) {
  LUMINAL_CHECK(members.size() >= 2, "internal error: a kernel group of ", members.size(), " kernels");
  const Kernel& first = kernels.at(members.front());
  std::string member_names;
  for (const int m : members) {
    const Kernel& member = kernels.at(m);
    LUMINAL_CHECK(!member.group_entry.empty() && member.block_size == first.block_size && member.grid_y == 1,
                  "internal error: kernel ", member.name, " cannot join a grouped launch");
    member_names += member.name + ";";
  }
  Kernel group;
  std::ostringstream hex;
  hex << std::hex << std::hash<std::string>{}(member_names);
  group.name = "lm_group_" + hex.str();
  group.block_size = first.block_size;
  group.group_members = members;
  std::ostringstream text;
  text << "struct " << group.name << "_params {\n";
  for (size_t k = 0; k < members.size(); ++k) text << "  " << kernels[members[k]].name << "_params m" << k << ";\n";
  text << "  lm_i64 blocks[" << members.size() << "];\n};\n";
  text << "extern \"C\" __global__ void __launch_bounds__(" << group.block_size << ") " << group.name << "(const "
       << group.name << "_params p) {\n";
  text << "  unsigned int lm_block = blockIdx.x;\n";
  for (size_t k = 0; k < members.size(); ++k) {
    const std::string blocks = "(unsigned int)p.blocks[" + std::to_string(k) + "]";
    text << "  if (lm_block < " << blocks << ") { " << kernels[members[k]].group_entry << "(p.m" << k
         << ", lm_block, " << blocks << "); return; }\n";
    if (k + 1 < members.size()) text << "  lm_block -= " << blocks << ";\n";
  }
  text << "}\n";
  group.source = text.str();
  return group;
}

}  // namespace luminal::codegen
