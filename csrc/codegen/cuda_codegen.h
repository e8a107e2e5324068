// IR compute nodes -> CUDA C kernels (compiled at run time with NVRTC).
//
// Kernels follow the scalar semantics of the CPU interpreter exactly: f16/bf16 values are
// computed in f32 and rounded after every op, signed integer arithmetic wraps, integer division
// and modulo use floor semantics, max/min propagate NaN. A failed bounds check (or an integer
// division by zero) records an error in a device flag and uses index 0, so no kernel ever reads
// out of bounds; the host raises the error.
//
// Kernel sources name nothing after node ids, so identical computations produce identical text
// (the cache key).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "schedule/kernel_schedule.h"

namespace luminal::codegen {

// Kernel parameters are packed into one struct of 8-byte fields, in this order.
enum class ParamKind : uint8_t {
  Output,       // the node's output buffer
  Input,        // pointer of input slot `slot`
  ErrorFlag,    // int64[4] device error record
  CheckBase,    // the id of the kernel's first check label in the executor's table (see check_labels)
  Symbol,       // value of shape symbol `symbol`
  InputStride,  // run-time stride of input `slot`, dimension `dim` (elements)
  NodePointer,  // row kernels: the buffer of graph node `slot` (an input, constant or output)
  NodeStride,   // row kernels: run-time stride of graph input node `slot`, dimension `dim`
};

struct KernelParam {
  ParamKind kind;
  int slot = -1;
  int dim = -1;
  std::string symbol;
};

// How operands are laid out (decided by the executor; see schedule/kernel_schedule.h).
using schedule::Layout;
using schedule::OperandInfo;

struct Kernel {
  std::string name;
  std::string source;  // the kernel alone (the module adds the prelude)
  std::vector<KernelParam> params;
  schedule::KernelSchedule schedule;  // what the kernel was rendered with
  ir::Expr outputs;   // output elements per grid row (the largest piece for Pieces): a shape expression
  // The launch, from the schedule: threads = outputs * threads_per_output in blocks of block_size.
  int threads_per_output = 1;
  int block_size = 256;
  int grid_y = 1;     // pieces
  // Labels of the kernel's run-time checks (ir/check_label.h): a failed check k records the id
  // p.check_base + k in the error record, which the executor maps back to check_labels[k].
  // Labels stay out of the source, so equal computations of different ops share one kernel.
  std::vector<std::string> check_labels;
  // Node kernels: the device function that computes block b of a grid of g blocks,
  // `<group_entry>(const <name>_params& p, unsigned b, unsigned g)`, which a grouped launch calls
  // (render_kernel_group). Empty: the kernel runs only as its own launch.
  std::string group_entry;
  // A grouped launch: the kernels (indices in the program's list) whose blocks it runs, in order.
  std::vector<int> group_members;
};

// Error codes written into the device error record: [code, value, bound, check id (-1: none)].
enum class DeviceError : int64_t { None = 0, IndexOutOfBounds = 1, DivisionByZero = 2 };

// The kernel of a Pointwise, Reduce, Scatter or Attention node or a grouped-rows contraction, rendered with
// `schedule` and nothing else decided here. Raises schedule::ScheduleError (before writing
// anything) when the schedule does not fit the node.
Kernel render_kernel(const ir::Node& node, const std::vector<OperandInfo>& operands,
                     const schedule::KernelSchedule& schedule);

// render_kernel with today's rules (schedule::choose_schedule).
Kernel generate_kernel(const ir::Node& node, const std::vector<OperandInfo>& operands);

// One kernel for a whole row-local graph (see passes/row_plan.h): thread t computes batch row t
// of every node, keeping rows in registers, and writes the output rows. `graph` holds pointwise
// nodes only; `rows` is the batch extent. Inputs must be contiguous (the caller checks).
// Parameters are NodePointer/ErrorFlag/CheckBase/Symbol. The schedule must be ThreadPerRow
// (its block size: rows per block).
Kernel render_row_kernel(const ir::Graph& graph, const ir::Expr& rows, const schedule::KernelSchedule& schedule);

// render_row_kernel with schedule::choose_row_schedule().
Kernel generate_row_kernel(const ir::Graph& graph, const ir::Expr& rows);

// One launch for independent node kernels (each with a group_entry and the same block size):
// their blocks one kernel after another. Its parameter is the members' parameter structs in order
// (every field 8 bytes: pointers and lm_i64), then each member's block count (lm_i64); the
// module holds the members' text before it. `members` indexes `kernels`.
Kernel render_kernel_group(const std::vector<Kernel>& kernels, const std::vector<int>& members);

// The largest input a node kernel requests into L2 before it waits for the kernels ahead
// (the prelude's lm_prefetch_l2): a decode step's vectors and norm weights; larger inputs stream
// with the kernel's own loads.
constexpr int64_t kPrefetchBytes = 64 * 1024;

// Helper definitions every kernel relies on (no #includes: NVRTC needs no headers).
const std::string& prelude();

// One module source for several kernels.
std::string module_source(const std::vector<Kernel>& kernels);

}  // namespace luminal::codegen
