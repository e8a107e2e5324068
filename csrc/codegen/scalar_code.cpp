#include "codegen/scalar_code.h"

#include <cstring>
#include <map>
#include <sstream>
#include <vector>

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
  if (is_floating(from)) {
    const char* const convert = float_cast_goes_through_int32(to) ? "lm_f2i32" : "lm_f2i";
    return str_cat("((", value_type(to), ")", convert, "((double)", value, "))");
  }
  return str_cat("((", value_type(to), ")", value, ")");
}

// ------------------------------------------------------------------------------------------------
// Scalar ops: the CUDA templates of the op table (ir/op_table.h)
// ------------------------------------------------------------------------------------------------
namespace {

// The operands a template names ({0}, {1}; the wrap and bitnot forms name both or the first).
std::vector<bool> operands_used(const std::string& text, size_t arity) {
  std::vector<bool> used(arity, false);
  for (size_t k = 0; k < arity; ++k) used[k] = text.find("{" + std::to_string(k) + "}") != std::string::npos;
  if (text.find("{wrap") != std::string::npos) used.assign(arity, true);
  if (text.find("{bitnot}") != std::string::npos) used[0] = true;
  return used;
}

// Renders `text`, replacing each {name} by values.at(name). Operands are rendered last first: the
// order in which the hand-written emitters produced them (their statements, CSE names), so that
// kernels stay byte-identical.
std::string render(const Expr& e, const std::string& text, std::map<std::string, std::string> values,
                   const ScalarArg& arg) {
  const std::vector<bool> used = operands_used(text, e->args.size());
  for (size_t k = used.size(); k-- > 0;) {
    if (used[k]) values[std::to_string(k)] = arg(k);
  }
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t open = text.find('{', pos);
    if (open == std::string::npos) {
      out.append(text, pos, std::string::npos);
      break;
    }
    const size_t close = text.find('}', open);
    LUMINAL_CHECK(close != std::string::npos, "internal error: unterminated placeholder in '", text, "'");
    const auto it = values.find(text.substr(open + 1, close - open - 1));
    LUMINAL_CHECK(it != values.end(), "internal error: unknown placeholder in '", text, "' for ",
                  ir::expr_op_name(e->op));
    out.append(text, pos, open - pos).append(it->second);
    pos = close + 1;
  }
  return out;
}

const char* template_of(const Expr& e, bool floating) {
  const ir::OpInfo& info = ir::op_info(e->op);
  const char* text = floating ? info.cuda_float : info.cuda_int;
  LUMINAL_CHECK(text != nullptr && *text != '\0', "internal error: cannot emit ", ir::expr_op_name(e->op), " on ",
                dtype_name(e->args.at(0)->dtype));
  return text;
}

}  // namespace

std::string float_op(const Expr& e, const ScalarArg& arg) {
  const bool is_double = e->args.at(0)->dtype == DType::F64;
  return render(e, template_of(e, true),
                {{"f", is_double ? "" : "f"},
                 {"s", is_double ? "d" : "f"},
                 {"one", is_double ? "1.0" : "1.0f"},
                 {"zero", is_double ? "0.0" : "0.0f"}},
                arg);
}

std::string int_op(const Expr& e, const ScalarArg& arg) {
  const DType t = e->args.at(0)->dtype;
  const std::string type = value_type(t), u = unsigned_type(t);
  const size_t bits = dtype_size(t) * 8;
  std::map<std::string, std::string> values = {{"T", type},
                                               {"U", u},
                                               {"bits", std::to_string(bits)},
                                               {"maxshift", std::to_string(bits - (t == DType::U8 ? 0 : 1))}};
  const std::string text = template_of(e, false);
  if (text.find("{wrap") != std::string::npos || text.find("{bitnot}") != std::string::npos) {
    // Wrapping arithmetic and bit negation depend on the type: bool normalizes (and multiplies as
    // a logical and), u8 truncates, the other signed types compute in their unsigned type.
    const std::string a = "{0}", b = "{1}";
    for (const char* op : {"+", "-", "*"}) {
      std::string wrapped;
      if (t == DType::Bool) {
        wrapped = std::string(op) == "*" ? str_cat("(", a, " && ", b, ")") : str_cat("((", a, " ", op, " ", b, ") != 0)");
      } else if (t == DType::U8) {
        wrapped = str_cat("((", type, ")(", a, " ", op, " ", b, "))");
      } else {
        wrapped = str_cat("((", type, ")((", u, ")", a, " ", op, " (", u, ")", b, "))");
      }
      values[std::string("wrap") + op] = wrapped;
    }
    values["bitnot"] = t == DType::Bool ? "(!{0})" : str_cat("((", type, ")~{0})");
    // Expand the type-dependent form first, then its operands.
    std::string expanded = text;
    for (const auto& name : {"wrap+", "wrap-", "wrap*", "bitnot"}) {
      const std::string key = std::string("{") + name + "}";
      for (size_t pos = expanded.find(key); pos != std::string::npos; pos = expanded.find(key)) {
        expanded.replace(pos, key.size(), values[name]);
      }
    }
    return render(e, expanded, values, arg);
  }
  return render(e, text, values, arg);
}

}  // namespace luminal::codegen::detail
