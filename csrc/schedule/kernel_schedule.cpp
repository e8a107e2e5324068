#include "schedule/kernel_schedule.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/expr_memo.h"
#include "ir/simplify.h"
#include "passes/passes.h"

namespace luminal::schedule {

using ir::Expr;
using ir::ExprOp;
using ir::Node;
using ir::NodeKind;

const char* mapping_name(Mapping mapping) {
  switch (mapping) {
    case Mapping::Elementwise: return "elementwise";
    case Mapping::Pieces: return "pieces";
    case Mapping::ThreadPerOutput: return "thread_per_output";
    case Mapping::WarpPerOutput: return "warp_per_output";
    case Mapping::Scatter: return "scatter";
    case Mapping::GroupedRows: return "grouped_rows";
    case Mapping::ThreadPerRow: return "thread_per_row";
    case Mapping::Attention: return "attention";
    case Mapping::WarpPerRow: return "warp_per_row";
    case Mapping::BlockPerRow: return "block_per_row";
  }
  return "?";
}

bool KernelSchedule::operator==(const KernelSchedule& other) const {
  return mapping == other.mapping && block_size == other.block_size && threads_per_output == other.threads_per_output &&
         vector_width == other.vector_width && unroll == other.unroll && pieces == other.pieces &&
         row_vector == other.row_vector && key_split == other.key_split && key_rows == other.key_rows &&
         value_rows == other.value_rows;
}

std::string to_string(const KernelSchedule& s) {
  std::string text = str_cat(mapping_name(s.mapping), "(block ", s.block_size, ", ", s.threads_per_output,
                              " threads/output, vector ", s.vector_width, ", unroll ", s.unroll);
  if (s.mapping == Mapping::Pieces || s.pieces != 1) text += str_cat(", ", s.pieces, " pieces");
  if (is_row_mapping(s.mapping) || s.row_vector != 1) text += str_cat(", row vector ", s.row_vector);
  if (s.key_split != 1) text += str_cat(", key split ", s.key_split);
  if (s.key_rows.input >= 0 || s.value_rows.input >= 0) {
    text += str_cat(", early keys (rows of %", s.key_rows.input, " and %", s.value_rows.input, ")");
  }
  return text + ")";
}

ScheduleError::ScheduleError(std::string node, const KernelSchedule& schedule, std::string reason)
    : Error(str_cat("cannot render ", node, " with schedule ", to_string(schedule), ": ", reason)),
      node_(std::move(node)),
      schedule_(schedule),
      reason_(std::move(reason)) {}

// ------------------------------------------------------------------------------------------------
// Analyses
// ------------------------------------------------------------------------------------------------

bool has_top_level_fold(const Expr& body, int64_t min_extent) {
  bool found = false;
  std::function<void(const Expr&, bool)> walk = [&](const Expr& e, bool in_loop) {
    if (found) return;
    if (e->op == ExprOp::Fold) {
      const auto extent = ir::as_int_const(e->args[0]);
      if (!in_loop && (min_extent <= 0 || (extent && *extent >= min_extent))) found = true;
      walk(e->args[0], in_loop);
      walk(e->args[1], true);
      return;
    }
    for (const Expr& arg : e->args) walk(arg, in_loop);
  };
  walk(body, false);
  return found;
}

bool has_row_invariant_fold(const Node& node) {
  if (node.kind != NodeKind::Pointwise || node.rank() == 0 || node.shape.back()->is_int_const(1)) return false;
  const int innermost = static_cast<int>(node.rank()) - 1;
  bool found = false;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (found) return;
    if (e->op == ExprOp::Fold) {
      found = !ir::reads_loop_var(e, innermost);
      return;  // folds nested in this one are computed with it
    }
    for (const Expr& arg : e->args) walk(arg);
  };
  walk(node.body);
  return found;
}

std::vector<Expr> rendered_bodies(const Node& node, Mapping mapping) {
  switch (mapping) {
    case Mapping::Pieces: {
      std::vector<Expr> bodies;
      for (const passes::PointwisePiece& piece : passes::split_pointwise(node)) bodies.push_back(piece.body);
      return bodies;
    }
    case Mapping::Scatter: {
      std::vector<Expr> bodies = node.scatter_targets;
      bodies.push_back(node.body);
      return bodies;
    }
    case Mapping::GroupedRows:  // operands are read through loads of the operands alone
    case Mapping::Attention: return {};
    case Mapping::ThreadPerOutput:
    case Mapping::WarpPerOutput: {
      std::vector<Expr> bodies{node.body};  // a ragged reduction's extent is rendered too
      if (node.kind == NodeKind::Reduce) bodies.insert(bodies.end(), node.reduce_extents.begin(), node.reduce_extents.end());
      return bodies;
    }
    case Mapping::Elementwise:
    case Mapping::WarpPerRow:
    case Mapping::BlockPerRow:
    case Mapping::ThreadPerRow: return {node.body};
  }
  return {node.body};
}

namespace {

// The float4 test of one fold (see float4_fold_loads), memoizing the structural walks.
class Float4Analysis {
 public:
  explicit Float4Analysis(const std::vector<OperandInfo>& operands) : operands_(operands) {}

  std::optional<std::vector<Expr>> loads_of(const Expr& fold) {
    const std::optional<int64_t> extent = ir::as_int_const(fold->args[0]);
    if (!extent || *extent <= 0 || *extent % kFloat4 != 0) return std::nullopt;
    std::vector<Expr> loads;
    std::unordered_set<const ir::ExprNode*> seen;
    if (!collect(fold->args[1], fold->index, loads, seen) || loads.empty()) return std::nullopt;
    for (const Expr& load : loads) {
      if (!layout_allows(load)) return std::nullopt;
    }
    return loads;
  }

 private:
  bool varies_with(const Expr& e, int var) {
    const std::vector<int>& vars = ir::free_reduce_vars(e, free_vars_);
    return std::find(vars.begin(), vars.end(), var) != vars.end();
  }

  // Lazily evaluated `where` branches: those that load memory or loop (as the kernel writer).
  bool expensive(const Expr& e) { return ir::loads_or_folds(e, expensive_); }

  // The loads of `e` that vary with `var`, or false when a part varying with `var` rules the
  // vector loop out.
  bool collect(const Expr& e, int var, std::vector<Expr>& loads, std::unordered_set<const ir::ExprNode*>& seen) {
    if (!seen.insert(e.get()).second || !varies_with(e, var)) return true;
    if (e->op == ExprOp::Fold || e->op == ExprOp::CheckIndex) return false;
    if (e->op == ExprOp::Where && (expensive(e->args[1]) || expensive(e->args[2]))) return false;
    if (e->op == ExprOp::Load) {
      if (e->masked || e->load_rank() == 0) return false;
      const OperandInfo& op = operands_.at(e->index);
      if (op.dtype != DType::F32 || op.layout == Layout::Row) return false;
      const size_t last = e->load_rank() - 1;
      const Expr& inner = e->args[last];
      if (inner->op != ExprOp::ReduceVar || inner->index != var) return false;
      for (size_t d = 0; d < last; ++d) {
        if (varies_with(e->args[d], var)) return false;
      }
      loads.push_back(e);
      return true;
    }
    for (const Expr& arg : e->args) {
      if (!collect(arg, var, loads, seen)) return false;
    }
    return true;
  }

  // The part of the alignment test known before run time: contiguous operands need an innermost
  // size that is a multiple of 4, fixed strides must be unit innermost and multiples of 4 outside
  // (strided operands are tested at run time).
  bool layout_allows(const Expr& load) const {
    const OperandInfo& op = operands_.at(load->index);
    const size_t last = load->load_rank() - 1;
    switch (op.layout) {
      case Layout::Contiguous: {
        const std::optional<int64_t> inner = ir::as_int_const(op.shape[last]);
        return inner && *inner % kFloat4 == 0;
      }
      case Layout::Fixed:
        if (op.fixed_strides.at(last) != 1) return false;
        for (size_t d = 0; d < last; ++d) {
          if (op.fixed_strides[d] % kFloat4 != 0) return false;
        }
        return true;
      case Layout::Strided: return true;
      case Layout::Row: return false;
    }
    return false;
  }

  const std::vector<OperandInfo>& operands_;
  ir::ExprMemo<std::vector<int>> free_vars_;
  ir::ExprMemo<bool> expensive_;
};

}  // namespace

std::optional<std::vector<Expr>> float4_fold_loads(const Expr& fold, const std::vector<OperandInfo>& operands) {
  LUMINAL_CHECK(fold->op == ExprOp::Fold, "internal error: float4_fold_loads of a ", ir::expr_op_name(fold->op));
  return Float4Analysis(operands).loads_of(fold);
}

bool has_float4_fold(const std::vector<Expr>& bodies, const std::vector<OperandInfo>& operands) {
  Float4Analysis analysis(operands);
  std::unordered_set<const ir::ExprNode*> seen;
  bool found = false;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (found || !seen.insert(e.get()).second) return;
    if (e->op == ExprOp::Fold && analysis.loads_of(e)) {
      found = true;
      return;
    }
    for (const Expr& arg : e->args) walk(arg);
  };
  for (const Expr& body : bodies) walk(body);
  return found;
}

int row_vector_width(const Node& node, const std::vector<OperandInfo>& operands) {
  if (node.kind != NodeKind::Pointwise || node.shape.empty()) return 1;
  const std::optional<int64_t> length = ir::as_int_const(node.shape.back());
  if (!length || *length <= 0) return 1;
  size_t widest = dtype_size(node.dtype);
  ir::visit(node.body, [&](const Expr& e) {
    if (e->op == ExprOp::Load) widest = std::max(widest, dtype_size(operands.at(e->index).dtype));
  });
  int width = static_cast<int>(std::min<size_t>(8, 16 / widest));
  while (width > 1 && *length % width != 0) width /= 2;
  return std::max(width, 1);
}

bool row_vector_load(const Expr& load, int var, int width, const std::vector<OperandInfo>& operands) {
  if (load->op != ExprOp::Load || load->masked || load->load_rank() == 0 || width < 2) return false;
  const OperandInfo& op = operands.at(load->index);
  if (op.layout == Layout::Row || dtype_size(op.dtype) * width > 16) return false;
  const size_t last = load->load_rank() - 1;
  const Expr& inner = load->args[last];
  if (inner->op != ExprOp::ReduceVar || inner->index != var) return false;
  for (size_t d = 0; d < last; ++d) {
    const std::vector<int> vars = ir::free_reduce_vars(load->args[d]);
    if (std::find(vars.begin(), vars.end(), var) != vars.end()) return false;
  }
  switch (op.layout) {
    case Layout::Contiguous: {
      const std::optional<int64_t> size = ir::as_int_const(op.shape[last]);
      return size && *size % width == 0;
    }
    case Layout::Fixed:
      if (op.fixed_strides.at(last) != 1) return false;
      for (size_t d = 0; d < last; ++d) {
        if (op.fixed_strides[d] % width != 0) return false;
      }
      return true;
    case Layout::Strided: return true;
    case Layout::Row: return false;
  }
  return false;
}

bool unroll_fits(const Node& node, int unroll) {
  if (unroll == 1) return true;
  if (unroll != 2 && unroll != 4 && unroll != 8) return false;
  if (node.kind != NodeKind::Pointwise || node.shape.empty()) return false;
  const std::optional<int64_t> inner = ir::as_int_const(node.shape.back());
  return inner && *inner % unroll == 0;
}

// ------------------------------------------------------------------------------------------------
// Rules
// ------------------------------------------------------------------------------------------------

namespace {

// Whether every reduce extent is a constant and their product is below kWarpReduceLength.
bool short_static_reduction(const Node& node) {
  int64_t length = 1;
  for (const Expr& extent : node.reduce_extents) {
    const std::optional<int64_t> value = ir::as_int_const(extent);
    if (!value || *value >= kWarpReduceLength) return false;  // symbolic or long on its own
    length *= *value;                                          // both factors < 32: no overflow
    if (length >= kWarpReduceLength) return false;
  }
  return true;
}

// A warp per output pays off when consecutive reduction steps read consecutive memory, and the
// reduction is long enough to keep the warp's lanes busy: a short static one (a 3x3 pooling
// window: 9 steps) would leave most lanes idle and pay a shuffle reduction per output.
Mapping reduce_mapping(const Node& node) {
  const bool ragged = !ir::is_shape_expr(node.reduce_extents[0]);
  if (ragged) return Mapping::ThreadPerOutput;
  if (short_static_reduction(node)) return Mapping::ThreadPerOutput;
  bool reduction_is_innermost = false;
  ir::visit(node.body, [&](const Expr& e) {
    if (e->op != ExprOp::Load || e->load_rank() == 0) return;
    const Expr& last = e->args[e->load_rank() - 1];
    if (ir::contains_op(last, ExprOp::ReduceVar)) reduction_is_innermost = true;
  });
  return reduction_is_innermost ? Mapping::WarpPerOutput : Mapping::ThreadPerOutput;
}

// At most kBlockRowMaxRows rows (all dimensions but the innermost, static) of a static length of
// at least kBlockRowMinLength: a warp per row would keep a few SMs busy, each lane many loads deep.
bool few_long_rows(const Node& node) {
  if (node.rank() == 0) return false;
  const std::optional<int64_t> length = ir::as_int_const(node.shape.back());
  const ir::Shape rows_shape(node.shape.begin(), node.shape.end() - 1);
  const std::optional<int64_t> rows = ir::as_int_const(ir::simplify(ir::product(rows_shape), {}));
  return length && rows && *length >= kBlockRowMinLength && *rows <= kBlockRowMaxRows;
}

KernelSchedule with_mapping(Mapping mapping, int pieces = 1) {
  KernelSchedule s;
  s.mapping = mapping;
  s.pieces = pieces;
  s.threads_per_output = mapping == Mapping::WarpPerOutput || mapping == Mapping::WarpPerRow ? 32 : 1;
  if (mapping == Mapping::BlockPerRow) s.block_size = s.threads_per_output = kBlockRowThreads;
  if (mapping == Mapping::GroupedRows) s.block_size = s.threads_per_output = kGroupedRowsThreads;
  if (mapping == Mapping::Attention) s.block_size = s.threads_per_output = kAttentionThreads;
  if (mapping == Mapping::ThreadPerRow) s.block_size = kRowBlock;
  return s;
}

// Attention: kMaxKeySplit blocks per row, halved while a static key count leaves a block fewer than
// kMinKeysPerSlice keys.
int attention_key_split(const Expr& keys) {
  const std::optional<int64_t> count = ir::as_int_const(keys);
  int split = kMaxKeySplit;
  while (count && split > 1 && *count / split < kMinKeysPerSlice) split /= 2;
  return split;
}

void check_kernel_node(const Node& node) {
  LUMINAL_CHECK(node.contraction != ir::Contraction::None || node.kind == NodeKind::Pointwise ||
                    node.kind == NodeKind::Reduce || node.kind == NodeKind::Scatter ||
                    node.kind == NodeKind::Attention,
                "internal error: no kernel for ", ir::node_kind_name(node.kind), " node ", node.origin);
}

}  // namespace

KernelSchedule choose_schedule(const Node& node, const std::vector<OperandInfo>& operands) {
  check_kernel_node(node);
  if (node.contraction != ir::Contraction::None) return with_mapping(Mapping::GroupedRows);
  if (node.kind == NodeKind::Attention) {
    KernelSchedule s = with_mapping(Mapping::Attention);
    s.key_split = attention_key_split(operands.at(1).shape.at(2));
    return s;
  }
  KernelSchedule s;
  std::vector<Expr> bodies{node.body};
  if (node.kind == NodeKind::Scatter) {
    s = with_mapping(Mapping::Scatter);
    bodies = rendered_bodies(node, Mapping::Scatter);
  } else if (node.kind == NodeKind::Reduce) {
    s = with_mapping(reduce_mapping(node));
    bodies = rendered_bodies(node, s.mapping);
  } else {
    const std::vector<passes::PointwisePiece> pieces = passes::split_pointwise(node);
    if (pieces.size() > 1 && pieces.size() <= kMaxPieces) {
      s = with_mapping(Mapping::Pieces, static_cast<int>(pieces.size()));
      bodies.clear();
      for (const passes::PointwisePiece& piece : pieces) bodies.push_back(piece.body);
    } else if (has_row_invariant_fold(node)) {
      s = with_mapping(few_long_rows(node) ? Mapping::BlockPerRow : Mapping::WarpPerRow);
      s.row_vector = row_vector_width(node, operands);
    } else {
      s = with_mapping(has_top_level_fold(node.body, kWarpFoldLength) ? Mapping::WarpPerOutput : Mapping::Elementwise);
      const std::optional<int64_t> elements = ir::as_int_const(ir::simplify(ir::product(node.shape), {}));
      if (s.mapping == Mapping::Elementwise && !has_top_level_fold(node.body, 0) &&
          unroll_fits(node, kElementwiseUnroll) && elements && *elements >= kUnrollMinElements) {
        // 16 bytes of 2-byte elements per thread where every dtype is that narrow (codegen reads
        // and writes a group with vectors where the pointers are aligned).
        const bool narrow = row_vector_width(node, operands) == 8 && unroll_fits(node, 8);
        s.unroll = narrow ? 8 : kElementwiseUnroll;
      }
    }
  }
  s.vector_width = has_float4_fold(bodies, operands) ? kFloat4 : 1;
  return s;
}

KernelSchedule choose_row_schedule() { return with_mapping(Mapping::ThreadPerRow); }

std::vector<KernelSchedule> candidate_schedules(const Node& node, const std::vector<OperandInfo>& operands) {
  const KernelSchedule chosen = choose_schedule(node, operands);
  std::vector<KernelSchedule> out{chosen};
  // Their templates fix the tile and the block.
  if (chosen.mapping == Mapping::GroupedRows || chosen.mapping == Mapping::Attention) return out;
  std::vector<KernelSchedule> mappings;
  if (node.kind == NodeKind::Scatter) {
    mappings.push_back(with_mapping(Mapping::Scatter));
  } else if (node.kind == NodeKind::Reduce) {
    mappings.push_back(with_mapping(Mapping::ThreadPerOutput));
    mappings.push_back(with_mapping(Mapping::WarpPerOutput));
  } else {
    mappings.push_back(with_mapping(Mapping::Elementwise));
    const size_t pieces = passes::split_pointwise(node).size();
    if (pieces > 1 && pieces <= kMaxPieces) mappings.push_back(with_mapping(Mapping::Pieces, static_cast<int>(pieces)));
    if (has_top_level_fold(node.body, 0)) mappings.push_back(with_mapping(Mapping::WarpPerOutput));
    if (node.rank() > 0) mappings.push_back(with_mapping(Mapping::WarpPerRow));
    if (node.rank() > 0) mappings.push_back(with_mapping(Mapping::BlockPerRow));
  }
  const int widest_row_vector = row_vector_width(node, operands);
  for (const KernelSchedule& mapping : mappings) {
    const bool float4 = has_float4_fold(rendered_bodies(node, mapping.mapping), operands);
    for (const int width : {1, kFloat4}) {
      if (width == kFloat4 && !float4) continue;
      for (const int block : {kNodeBlock, 128, 512}) {
        for (const int unroll : {1, 2, kElementwiseUnroll, 8}) {
          if (unroll != 1 && (mapping.mapping != Mapping::Elementwise || !unroll_fits(node, unroll))) continue;
          for (const int row_vector : {1, widest_row_vector}) {
            if (row_vector != 1 && !is_row_mapping(mapping.mapping)) continue;
            KernelSchedule s = mapping;
            s.vector_width = width;
            s.block_size = block;
            if (s.mapping == Mapping::BlockPerRow) s.threads_per_output = block;  // the block is the row's
            s.unroll = unroll;
            s.row_vector = row_vector;
            if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
          }
        }
      }
    }
  }
  return out;
}

}  // namespace luminal::schedule
