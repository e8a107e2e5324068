// Expression values (the scalar ops themselves: scalar_code.cpp), loads and operand strides.
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "codegen/kernel_writer.h"
#include "ir/simplify.h"

namespace luminal::codegen::detail {

// The C name of input `slot`'s pointer.
std::string KernelWriter::operand_pointer(int slot) const {
  const OperandInfo& op = operands_.at(slot);
  return op.name.empty() ? str_cat("p.in", slot) : op.name;
}

// Element strides of input `slot`, one C expression per dimension.
std::vector<std::string> KernelWriter::operand_strides(int slot) const {
  const OperandInfo& op = operands_.at(slot);
  std::vector<std::string> strides(op.shape.size());
  switch (op.layout) {
    case Layout::Strided:
      for (size_t d = 0; d < strides.size(); ++d) {
        strides[d] = op.name.empty() ? str_cat("p.stride", slot, "_", d) : str_cat(op.name, "_s", d);
      }
      break;
    case Layout::Row: fail("internal error: row operands have no memory strides");
    case Layout::Fixed:
      for (size_t d = 0; d < strides.size(); ++d) strides[d] = str_cat(op.fixed_strides.at(d), "LL");
      break;
    case Layout::Contiguous: {
      Expr stride = ir::int_const(1);
      for (size_t d = strides.size(); d-- > 0;) {
        strides[d] = shape_code(ir::simplify(stride, {}));
        stride = ir::mul(stride, op.shape[d]);
      }
      break;
    }
  }
  return strides;
}

std::string KernelWriter::value_code(const Expr& e, int scope) {
  auto arg = [&](size_t k) { return emit(e->args[k], scope); };
  const DType t = e->dtype;
  switch (e->op) {
    case ExprOp::Const:
      return is_floating(t) ? rounding(t, float_literal(e->float_value, t)) : int_literal(e->int_value, t);
    case ExprOp::LoopVar: return str_cat("i", e->index);
    case ExprOp::ReduceVar: return str_cat("r", e->index);
    case ExprOp::Symbol: return "p." + sanitize(e->symbol);
    case ExprOp::Load: return load_code(e, scope);
    case ExprOp::CheckIndex: {
      const std::string mask = e->masked ? arg(2) : "true";
      uses_checks_ = true;
      return str_cat("lm_check(", arg(0), ", ", arg(1), ", ", mask, ", p.error, lm_ok, p.check_base + ",
                     check_label_id(e->symbol), ")");
    }
    case ExprOp::Cast: return cast_code(e->args[0]->dtype, t, arg(0));
    case ExprOp::Where: return str_cat("(", arg(0), " ? ", arg(1), " : ", arg(2), ")");
    case ExprOp::Fold: break;  // the kernel writer emits folds as loops (emit_fold)
    LUMINAL_SCALAR_OP_CASES
      if (is_floating(e->args[0]->dtype)) return rounding(t, float_op(e, arg));
      if (e->op == ExprOp::FloorDiv || e->op == ExprOp::Mod) {
        if (std::optional<std::string> plain = unchecked_division(e, scope)) return *plain;
      }
      return int_op(e, arg);
  }
  fail("internal error: cannot emit ", ir::expr_op_name(e->op), " as a value");
}

// Python's floor division and modulo agree with C's truncating ones when the dividend is
// non-negative and the divisor positive, and a constant divisor cannot be zero: then no error
// check and no sign fix-up are needed. Only i64 values have proven ranges (ir::bounds_of).
std::optional<std::string> KernelWriter::unchecked_division(const Expr& e, int scope) {
  if (!ranges_ || e->dtype != DType::I64) return std::nullopt;
  const std::optional<int64_t> divisor = ir::as_int_const(e->args[1]);
  if (!divisor || *divisor <= 0) return std::nullopt;
  const ir::Bounds bounds = ir::bounds_of(e->args[0], *ranges_);
  if (!bounds.lo || !ir::prove_nonnegative(*bounds.lo)) return std::nullopt;
  const char* op = e->op == ExprOp::FloorDiv ? " / " : " % ";
  const std::string dividend = emit(e->args[0], scope);
  const bool narrow = bounds.hi && bounds.hi->is_constant() && bounds.hi->constant < kIndex32Limit &&
                      *divisor < kIndex32Limit;
  if (narrow) return str_cat("((lm_i64)((unsigned int)", dividend, op, *divisor, "u))");
  return str_cat("(", dividend, op, *divisor, "LL)");
}

std::string KernelWriter::load_code(const Expr& e, int scope) {
  const int slot = e->index;
  const OperandInfo& op = operands_.at(slot);
  if (op.layout == Layout::Row) return row_load_code(e, scope);
  const std::vector<std::string> strides = operand_strides(slot);
  std::string offset;
  for (size_t d = 0; d < e->load_rank(); ++d) {
    const std::string index = emit(e->args[d], scope);
    const std::string term = strides[d] == "1LL" ? index : str_cat(index, " * ", strides[d]);
    offset = offset.empty() ? term : str_cat(offset, " + ", term);
  }
  if (offset.empty()) offset = "0";
  const std::string element = str_cat(operand_pointer(slot), "[", offset, "]");
  return guarded(e, loaded_value(op.dtype, op.read_only ? str_cat("__ldg(&", element, ")") : element), scope);
}

std::string loaded_value(DType dtype, const std::string& read) {
  switch (dtype) {
    case DType::F16: return "lm_h2f(" + read + ")";
    case DType::BF16: return "lm_bf2f(" + read + ")";
    case DType::Bool: return "(" + read + " != 0)";
    default: return read;
  }
}

bool KernelWriter::structural(const Expr& e) const {
  switch (e->op) {
    case ExprOp::Const:
    case ExprOp::LoopVar:
    case ExprOp::Symbol: return true;
    case ExprOp::ReduceVar: return data_dependent_folds_.count(e->index) == 0;
    case ExprOp::Load:
    case ExprOp::CheckIndex:
    case ExprOp::Fold: return false;
    default: break;
  }
  for (const Expr& arg : e->args) {
    if (!structural(arg)) return false;
  }
  return true;
}

void KernelWriter::note_fold_extent(const Expr& fold) {
  if (!structural(fold->args[0])) data_dependent_folds_.insert(fold->index);
}

namespace {

// lm_check returns its index when it passes and 0 when it fails or its lane is masked off: a check
// of a constant bound b >= 1 yields a value in [0, b) whatever happened, in range for a dimension of
// at least b elements.
bool always_in_range(const Expr& index, const Expr& dimension) {
  if (index->op != ExprOp::CheckIndex) return false;
  const std::optional<int64_t> bound = ir::as_int_const(index->args[1]);
  const std::optional<int64_t> size = ir::as_int_const(dimension);
  return bound && size && *bound >= 1 && *bound <= *size;
}

}  // namespace

// Reads that a failed check or a false mask must not perform yield 0. A failed check sets lm_ok;
// reads at indices that may be out of range after a failed check wait for it. A read whose every
// index is structural (see structural) or the result of a check that stays in range whatever it
// found (always_in_range) touches valid memory in any case, so it does not wait for lm_ok: it
// issues as soon as its own index is known, not after every check before it (the DLRM
// megakernel's tables: each table's offset, index and row reads no longer wait for the checks of
// the tables before it). The call still raises on a failed check, whatever the reads returned.
std::string KernelWriter::guarded(const Expr& e, const std::string& read, int scope) {
  const ir::Shape& shape = operands_.at(e->index).shape;
  bool in_range = shape.size() == e->load_rank();
  for (size_t d = 0; in_range && d < e->load_rank(); ++d) {
    in_range = structural(e->args[d]) || always_in_range(e->args[d], shape[d]);
  }
  std::string guard = uses_checks_ && !in_range ? "lm_ok" : "";
  if (e->masked) {
    const std::string mask = emit(e->mask(), scope);
    guard = guard.empty() ? mask : str_cat(guard, " && ", mask);
  }
  if (guard.empty()) return read;
  return str_cat("((", guard, ") ? ", read, " : (", value_type(e->dtype), ")0)");
}

// A read of the producer's row of the current batch index: dimensions 1.. index a contiguous
// local array (the row planner proved that dimension 0 is i0).
std::string KernelWriter::row_load_code(const Expr& e, int scope) {
  const OperandInfo& op = operands_.at(e->index);
  Expr flat = ir::int_const(0);
  int64_t stride = 1;
  for (size_t d = e->load_rank(); d-- > 1;) {
    flat = ir::add(flat, ir::mul(e->args[d], ir::int_const(stride)));
    stride *= ir::as_int_const(op.shape[d]).value();
  }
  const std::string offset = emit(ir::simplify(flat, {}), scope);
  return guarded(e, str_cat(op.name, "[", offset, "]"), scope);
}

}  // namespace luminal::codegen::detail
