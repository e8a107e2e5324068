// The host columns of the op table (ir/op_table.h) as functions of one element: constant folding,
// symbol evaluation and the unit tests evaluate ops through these. (The CPU interpreter expands the
// same columns into loops over lanes, runtime/cpu/interpreter.cpp.)
#pragma once

#include <cmath>
#include <cstdint>

#include "common/scalar_ops.h"
#include "ir/expr.h"

namespace luminal::ir {

// The integer type an integer or bool value narrows to.
struct IntLane {
  int bits = 64;
  bool is_signed = true;
  bool is_bool = false;
};

inline IntLane int_lane(DType dtype) {
  IntLane lane;
  lane.bits = static_cast<int>(dtype_size(dtype) * 8);
  lane.is_signed = dtype != DType::U8 && dtype != DType::Bool;
  lane.is_bool = dtype == DType::Bool;
  return lane;
}

// The op's host_int column on x (and y; ignored by unary ops), before narrowing to the dtype. A
// DividesInt op's divisor must be non-zero: the caller reports zero in its own terms.
inline int64_t eval_int(ExprOp op, int64_t x, int64_t y, IntLane lane) {
  using namespace ::luminal::scalar;
  const int bits = lane.bits;
  const bool is_signed = lane.is_signed, is_bool = lane.is_bool;
  (void)bits, (void)is_signed, (void)is_bool, (void)x, (void)y;
#define LM_NA (op_not_applicable(op), x)
#define LUMINAL_EVAL_INT(name, arity, text, kind, classes, host_float, host_int, cuda_float, cuda_int) \
  case ExprOp::name: return static_cast<int64_t>(host_int);
  switch (op) { LUMINAL_EXPR_OPS(LUMINAL_EVAL_INT) }
#undef LUMINAL_EVAL_INT
#undef LM_NA
  op_not_applicable(op);
}

// The op's host_float column computed in T (float or double). Test and Compare ops give 0 or 1.
template <typename T>
T eval_float(ExprOp op, T x, T y) {
  using namespace ::luminal::scalar;
  (void)x, (void)y;
#define LM_NA (op_not_applicable(op), x)
#define LUMINAL_EVAL_FLOAT(name, arity, text, kind, classes, host_float, host_int, cuda_float, cuda_int) \
  case ExprOp::name: return static_cast<T>(host_float);
  switch (op) { LUMINAL_EXPR_OPS(LUMINAL_EVAL_FLOAT) }
#undef LUMINAL_EVAL_FLOAT
#undef LM_NA
  op_not_applicable(op);
}

}  // namespace luminal::ir
