// Scalar expressions: the primitive layer of the IR.
//
// Every compute node of the graph describes one output element as an expression over indexed
// loads of its inputs. Views, broadcasts, gathers and concatenations are index arithmetic inside
// those expressions, so the CPU interpreter and the CUDA code generator handle every op
// generically: they only need to evaluate (or print) this small set of scalar operations.
//
// Expressions are immutable DAGs shared through shared_ptr. Integer expressions are kept in a
// canonical polynomial form by the smart constructors below, so structurally equal shapes and
// indices compare equal.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "ir/op_table.h"

namespace luminal::ir {

// How a reduction combines values (reduce nodes and fold expressions).
enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, Any, All };
const char* reduce_op_name(ReduceOp op);

enum class ExprOp : uint8_t {
#define LUMINAL_ENUM_ENTRY(name, arity, text, kind, classes, host_float, host_int, cuda_float, cuda_int) name,
  LUMINAL_EXPR_OPS(LUMINAL_ENUM_ENTRY)
#undef LUMINAL_ENUM_ENTRY
};

// An op's row of the table (ir/op_table.h) without its host columns.
struct OpInfo {
  const char* name;
  int arity;
  OpKind kind;
  uint8_t classes;         // op_class bits
  const char* cuda_float;  // CUDA expression templates ("" where the class does not apply)
  const char* cuda_int;
};
const OpInfo& op_info(ExprOp op);

const char* expr_op_name(ExprOp op);
bool is_unary_op(ExprOp op);       // Unary and Test kinds
bool is_binary_op(ExprOp op);      // Binary and Compare kinds
bool is_comparison_op(ExprOp op);  // Compare kind
// Does the op accept operands of this dtype (its row's classes)?
bool op_accepts(ExprOp op, DType dtype);
// Reached only through a table entry marked LM_NA, which the op's classes exclude.
[[noreturn]] void op_not_applicable(ExprOp op);

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

// One node of an expression DAG. Build nodes with the functions below, never directly.
//
// Semantics that matter for correctness:
// - Integer FloorDiv/Mod follow Python (floor) semantics, as torch.floor_divide/remainder do.
// - Load(slot, index..., [mask]) reads input `slot` of the owning graph node at a
//   multi-dimensional index (one i64 expression per input dimension). With a mask, lanes whose
//   mask is false read 0 and touch no memory.
// - CheckIndex(index, bound, [mask]) returns `index` and raises (CPU) or flags an error (CUDA)
//   when index is outside [0, bound) on a lane whose mask is true. `symbol` holds its label: the
//   failure message's template (see ir/check_label.h; empty: a generic message naming the
//   graph node). `int_value` 1 marks a value check (check_value): range analysis learns nothing
//   from it, so simplification can never use its own guarantee to drop it.
// - f16/bf16 arithmetic is computed in f32 and rounded to the node's dtype after every op.
// - Fold(extent, body) with `index` = v and `int_value` = ReduceOp combines body over
//   ReduceVar(v) in [0, extent) (an empty range gives the op's identity). It is a reduction
//   inlined into an element's computation; v is bound only inside `body`.
struct ExprNode {
  ExprOp op;
  DType dtype;
  int32_t index = 0;       // LoopVar/ReduceVar: axis. Load: input slot.
  int64_t int_value = 0;   // Const of integral or bool dtype
  double float_value = 0;  // Const of floating dtype
  std::string symbol;      // Symbol name; CheckIndex: its label
  std::vector<Expr> args;  // operands. Load: index per dimension, then the mask if `masked`.
  bool masked = false;     // Load/CheckIndex: the last operand is a bool mask
  size_t hash = 0;

  bool is_const() const { return op == ExprOp::Const; }
  bool is_int_const(int64_t value) const;
  // Load accessors.
  size_t load_rank() const { return masked ? args.size() - 1 : args.size(); }
  const Expr& mask() const { return args.back(); }
};

// Structural equality and ordering (used for canonical forms and CSE).
bool expr_equal(const Expr& a, const Expr& b);
int expr_compare(const Expr& a, const Expr& b);  // total order: <0, 0, >0
struct ExprHash {
  size_t operator()(const Expr& e) const { return e->hash; }
};
struct ExprEqual {
  bool operator()(const Expr& a, const Expr& b) const { return expr_equal(a, b); }
};

// ---- leaves ---------------------------------------------------------------------------------
Expr int_const(int64_t value, DType dtype = DType::I64);
Expr float_const(double value, DType dtype = DType::F32);
Expr bool_const(bool value);
Expr scalar_const(double value, DType dtype);  // int or float const as the dtype requires
Expr loop_var(int axis);
Expr reduce_var(int axis);
Expr symbol(const std::string& name);
Expr load(int slot, DType dtype, std::vector<Expr> index, Expr mask = nullptr);

// ---- operations (simplify on construction; integer arithmetic stays canonical) ----------------
Expr unary(ExprOp op, Expr a);
Expr binary(ExprOp op, Expr a, Expr b);
Expr where(Expr cond, Expr a, Expr b);
Expr cast(Expr a, DType dtype);
Expr check_index(Expr index, Expr bound, Expr mask = nullptr, std::string label = {});
// A run-time assertion that value lies in [0, bound), as check_index, but opaque to range
// analysis: the expressions computed from it keep the check however they simplify (validation of
// inputs whose values only decide extents, like an embedding bag's offsets).
Expr check_value(Expr value, Expr bound, std::string label, Expr mask = nullptr);
bool is_value_check(const ExprNode& node);
// A check of the same kind and label as `original` (a CheckIndex) over new operands.
Expr check_like(const ExprNode& original, Expr index, Expr bound, Expr mask);
// combine over ReduceVar(var) in [0, extent) of body.
Expr fold(ReduceOp op, int var, Expr extent, Expr body);
// The identity of a reduction for a dtype (sum: 0, max: -inf or the type's minimum, ...).
Expr reduction_identity(ReduceOp op, DType dtype);

Expr add(Expr a, Expr b);
Expr sub(Expr a, Expr b);
Expr mul(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);
Expr mod(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr logical_and(Expr a, Expr b);
Expr lt(Expr a, Expr b);
Expr ge(Expr a, Expr b);
Expr eq(Expr a, Expr b);

// Product of a list of i64 expressions (1 for an empty list).
Expr product(const std::vector<Expr>& factors);

// ---- queries ---------------------------------------------------------------------------------
std::optional<int64_t> as_int_const(const Expr& e);
bool contains_op(const Expr& e, ExprOp op);
// Does the expression read loop variable `axis` (through nested loads too)?
bool reads_loop_var(const Expr& e, int axis);
// Ids of the reduce variables an expression reads without binding them (fold variables are bound
// inside their fold's body).
std::vector<int> free_reduce_vars(const Expr& e);
// Largest reduce-variable id used anywhere in the expression (-1 when none).
int max_reduce_var(const Expr& e);
// Renumbers the fold variables of an expression that has no free reduce variables to distinct
// ids from `first` up (folds that shared an id still share one; nesting is kept). Substituting
// the result into a body whose reduce variables (bound or free, including those in the
// substituted indices) are all below `first` can neither capture one of them nor rebind one.
Expr rebase_fold_vars(const Expr& e, int first);
// Renumbers the fold variables of an expression that has no free reduce variables by height: a
// fold gets `first` + the height of its nesting below it (first for a fold with no fold inside),
// so that equal folds get equal variables wherever they appear (structural CSE then computes a
// LayerNorm's mean once, whether it is read directly or inside the variance) while nested folds
// keep distinct ones.
Expr canonical_fold_vars(const Expr& e, int first);
// Does the expression only depend on symbols (no loop/reduce vars, no loads)?
bool is_shape_expr(const Expr& e);
void collect_symbols(const Expr& e, std::vector<std::string>& out);  // unique, in first-seen order

// Recreates `node` with new operands through the smart constructors (re-simplifying).
Expr rebuild(const Expr& node, std::vector<Expr> args);

// Rebuilds an expression bottom-up. For every node of the original expression (once per shared
// node) `rewrite(original, args)` receives that node and its already transformed operands, and
// returns a replacement or nullptr to rebuild the node from `args`. Replacements are final: they
// are never visited again, so a substitution can't apply twice even when rebuilding a parent
// collapses it into a node that the rewrite would match (i1 -> i1 + 4 inside (i1 + -4)).
using Rewrite = std::function<Expr(const Expr& original, const std::vector<Expr>& args)>;
Expr transform(const Expr& root, const Rewrite& rewrite);

// Calls `visit` once for every distinct node of the expression (operands before users).
void visit(const Expr& root, const std::function<void(const Expr&)>& visit);

// Readable single-line text, e.g. "relu(add(load0[i0, i1], load1[i1]))".
std::string to_string(const Expr& e);

}  // namespace luminal::ir
