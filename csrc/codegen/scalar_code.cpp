#include "codegen/scalar_code.h"

#include <cstring>
#include <sstream>

#include "common/error.h"

namespace luminal::codegen::detail {

using ir::Expr;
using ir::ExprOp;

// ------------------------------------------------------------------------------------------------
// Types and literals
// ------------------------------------------------------------------------------------------------

// The C type a value of `dtype` has inside a kernel (f16/bf16 are computed as float).
const char* value_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::U8: return "unsigned char";
    case DType::I8: return "signed char";
    case DType::I16: return "short";
    case DType::I32: return "int";
    case DType::I64: return "lm_i64";
    case DType::F16:
    case DType::BF16:
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "?";
}

// The C type of an element in memory.
const char* storage_type(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::U8: return "unsigned char";
    case DType::F16:
    case DType::BF16: return "unsigned short";
    default: return value_type(dtype);
  }
}

// The unsigned type used for wrap-around arithmetic of a signed integer type.
// (32 bits for the narrow types too: their products must not overflow int after promotion.)
const char* unsigned_type(DType dtype) { return dtype == DType::I64 ? "lm_u64" : "unsigned int"; }

std::string hex_bits(uint64_t bits) {
  std::ostringstream out;
  out << "0x" << std::hex << bits;
  return out.str();
}

std::string float_literal(double value, DType dtype) {
  if (dtype == DType::F64) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return "__longlong_as_double(" + hex_bits(bits) + "ull)";
  }
  const float f = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return "__int_as_float(" + hex_bits(bits) + ")";
}

std::string int_literal(int64_t value, DType dtype) {
  if (dtype == DType::Bool) return value ? "true" : "false";
  if (value == INT64_MIN) return str_cat("((", value_type(dtype), ")(-9223372036854775807LL - 1))");
  return str_cat("((", value_type(dtype), ")", value, "LL)");
}

std::string rounding(DType dtype, const std::string& value) {
  if (dtype == DType::F16) return "lm_round_h(" + value + ")";
  if (dtype == DType::BF16) return "lm_round_bf(" + value + ")";
  return value;
}

std::string cast_code(DType from, DType to, const std::string& value) {
  if (from == to) return value;
  if (to == DType::Bool) return str_cat("(", value, " != 0)");
  if (is_floating(to)) {
    if (is_floating(from) && from != DType::F64 && to != DType::F64) return rounding(to, value);  // f32-class
    return rounding(to, str_cat("((", value_type(to), ")", value, ")"));
  }
  if (is_floating(from)) return str_cat("((", value_type(to), ")lm_f2i((double)", value, "))");
  return str_cat("((", value_type(to), ")", value, ")");
}

std::string float_op(const Expr& e, const std::string& f, bool is_double, const ScalarArg& arg) {
  const std::string one = is_double ? "1.0" : "1.0f";
  const std::string zero = is_double ? "0.0" : "0.0f";
  const std::string sfx = is_double ? "d" : "f";
  switch (e->op) {
    case ExprOp::Neg: return "(-" + arg(0) + ")";
    case ExprOp::Abs: return str_cat("fabs", f, "(", arg(0), ")");
    case ExprOp::Relu: return str_cat("(", arg(0), " < ", zero, " ? ", zero, " : ", arg(0), ")");
    case ExprOp::Sigmoid: return str_cat("(", one, " / (", one, " + exp", f, "(-", arg(0), ")))");
    case ExprOp::Tanh: return str_cat("tanh", f, "(", arg(0), ")");
    case ExprOp::Exp: return str_cat("exp", f, "(", arg(0), ")");
    case ExprOp::Log: return str_cat("log", f, "(", arg(0), ")");
    case ExprOp::Sqrt: return str_cat("sqrt", f, "(", arg(0), ")");
    case ExprOp::Rsqrt: return str_cat("(", one, " / sqrt", f, "(", arg(0), "))");
    case ExprOp::Recip: return str_cat("(", one, " / ", arg(0), ")");
    case ExprOp::Sin: return str_cat("sin", f, "(", arg(0), ")");
    case ExprOp::Cos: return str_cat("cos", f, "(", arg(0), ")");
    case ExprOp::Erf: return str_cat("erf", f, "(", arg(0), ")");
    case ExprOp::Tan: return str_cat("tan", f, "(", arg(0), ")");
    case ExprOp::Asin: return str_cat("asin", f, "(", arg(0), ")");
    case ExprOp::Acos: return str_cat("acos", f, "(", arg(0), ")");
    case ExprOp::Atan: return str_cat("atan", f, "(", arg(0), ")");
    case ExprOp::Sinh: return str_cat("sinh", f, "(", arg(0), ")");
    case ExprOp::Cosh: return str_cat("cosh", f, "(", arg(0), ")");
    case ExprOp::Asinh: return str_cat("asinh", f, "(", arg(0), ")");
    case ExprOp::Acosh: return str_cat("acosh", f, "(", arg(0), ")");
    case ExprOp::Atanh: return str_cat("atanh", f, "(", arg(0), ")");
    case ExprOp::Expm1: return str_cat("expm1", f, "(", arg(0), ")");
    case ExprOp::Log1p: return str_cat("log1p", f, "(", arg(0), ")");
    case ExprOp::Log2: return str_cat("log2", f, "(", arg(0), ")");
    case ExprOp::Log10: return str_cat("log10", f, "(", arg(0), ")");
    case ExprOp::Exp2: return str_cat("exp2", f, "(", arg(0), ")");
    case ExprOp::Erfc: return str_cat("erfc", f, "(", arg(0), ")");
    case ExprOp::Erfinv: return str_cat("erfinv", f, "(", arg(0), ")");
    case ExprOp::Lgamma: return str_cat("lgamma", f, "(", arg(0), ")");
    // torch's Chebyshev evaluation gives NaN for +-inf; CUDA's gives inf.
    case ExprOp::I0: return str_cat("lm_i0_", sfx, "(", arg(0), ")");
    case ExprOp::GeluTanh: return str_cat("lm_gelu_tanh_", sfx, "(", arg(0), ")");
    case ExprOp::Floor: return str_cat("floor", f, "(", arg(0), ")");
    case ExprOp::Ceil: return str_cat("ceil", f, "(", arg(0), ")");
    case ExprOp::Trunc: return str_cat("trunc", f, "(", arg(0), ")");
    case ExprOp::Round: return str_cat("rint", f, "(", arg(0), ")");
    case ExprOp::Sign: return str_cat("lm_sign_", sfx, "(", arg(0), ")");
    case ExprOp::Add: return str_cat("(", arg(0), " + ", arg(1), ")");
    case ExprOp::Sub: return str_cat("(", arg(0), " - ", arg(1), ")");
    case ExprOp::Mul: return str_cat("(", arg(0), " * ", arg(1), ")");
    case ExprOp::Div: return str_cat("(", arg(0), " / ", arg(1), ")");
    case ExprOp::Pow: return str_cat("pow", f, "(", arg(0), ", ", arg(1), ")");
    case ExprOp::Atan2: return str_cat("atan2", f, "(", arg(0), ", ", arg(1), ")");
    case ExprOp::Hypot: return str_cat("hypot", f, "(", arg(0), ", ", arg(1), ")");
    case ExprOp::Fmod: return str_cat("fmod", f, "(", arg(0), ", ", arg(1), ")");
    case ExprOp::Copysign: return str_cat("copysign", f, "(", arg(0), ", ", arg(1), ")");
    case ExprOp::Max: return str_cat("lm_max_", sfx, "(", arg(0), ", ", arg(1), ")");
    case ExprOp::Min: return str_cat("lm_min_", sfx, "(", arg(0), ", ", arg(1), ")");
    case ExprOp::FloorDiv: return str_cat("floor", f, "(", arg(0), " / ", arg(1), ")");
    case ExprOp::Mod: return str_cat("lm_pymod_", sfx, "(", arg(0), ", ", arg(1), ")");
    default: fail("internal error: cannot emit ", ir::expr_op_name(e->op), " on ", dtype_name(e->dtype));
  }
}

std::string int_op(const Expr& e, const ScalarArg& arg) {
  const DType t = e->dtype;
  const std::string type = value_type(t);
  const std::string u = unsigned_type(t);
  auto wrap = [&](const char* op) {
    if (t == DType::Bool) return str_cat("((", arg(0), " ", op, " ", arg(1), ") != 0)");
    if (t == DType::U8) return str_cat("((", type, ")(", arg(0), " ", op, " ", arg(1), "))");
    return str_cat("((", type, ")((", u, ")", arg(0), " ", op, " (", u, ")", arg(1), "))");
  };
  switch (e->op) {
    case ExprOp::Neg: return str_cat("((", type, ")(0u - (", u, ")", arg(0), "))");
    case ExprOp::Abs: return str_cat("(", arg(0), " < 0 ? ((", type, ")(0u - (", u, ")", arg(0), ")) : ", arg(0), ")");
    case ExprOp::Relu: return str_cat("(", arg(0), " < 0 ? (", type, ")0 : ", arg(0), ")");
    case ExprOp::Sign: return str_cat("((", type, ")((", arg(0), " > 0) - (", arg(0), " < 0)))");
    case ExprOp::Not: return str_cat("(!", arg(0), ")");
    case ExprOp::BitNot:
      return t == DType::Bool ? str_cat("(!", arg(0), ")") : str_cat("((", type, ")~", arg(0), ")");
    case ExprOp::Floor:
    case ExprOp::Ceil:
    case ExprOp::Trunc:
    case ExprOp::Round: return arg(0);
    case ExprOp::Add: return wrap("+");
    case ExprOp::Sub: return wrap("-");
    case ExprOp::Mul: return t == DType::Bool ? str_cat("(", arg(0), " && ", arg(1), ")") : wrap("*");
    case ExprOp::FloorDiv: return str_cat("((", type, ")lm_floordiv((lm_i64)", arg(0), ", (lm_i64)", arg(1), ", p.error))");
    case ExprOp::Mod: return str_cat("((", type, ")lm_mod((lm_i64)", arg(0), ", (lm_i64)", arg(1), ", p.error))");
    case ExprOp::Max: return str_cat("(", arg(0), " > ", arg(1), " ? ", arg(0), " : ", arg(1), ")");
    case ExprOp::Min: return str_cat("(", arg(0), " < ", arg(1), " ? ", arg(0), " : ", arg(1), ")");
    case ExprOp::BitAnd: return str_cat("((", type, ")(", arg(0), " & ", arg(1), "))");
    case ExprOp::BitOr: return str_cat("((", type, ")(", arg(0), " | ", arg(1), "))");
    case ExprOp::BitXor: return str_cat("((", type, ")(", arg(0), " ^ ", arg(1), "))");
    // torch's shifts: a negative or too large amount shifts everything out (left) or gives the
    // sign fill (right); C++ leaves those undefined, so they are handled explicitly.
    case ExprOp::Shl: {
      const size_t bits = dtype_size(t) * 8;
      return str_cat("((", arg(1), " < 0 || ", arg(1), " >= ", bits, ") ? (", type, ")0 : (", type, ")((", u, ")",
                     arg(0), " << ", arg(1), "))");
    }
    case ExprOp::Shr: {
      const size_t max_shift = dtype_size(t) * 8 - (t == DType::U8 ? 0 : 1);
      return str_cat("((", arg(1), " < 0 || ", arg(1), " >= ", max_shift, ") ? (", type, ")(", arg(0), " >> ",
                     max_shift, ") : (", type, ")(", arg(0), " >> ", arg(1), "))");
    }
    case ExprOp::And: return str_cat("(", arg(0), " && ", arg(1), ")");
    case ExprOp::Or: return str_cat("(", arg(0), " || ", arg(1), ")");
    default: fail("internal error: cannot emit ", ir::expr_op_name(e->op), " on ", dtype_name(e->dtype));
  }
}

}  // namespace luminal::codegen::detail
