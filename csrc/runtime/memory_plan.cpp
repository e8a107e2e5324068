#include "runtime/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "common/checked.h"
#include "common/error.h"

namespace luminal::runtime {

using ir::Node;
using ir::NodeId;

size_t align_to_arena(size_t bytes, const std::string& what) {
  return checked_add(bytes, kArenaAlignment - 1, what) / kArenaAlignment * kArenaAlignment;
}

namespace {

// The request whose slot request k uses (itself, or the start of its take-over chain).
std::vector<size_t> resolve_take_overs(const std::vector<BufferRequest>& requests) {
  std::vector<size_t> root(requests.size());
  for (size_t k = 0; k < requests.size(); ++k) {
    const BufferRequest& r = requests[k];
    LUMINAL_CHECK(r.first_step <= r.last_step, "internal error: buffer ", k, " ends (step ", r.last_step,
                  ") before it begins (step ", r.first_step, ")");
    root[k] = k;
    if (r.take_over < 0) continue;
    const auto base = static_cast<size_t>(r.take_over);
    LUMINAL_CHECK(base < k, "internal error: buffer ", k, " takes over buffer ", r.take_over, ", which is not earlier");
    LUMINAL_CHECK(requests[base].last_step <= r.first_step, "internal error: buffer ", k, " takes over buffer ", base,
                  ", which is still read after step ", r.first_step);
    root[k] = root[base];
    LUMINAL_CHECK(r.bytes <= requests[root[k]].bytes, "internal error: buffer ", k, " (", r.bytes,
                  " bytes) takes over a smaller buffer (", requests[root[k]].bytes, " bytes)");
  }
  return root;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, const std::string& what) {
  const std::vector<size_t> root = resolve_take_overs(requests);
  // A slot lives from its first writer to the last reader of anything that took it over.
  std::vector<int> slot_end(requests.size());
  for (size_t k = 0; k < requests.size(); ++k) slot_end[k] = requests[k].last_step;
  for (size_t k = 0; k < requests.size(); ++k) {
    slot_end[root[k]] = std::max({slot_end[root[k]], requests[k].last_step, requests[k].first_step});
  }
  struct Block {
    size_t offset, bytes;
    int begin, end;
  };
  std::vector<Block> blocks;
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  for (size_t k = 0; k < requests.size(); ++k) {
    if (root[k] != k) {
      plan.offsets[k] = plan.offsets[root[k]];
      continue;
    }
    // Byte counts are at most 2**63 each (tensor_bytes), but their sum may not fit: checked.
    const size_t bytes = align_to_arena(std::max<size_t>(requests[k].bytes, 1), what);
    const int begin = requests[k].first_step, end = slot_end[k];
    // First fit among the regions free during [begin, end].
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Block& b : blocks) {
      if (b.begin <= end && begin <= b.end) busy.emplace_back(b.offset, b.offset + b.bytes);
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset <= lo && lo - offset >= bytes) break;  // (offset + bytes could wrap)
      offset = std::max(offset, hi);
    }
    const size_t end_offset = checked_add(offset, bytes, what);
    blocks.push_back(Block{offset, bytes, begin, end});
    plan.total = std::max(plan.total, end_offset);
    plan.offsets[k] = offset;
  }
  return plan;
}

// ------------------------------------------------------------------------------------------------
// Placement and lifetimes
// ------------------------------------------------------------------------------------------------
namespace {

void place_nodes(const ir::Graph& g, const schedule::Plan& plan, BufferPlan& out) {
  std::vector<bool> is_view(g.size(), false);
  for (NodeId view : plan.views) is_view[view] = true;
  for (const Node& node : g.nodes()) {
    Placement& p = out.placement[node.id];
    if (node.kind == ir::NodeKind::Input) p = Placement::Input;
    if (node.kind == ir::NodeKind::Constant) p = Placement::Constant;
    if (node.is_compute() && out.step_of[node.id] < 0) {
      // Not computed by a step of its own: read by strides, or inside the row kernel.
      LUMINAL_CHECK(is_view[node.id] || plan.is_row_kernel(), "internal error: node %", node.id,
                    " is neither a step nor a view of the plan");
      p = is_view[node.id] ? Placement::VirtualView : Placement::Register;
    }
    if (out.output_of[node.id] >= 0) p = Placement::Output;
  }
}

void find_last_uses(const ir::Graph& g, const schedule::Plan& plan, BufferPlan& out) {
  for (const schedule::Step& step : plan.steps) {
    const int s = out.step_of[step.node];
    for (NodeId input : g.node(step.node).inputs) {
      out.last_use[input] = std::max(out.last_use[input], s);
      if (out.placement[input] == Placement::VirtualView) {
        const NodeId base = g.node(input).inputs.at(0);  // an affine view reads its input 0
        out.last_use[base] = std::max(out.last_use[base], s);
      }
    }
  }
}

// A scatter into an intermediate that nothing reads afterwards takes over the base's memory: no
// copy, one buffer (a chain of scatters shares it).
void find_take_overs(const ir::Graph& g, const schedule::Plan& plan, BufferPlan& out) {
  for (const schedule::Step& step : plan.steps) {
    const Node& node = g.node(step.node);
    if (step.kind != schedule::StepKind::Scatter || out.placement[node.id] != Placement::Arena) continue;
    const NodeId base = node.inputs[0];
    if (out.placement[base] != Placement::Arena || out.last_use[base] != out.step_of[node.id]) continue;
    out.memory_of[node.id] = out.memory_of[base];
    out.takes_over[node.id] = base;
  }
}

}  // namespace

BufferPlan plan_buffers(const ir::Graph& g, const schedule::Plan& plan) {
  BufferPlan out;
  out.placement.assign(g.size(), Placement::Arena);
  out.output_of.assign(g.size(), -1);
  out.step_of.assign(g.size(), -1);
  out.last_use.assign(g.size(), -1);
  out.memory_of.resize(g.size());
  out.takes_over.assign(g.size(), -1);
  std::iota(out.memory_of.begin(), out.memory_of.end(), 0);
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    if (g.outputs[k].kind == ir::GraphOutput::Kind::Tensor) out.output_of[g.outputs[k].node] = static_cast<int>(k);
  }
  for (size_t s = 0; s < plan.steps.size(); ++s) out.step_of[plan.steps[s].node] = static_cast<int>(s);
  place_nodes(g, plan, out);
  find_last_uses(g, plan, out);
  find_take_overs(g, plan, out);
  for (const schedule::Step& step : plan.steps) {
    if (out.placement[step.node] == Placement::Arena) out.arena_nodes.push_back(step.node);
  }
  return out;
}

void hold_through(BufferPlan& buffers, NodeId id, int step) { buffers.last_use.at(id) = std::max(buffers.last_use[id], step); }

ArenaLayout layout_arena(const BufferPlan& buffers, const std::vector<size_t>& node_bytes, const std::string& what) {
  std::vector<BufferRequest> requests;
  std::vector<int> request_of(buffers.placement.size(), -1);
  for (NodeId id : buffers.arena_nodes) {
    BufferRequest r;
    r.bytes = node_bytes.at(id);
    r.first_step = buffers.step_of[id];
    r.last_step = std::max(buffers.last_use[id], buffers.step_of[id]);
    // The base a scatter takes over is an earlier arena node (its input 0).
    if (buffers.takes_over[id] >= 0) r.take_over = request_of.at(buffers.takes_over[id]);
    request_of[id] = static_cast<int>(requests.size());
    requests.push_back(r);
  }
  const MemoryPlan memory = plan_memory(requests, what);
  ArenaLayout layout;
  layout.offset.assign(buffers.placement.size(), 0);
  for (NodeId id : buffers.arena_nodes) layout.offset[id] = memory.offsets[request_of[id]];
  layout.total = memory.total;
  return layout;
}

}  // namespace luminal::runtime
