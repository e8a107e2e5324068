// Private to csrc/codegen: the CUDA C text of scalar values and operations: C types and literals
// of each dtype, the rounding of f16/bf16 results, casts, and every float and integer ExprOp.
// (Shape arithmetic, loads and CSE live in the kernel writer; see kernel_writer.h.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "common/dtype.h"
#include "ir/expr.h"

namespace luminal::codegen::detail {

// The C type a value of `dtype` has inside a kernel (f16/bf16 are computed as float).
const char* value_type(DType dtype);
// The C type of an element in memory.
const char* storage_type(DType dtype);
// The unsigned type used for wrap-around arithmetic of a signed integer type.
const char* unsigned_type(DType dtype);

// "0x..." of `bits`.
std::string hex_bits(uint64_t bits);
std::string float_literal(double value, DType dtype);
std::string int_literal(int64_t value, DType dtype);

// `value` (computed in f32) rounded to f16/bf16; other dtypes unchanged.
std::string rounding(DType dtype, const std::string& value);
std::string cast_code(DType from, DType to, const std::string& value);

// The C expression of argument k of the op being rendered. Called lazily, in the order the op's
// text needs it: each call may emit the argument's statements (the caller's CSE).
using ScalarArg = std::function<std::string(size_t)>;

// The CUDA expression of a scalar op of `e` (Unary, Test, Binary or Compare kind) from the op
// table's templates (ir/op_table.h): float_op for floating operands (f32-class or f64), int_op
// for integer and bool operands (signed arithmetic wraps, division and modulo floor).
std::string float_op(const ir::Expr& e, const ScalarArg& arg);
std::string int_op(const ir::Expr& e, const ScalarArg& arg);

}  // namespace luminal::codegen::detail
