#include "runtime/cpu/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/checked.h"
#include "common/config.h"
#include "common/error.h"
#include "common/half.h"
#include "ir/simplify.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/gemm.h"

namespace luminal::runtime::cpu {

using ir::Expr;
using ir::ExprOp;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;

// A tensor available during a run: caller memory, constant bytes or an intermediate in the arena.
struct Executor::Buffer {
  const void* data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

namespace {

// Element counts of evaluated shapes; the sizes of every node that owns memory were already
// checked where it was allocated (prepare_destination), so this only guards what is derived.
int64_t product(const std::vector<int64_t>& sizes) { return element_count(sizes, "evaluated shape"); }

// Multi-dimensional counter over a shape, advanced one element at a time.
class IndexCounter {
 public:
  explicit IndexCounter(const std::vector<int64_t>& sizes) : sizes_(sizes), index_(sizes.size(), 0) {}
  int64_t operator[](size_t axis) const { return index_[axis]; }
  void advance() {
    for (size_t d = sizes_.size(); d-- > 0;) {
      if (++index_[d] < sizes_[d]) return;
      index_[d] = 0;
    }
  }

 private:
  std::vector<int64_t> sizes_;
  std::vector<int64_t> index_;
};

// Registers of a program's loop or reduce variables, by axis.
std::vector<std::pair<int, int>> variable_registers(const Program& program, ExprOp op) {
  std::vector<std::pair<int, int>> out;
  const auto& code = program.code();
  for (size_t r = 0; r < code.size(); ++r) {
    if (code[r].op == op && !code[r].fold_bound) out.emplace_back(static_cast<int>(r), code[r].slot);
  }
  return out;
}

// Fills the loop-variable registers of `regs` for the next n elements of `counter`.
void fill_loop_vars(const std::vector<std::pair<int, int>>& vars, Registers& regs, IndexCounter& counter, int n) {
  for (int i = 0; i < n; ++i) {
    for (const auto& [reg, axis] : vars) regs.i64(reg)[i] = counter[axis];
    counter.advance();
  }
}

void set_reduce_vars(const std::vector<std::pair<int, int>>& vars, Registers& regs,
                     const std::vector<int64_t>& extents, int64_t flat, int lane) {
  for (const auto& [reg, axis] : vars) {
    int64_t inner = 1;
    for (size_t d = axis + 1; d < extents.size(); ++d) inner *= extents[d];
    regs.i64(reg)[lane] = (flat / inner) % extents[axis];
  }
}

// Accumulator for one reduction output, kept in double (floats) or int64 (integers and bool).
struct Accumulator {
  ir::ReduceOp op;
  bool floating;
  double f = 0;
  int64_t i = 0;

  void reset() {
    switch (op) {
      case ir::ReduceOp::Sum:
      case ir::ReduceOp::Any:
        f = 0;
        i = 0;
        break;
      case ir::ReduceOp::Prod:
      case ir::ReduceOp::All:
        f = 1;
        i = 1;
        break;
      case ir::ReduceOp::Max:
        f = -std::numeric_limits<double>::infinity();
        i = std::numeric_limits<int64_t>::min();
        break;
      case ir::ReduceOp::Min:
        f = std::numeric_limits<double>::infinity();
        i = std::numeric_limits<int64_t>::max();
        break;
    }
  }

  void add(double v) {
    switch (op) {
      case ir::ReduceOp::Sum: f += v; break;
      case ir::ReduceOp::Prod: f *= v; break;
      case ir::ReduceOp::Max: f = (f != f || v != v) ? std::numeric_limits<double>::quiet_NaN() : std::max(f, v); break;
      case ir::ReduceOp::Min: f = (f != f || v != v) ? std::numeric_limits<double>::quiet_NaN() : std::min(f, v); break;
      case ir::ReduceOp::Any: f = (f != 0 || v != 0) ? 1 : 0; break;
      case ir::ReduceOp::All: f = (f != 0 && v != 0) ? 1 : 0; break;
    }
  }

  void add(int64_t v) {
    switch (op) {
      case ir::ReduceOp::Sum: i = static_cast<int64_t>(static_cast<uint64_t>(i) + static_cast<uint64_t>(v)); break;
      case ir::ReduceOp::Prod: i = static_cast<int64_t>(static_cast<uint64_t>(i) * static_cast<uint64_t>(v)); break;
      case ir::ReduceOp::Max: i = std::max(i, v); break;
      case ir::ReduceOp::Min: i = std::min(i, v); break;
      case ir::ReduceOp::Any: i = (i != 0 || v != 0); break;
      case ir::ReduceOp::All: i = (i != 0 && v != 0); break;
    }
  }
};

void store_scalar(DType dtype, void* out, int64_t offset, const Accumulator& acc) {
  switch (dtype) {
    case DType::F32: static_cast<float*>(out)[offset] = static_cast<float>(acc.f); break;
    case DType::F64: static_cast<double*>(out)[offset] = acc.f; break;
    case DType::F16: static_cast<uint16_t*>(out)[offset] = float_to_half_bits(static_cast<float>(acc.f)); break;
    case DType::BF16: static_cast<uint16_t*>(out)[offset] = float_to_bf16_bits(static_cast<float>(acc.f)); break;
    case DType::Bool: static_cast<uint8_t*>(out)[offset] = acc.i != 0; break;
    case DType::U8: static_cast<uint8_t*>(out)[offset] = static_cast<uint8_t>(acc.i); break;
    case DType::I8: static_cast<int8_t*>(out)[offset] = static_cast<int8_t>(acc.i); break;
    case DType::I16: static_cast<int16_t*>(out)[offset] = static_cast<int16_t>(acc.i); break;
    case DType::I32: static_cast<int32_t*>(out)[offset] = static_cast<int32_t>(acc.i); break;
    case DType::I64: static_cast<int64_t*>(out)[offset] = acc.i; break;
  }
}

// out[offsets[i]] = round(out[offsets[i]] + value[i]) for lanes in order: a scatter's accumulation,
// in the value's lane type (f32 for f16/bf16 storage, rounded once per add; wrapping integers; a
// logical or for bool).
void accumulate_lanes(DType dtype, const Instr& value, Registers& regs, int reg, int n, void* out,
                      const int64_t* offsets) {
  auto each = [&](auto* data, auto update) {
    for (int i = 0; i < n; ++i) data[offsets[i]] = update(data[offsets[i]], i);
  };
  const Lane expected = lane_of(ir::scatter_compute_dtype(dtype));
  LUMINAL_CHECK(value.lane == expected, "internal error: scatter accumulation into ", dtype_name(dtype), " from a ",
                dtype_name(value.dtype), " value");
  const float* f = value.lane == Lane::F32 ? regs.f32(reg) : nullptr;
  const double* d = value.lane == Lane::F64 ? regs.f64(reg) : nullptr;
  const int64_t* q = value.lane == Lane::I64 ? regs.i64(reg) : nullptr;
  auto wrap = [&](auto* data) {
    using T = std::remove_pointer_t<decltype(data)>;
    each(data, [&](T old, int i) { return static_cast<T>(static_cast<uint64_t>(old) + static_cast<uint64_t>(q[i])); });
  };
  switch (dtype) {
    case DType::F32: each(static_cast<float*>(out), [&](float old, int i) { return old + f[i]; }); break;
    case DType::F64: each(static_cast<double*>(out), [&](double old, int i) { return old + d[i]; }); break;
    case DType::F16:
      each(static_cast<uint16_t*>(out),
           [&](uint16_t old, int i) { return float_to_half_bits(half_bits_to_float(old) + f[i]); });
      break;
    case DType::BF16:
      each(static_cast<uint16_t*>(out),
           [&](uint16_t old, int i) { return float_to_bf16_bits(bf16_bits_to_float(old) + f[i]); });
      break;
    case DType::Bool: each(static_cast<uint8_t*>(out), [&](uint8_t old, int i) { return uint8_t(old != 0 || q[i] != 0); }); break;
    case DType::U8: wrap(static_cast<uint8_t*>(out)); break;
    case DType::I8: wrap(static_cast<int8_t*>(out)); break;
    case DType::I16: wrap(static_cast<int16_t*>(out)); break;
    case DType::I32: wrap(static_cast<int32_t*>(out)); break;
    case DType::I64: wrap(static_cast<int64_t*>(out)); break;
  }
}

void accumulate_lane(Accumulator& acc, const Instr& instr, Registers& regs, int reg, int lane) {
  switch (instr.lane) {
    case Lane::F32: acc.add(static_cast<double>(regs.f32(reg)[lane])); break;
    case Lane::F64: acc.add(regs.f64(reg)[lane]); break;
    case Lane::I64: acc.add(regs.i64(reg)[lane]); break;
  }
}

// Loads whose every index is provably inside the operand skip the run-time bounds check.
LoadProof load_proof(const ir::Graph& graph, const Node& node, ir::IndexRanges ranges) {
  return [&graph, &node, ranges = std::move(ranges)](const ir::ExprNode& load) {
    const ir::Node& operand = graph.node(node.inputs.at(load.index));
    for (size_t d = 0; d < load.load_rank(); ++d) {
      if (!ir::prove_in_range(load.args[d], operand.shape[d], ranges)) return false;
    }
    return true;
  };
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Planning
// ------------------------------------------------------------------------------------------------
namespace {

// One program: the target coordinates (results 0..rank-1), then the value.
std::unique_ptr<Program> scatter_program(const ir::Graph& g, const Node& node) {
  std::vector<Expr> roots = node.scatter_targets;
  roots.push_back(node.body);
  return std::make_unique<Program>(roots, node.origin, load_proof(g, node, ir::IndexRanges{node.scatter_domain, {}}));
}

}  // namespace

// Programs for the node's body (pieces of a pointwise node; a reduction's body and ragged extent).
void Executor::compile_node(const Node& node, NodePlan& plan) const {
  const ir::Graph& g = *graph_;
  switch (node.kind) {
    case NodeKind::Input:
    case NodeKind::Constant:
    case NodeKind::MatMul:
    case NodeKind::Attention: break;
    case NodeKind::Scatter: plan.body = scatter_program(g, node); break;
    case NodeKind::Pointwise:
      for (passes::PointwisePiece& piece : passes::split_pointwise(node)) {
        ir::Shape box = node.shape;
        if (piece.axis >= 0) box[piece.axis] = piece.extent;
        const ir::IndexRanges ranges{box, {}};
        plan.pieces.push_back(Piece{piece.axis, piece.begin, piece.extent,
                                    std::make_unique<Program>(std::vector<Expr>{piece.body}, node.origin,
                                                              load_proof(g, node, ranges))});
      }
      break;
    case NodeKind::Reduce: {
      ir::IndexRanges ranges{node.shape, {}};
      for (const Expr& extent : node.reduce_extents) {
        ranges.reduce_extents.push_back(ir::is_shape_expr(extent) ? extent : nullptr);
      }
      plan.body = std::make_unique<Program>(std::vector<Expr>{node.body}, node.origin, load_proof(g, node, ranges));
      if (!ir::is_shape_expr(node.reduce_extents[0])) {
        plan.extents = std::make_unique<Program>(std::vector<Expr>{node.reduce_extents[0]}, node.origin,
                                                 load_proof(g, node, ir::IndexRanges{node.shape, {}}));
      }
      break;
    }
  }
}

Executor::Executor(std::shared_ptr<const ir::Graph> graph)
    : graph_(std::move(graph)), plan_(schedule::plan_steps(*graph_)), buffers_(plan_buffers(*graph_, plan_)) {
  const ir::Graph& g = *graph_;
  plans_.resize(g.size());
  for (const Node& node : g.nodes()) compile_node(node, plans_[node.id]);
  // A view read only by matmuls is never materialized: the matmul reads its base by strides.
  for (NodeId view : plan_.views) plans_[view].view = passes::as_affine_view(g, view);
}

size_t Executor::kernel_count() const { return plan_.steps.size(); }

// ------------------------------------------------------------------------------------------------
// One call
// ------------------------------------------------------------------------------------------------
class Executor::Run {
 public:
  Run(const Executor& executor, const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
      const SymbolValues& symbols)
      : ex_(executor), graph_(*executor.graph_), inputs_(inputs), outputs_(outputs), symbols_(symbols),
        buffers_(graph_.size()), settings_(config()) {}

  void execute() {
    LUMINAL_CHECK(outputs_.size() == graph_.outputs.size(), "expected ", graph_.outputs.size(), " output views, got ",
                  outputs_.size());
    allocate_arena();
    const bool profile = settings_->profile;
    for (const Node& node : graph_.nodes()) {
      const NodePlan& plan = ex_.plans_[node.id];
      switch (ex_.buffers_.placement[node.id]) {
        case Placement::Input: bind_input(node); break;
        case Placement::Constant: bind_constant(node); break;
        case Placement::VirtualView: break;
        case Placement::Register: fail("internal error: the CPU engine has no row kernel (node %", node.id, ")");
        case Placement::Arena:
        case Placement::Output: {
          const auto start = std::chrono::steady_clock::now();
          prepare_destination(node);
          compute(node, plan);
          if (profile) {
            const std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
            std::fprintf(stderr, "[luminal cpu] %%%d %-12s %10.1f us  %s\n", node.id, ir::node_kind_name(node.kind),
                         elapsed.count(), node.origin.c_str());
          }
          break;
        }
      }
    }
  }

 private:
  void bind_input(const Node& node) {
    const TensorView& view = inputs_.at(node.input_position);
    LUMINAL_CHECK(view.device.type == DeviceType::CPU, "input #", node.input_position, " '", node.name,
                  "' is on ", device_name(view.device), "; the CPU executor needs CPU tensors");
    Buffer& b = buffers_[node.id];
    b.data = view.data;
    b.dtype = view.dtype;
    b.sizes = view.sizes;
    b.strides = view.strides;
  }

  void bind_constant(const Node& node) {
    const ir::ConstantData& c = *node.constant;
    Buffer& b = buffers_[node.id];
    b.data = c.bytes->data() + c.storage_offset * static_cast<int64_t>(dtype_size(c.dtype));
    b.dtype = c.dtype;
    b.sizes = c.sizes;
    b.strides = c.strides;
  }

  // One arena per call for every intermediate (runtime/memory_plan.h): buffers whose lifetimes do
  // not overlap share memory, as freeing each after its last reader did.
  void allocate_arena() {
    std::vector<size_t> bytes(graph_.size(), 0);
    for (NodeId id : ex_.buffers_.arena_nodes) {
      const Node& node = graph_.node(id);
      bytes[id] = tensor_bytes(evaluate(node.shape, symbols_), node.dtype, node.origin);
    }
    layout_ = layout_arena(ex_.buffers_, bytes, "the CPU arena of intermediates");
    arena_.reset(new uint8_t[std::max<size_t>(layout_.total, 1)]);
  }

  void prepare_destination(const Node& node) {
    Buffer& b = buffers_[node.id];
    b.dtype = node.dtype;
    b.sizes = evaluate(node.shape, symbols_);
    const size_t bytes = tensor_bytes(b.sizes, node.dtype, node.origin);
    b.strides = contiguous_strides(b.sizes);
    const int output = ex_.buffers_.output_of[node.id];
    if (output >= 0) {
      const TensorView& out = outputs_[output];
      LUMINAL_CHECK(out.dtype == node.dtype && out.sizes == b.sizes && out.is_contiguous() &&
                        out.device.type == DeviceType::CPU,
                    "internal error: output #", output, " view ", describe(out), " does not match ",
                    ir::node_signature(node));
      b.data = out.data;
      return;
    }
    b.data = arena_.get() + layout_.offset[node.id];
    // A scatter whose base is an intermediate that nothing reads afterwards writes into the base's
    // memory (memory_plan.h): it holds the base's values, so no copy and no poison.
    const NodeId base = ex_.buffers_.takes_over[node.id];
    if (base >= 0) {
      LUMINAL_CHECK(buffers_[base].data == b.data && buffers_[base].sizes == b.sizes, "internal error: ",
                    node.origin, " takes over the memory of %", base, ", which does not match it");
      return;
    }
    if (settings_->poison_outputs) std::memset(arena_.get() + layout_.offset[node.id], 0xFF, bytes);  // NaN; -1 for integers
  }

  void* destination(const Node& node) { return const_cast<void*>(buffers_[node.id].data); }

  std::vector<Operand> operands_of(const Node& node) {
    std::vector<Operand> out;
    for (NodeId input : node.inputs) {
      const Buffer& b = buffers_[input];
      LUMINAL_CHECK(b.data != nullptr || product(b.sizes) == 0, "internal error: ", node.origin,
                    " reads %", input, " which was not computed");
      out.push_back(Operand{b.data, b.dtype, b.strides, b.sizes});
    }
    return out;
  }

  void compute(const Node& node, const NodePlan& plan) {
    switch (node.kind) {
      case NodeKind::Pointwise: run_pointwise(node, plan); break;
      case NodeKind::Reduce: run_reduce(node, plan); break;
      case NodeKind::MatMul: run_matmul(node); break;
      case NodeKind::Scatter: run_scatter(node, plan); break;
      case NodeKind::Attention: run_attention(node); break;
      case NodeKind::Input:
      case NodeKind::Constant: break;
    }
  }

  // out = base (unless they share memory: an input updated in place, or a taken-over base), then
  // every element of the domain writes (or adds) its value at its target, in order.
  void run_scatter(const Node& node, const NodePlan& plan) {
    Buffer& out = buffers_[node.id];
    const Buffer& base = buffers_[node.inputs[0]];
    if (out.data != base.data) {
      copy_strided(base, destination(node));
      copied_bytes_ += static_cast<size_t>(product(out.sizes)) * dtype_size(node.dtype);
    }
    const std::vector<int64_t> domain = evaluate(node.scatter_domain, symbols_);
    const int64_t count = element_count(domain, node.origin);
    if (count == 0) return;
    const Program& program = *plan.body;
    const std::vector<Operand> operands = operands_of(node);
    const EvalContext ctx{&operands, &symbols_, nullptr};
    Registers regs(program);
    initialize_constants(program, regs, ctx);
    const auto loop_vars = variable_registers(program, ExprOp::LoopVar);
    const size_t rank = node.rank();
    const int value_reg = program.result(rank);
    const Instr& value = program.code()[value_reg];
    IndexCounter counter(domain);
    int64_t offsets[kLanes];
    for (int64_t start = 0; start < count; start += kLanes) {
      const int n = static_cast<int>(std::min<int64_t>(kLanes, count - start));
      fill_loop_vars(loop_vars, regs, counter, n);
      evaluate_program(program, regs, n, ctx);
      for (int i = 0; i < n; ++i) {
        int64_t offset = 0;
        for (size_t d = 0; d < rank; ++d) offset += regs.i64(program.result(d))[i] * out.strides[d];
        offsets[i] = offset;
      }
      if (node.scatter_accumulate) {
        accumulate_lanes(node.dtype, value, regs, value_reg, n, destination(node), offsets);
      } else {
        store_lanes(value, regs, value_reg, n, destination(node), 0, offsets);  // in order: the last write wins
      }
    }
  }

  // Copies a strided tensor into contiguous memory of the same sizes.
  static void copy_strided(const Buffer& from, void* to) {
    const size_t element = dtype_size(from.dtype);
    const int64_t count = product(from.sizes);
    if (from.strides == contiguous_strides(from.sizes)) {
      std::memcpy(to, from.data, static_cast<size_t>(count) * element);
      return;
    }
    IndexCounter counter(from.sizes);
    const auto* source = static_cast<const uint8_t*>(from.data);
    auto* target = static_cast<uint8_t*>(to);
    for (int64_t k = 0; k < count; ++k, counter.advance()) {
      int64_t offset = 0;
      for (size_t d = 0; d < from.sizes.size(); ++d) offset += counter[d] * from.strides[d];
      std::memcpy(target + k * static_cast<int64_t>(element), source + offset * static_cast<int64_t>(element), element);
    }
  }

  void run_pointwise(const Node& node, const NodePlan& plan) {
    const std::vector<Operand> operands = operands_of(node);
    for (const Piece& piece : plan.pieces) run_piece(node, piece, operands);
  }

  // One box of a pointwise node's iteration space.
  void run_piece(const Node& node, const Piece& piece, const std::vector<Operand>& operands) {
    const Buffer& out = buffers_[node.id];
    std::vector<int64_t> box = out.sizes;
    int64_t origin = 0;
    if (piece.axis >= 0) {
      box[piece.axis] = evaluate(piece.extent, symbols_);
      origin = evaluate(piece.begin, symbols_) * out.strides[piece.axis];
    }
    const int64_t numel = product(box);
    if (numel == 0) return;
    const Program& program = *piece.program;
    const EvalContext ctx{&operands, &symbols_, nullptr};
    Registers regs(program);
    initialize_constants(program, regs, ctx);
    const auto loop_vars = variable_registers(program, ExprOp::LoopVar);
    const int result_reg = program.result();
    const Instr& result = program.code()[result_reg];
    void* dst = destination(node);

    // Long rows: chunks stay inside one row, so the innermost index is an iota and the others are
    // constant over the chunk. Short rows: a counter walks the box element by element.
    const size_t rank = box.size();
    const int64_t row = rank > 0 ? box.back() : 1;
    if (rank > 0 && row >= kLanes / 8) {
      const std::vector<int64_t> outer(box.begin(), box.end() - 1);
      IndexCounter rows(outer);
      const int64_t inner_stride = out.strides.back();
      for (int64_t r = 0, count = product(outer); r < count; ++r, rows.advance()) {
        int64_t row_offset = origin;
        for (size_t d = 0; d + 1 < rank; ++d) row_offset += rows[d] * out.strides[d];
        for (int64_t start = 0; start < row; start += kLanes) {
          const int n = static_cast<int>(std::min<int64_t>(kLanes, row - start));
          for (const auto& [reg, axis] : loop_vars) {
            int64_t* lanes = regs.i64(reg);
            if (static_cast<size_t>(axis) + 1 == rank) {
              for (int i = 0; i < n; ++i) lanes[i] = start + i;
            } else {
              std::fill(lanes, lanes + n, rows[axis]);
            }
          }
          evaluate_program(program, regs, n, ctx);
          store_run(result, regs, result_reg, n, dst, row_offset + start * inner_stride, inner_stride);
        }
      }
      return;
    }
    IndexCounter counter(box);
    IndexCounter store_counter(box);
    int64_t offsets[kLanes];
    for (int64_t start = 0; start < numel; start += kLanes) {
      const int n = static_cast<int>(std::min<int64_t>(kLanes, numel - start));
      fill_loop_vars(loop_vars, regs, counter, n);
      evaluate_program(program, regs, n, ctx);
      if (piece.axis < 0) {
        store_lanes(result, regs, result_reg, n, dst, start);
        continue;
      }
      for (int i = 0; i < n; ++i) {
        int64_t offset = origin;
        for (size_t d = 0; d < rank; ++d) offset += store_counter[d] * out.strides[d];
        offsets[i] = offset;
        store_counter.advance();
      }
      store_lanes(result, regs, result_reg, n, dst, 0, offsets);
    }
  }

  // Stores n lanes at base, base + stride, ... (stride 1: a contiguous run).
  static void store_run(const Instr& result, Registers& regs, int reg, int n, void* dst, int64_t base,
                        int64_t stride) {
    if (stride == 1) {
      store_lanes(result, regs, reg, n, dst, base);
      return;
    }
    int64_t offsets[kLanes];
    for (int i = 0; i < n; ++i) offsets[i] = base + i * stride;
    store_lanes(result, regs, reg, n, dst, 0, offsets);
  }

  void run_reduce(const Node& node, const NodePlan& plan) {
    const Buffer& out = buffers_[node.id];
    const int64_t outputs = product(out.sizes);
    const Program& program = *plan.body;
    const std::vector<Operand> operands = operands_of(node);
    std::vector<int64_t> static_extents;
    if (!plan.extents) static_extents = evaluate(node.reduce_extents, symbols_);
    const int64_t static_total = plan.extents ? 0 : element_count(static_extents, node.origin);
    checked_mul(outputs, static_total, node.origin);  // the reduction's iteration space
    if (!plan.extents && outputs < kLanes && static_total > outputs) {
      reduce_along_lanes(node, program, operands, static_extents);
    } else {
      reduce_across_outputs(node, plan, operands, static_extents);
    }
  }

  // Few outputs, long reductions: lanes run over the reduction index of one output at a time.
  void reduce_along_lanes(const Node& node, const Program& program, const std::vector<Operand>& operands,
                          const std::vector<int64_t>& extents) {
    const Buffer& out = buffers_[node.id];
    const EvalContext ctx{&operands, &symbols_, nullptr};
    Registers regs(program);
    initialize_constants(program, regs, ctx);
    const auto loop_vars = variable_registers(program, ExprOp::LoopVar);
    const auto reduce_vars = variable_registers(program, ExprOp::ReduceVar);
    const Instr& result = program.code()[program.result()];
    const int64_t total = product(extents);
    IndexCounter counter(out.sizes);
    Accumulator acc{node.reduce_op, is_floating(node.dtype)};
    for (int64_t o = 0, outputs = product(out.sizes); o < outputs; ++o) {
      for (const auto& [reg, axis] : loop_vars) std::fill(regs.i64(reg), regs.i64(reg) + kLanes, counter[axis]);
      counter.advance();
      acc.reset();
      for (int64_t r0 = 0; r0 < total; r0 += kLanes) {
        const int n = static_cast<int>(std::min<int64_t>(kLanes, total - r0));
        for (int i = 0; i < n; ++i) set_reduce_vars(reduce_vars, regs, extents, r0 + i, i);
        evaluate_program(program, regs, n, ctx);
        for (int i = 0; i < n; ++i) accumulate_lane(acc, result, regs, program.result(), i);
      }
      store_scalar(node.dtype, destination(node), o, acc);
    }
  }

  // Lanes run over outputs; the reduction index advances in lockstep (ragged extents mask lanes).
  void reduce_across_outputs(const Node& node, const NodePlan& plan, const std::vector<Operand>& operands,
                             const std::vector<int64_t>& static_extents) {
    const Buffer& out = buffers_[node.id];
    const int64_t outputs = product(out.sizes);
    const Program& program = *plan.body;
    uint8_t active[kLanes];
    EvalContext ctx{&operands, &symbols_, nullptr};
    Registers regs(program);
    initialize_constants(program, regs, ctx);
    const auto loop_vars = variable_registers(program, ExprOp::LoopVar);
    const auto reduce_vars = variable_registers(program, ExprOp::ReduceVar);
    const Instr& result = program.code()[program.result()];

    std::optional<Registers> extent_regs;
    std::vector<std::pair<int, int>> extent_loop_vars;
    if (plan.extents) {
      extent_regs.emplace(*plan.extents);
      initialize_constants(*plan.extents, *extent_regs, EvalContext{&operands, &symbols_, nullptr});
      extent_loop_vars = variable_registers(*plan.extents, ExprOp::LoopVar);
    }
    const int64_t static_total = plan.extents ? 0 : product(static_extents);
    IndexCounter counter(out.sizes);
    std::vector<Accumulator> acc(kLanes, Accumulator{node.reduce_op, is_floating(node.dtype)});
    int64_t extent[kLanes];
    for (int64_t start = 0; start < outputs; start += kLanes) {
      const int n = static_cast<int>(std::min<int64_t>(kLanes, outputs - start));
      IndexCounter extent_counter = counter;
      fill_loop_vars(loop_vars, regs, counter, n);
      int64_t longest = static_total;
      if (plan.extents) {
        fill_loop_vars(extent_loop_vars, *extent_regs, extent_counter, n);
        evaluate_program(*plan.extents, *extent_regs, n, EvalContext{&operands, &symbols_, nullptr});
        const int64_t* values = extent_regs->i64(plan.extents->result());
        longest = 0;
        for (int i = 0; i < n; ++i) {
          extent[i] = values[i];
          longest = std::max(longest, values[i]);
        }
      }
      for (int i = 0; i < n; ++i) acc[i].reset();
      for (int64_t r = 0; r < longest; ++r) {
        for (int i = 0; i < n; ++i) {
          if (plan.extents) {
            active[i] = r < extent[i];
            for (const auto& [reg, axis] : reduce_vars) regs.i64(reg)[i] = r;
          } else {
            set_reduce_vars(reduce_vars, regs, static_extents, r, i);
          }
        }
        ctx.active = plan.extents ? active : nullptr;
        evaluate_program(program, regs, n, ctx);
        for (int i = 0; i < n; ++i) {
          if (!plan.extents || active[i]) accumulate_lane(acc[i], result, regs, program.result(), i);
        }
      }
      for (int i = 0; i < n; ++i) store_scalar(node.dtype, destination(node), start + i, acc[i]);
    }
  }

  // The operand as a strided [batch, rows, cols] matrix (a virtual view is resolved by strides).
  // The memory of an operand read by strides: its buffer, or for a view read in place (a virtual
  // view), its base's memory with the view's strides.
  std::pair<const void*, std::vector<int64_t>> strided_operand(NodeId id) {
    const NodePlan& plan = ex_.plans_[id];
    const void* data;
    std::vector<int64_t> strides;
    if (ex_.buffers_.placement[id] == Placement::VirtualView) {
      const Buffer& base = buffers_[plan.view->base];
      passes::require_row_major_base(*plan.view, base.sizes, base.strides);
      const size_t out_rank = graph_.node(id).rank();
      strides.assign(out_rank, 0);
      int64_t offset = 0;
      for (size_t d = 0; d < base.strides.size(); ++d) {
        offset += evaluate(plan.view->offset[d], symbols_) * base.strides[d];
        for (size_t j = 0; j < out_rank; ++j) {
          strides[j] += evaluate(plan.view->coefficients[d][j], symbols_) * base.strides[d];
        }
      }
      data = static_cast<const uint8_t*>(base.data) + offset * static_cast<int64_t>(dtype_size(base.dtype));
    } else {
      data = buffers_[id].data;
      strides = buffers_[id].strides;
    }
    return {data, strides};
  }

  MatrixView matrix_operand(NodeId id, size_t rank) {
    const auto [data, strides] = strided_operand(id);
    MatrixView view;
    view.data = data;
    view.batch_stride = rank == 3 ? strides[0] : 0;
    view.row_stride = strides[rank - 2];
    view.col_stride = strides[rank - 1];
    return view;
  }

  void run_attention(const Node& node) {
    std::vector<AttentionOperand> operands;
    for (NodeId input : node.inputs) {
      auto [data, strides] = strided_operand(input);
      const Node& producer = graph_.node(input);
      operands.push_back(AttentionOperand{data, producer.dtype, evaluate(producer.shape, symbols_), std::move(strides)});
    }
    if (product(buffers_[node.id].sizes) == 0) return;
    attention(operands[0], operands[1], operands[2], operands.size() > 3 ? &operands[3] : nullptr,
              node.attention_scale, node.attention_causal, destination(node));
  }

  void run_matmul(const Node& node) {
    const std::vector<int64_t>& sizes = buffers_[node.id].sizes;
    const size_t rank = sizes.size();
    const std::vector<int64_t> a_sizes = evaluate(graph_.node(node.inputs[0]).shape, symbols_);
    const int64_t batch = rank == 3 ? sizes[0] : 1;
    gemm(node.dtype, batch, sizes[rank - 2], sizes[rank - 1], a_sizes[rank - 1], matrix_operand(node.inputs[0], rank),
         matrix_operand(node.inputs[1], rank), destination(node));
    if (node.epilogue != ir::MatMulEpilogue::None) apply_epilogue(node);
  }

  // out = act(out + bias[n]), in the output's dtype (rounding once more for f16/bf16, as a
  // separate eager op would).
  void apply_epilogue(const Node& node) {
    const Buffer& bias = buffers_[node.inputs[2]];
    const Buffer& out = buffers_[node.id];
    const int64_t n = out.sizes.back();
    const int64_t rows = product(out.sizes) / std::max<int64_t>(n, 1);
    const bool relu = node.epilogue == ir::MatMulEpilogue::BiasRelu;
    const bool gelu = node.epilogue == ir::MatMulEpilogue::BiasGeluTanh;
    auto apply = [&](auto* data, const auto* b, auto to_float, auto from_float) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          // Rounded after the add, as eager's addmm is, before the activation.
          float v = to_float(from_float(to_float(data[r * n + j]) + to_float(b[j * bias.strides[0]])));
          if (relu && v < 0) v = 0;  // NaN stays NaN
          if (gelu) v = gelu_tanh(v);
          data[r * n + j] = from_float(v);
        }
      }
    };
    auto identity = [](auto v) { return v; };
    void* data = destination(node);
    switch (node.dtype) {
      case DType::F32: apply(static_cast<float*>(data), static_cast<const float*>(bias.data), identity, identity); break;
      case DType::F64: {
        double* d = static_cast<double*>(data);
        const double* b = static_cast<const double*>(bias.data);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < n; ++j) {
            double v = d[r * n + j] + b[j * bias.strides[0]];
            if (relu && v < 0) v = 0;
            if (gelu) v = gelu_tanh(v);
            d[r * n + j] = v;
          }
        }
        break;
      }
      case DType::F16:
        apply(static_cast<uint16_t*>(data), static_cast<const uint16_t*>(bias.data), half_bits_to_float, float_to_half_bits);
        break;
      case DType::BF16:
        apply(static_cast<uint16_t*>(data), static_cast<const uint16_t*>(bias.data), bf16_bits_to_float, float_to_bf16_bits);
        break;
      default: fail("internal error: matmul epilogue on ", dtype_name(node.dtype));
    }
  }

  const Executor& ex_;
  const ir::Graph& graph_;
  const std::vector<TensorView>& inputs_;
  const std::vector<TensorView>& outputs_;
  const SymbolValues& symbols_;
  std::vector<Buffer> buffers_;
  const std::shared_ptr<const Config> settings_;  // read once per call, not per node
  ArenaLayout layout_;                  // this call's offsets of the intermediates
  std::unique_ptr<uint8_t[]> arena_;    // the intermediates' memory

 public:
  size_t copied_bytes_ = 0;  // scatter bases copied in this call
};

size_t Executor::run(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs,
                     const SymbolValues& symbols) const {
  Run run(*this, inputs, outputs, symbols);
  run.execute();
  return run.copied_bytes_;
}

}  // namespace luminal::runtime::cpu
