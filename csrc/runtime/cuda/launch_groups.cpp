#include "runtime/cuda/launch_groups.h"

#include <optional>
#include <utility>
#include <vector>

#include "common/dtype.h"

namespace luminal::runtime::gpu {

namespace {

using ir::Node;
using ir::NodeId;

// [first, last) bytes of device memory.
struct Range {
  CUdeviceptr first = 0, last = 0;
  bool overlaps(const Range& other) const { return first < other.last && other.first < last; }
};

// The bytes a node's buffer spans, for memory this instance laid out (the arena, constants, views
// of them); the caller's tensors are left out (the program's plan already keeps a group from
// writing an input another member reads, and fresh outputs overlap nothing).
std::optional<Range> memory_range(const CudaProgram& program, const Instance& instance, NodeId id) {
  const Placement where = program.buffers.placement.at(id);
  if (where != Placement::Arena && where != Placement::Constant && where != Placement::VirtualView) return std::nullopt;
  const Buffer& b = instance.buffers.at(id);
  const std::optional<ElementSpan> span = element_span(b.sizes, b.strides);
  if (!span) return std::nullopt;
  const int64_t element = static_cast<int64_t>(dtype_size(program.graph->node(id).dtype));
  return Range{b.ptr + span->low * element, b.ptr + (span->high + 1) * element};
}

struct MemberMemory {
  std::vector<Range> reads, writes;
};

MemberMemory member_memory(const CudaProgram& program, const Instance& instance, const Node& node) {
  MemberMemory memory;
  if (const auto written = memory_range(program, instance, node.id)) memory.writes.push_back(*written);
  for (const NodeId input : node.inputs) {
    if (const auto read = memory_range(program, instance, input)) memory.reads.push_back(*read);
  }
  return memory;
}

bool any_overlap(const std::vector<Range>& a, const std::vector<Range>& b) {
  for (const Range& x : a) {
    for (const Range& y : b) {
      if (x.overlaps(y)) return true;
    }
  }
  return false;
}

bool memory_disjoint(const std::vector<MemberMemory>& members) {
  for (size_t i = 0; i < members.size(); ++i) {
    for (size_t j = 0; j < members.size(); ++j) {
      if (i == j) continue;
      if (any_overlap(members[i].writes, members[j].reads) || any_overlap(members[i].writes, members[j].writes)) {
        return false;
      }
    }
  }
  return true;
}

// The launches [begin, end) of `group`'s steps as one group launch, and the base copies this
// instance leaves unrecorded (kept in the list, after it); nullopt when they cannot share one.
std::optional<std::pair<Instance::Launch, std::vector<Instance::Launch>>> combine(const CudaProgram& program,
                                                                                  const Instance& instance,
                                                                                  const KernelGroup& group,
                                                                                  size_t begin, size_t end) {
  std::vector<const Instance::Launch*> mains;
  std::vector<Instance::Launch> copies;
  std::vector<MemberMemory> memory;
  for (size_t k = begin; k < end; ++k) {
    const Instance::Launch& launch = instance.launches[k];
    if (launch.kernel == program.step_kernels.at(launch.step).kernel) {
      mains.push_back(&launch);
      memory.push_back(member_memory(program, instance, program.graph->node(program.plan.steps[launch.step].node)));
    } else if (launch.alias_output >= 0 && !instance.scatter_copies_recorded) {
      copies.push_back(launch);
    } else {
      return std::nullopt;  // a base copy that runs first
    }
  }
  if (mains.size() != group.steps || !memory_disjoint(memory)) return std::nullopt;
  Instance::Launch grouped;
  grouped.step = group.first_step;
  grouped.kernel = group.kernel;
  grouped.grid = 0;
  for (const Instance::Launch* member : mains) {
    const size_t offset = grouped.fields.size();
    grouped.fields.insert(grouped.fields.end(), member->fields.begin(), member->fields.end());
    for (ExternalParam external : member->externals) {
      external.field += offset;
      grouped.externals.push_back(external);
    }
    grouped.grid += member->grid;
  }
  for (const Instance::Launch* member : mains) grouped.fields.push_back(member->grid);  // p.blocks
  return std::make_pair(std::move(grouped), std::move(copies));
}

}  // namespace

size_t group_launches(const CudaProgram& program, Instance& instance) {
  std::vector<Instance::Launch> launches;
  launches.reserve(instance.launches.size());
  size_t next = 0, grouped = 0;
  for (const KernelGroup& group : program.kernel_groups) {
    while (next < instance.launches.size() && instance.launches[next].step < group.first_step) {
      launches.push_back(std::move(instance.launches[next++]));
    }
    size_t end = next;
    while (end < instance.launches.size() && instance.launches[end].step < group.first_step + group.steps) ++end;
    auto combined = combine(program, instance, group, next, end);
    if (combined) {
      // Steps stay in order: the group launch carries its first step; the unrecorded copies follow.
      launches.push_back(std::move(combined->first));
      for (Instance::Launch& copy : combined->second) launches.push_back(std::move(copy));
      grouped += group.steps;
    } else {
      for (size_t k = next; k < end; ++k) launches.push_back(std::move(instance.launches[k]));
    }
    next = end;
  }
  for (; next < instance.launches.size(); ++next) launches.push_back(std::move(instance.launches[next]));
  instance.launches = std::move(launches);
  return grouped;
}

}  // namespace luminal::runtime::gpu
