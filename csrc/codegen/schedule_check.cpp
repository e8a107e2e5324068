// Which schedules the kernel writer can render for a node. A schedule it cannot render is refused
// with a schedule::ScheduleError before anything is written: the writer follows its schedule and
// never falls back to another one silently.
#include "codegen/kernel_writer.h"

namespace luminal::codegen::detail {

namespace {

[[noreturn]] void refuse(const std::string& node, const KernelSchedule& schedule, const std::string& reason) {
  throw schedule::ScheduleError(node, schedule, reason);
}

// The mappings a node kernel may use, by node kind.
bool mapping_fits(const Node& node, Mapping mapping) {
  if (node.contraction != ir::Contraction::None) return mapping == Mapping::GroupedRows;
  if (node.kind == NodeKind::Scatter) return mapping == Mapping::Scatter;
  if (node.kind == NodeKind::Attention) return mapping == Mapping::Attention;
  if (node.kind == NodeKind::Reduce) return mapping == Mapping::ThreadPerOutput || mapping == Mapping::WarpPerOutput;
  if (node.kind == NodeKind::Pointwise) {
    return mapping == Mapping::Elementwise || mapping == Mapping::Pieces || mapping == Mapping::WarpPerOutput ||
           (schedule::is_row_mapping(mapping) && node.rank() > 0);
  }
  return false;
}

int threads_per_output_of(const KernelSchedule& schedule) {
  switch (schedule.mapping) {
    case Mapping::BlockPerRow: return schedule.block_size;
    case Mapping::WarpPerOutput:
    case Mapping::WarpPerRow: return 32;
    case Mapping::GroupedRows: return schedule::kGroupedRowsThreads;
    case Mapping::Attention: return schedule::kAttentionThreads;
    case Mapping::Elementwise:
    case Mapping::Pieces:
    case Mapping::ThreadPerOutput:
    case Mapping::Scatter:
    case Mapping::ThreadPerRow: return 1;
  }
  return 1;
}

// Fields every mapping constrains the same way.
void check_common(const std::string& where, const KernelSchedule& schedule) {
  if (schedule.vector_width != 1 && schedule.vector_width != schedule::kFloat4) {
    refuse(where, schedule, "the vector width must be 1 or 4 (float4 folds)");
  }
  if (schedule.threads_per_output != threads_per_output_of(schedule)) {
    refuse(where, schedule, str_cat(mapping_name(schedule.mapping), " has ", threads_per_output_of(schedule),
                                    " threads per output"));
  }
  if (schedule.mapping != Mapping::Pieces && schedule.pieces != 1) refuse(where, schedule, "pieces without Pieces");
  if (schedule.mapping != Mapping::Attention && schedule.key_split != 1) {
    refuse(where, schedule, "key_split without Attention");
  }
  for (const KernelSchedule::Rows& rows : {schedule.key_rows, schedule.value_rows}) {
    if (rows.input < 0) continue;
    if (schedule.mapping != Mapping::Attention) refuse(where, schedule, "early key rows without Attention");
    if (rows.count < 1 || rows.count > schedule::kMaxEarlyRows) {
      refuse(where, schedule, str_cat("early key rows from 1 to ", schedule::kMaxEarlyRows, " values"));
    }
  }
  if (schedule.mapping == Mapping::GroupedRows) {
    if (schedule.block_size != schedule::kGroupedRowsThreads) {
      refuse(where, schedule, "the grouped-rows template runs 128 threads per block (four warps of 32x32)");
    }
  } else if (schedule.mapping == Mapping::Attention) {
    if (schedule.block_size != schedule::kAttentionThreads) {
      refuse(where, schedule, "the attention template runs 128 threads per block (four warps)");
    }
    if (schedule.vector_width != 1) refuse(where, schedule, "the attention template has no float4 folds");
    const int split = schedule.key_split;
    if (split < 1 || split > schedule::kMaxKeySplit || (split & (split - 1)) != 0) {
      refuse(where, schedule, str_cat("key_split must be a power of 2 up to ", schedule::kMaxKeySplit));
    }
  } else if (schedule.block_size < 32 || schedule.block_size > 1024 || schedule.block_size % 32 != 0) {
    refuse(where, schedule, "the block size must be a multiple of 32 in [32, 1024]");
  }
}

}  // namespace

void check_renderable(const Node& node, const std::vector<OperandInfo>& operands, const KernelSchedule& schedule) {
  const std::string& where = node.origin;
  if (!mapping_fits(node, schedule.mapping)) {
    refuse(where, schedule, str_cat("a ", ir::node_kind_name(node.kind), " node",
                                    node.contraction != ir::Contraction::None ? " (grouped-rows contraction)" : "",
                                    " cannot be rendered as ", mapping_name(schedule.mapping)));
  }
  check_common(where, schedule);
  if (schedule.unroll != 1 && (schedule.mapping != Mapping::Elementwise || !schedule::unroll_fits(node, schedule.unroll))) {
    refuse(where, schedule, "unroll needs an elementwise kernel whose innermost dimension is a static multiple of it");
  }
  if (schedule.row_vector != 1) {
    const int widest = schedule::row_vector_width(node, operands);
    const int v = schedule.row_vector;
    if (!schedule::is_row_mapping(schedule.mapping) || v < 1 || (v & (v - 1)) != 0 || v > widest) {
      refuse(where, schedule,
             str_cat("a row vector needs a warp or a block per row and a power of 2 up to ", widest,
                     " (it divides the row's static length, at most 16 bytes per vector)"));
    }
  }
  if (schedule.mapping == Mapping::Pieces) {
    const size_t pieces = passes::split_pointwise(node).size();
    if (pieces < 2 || static_cast<size_t>(schedule.pieces) != pieces || pieces > 65535) {
      refuse(where, schedule, str_cat("the node splits into ", pieces, " pieces (Pieces needs 2 to 65535, all of them)"));
    }
  }
  if (schedule.mapping == Mapping::WarpPerOutput && node.kind == NodeKind::Pointwise &&
      !schedule::has_top_level_fold(node.body, 0)) {
    refuse(where, schedule, "the node has no top-level fold for the warp's lanes to share");
  }
  if (schedule.vector_width == schedule::kFloat4 &&
      !schedule::has_float4_fold(schedule::rendered_bodies(node, schedule.mapping), operands)) {
    refuse(where, schedule,
           "no fold qualifies for float4 loads (f32 loads at unit stride over a static multiple of 4 elements)");
  }
}

void check_row_renderable(const KernelSchedule& schedule) {
  const std::string where = "row kernel";
  if (schedule.mapping != Mapping::ThreadPerRow) {
    refuse(where, schedule, str_cat("a row kernel cannot be rendered as ", mapping_name(schedule.mapping)));
  }
  check_common(where, schedule);
  if (schedule.unroll != 1) refuse(where, schedule, "row kernels compute one row per thread (unroll 1)");
  if (schedule.row_vector != 1) refuse(where, schedule, "row kernels have no row vectors (a thread per row)");
  // Row kernels unroll static folds so that the rows stay in registers; they have no float4 loop.
  if (schedule.vector_width != 1) refuse(where, schedule, "row kernels have no float4 folds");
}

}  // namespace luminal::codegen::detail
