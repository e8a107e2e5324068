// Kernel schedules as values: how one generated kernel maps its work onto the GPU (a thread, a
// warp or a tile per output; float4 folds; threads per block), decided before any code is
// written. `choose_schedule` holds the rules luminal uses today; codegen renders a (node,
// operands, schedule) triple and decides nothing (codegen::render_kernel), so that a later step
// can enumerate `candidate_schedules`, compile and time them.
//
// The schedule is the whole decision: codegen refuses, with a ScheduleError, a schedule it cannot
// render for the node (a float4 fold where no fold qualifies, a warp per output of a pointwise node
// without a fold to share, ...) instead of rendering something else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "ir/graph.h"

namespace luminal::schedule {

// How an input slot's memory is laid out (what the executor tells code generation).
enum class Layout : uint8_t {
  Contiguous,  // row-major over its shape (strides follow from the shape's expressions)
  Strided,     // strides arrive as kernel parameters (graph inputs)
  Fixed,       // compile-time constant strides (constants)
  Row,         // row kernels: the producer's row of the current batch index, in a local array
};

struct OperandInfo {
  DType dtype = DType::F32;
  ir::Shape shape;
  Layout layout = Layout::Contiguous;
  std::vector<int64_t> fixed_strides;
  // The C name of the pointer (strides: `<name>_s<d>`) or, for Row, of the array; empty: p.in<slot>.
  std::string name;
  // Nothing writes this memory while the kernel runs (a constant, or an input the graph does not
  // update in place): read through the non-coherent cache (__ldg). Row kernels set it: NVVM's
  // optimizer took 7.6 s on an MLP's unrolled row kernel of 3,088 plain loads, 0.3 s on __ldg ones.
  bool read_only = false;
};

// Which threads compute which outputs.
enum class Mapping : uint8_t {
  Elementwise,      // pointwise: one thread per output element
  Pieces,           // pointwise pieces (a concatenation): blockIdx.y selects the piece
  ThreadPerOutput,  // reductions: one thread loops over the whole reduction
  WarpPerOutput,    // a warp per output: it splits the reduction (or a pointwise node's top-level folds)
  Scatter,          // scatters: one thread per element of the scatter domain
  GroupedRows,      // grouped-rows contractions: a 64x64 output tile per block (a tiled grouped GEMM)
  ThreadPerRow,     // row kernels (a whole row-local graph): one thread per batch row
  Attention,        // attention: a block of 128 threads per (batch, head, tile of queries)
  // pointwise: a warp per row (all dimensions but the innermost). Values that do not vary along the
  // row, its folds above all (a LayerNorm's mean and variance, a softmax's max and sum), are
  // computed once per row with the lanes splitting each fold; then the lanes stride along the row.
  WarpPerRow,
  // pointwise: WarpPerRow with a whole block (block_size threads) per row: for a few long rows (a
  // decode step's RMSNorm: one row of 2048), where a warp per row leaves the GPU idle and each lane
  // waits on many dependent loads. Folds combine across the block's warps through shared memory.
  BlockPerRow,
};

const char* mapping_name(Mapping mapping);

// WarpPerRow or BlockPerRow: the threads of a row share its row-invariant folds, then stride along it.
inline bool is_row_mapping(Mapping mapping) { return mapping == Mapping::WarpPerRow || mapping == Mapping::BlockPerRow; }

constexpr int kFloat4 = 4;                 // the vector width of a float4 fold
constexpr int64_t kWarpReduceLength = 32;  // a static reduction shorter than this gets a thread per output
constexpr int64_t kWarpFoldLength = 64;    // a top-level fold this long (static) gets a warp
constexpr size_t kMaxPieces = 256;         // more pieces than this: one elementwise kernel
constexpr int kNodeBlock = 256;            // threads per block of node kernels
constexpr int kGroupedRowsThreads = 128;   // threads per 64x64 tile (four warps of 32x32)
constexpr int kRowBlock = 32;              // row kernels: one warp per block, many SMs busy
constexpr int kAttentionThreads = 128;     // attention: four warps per block, one tile of queries
constexpr int kMaxKeySplit = 8;            // attention: at most this many blocks per decode row...
constexpr int64_t kMinKeysPerSlice = 32;   // ... each with at least this many keys of a static count
constexpr int64_t kMaxEarlyRows = 8;       // attention: rows re-read after the wait (key_rows), at most
constexpr int kBlockRowThreads = 256;       // BlockPerRow: threads per row (one block)
constexpr int64_t kBlockRowMaxRows = 32;    // BlockPerRow by rule: at most this many rows (static)...
constexpr int64_t kBlockRowMinLength = 1024;  // ... of at least this static length
constexpr int kElementwiseUnroll = 4;      // elements per thread of a large elementwise kernel
constexpr int64_t kUnrollMinElements = 1 << 16;

struct KernelSchedule {
  Mapping mapping = Mapping::Elementwise;
  // Threads per block; for ThreadPerRow also the rows per block. GroupedRows: exactly 128.
  int block_size = kNodeBlock;
  // Threads that cooperate on one output: 32 for WarpPerOutput and WarpPerRow, 128 (the tile) for
  // GroupedRows, block_size for BlockPerRow.
  int threads_per_output = 1;
  // 1, or 4: every fold that qualifies (float4_fold_loads) and is not shared by a warp's lanes
  // gets a float4 loop, taken when its pointers are 16-byte aligned at run time (the scalar loop
  // stays for the other case).
  int vector_width = 1;
  // Elementwise only: each thread computes `unroll` consecutive elements of the innermost dimension
  // (static, a multiple of it): the index arithmetic of one element serves them all. Others: 1.
  int unroll = 1;
  int pieces = 1;  // Pieces: the number of pieces (the launch's grid y)
  // WarpPerRow and BlockPerRow only: the elements a lane takes per step along the row and along the folds its
  // lanes share (1, 2, 4 or 8; row_vector_width gives the widest). The loads of those loops that
  // read at unit stride along them become one load of up to 16 bytes each, and the row's stores
  // one store, on a path taken when every such pointer is aligned at run time (the scalar loops
  // stay for the other case). Without it a lane of a 2048-wide bf16 row waited on 64 dependent
  // 2-byte loads per pass: 43 us per RMSNorm of a decode step on an H100.
  int row_vector = 1;
  // Attention only: blocks per decode row (1, 2, 4 or 8), each scoring a slice of the row's keys
  // (attention_decode.cuh's vector path, a cluster of blocks on sm_90+; codegen renders one block
  // per row where that path does not apply). A decode row's keys in one block waited on one SM's
  // loads.
  int key_split = 1;
  // Attention only (mark_early_attention_rows): graph inputs holding every row along the key axis
  // that the key operand's (value operand's) scatter writes; none where not proven. The decode
  // kernel then requests its first keys and values before it waits for the kernel ahead of it, and
  // after the wait requests again the rows these inputs name: the only rows that kernel may still
  // be writing. Other kernels ignore them.
  struct Rows {
    ir::NodeId input = -1;  // an i64 graph input...
    int count = 0;          // ... of this many elements (1 to kMaxEarlyRows)
    bool operator==(const Rows& other) const { return input == other.input && count == other.count; }
  };
  Rows key_rows, value_rows;
  bool has_early_rows() const { return key_rows.input >= 0 && value_rows.input >= 0; }

  bool operator==(const KernelSchedule& other) const;
  bool operator!=(const KernelSchedule& other) const { return !(*this == other); }
};

// e.g. "warp_per_output(block 256, 32 threads/output, vector 4, unroll 1)".
std::string to_string(const KernelSchedule& schedule);

// A schedule that does not fit its node. Typed, so that a caller enumerating schedules can skip
// it without parsing the message.
class ScheduleError : public Error {
 public:
  // `node`: the node's origin (or what the kernel computes, e.g. "row kernel").
  ScheduleError(std::string node, const KernelSchedule& schedule, std::string reason);
  const std::string& node() const { return node_; }
  const KernelSchedule& schedule() const { return schedule_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string node_;
  KernelSchedule schedule_;
  std::string reason_;
};

// Today's rules, for a node kernel (Pointwise, Reduce, Scatter, Attention or a grouped-rows
// contraction):
//   grouped-rows contraction -> GroupedRows; scatter -> Scatter; attention -> Attention with
//     key_split kMaxKeySplit, halved while a static key count leaves a slice fewer than
//     kMinKeysPerSlice keys;
//   reduction -> WarpPerOutput when the reduction is static and some load's innermost index
//     varies with it (consecutive steps read consecutive memory), else ThreadPerOutput;
//   pointwise -> Pieces for 2..256 pieces (passes::split_pointwise), else WarpPerRow with a
//     row-invariant fold (has_row_invariant_fold), BlockPerRow instead for at most
//     kBlockRowMaxRows static rows of static length kBlockRowMinLength or more, else
//     WarpPerOutput with a top-level fold of
//     static length >= 64, else Elementwise;
//   vector width 4 when some fold the kernel renders qualifies for a float4 loop;
//   unroll 4 for an elementwise node without folds whose innermost dimension is a static multiple
//   of 4 and that has at least kUnrollMinElements elements; 8 where every dtype it loads and
//   stores is 2 bytes or narrower and the innermost dimension a multiple of 8 (codegen reads and
//   writes the group with vectors of up to 16 bytes where the pointers are aligned);
//   WarpPerRow, BlockPerRow: row_vector = row_vector_width.
KernelSchedule choose_schedule(const ir::Node& node, const std::vector<OperandInfo>& operands);
// The schedule of a row kernel (codegen::generate_row_kernel).
KernelSchedule choose_row_schedule();

// Schedules a node kernel may run with: choose_schedule's first, then the other mappings the node
// admits, vector widths where a fold qualifies, and a few block sizes. Every one renders.
std::vector<KernelSchedule> candidate_schedules(const ir::Node& node, const std::vector<OperandInfo>& operands);

// ---- analyses shared by the rules and codegen ----

// Whether `body` has a fold outside every other fold whose extent is static and at least
// `min_extent` (min_extent <= 0: any top-level fold, static or not).
bool has_top_level_fold(const ir::Expr& body, int64_t min_extent);

// Whether a pointwise node's body has a top-level fold that does not read the innermost loop
// variable, along an innermost dimension longer than 1: what WarpPerRow computes once per row.
bool has_row_invariant_fold(const ir::Node& node);

// The expressions a kernel renders under `mapping`: the node's body, with a reduction's extents,
// a scatter's targets, or the pieces' bodies for Pieces.
std::vector<ir::Expr> rendered_bodies(const ir::Node& node, Mapping mapping);

// A fold over a static [0, E), E a positive multiple of 4, whose loads that vary with the fold read
// f32 at [..., r] (r the fold's variable, unit stride; every other stride a multiple of 4, checked
// at run time for strided operands): those loads, in the order the kernel reads them. nullopt when
// the fold does not qualify: bodies with bounds checks, nested folds or lazily loaded branches that
// vary with r keep the scalar loop only.
std::optional<std::vector<ir::Expr>> float4_fold_loads(const ir::Expr& fold, const std::vector<OperandInfo>& operands);

// The widest row_vector a WarpPerRow kernel of `node` may take: a power of 2 up to 8 that divides
// the row's static length, with 16 bytes or fewer per vector of the output and of every operand
// the body loads. 1 when the row's length is not static or no width above 1 fits.
int row_vector_width(const ir::Node& node, const std::vector<OperandInfo>& operands);

// Whether `load` may be read `width` elements at a time along reduce variable `var`: an unmasked
// memory load at [..., r] (r = `var`, unit stride; no other index reads r) of `width` elements of
// 16 bytes or fewer, whose layout keeps each vector inside an aligned 16-byte block when the
// pointer is aligned (contiguous: an innermost size that is a static multiple of `width`; fixed
// strides: unit innermost, multiples of `width` outside; strided operands: tested at run time).
bool row_vector_load(const ir::Expr& load, int var, int width, const std::vector<OperandInfo>& operands);

// The unroll factors (elements per thread) an Elementwise kernel of `node` may render: 1, and 2, 4
// or 8 where the innermost dimension is static and a multiple of the factor.
bool unroll_fits(const ir::Node& node, int unroll);

// Whether a fold in `bodies` qualifies for a float4 loop.
bool has_float4_fold(const std::vector<ir::Expr>& bodies, const std::vector<OperandInfo>& operands);

}  // namespace luminal::schedule
