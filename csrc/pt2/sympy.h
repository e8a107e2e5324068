// Parser for the sympy `srepr` strings that torch.export writes into SymExpr.expr_str.
//
// Examples: "Symbol('s0', positive=True, integer=True)",
//           "Add(Mul(Integer(2), Symbol('s0', positive=True, integer=True)), Integer(1))",
//           "FloorDiv(Symbol('s0', ...), Integer(2))", "int_oo", "-int_oo".
// The AST is deliberately untyped: deciding which functions are supported is the consumer's job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace luminal::pt2 {

struct SympyExpr {
  // Call: Func(args...), e.g. Add, Mul, FloorDiv, Mod, Max, Min, Pow, CeilToInt, Rational, Float,
  // and the argument-less constants oo, zoo, nan, int_oo, true, false, Half.
  enum class Kind { Integer, Symbol, Call };
  Kind kind = Kind::Integer;
  int64_t value = 0;  // Integer
  std::string name;   // Symbol name or Call function name
  std::vector<SympyExpr> args;

  static SympyExpr integer(int64_t value);
  static SympyExpr symbol(std::string name);
  static SympyExpr call(std::string name, std::vector<SympyExpr> args = {});
};

// Parses an srepr string (or a bare symbol name as sympy's str() prints it). Handles
// Symbol('name', kw=...), Integer(n), bare and negative integers, One/Zero/NegativeOne (bare or
// called) -> Integer, nested calls and whitespace. Keyword arguments are ignored. A unary minus on
// a non-integer x (e.g. "-int_oo") becomes Mul(-1, x). A quoted string outside Symbol(...), as in
// Float('1.5', precision=53), is kept as a Symbol node holding the text. Throws luminal::Error with
// the offset on anything else.
SympyExpr parse_sympy(const std::string& text);

// Readable form, e.g. "Mul(2, s0)"; argument-less constants print bare ("int_oo").
std::string to_string(const SympyExpr& e);

bool operator==(const SympyExpr& a, const SympyExpr& b);
inline bool operator!=(const SympyExpr& a, const SympyExpr& b) { return !(a == b); }

}  // namespace luminal::pt2
