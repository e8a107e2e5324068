// Private to csrc/codegen: the writer that renders one IR node (or one node of a row kernel) as
// CUDA C under a given schedule (schedule/kernel_schedule.h), which it follows and never changes;
// check_renderable (schedule_check.cpp) refuses a schedule before the writer sees it. Its member
// functions live in several files, by concern:
//   emitter.cpp       scopes, structural CSE, folds, parameters, naming
//   expressions.cpp   expression values, loads, operand strides (scalar ops: scalar_code.cpp)
//   vector_folds.cpp  float4 folds and fold groups (row kernels)
//   row_vectors.cpp   row vectors of a warp per row (vector loads along the row and its folds)
//   node_kernels.cpp  elementwise / pieces / reduction / scatter kernels
//   row_kernel.cpp    row kernels (one kernel for a row-local graph)
//   grouped_rows.cpp  the grouped-rows GEMM (its template: grouped_rows.cuh)
//   attention.cpp     fused attention (its template: attention.cuh)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/cuda_codegen.h"
#include "codegen/scalar_code.h"
#include "common/error.h"
#include "ir/expr_memo.h"
#include "ir/simplify.h"
#include "passes/passes.h"

namespace luminal::codegen::detail {

using ir::Expr;
using ir::ExprOp;
using ir::Node;
using ir::NodeKind;

using schedule::KernelSchedule;
using schedule::Mapping;

// Grouped-rows GEMM tiles (see KernelWriter::write_grouped_rows).
constexpr int kGroupedTile = 64;

// The C name of a shape symbol's kernel parameter.
std::string sanitize(const std::string& symbol);

// Index arithmetic in 32 bits is exact below this bound (values that fit a non-negative int).
constexpr int64_t kIndex32Limit = int64_t{1} << 31;

// The product of `extents` when every one is a constant and the product is below kIndex32Limit
// (so every flat index over them, and every coordinate, fits 32 bits); nullopt otherwise.
std::optional<int64_t> small_static_count(const std::vector<Expr>& extents);

class KernelWriter {
 public:
  // `check_labels`: where the labels of the checks go (shared by the nodes of a row kernel);
  // null: the writer's own list, which name_and_finish hands to the kernel.
  KernelWriter(const Node& node, const std::vector<OperandInfo>& operands, const KernelSchedule& schedule,
               std::vector<std::string>* check_labels = nullptr)
      : node_(node),
        operands_(operands),
        schedule_(schedule),
        check_labels_(check_labels ? check_labels : &own_check_labels_),
        warp_mode_(schedule.mapping == Mapping::WarpPerOutput || schedule::is_row_mapping(schedule.mapping)),
        lanes_(schedule.mapping == Mapping::BlockPerRow ? schedule.block_size : 32),
        unroll_folds_(schedule.mapping == Mapping::ThreadPerRow) {}

  // ---- shape expressions (i64, symbols only) ----
  static std::string shape_code(const Expr& e);
  static std::string shape_op_code(const Expr& e);
  static std::string replace_all(std::string text, const std::string& from, const std::string& to);

  Kernel write_grouped_rows();
  Kernel write_attention();
  Kernel write_scatter();
  Kernel write();

  // Row kernels: the code computing this node's row for batch index i0 into `array`.
  std::string row_fragment(const std::string& array, const std::vector<Expr>& element_bodies);

 private:
  // ---- expressions (SSA statements in nested scopes) ----
  // A scope is the root of a work item, a loop (the node's reduction or a fold) or one branch of a
  // lazily evaluated `where`. Values are emitted in the outermost scope they may live in: out of
  // loops whose variables they do not read, but never out of a branch (the other branch must not
  // pay for them). A scope's code is pasted into its parent when it is closed.
  struct Scope {
    int parent = -1;
    std::vector<int> vars;  // reduce variables bound by this scope
    bool branch = false;
    std::unordered_map<Expr, std::string, ir::ExprHash, ir::ExprEqual> names;  // structural CSE
    std::ostringstream code;
    int indent = 4;
  };

  struct Combine {
    std::string acc_type, init, step;  // step uses `acc` and `val`
  };

  // ---- vectorized folds (vector_folds.cpp) ----
  struct VectorFold {
    std::string condition;  // run-time: every vector load aligned (and unit innermost stride)
    std::string code;       // the vector loop's body
  };

  // ---- parameters (emitter.cpp) ----
  void add_node_params();
  void name_and_finish(Kernel& kernel, const std::string& text) const;
  size_t check_label_id(const std::string& label);
  void add_param(ParamKind kind, int slot = -1, int dim = -1, std::string symbol = "");
  void collect_symbols();
  std::string params_declaration() const;

  // ---- scopes and emission (emitter.cpp) ----
  int open_scope(int parent, std::vector<int> vars, bool branch);
  bool inside_loop(int scope) const;
  int placement(const Expr& e, int scope);
  const std::vector<int>& free_vars(const Expr& e);
  std::string fresh() { return str_cat("v", counter_++); }
  void line(int scope, const std::string& text);
  std::string emit(const Expr& e, int scope);
  bool expensive(const Expr& e);
  std::string emit_lazy_where(const Expr& e, int scope);
  std::string indented(int scope, const std::string& text) const;
  std::string emit_fold(const Expr& e, int scope);
  std::string element_function(const std::string& name, const std::string& type, const Expr& e, int arity);
  std::string unravel(const std::string& flat, int indent) const { return unravel(flat, indent, node_.shape); }
  ir::Shape unrolled_shape() const;
  std::string unravel(const std::string& flat, int indent, const ir::Shape& shape) const;
  // The ranges of the variables in the code being written: loop variable d over [0, loop_extents[d]),
  // the node's reduce variables and every fold variable over their extents (see index_ranges).
  void set_index_ranges(const ir::Shape& loop_extents);
  std::string store_code(const std::string& value) const;

  // ---- expressions and loads (expressions.cpp) ----
  std::string operand_pointer(int slot) const;
  std::vector<std::string> operand_strides(int slot) const;
  std::string value_code(const Expr& e, int scope);
  std::string load_code(const Expr& e, int scope);
  std::string guarded(const Expr& e, const std::string& read, int scope);
  // True when `e` is built from constants, loop variables, symbols and the variables of folds with
  // such extents only: in range by construction, whatever any check found.
  bool structural(const Expr& e) const;
  // Folds whose extent is not structural: their variables' ranges came from values a check may
  // have clamped (marked before their bodies are emitted).
  void note_fold_extent(const Expr& fold);
  std::string row_load_code(const Expr& e, int scope);
  // floordiv/mod by a positive constant of a dividend proven non-negative: plain C division (in
  // 32 bits where the dividend is proven below 2^31); nullopt where nothing is proven.
  std::optional<std::string> unchecked_division(const Expr& e, int scope);

  // ---- vectorized folds and fold groups (vector_folds.cpp) ----
  std::string vector_load_condition(const Expr& load);
  std::string vector_offset(const Expr& load, const std::string& first, int scope);
  std::optional<VectorFold> emit_vector_fold(const Expr& fold, int scope, const Combine& c, const std::string& acc);
  static std::vector<Expr> unconditional_folds(const Expr& root);
  void emit_fold_groups(const std::vector<std::vector<Expr>>& groups, int scope);

  // ---- row vectors of a warp per row (row_vectors.cpp) ----
  struct RowCopy {
    int scope;          // the copy's scope (its code is pasted by the caller)
    std::string value;  // the body's value for the copy's element
  };
  std::vector<Expr> row_vector_loads(const Expr& body, int var, int width);
  std::string row_vector_condition(const std::vector<Expr>& loads, int width);
  std::vector<RowCopy> emit_row_vector_copies(const Expr& body, int var, int loop, const std::vector<Expr>& loads,
                                              int width);
  std::optional<VectorFold> emit_row_vector_fold(const Expr& fold, int scope, const Combine& c, const std::string& acc);
  std::optional<VectorFold> emit_row_vector_loop(const Expr& body, int along, int root, const std::string& length);
  std::optional<VectorFold> emit_single_step_row(const Expr& body, int along, const std::string& length);
  std::string store_row_vector(int scope, const std::vector<RowCopy>& copies, int along, const std::string& length);
  std::optional<VectorFold> emit_elementwise_vector(int unroll);

  // ---- node kernels (node_kernels.cpp) ----
  std::string accumulate_code(const std::string& target, const std::string& value) const;
  std::string elementwise_body();
  std::string row_body();
  ir::Shape row_shape() const;  // the node's shape without its innermost dimension
  Expr innermost_as_reduce_var(int& along);
  static ir::Shape piece_shape_of(const Node& node, const passes::PointwisePiece& piece);
  ir::Shape piece_shape(const passes::PointwisePiece& piece) const { return piece_shape_of(node_, piece); }
  std::string pieces_body(const std::vector<passes::PointwisePiece>& pieces);
  static Combine combine_code(ir::ReduceOp op, DType t);
  std::string warp_combine(const Combine& c) const;
  // Combines the lanes' partial `acc` of a shared fold: warp_combine, then, for a block per row,
  // across the block's warps through shared memory (every thread ends with the whole value).
  std::string lanes_combine(const Combine& c);
  std::string reduce_body();
  // `__launch_bounds__(<block size>)`
  std::string launch_bounds() const;
  // A node kernel's device function's signature (LM_KERNEL_run: the block `lm_block` of
  // `lm_grid`), the L2 prefetches of its small inputs and lm_kernel_entry() (the wait for the
  // kernels ahead of it: codegen prelude), before any load.
  std::string kernel_opening() const;
  // The bytes of input `slot` that kernel_opening requests into L2 before the wait, as C; nullopt:
  // none (symbolic shape, empty, or larger than kPrefetchBytes).
  std::optional<std::string> prefetch_bytes(int slot) const;
  // The __global__ function that runs a node kernel's device function (kernel_opening) with the
  // launch's blocks; finish_node_kernel appends it and names the kernel.
  std::string entry_point() const;
  void finish_node_kernel(Kernel& kernel, const std::string& text) const;

  const Node& node_;
  const std::vector<OperandInfo>& operands_;
  const KernelSchedule schedule_;
  std::vector<KernelParam> params_;
  std::vector<std::unique_ptr<Scope>> scopes_;
  ir::ExprMemo<std::vector<int>> free_vars_;
  ir::ExprMemo<bool> expensive_;
  std::vector<std::string> own_check_labels_;
  std::vector<std::string>* check_labels_;
  int counter_ = 0;
  bool uses_checks_ = false;
  std::unordered_set<int> data_dependent_folds_;  // fold variables, see note_fold_extent
  // Set by the node kernels whose variables are known to stay in range (set_index_ranges); row
  // kernels and template kernels leave it unset and keep the checked division.
  std::optional<ir::IndexRanges> ranges_;
  // From the schedule: a warp per output (or per row) shares top-level folds among its lanes (a
  // block per row: the block's threads); row kernels unroll static folds (their row arrays stay in
  // registers) and have no float4 folds.
  const bool warp_mode_;
  const int lanes_;  // the threads sharing a fold: 32, or the block of a BlockPerRow
  const bool unroll_folds_;
};

// The value of an element of `dtype` read as `read` (its storage type): f16/bf16 widened to float,
// bool tested against 0.
std::string loaded_value(DType dtype, const std::string& read);

// Raises schedule::ScheduleError when `schedule` does not fit `node` (schedule_check.cpp).
void check_renderable(const Node& node, const std::vector<OperandInfo>& operands, const KernelSchedule& schedule);
void check_row_renderable(const KernelSchedule& schedule);

}  // namespace luminal::codegen::detail
