// The table of scalar ops: one row per ExprOp says everything a backend needs to know about it.
//
// X(name, arity, text, kind, classes, host_float, host_int, cuda_float, cuda_int)
//   arity       operands (-1: variable)
//   text        printed name
//   kind        OpKind: Leaf, Unary, Test (unary, bool result), Binary, Compare (bool result), Other
//               (ops with their own code in every backend: loads, casts, checks, where, folds)
//   classes     the operand dtypes it accepts (op_class bits; ir::unary/ir::binary enforce them)
//   host_float  its value on the host for floating operands x (and y) of type T (float or double;
//               f16/bf16 compute in float and round after every op)
//   host_int    its value for integer or bool operands x (and y), held as int64 (lm_i64) lanes;
//               `bits`, `is_signed` and `is_bool` describe the dtype. The result is narrowed to the
//               dtype afterwards (wrap-around, bool normalization).
//   cuda_float  the CUDA expression (see codegen: {0} {1} operands, {f} the libm suffix "f" or "",
//   cuda_int    {s} "f"/"d", {one} {zero} literals, {T} {U} the value and unsigned types, {bits}
//               {maxshift} the width, {wrap+} {wrap-} {wrap*} wrapping arithmetic, {bitnot})
// LM_NA / "": the op does not apply to that class (its row's classes exclude it).
//
// Host expressions name the functions of common/scalar_ops.h (namespace luminal::scalar), which the
// CUDA prelude also holds, so both sides compute the same thing. A new scalar primitive is one row
// here (plus a function in common/scalar_ops.h when libm has none) and one ATen translator; every
// switch over ExprOp lists all enumerators (-Werror=switch), so the compiler names a missed one.
#pragma once

#include <cstdint>

namespace luminal::ir {

enum class OpKind : uint8_t { Leaf, Unary, Test, Binary, Compare, Other };

// Dtype classes an op accepts, and whether an integer divisor must be non-zero.
namespace op_class {
constexpr uint8_t None = 0;
constexpr uint8_t F = 1;  // floating point
constexpr uint8_t I = 2;  // integers other than bool
constexpr uint8_t B = 4;  // bool
constexpr uint8_t All = F | I | B;
constexpr uint8_t DividesInt = 8;  // integer operand 1 is a divisor: zero is an error
}  // namespace op_class

// clang-format off
#define LUMINAL_EXPR_OPS(X)                                                                                          \
  /* leaves */                                                                                                       \
  X(Const, 0, "const", Leaf, None, LM_NA, LM_NA, "", "")                                                             \
  X(LoopVar, 0, "i", Leaf, None, LM_NA, LM_NA, "", "")                                                               \
  X(ReduceVar, 0, "r", Leaf, None, LM_NA, LM_NA, "", "")                                                             \
  X(Symbol, 0, "sym", Leaf, None, LM_NA, LM_NA, "", "")                                                              \
  X(Load, -1, "load", Other, None, LM_NA, LM_NA, "", "")                                                             \
  /* unary */                                                                                                        \
  X(Neg, 1, "neg", Unary, F | I, -x, lm_wrap_sub(0, x), "(-{0})", "(({T})(0u - ({U}){0}))")                          \
  X(Abs, 1, "abs", Unary, All, std::fabs(x), (x < 0 ? lm_wrap_sub(0, x) : x), "fabs{f}({0})",                       \
    "({0} < 0 ? (({T})(0u - ({U}){0})) : {0})")                                                                      \
  X(Relu, 1, "relu", Unary, All, (x < T(0) ? T(0) : x), (x < 0 ? 0 : x), "({0} < {zero} ? {zero} : {0})",            \
    "({0} < 0 ? ({T})0 : {0})")                                                                                      \
  X(Sigmoid, 1, "sigmoid", Unary, F, T(1) / (T(1) + std::exp(-x)), LM_NA, "({one} / ({one} + exp{f}(-{0})))", "")    \
  X(Tanh, 1, "tanh", Unary, F, std::tanh(x), LM_NA, "tanh{f}({0})", "")                                              \
  X(Exp, 1, "exp", Unary, F, std::exp(x), LM_NA, "exp{f}({0})", "")                                                  \
  X(Log, 1, "log", Unary, F, std::log(x), LM_NA, "log{f}({0})", "")                                                  \
  X(Sqrt, 1, "sqrt", Unary, F, std::sqrt(x), LM_NA, "sqrt{f}({0})", "")                                              \
  X(Rsqrt, 1, "rsqrt", Unary, F, T(1) / std::sqrt(x), LM_NA, "({one} / sqrt{f}({0}))", "")                           \
  X(Recip, 1, "recip", Unary, F, T(1) / x, LM_NA, "({one} / {0})", "")                                               \
  X(Sin, 1, "sin", Unary, F, std::sin(x), LM_NA, "sin{f}({0})", "")                                                  \
  X(Cos, 1, "cos", Unary, F, std::cos(x), LM_NA, "cos{f}({0})", "")                                                  \
  X(Erf, 1, "erf", Unary, F, std::erf(x), LM_NA, "erf{f}({0})", "")                                                  \
  X(GeluTanh, 1, "gelu_tanh", Unary, F, lm_gelu_tanh(x), LM_NA, "lm_gelu_tanh_{s}({0})", "")                         \
  X(Floor, 1, "floor", Unary, All, std::floor(x), x, "floor{f}({0})", "{0}")                                         \
  X(Ceil, 1, "ceil", Unary, All, std::ceil(x), x, "ceil{f}({0})", "{0}")                                             \
  X(Trunc, 1, "trunc", Unary, All, std::trunc(x), x, "trunc{f}({0})", "{0}")                                         \
  X(Round, 1, "round", Unary, All, std::nearbyint(x), x, "rint{f}({0})", "{0}")                                      \
  X(Sign, 1, "sign", Unary, F | I, lm_sign(x), (lm_i64)((0 < x) - (x < 0)), "lm_sign_{s}({0})",                      \
    "(({T})(({0} > 0) - ({0} < 0)))")                                                                                \
  X(Not, 1, "not", Unary, B, LM_NA, (lm_i64)(x == 0), "", "(!{0})")                                                  \
  X(BitNot, 1, "bitnot", Unary, I | B, LM_NA, (is_bool ? (lm_i64)(x == 0) : ~x), "", "{bitnot}")                    \
  X(IsNan, 1, "isnan", Test, All, x != x, false, "({0} != {0})", "false")                                            \
  X(Tan, 1, "tan", Unary, F, std::tan(x), LM_NA, "tan{f}({0})", "")                                                  \
  X(Asin, 1, "asin", Unary, F, std::asin(x), LM_NA, "asin{f}({0})", "")                                              \
  X(Acos, 1, "acos", Unary, F, std::acos(x), LM_NA, "acos{f}({0})", "")                                              \
  X(Atan, 1, "atan", Unary, F, std::atan(x), LM_NA, "atan{f}({0})", "")                                              \
  X(Sinh, 1, "sinh", Unary, F, std::sinh(x), LM_NA, "sinh{f}({0})", "")                                              \
  X(Cosh, 1, "cosh", Unary, F, std::cosh(x), LM_NA, "cosh{f}({0})", "")                                              \
  X(Asinh, 1, "asinh", Unary, F, std::asinh(x), LM_NA, "asinh{f}({0})", "")                                          \
  X(Acosh, 1, "acosh", Unary, F, std::acosh(x), LM_NA, "acosh{f}({0})", "")                                          \
  X(Atanh, 1, "atanh", Unary, F, std::atanh(x), LM_NA, "atanh{f}({0})", "")                                          \
  X(Expm1, 1, "expm1", Unary, F, std::expm1(x), LM_NA, "expm1{f}({0})", "")                                          \
  X(Log1p, 1, "log1p", Unary, F, std::log1p(x), LM_NA, "log1p{f}({0})", "")                                          \
  X(Log2, 1, "log2", Unary, F, std::log2(x), LM_NA, "log2{f}({0})", "")                                              \
  X(Log10, 1, "log10", Unary, F, std::log10(x), LM_NA, "log10{f}({0})", "")                                          \
  X(Exp2, 1, "exp2", Unary, F, std::exp2(x), LM_NA, "exp2{f}({0})", "")                                              \
  X(Erfc, 1, "erfc", Unary, F, std::erfc(x), LM_NA, "erfc{f}({0})", "")                                              \
  X(Erfinv, 1, "erfinv", Unary, F, lm_erfinv(x), LM_NA, "lm_erfinv_{s}({0})", "")                                    \
  X(Lgamma, 1, "lgamma", Unary, F, std::lgamma(x), LM_NA, "lgamma{f}({0})", "")                                      \
  X(I0, 1, "i0", Unary, F, lm_i0(x), LM_NA, "lm_i0_{s}({0})", "")                                                    \
  /* binary arithmetic */                                                                                            \
  X(Add, 2, "add", Binary, All, x + y, lm_wrap_add(x, y), "({0} + {1})", "{wrap+}")                                  \
  X(Sub, 2, "sub", Binary, All, x - y, lm_wrap_sub(x, y), "({0} - {1})", "{wrap-}")                                  \
  X(Mul, 2, "mul", Binary, All, x * y, lm_wrap_mul(x, y), "({0} * {1})", "{wrap*}")                                  \
  X(Div, 2, "div", Binary, F, x / y, LM_NA, "({0} / {1})", "")                                                       \
  X(FloorDiv, 2, "floordiv", Binary, F | I | DividesInt, std::floor(x / y), lm_floordiv_nonzero(x, y),               \
    "floor{f}({0} / {1})", "(({T})lm_floordiv((lm_i64){0}, (lm_i64){1}, p.error))")                                  \
  X(Mod, 2, "mod", Binary, F | I | DividesInt, lm_pymod(x, y), lm_mod_nonzero(x, y), "lm_pymod_{s}({0}, {1})",      \
    "(({T})lm_mod((lm_i64){0}, (lm_i64){1}, p.error))")                                                              \
  X(Max, 2, "max", Binary, All, lm_max(x, y), lm_max(x, y), "lm_max_{s}({0}, {1})", "({0} > {1} ? {0} : {1})")      \
  X(Min, 2, "min", Binary, All, lm_min(x, y), lm_min(x, y), "lm_min_{s}({0}, {1})", "({0} < {1} ? {0} : {1})")      \
  X(Pow, 2, "pow", Binary, F, std::pow(x, y), LM_NA, "pow{f}({0}, {1})", "")                                         \
  X(Atan2, 2, "atan2", Binary, F, std::atan2(x, y), LM_NA, "atan2{f}({0}, {1})", "")                                 \
  X(Hypot, 2, "hypot", Binary, F, std::hypot(x, y), LM_NA, "hypot{f}({0}, {1})", "")                                 \
  X(Fmod, 2, "fmod", Binary, F, std::fmod(x, y), LM_NA, "fmod{f}({0}, {1})", "")                                     \
  X(Copysign, 2, "copysign", Binary, F, std::copysign(x, y), LM_NA, "copysign{f}({0}, {1})", "")                     \
  X(Shl, 2, "shl", Binary, I, LM_NA, lm_shl(x, y, bits), "",                                                         \
    "(({1} < 0 || {1} >= {bits}) ? ({T})0 : ({T})(({U}){0} << {1}))")                                                \
  X(Shr, 2, "shr", Binary, I, LM_NA, lm_shr(x, y, bits, is_signed), "",                                              \
    "(({1} < 0 || {1} >= {maxshift}) ? ({T})({0} >> {maxshift}) : ({T})({0} >> {1}))")                               \
  X(BitAnd, 2, "bitand", Binary, I | B, LM_NA, x & y, "", "(({T})({0} & {1}))")                                      \
  X(BitOr, 2, "bitor", Binary, I | B, LM_NA, x | y, "", "(({T})({0} | {1}))")                                        \
  X(BitXor, 2, "bitxor", Binary, I | B, LM_NA, x ^ y, "", "(({T})({0} ^ {1}))")                                      \
  X(And, 2, "and", Binary, B, LM_NA, (lm_i64)(x && y), "", "({0} && {1})")                                           \
  X(Or, 2, "or", Binary, B, LM_NA, (lm_i64)(x || y), "", "({0} || {1})")                                             \
  /* comparisons: bool result */                                                                                     \
  X(Eq, 2, "eq", Compare, All, x == y, x == y, "({0} == {1})", "({0} == {1})")                                       \
  X(Ne, 2, "ne", Compare, All, x != y, x != y, "({0} != {1})", "({0} != {1})")                                       \
  X(Lt, 2, "lt", Compare, All, x < y, x < y, "({0} < {1})", "({0} < {1})")                                           \
  X(Le, 2, "le", Compare, All, x <= y, x <= y, "({0} <= {1})", "({0} <= {1})")                                       \
  X(Gt, 2, "gt", Compare, All, x > y, x > y, "({0} > {1})", "({0} > {1})")                                           \
  X(Ge, 2, "ge", Compare, All, x >= y, x >= y, "({0} >= {1})", "({0} >= {1})")                                       \
  /* others */                                                                                                       \
  X(Where, 3, "where", Other, None, LM_NA, LM_NA, "", "")                                                            \
  X(Cast, 1, "cast", Other, None, LM_NA, LM_NA, "", "")                                                              \
  X(CheckIndex, -1, "check_index", Other, None, LM_NA, LM_NA, "", "")                                                \
  /* inline reduction */                                                                                             \
  X(Fold, -1, "fold", Other, None, LM_NA, LM_NA, "", "")

// Case labels for every op of a kind, for switches over ExprOp that list the Leaf and Other ops by
// hand and treat the scalar ops alike: `switch (op) { case ExprOp::Load: ... LUMINAL_UNARY_OP_CASES
// return ...; LUMINAL_BINARY_OP_CASES return ...; }`. A new row lands in its kind's list; a new
// Leaf or Other op is a missing enumerator (-Werror=switch).
#define LUMINAL_OP_CASE(name) case ::luminal::ir::ExprOp::name:
#define LUMINAL_UNARY_CASE_Leaf(name)
#define LUMINAL_UNARY_CASE_Unary(name) LUMINAL_OP_CASE(name)
#define LUMINAL_UNARY_CASE_Test(name) LUMINAL_OP_CASE(name)
#define LUMINAL_UNARY_CASE_Binary(name)
#define LUMINAL_UNARY_CASE_Compare(name)
#define LUMINAL_UNARY_CASE_Other(name)
#define LUMINAL_BINARY_CASE_Leaf(name)
#define LUMINAL_BINARY_CASE_Unary(name)
#define LUMINAL_BINARY_CASE_Test(name)
#define LUMINAL_BINARY_CASE_Binary(name) LUMINAL_OP_CASE(name)
#define LUMINAL_BINARY_CASE_Compare(name) LUMINAL_OP_CASE(name)
#define LUMINAL_BINARY_CASE_Other(name)
#define LUMINAL_UNARY_CASE_ENTRY(name, arity, text, kind, ...) LUMINAL_UNARY_CASE_##kind(name)
#define LUMINAL_BINARY_CASE_ENTRY(name, arity, text, kind, ...) LUMINAL_BINARY_CASE_##kind(name)
#define LUMINAL_UNARY_OP_CASES LUMINAL_EXPR_OPS(LUMINAL_UNARY_CASE_ENTRY)
#define LUMINAL_BINARY_OP_CASES LUMINAL_EXPR_OPS(LUMINAL_BINARY_CASE_ENTRY)
#define LUMINAL_SCALAR_OP_CASES LUMINAL_UNARY_OP_CASES LUMINAL_BINARY_OP_CASES
// The ops a shape expression (sizes and symbols combined by binary arithmetic) never holds: for
// the switches that evaluate or render shape expressions, after their Const/Symbol/binary cases.
#define LUMINAL_NON_SHAPE_OP_CASES \
  case ExprOp::LoopVar:            \
  case ExprOp::ReduceVar:          \
  case ExprOp::Load:               \
  case ExprOp::Where:              \
  case ExprOp::Cast:               \
  case ExprOp::CheckIndex:         \
  case ExprOp::Fold:               \
    LUMINAL_UNARY_OP_CASES
// clang-format on

}  // namespace luminal::ir
