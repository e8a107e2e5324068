// Where every tensor of a plan lives, and a pure arena layout of the intermediates.
//
// plan_buffers decides placement and lifetimes from the graph and its plan of steps alone (no
// shapes): both executors share it. plan_memory then lays the intermediates out in one arena
// from their sizes and lifetimes (first fit; buffers whose lifetimes do not overlap share memory),
// a pure function with unit tests (tests/cpp/test_memory_plan.cpp). Steps run in order (one CUDA
// stream, or the CPU's one thread), so memory is free for reuse after its last reader's step.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "schedule/plan.h"

namespace luminal::runtime {

constexpr size_t kArenaAlignment = 256;

// Rounds up to kArenaAlignment; overflow raises (naming `what`).
size_t align_to_arena(size_t bytes, const std::string& what);

// ---- the pure layout -------------------------------------------------------------------------
struct BufferRequest {
  size_t bytes = 0;     // zero-byte buffers still get a distinct (aligned) slot
  int first_step = 0;   // the step that writes it
  int last_step = 0;    // the last step that reads it (>= first_step)
  // >= 0: the buffer takes over request `take_over`'s memory (a scatter into a base whose last
  // reader is this scatter): same offset, and the base's slot lives until this buffer's end. The
  // request taken over must come earlier, be at least as large and end where this one begins.
  int take_over = -1;
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // per request, multiples of kArenaAlignment
  size_t total = 0;             // the arena's bytes (a multiple of kArenaAlignment)
};

// Requests are placed in order, each at the lowest offset free throughout its lifetime. Sizes
// whose sum does not fit raise, naming `what`.
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, const std::string& what);

// ---- placement and lifetimes of a graph's tensors ---------------------------------------------
enum class Placement {
  Input,        // the caller's tensor
  Constant,     // the graph's weights
  Arena,        // an intermediate, in the arena
  Output,       // the caller's output tensor
  VirtualView,  // an affine view read by strides (schedule::Plan::views)
  Register,     // an intermediate of the row kernel, never in memory
};

struct BufferPlan {
  std::vector<Placement> placement;  // per node
  std::vector<int> output_of;        // per node: the graph output it is, or -1
  std::vector<int> step_of;          // per node: the step that computes it, or -1
  std::vector<int> last_use;         // per node: the last step that reads it (views: their base), or -1
  // Per node: the node whose arena slot it uses (itself, or the base a scatter took over; chains
  // of scatters share one slot). Only Arena nodes that are their own memory get a request.
  std::vector<ir::NodeId> memory_of;
  std::vector<ir::NodeId> takes_over;   // per node: the base whose slot a scatter took over, or -1
  std::vector<ir::NodeId> arena_nodes;  // the nodes with their own arena slot, in step order
};

BufferPlan plan_buffers(const ir::Graph& graph, const schedule::Plan& plan);

// Keeps node `id`'s memory allocated through step `step` (a scatter that took over its base: its
// slot's, which the base's own lifetime must not extend): steps that run at once (a kernel group)
// must not be given each other's memory.
void hold_through(BufferPlan& buffers, ir::NodeId id, int step);

// The arena layout for a buffer plan and the evaluated byte sizes of the nodes (per node id):
// offsets per node id (0 for nodes outside the arena; taken-over slots share their base's).
struct ArenaLayout {
  std::vector<size_t> offset;  // per node
  size_t total = 0;
};
ArenaLayout layout_arena(const BufferPlan& buffers, const std::vector<size_t>& node_bytes, const std::string& what);

}  // namespace luminal::runtime
