#include "ir/expr.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/scalar_ops.h"
#include "ir/poly.h"
#include "ir/scalar_eval.h"

namespace luminal::ir {

namespace {

namespace table {
using namespace op_class;  // the rows name classes unqualified
constexpr OpInfo kOpInfo[] = {
#define LUMINAL_INFO_ENTRY(name, arity, text, kind, classes, host_float, host_int, cuda_float, cuda_int) \
  {text, arity, OpKind::kind, static_cast<uint8_t>(classes), cuda_float, cuda_int},
    LUMINAL_EXPR_OPS(LUMINAL_INFO_ENTRY)
#undef LUMINAL_INFO_ENTRY
};
}  // namespace table
using table::kOpInfo;

size_t hash_combine(size_t seed, size_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

size_t hash_double(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return std::hash<uint64_t>{}(bits);
}

size_t compute_hash(const ExprNode& n) {
  size_t h = std::hash<int>{}(static_cast<int>(n.op));
  h = hash_combine(h, static_cast<size_t>(n.dtype));
  h = hash_combine(h, static_cast<size_t>(n.index));
  h = hash_combine(h, std::hash<int64_t>{}(n.int_value));
  h = hash_combine(h, hash_double(n.float_value));
  if (!n.symbol.empty()) h = hash_combine(h, std::hash<std::string>{}(n.symbol));
  h = hash_combine(h, n.masked ? 1 : 0);
  for (const Expr& arg : n.args) h = hash_combine(h, arg->hash);
  return h;
}

Expr finish(ExprNode node) {
  node.hash = compute_hash(node);
  return std::make_shared<const ExprNode>(std::move(node));
}

Expr make_node(ExprOp op, DType dtype, std::vector<Expr> args) {
  ExprNode node;
  node.op = op;
  node.dtype = dtype;
  node.args = std::move(args);
  return finish(std::move(node));
}

void require(bool cond, const char* op, const std::string& message) {
  if (!cond) fail("invalid expression ", op, ": ", message);
}

// Two's-complement wrapping arithmetic and Python floor division (divisors are non-zero).
using scalar::lm_wrap_add;
using scalar::lm_wrap_mul;
int64_t wrap_add(int64_t a, int64_t b) { return lm_wrap_add(a, b); }
int64_t wrap_mul(int64_t a, int64_t b) { return lm_wrap_mul(a, b); }
int64_t python_floordiv(int64_t a, int64_t b) { return scalar::lm_floordiv_nonzero(a, b); }
int64_t python_mod(int64_t a, int64_t b) { return scalar::lm_mod_nonzero(a, b); }

bool is_i64(const Expr& e) { return e->dtype == DType::I64; }

}  // namespace

// ------------------------------------------------------------------------------------------------
// Op metadata
// ------------------------------------------------------------------------------------------------
const OpInfo& op_info(ExprOp op) { return kOpInfo[static_cast<int>(op)]; }

const char* expr_op_name(ExprOp op) { return op_info(op).name; }

bool is_unary_op(ExprOp op) { return op_info(op).kind == OpKind::Unary || op_info(op).kind == OpKind::Test; }

bool is_binary_op(ExprOp op) { return op_info(op).kind == OpKind::Binary || op_info(op).kind == OpKind::Compare; }

bool is_comparison_op(ExprOp op) { return op_info(op).kind == OpKind::Compare; }

bool op_accepts(ExprOp op, DType dtype) {
  const uint8_t cls = is_floating(dtype) ? op_class::F : dtype == DType::Bool ? op_class::B : op_class::I;
  return (op_info(op).classes & cls) != 0;
}

void op_not_applicable(ExprOp op) { fail("internal error: op ", expr_op_name(op), " reached a backend for a dtype its table row excludes"); }

bool ExprNode::is_int_const(int64_t value) const {
  return op == ExprOp::Const && !is_floating(dtype) && int_value == value;
}

// ------------------------------------------------------------------------------------------------
// Structural comparison
// ------------------------------------------------------------------------------------------------
int expr_compare(const Expr& a, const Expr& b) {
  if (a.get() == b.get()) return 0;
  auto cmp = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  if (int c = cmp(a->op, b->op)) return c;
  if (int c = cmp(a->dtype, b->dtype)) return c;
  if (int c = cmp(a->index, b->index)) return c;
  if (int c = cmp(a->int_value, b->int_value)) return c;
  uint64_t fa, fb;
  std::memcpy(&fa, &a->float_value, sizeof fa);
  std::memcpy(&fb, &b->float_value, sizeof fb);
  if (int c = cmp(fa, fb)) return c;
  if (int c = a->symbol.compare(b->symbol)) return c < 0 ? -1 : 1;
  if (int c = cmp(a->masked, b->masked)) return c;
  if (int c = cmp(a->args.size(), b->args.size())) return c;
  for (size_t i = 0; i < a->args.size(); ++i) {
    if (int c = expr_compare(a->args[i], b->args[i])) return c;
  }
  return 0;
}

bool expr_equal(const Expr& a, const Expr& b) {
  if (a.get() == b.get()) return true;
  if (!a || !b) return false;
  return a->hash == b->hash && expr_compare(a, b) == 0;
}

// ------------------------------------------------------------------------------------------------
// Leaves
// ------------------------------------------------------------------------------------------------
Expr int_const(int64_t value, DType dtype) {
  require(!is_floating(dtype), "const", str_cat("int_const with floating dtype ", dtype_name(dtype)));
  ExprNode node;
  node.op = ExprOp::Const;
  node.dtype = dtype;
  node.int_value = dtype == DType::Bool ? (value != 0) : value;
  return finish(std::move(node));
}

Expr float_const(double value, DType dtype) {
  require(is_floating(dtype), "const", str_cat("float_const with dtype ", dtype_name(dtype)));
  ExprNode node;
  node.op = ExprOp::Const;
  node.dtype = dtype;
  node.float_value = value;
  return finish(std::move(node));
}

Expr bool_const(bool value) { return int_const(value ? 1 : 0, DType::Bool); }

Expr scalar_const(double value, DType dtype) {
  if (is_floating(dtype)) return float_const(value, dtype);
  if (dtype == DType::Bool) return bool_const(value != 0.0);
  require(std::isfinite(value) && value == std::trunc(value), "const",
          str_cat("value ", value, " is not representable as ", dtype_name(dtype)));
  return int_const(static_cast<int64_t>(value), dtype);
}

Expr loop_var(int axis) {
  ExprNode node;
  node.op = ExprOp::LoopVar;
  node.dtype = DType::I64;
  node.index = axis;
  return finish(std::move(node));
}

Expr reduce_var(int axis) {
  ExprNode node;
  node.op = ExprOp::ReduceVar;
  node.dtype = DType::I64;
  node.index = axis;
  return finish(std::move(node));
}

Expr symbol(const std::string& name) {
  require(!name.empty(), "symbol", "empty name");
  ExprNode node;
  node.op = ExprOp::Symbol;
  node.dtype = DType::I64;
  node.symbol = name;
  return finish(std::move(node));
}

Expr load(int slot, DType dtype, std::vector<Expr> index, Expr mask) {
  for (const Expr& e : index) require(is_i64(e), "load", "index expressions must be i64");
  ExprNode node;
  node.op = ExprOp::Load;
  node.dtype = dtype;
  node.index = slot;
  node.args = std::move(index);
  if (mask) {
    if (mask->is_int_const(0)) {
      // Fully masked: the load never happens.
      return dtype == DType::Bool ? bool_const(false)
                                  : (is_floating(dtype) ? float_const(0.0, dtype) : int_const(0, dtype));
    }
    if (!mask->is_int_const(1)) {
      require(mask->dtype == DType::Bool, "load", "mask must be bool");
      node.args.push_back(std::move(mask));
      node.masked = true;
    }
  }
  return finish(std::move(node));
}

// ------------------------------------------------------------------------------------------------
// Integer canonical form (see poly.h)
// ------------------------------------------------------------------------------------------------
namespace {

Expr poly_to_expr(const Poly& p);

Expr monomial_to_expr(const Monomial& m, int64_t coefficient) {
  Expr out;
  for (const Expr& atom : m) out = out ? make_node(ExprOp::Mul, DType::I64, {out, atom}) : atom;
  if (!out) return int_const(coefficient);
  if (coefficient != 1) out = make_node(ExprOp::Mul, DType::I64, {out, int_const(coefficient)});
  return out;
}

Expr poly_to_expr(const Poly& p) {
  Expr out;
  for (const auto& [monomial, coefficient] : p.terms) {
    Expr term = monomial_to_expr(monomial, coefficient);
    out = out ? make_node(ExprOp::Add, DType::I64, {out, term}) : term;
  }
  if (!out) return int_const(p.constant);
  if (p.constant != 0) out = make_node(ExprOp::Add, DType::I64, {out, int_const(p.constant)});
  return out;
}

// Replaces k*c*(x // c) + k*(x % c) by k*x for constant c (the remainder/quotient identity).
bool fold_div_mod_pairs(Poly& p) {
  for (auto it = p.terms.begin(); it != p.terms.end(); ++it) {
    if (it->first.size() != 1 || it->first[0]->op != ExprOp::Mod) continue;
    const Expr mod_atom = it->first[0];  // copies: the map entries are erased below
    const Expr x = mod_atom->args[0];
    const auto c = as_int_const(mod_atom->args[1]);
    if (!c || *c <= 0) continue;
    const int64_t k = it->second;
    const Expr quotient = make_node(ExprOp::FloorDiv, DType::I64, {x, mod_atom->args[1]});
    auto q = p.terms.find(Monomial{quotient});
    if (q == p.terms.end() || q->second != wrap_mul(k, *c)) continue;
    p.terms.erase(q);
    p.terms.erase(Monomial{mod_atom});
    Poly replacement = poly_from_expr(x);
    replacement.scale(k);
    p.add(replacement);
    return true;
  }
  return false;
}

// Replaces k*a*((x // a) % b) + k*(x % a) by k*(x % (a*b)) for constants a, b > 0 (floor
// semantics: x % ab = a*((x // a) % b) + x % a for every integer x). A flattened view of a
// row-major tensor read through its unflattened coordinates leaves these; together with
// fold_div_mod_pairs they collapse back to the flat index.
bool fold_nested_mods(Poly& p) {
  for (auto it = p.terms.begin(); it != p.terms.end(); ++it) {
    if (it->first.size() != 1 || it->first[0]->op != ExprOp::Mod) continue;
    const Expr inner = it->first[0];  // x % a
    const auto a = as_int_const(inner->args[1]);
    if (!a || *a <= 0) continue;
    const int64_t k = it->second;
    for (auto outer = p.terms.begin(); outer != p.terms.end(); ++outer) {
      if (outer->first.size() != 1 || outer->first[0]->op != ExprOp::Mod) continue;
      const Expr candidate = outer->first[0];  // (x // a) % b ?
      const Expr& quotient = candidate->args[0];
      const auto b = as_int_const(candidate->args[1]);
      int64_t ab = 0;
      if (!b || *b <= 0 || quotient->op != ExprOp::FloorDiv || !expr_equal(quotient->args[0], inner->args[0]) ||
          as_int_const(quotient->args[1]) != a || outer->second != wrap_mul(k, *a) ||
          __builtin_mul_overflow(*a, *b, &ab)) {
        continue;
      }
      const Expr x = inner->args[0];
      p.terms.erase(outer);
      p.terms.erase(Monomial{inner});
      Poly replacement = poly_from_expr(mod(x, int_const(ab)));
      replacement.scale(k);
      p.add(replacement);
      return true;
    }
  }
  return false;
}

Expr canonical(Poly p) {
  while (fold_div_mod_pairs(p) || fold_nested_mods(p)) {
  }
  return poly_to_expr(p);
}

}  // namespace

Poly poly_from_expr(const Expr& e) {
  Poly out;
  if (auto value = as_int_const(e); value && e->dtype == DType::I64) {
    out.constant = *value;
    return out;
  }
  if (e->dtype == DType::I64) {
    if (e->op == ExprOp::Add || e->op == ExprOp::Sub) {
      out = poly_from_expr(e->args[0]);
      Poly rhs = poly_from_expr(e->args[1]);
      if (e->op == ExprOp::Sub) rhs.scale(-1);
      out.add(rhs);
      return out;
    }
    if (e->op == ExprOp::Neg) {
      out = poly_from_expr(e->args[0]);
      out.scale(-1);
      return out;
    }
    if (e->op == ExprOp::Mul) return Poly::multiply(poly_from_expr(e->args[0]), poly_from_expr(e->args[1]));
  }
  out.terms[Monomial{e}] = 1;
  return out;
}

void Poly::add(const Poly& other) {
  constant = wrap_add(constant, other.constant);
  for (const auto& [m, c] : other.terms) {
    auto [it, inserted] = terms.emplace(m, c);
    if (!inserted) {
      it->second = wrap_add(it->second, c);
      if (it->second == 0) terms.erase(it);
    }
  }
}

void Poly::scale(int64_t factor) {
  if (factor == 0) {
    terms.clear();
    constant = 0;
    return;
  }
  constant = wrap_mul(constant, factor);
  for (auto& term : terms) term.second = wrap_mul(term.second, factor);
}

Poly Poly::multiply(const Poly& a, const Poly& b) {
  Poly out;
  out.constant = wrap_mul(a.constant, b.constant);
  auto add_term = [&out](Monomial m, int64_t c) {
    if (c == 0) return;
    std::sort(m.begin(), m.end(), [](const Expr& x, const Expr& y) { return expr_compare(x, y) < 0; });
    Poly single;
    single.terms.emplace(std::move(m), c);
    out.add(single);
  };
  for (const auto& [m, c] : a.terms) add_term(m, wrap_mul(c, b.constant));
  for (const auto& [m, c] : b.terms) add_term(m, wrap_mul(c, a.constant));
  for (const auto& [ma, ca] : a.terms) {
    for (const auto& [mb, cb] : b.terms) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      add_term(std::move(m), wrap_mul(ca, cb));
    }
  }
  return out;
}

bool MonomialLess::operator()(const Monomial& a, const Monomial& b) const {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (int c = expr_compare(a[i], b[i])) return c < 0;
  }
  return a.size() < b.size();
}

Expr expr_from_poly(const Poly& p) { return canonical(p); }

// ------------------------------------------------------------------------------------------------
// Smart constructors
// ------------------------------------------------------------------------------------------------
std::optional<int64_t> as_int_const(const Expr& e) {
  if (e && e->op == ExprOp::Const && !is_floating(e->dtype)) return e->int_value;
  return std::nullopt;
}

namespace {

// The constant's value: its number rounded to its dtype (see cast).
std::optional<double> as_float_const(const Expr& e) {
  if (e && e->op == ExprOp::Const && is_floating(e->dtype)) return float_value_in(e->dtype, e->float_value);
  return std::nullopt;
}

// Floor division of a canonical polynomial by a positive constant, keeping the exactly divisible
// part outside: (q*c + r) // c == q + r // c for every integer q, r.
Expr floordiv_by_const(const Poly& a, int64_t c) {
  Poly quotient, remainder;
  quotient.constant = python_floordiv(a.constant, c);
  remainder.constant = python_mod(a.constant, c);
  for (const auto& [m, coefficient] : a.terms) {
    if (coefficient % c == 0) {
      quotient.terms.emplace(m, coefficient / c);
    } else {
      remainder.terms.emplace(m, coefficient);
    }
  }
  if (remainder.terms.empty()) {
    quotient.constant = wrap_add(quotient.constant, python_floordiv(remainder.constant, c));
    return canonical(quotient);
  }
  Expr rest = make_node(ExprOp::FloorDiv, DType::I64, {canonical(remainder), int_const(c)});
  Poly result = quotient;
  result.add(poly_from_expr(rest));
  return canonical(result);
}

Expr mod_by_const(const Poly& a, int64_t c) {
  Poly remainder;
  remainder.constant = python_mod(a.constant, c);
  for (const auto& [m, coefficient] : a.terms) {
    const int64_t reduced = python_mod(coefficient, c);
    if (reduced != 0) remainder.terms.emplace(m, reduced);
  }
  if (remainder.terms.empty()) return int_const(remainder.constant);
  // (x % (c*k)) % c == x % c
  if (remainder.constant == 0 && remainder.terms.size() == 1) {
    const auto& [m, coefficient] = *remainder.terms.begin();
    if (coefficient == 1 && m.size() == 1 && m[0]->op == ExprOp::Mod) {
      if (auto inner = as_int_const(m[0]->args[1]); inner && *inner > 0 && *inner % c == 0) {
        return make_node(ExprOp::Mod, DType::I64, {m[0]->args[0], int_const(c)});
      }
    }
  }
  return make_node(ExprOp::Mod, DType::I64, {canonical(remainder), int_const(c)});
}

// For a symbolic monomial divisor d (coefficient 1), splits off the terms that are multiples of d.
std::optional<std::pair<Poly, Poly>> split_multiples(const Poly& a, const Monomial& divisor) {
  Poly quotient, remainder;
  remainder.constant = a.constant;
  bool any = false;
  for (const auto& [m, coefficient] : a.terms) {
    Monomial rest = m;
    bool divisible = true;
    for (const Expr& atom : divisor) {
      auto found = std::find_if(rest.begin(), rest.end(), [&](const Expr& x) { return expr_equal(x, atom); });
      if (found == rest.end()) {
        divisible = false;
        break;
      }
      rest.erase(found);
    }
    if (divisible) {
      Poly term;
      if (rest.empty()) {
        term.constant = coefficient;
      } else {
        term.terms.emplace(rest, coefficient);
      }
      quotient.add(term);
      any = true;
    } else {
      remainder.terms.emplace(m, coefficient);
    }
  }
  if (!any) return std::nullopt;
  return std::make_pair(quotient, remainder);
}

std::optional<Monomial> as_unit_monomial(const Poly& p) {
  if (p.constant != 0 || p.terms.size() != 1) return std::nullopt;
  const auto& [m, coefficient] = *p.terms.begin();
  if (coefficient != 1) return std::nullopt;
  return m;
}

Expr int_floordiv(const Expr& a, const Expr& b) {
  const auto bc = as_int_const(b);
  if (bc && *bc == 1) return a;
  const Poly pa = poly_from_expr(a);
  if (bc && *bc > 0) {
    // (x // c1) // c2 == x // (c1*c2) for positive constants.
    if (pa.constant == 0 && pa.terms.size() == 1 && pa.terms.begin()->second == 1) {
      const Monomial& m = pa.terms.begin()->first;
      if (m.size() == 1 && m[0]->op == ExprOp::FloorDiv) {
        if (auto inner = as_int_const(m[0]->args[1]); inner && *inner > 0) {
          return int_floordiv(m[0]->args[0], int_const(wrap_mul(*inner, *bc)));
        }
      }
    }
    return floordiv_by_const(pa, *bc);
  }
  if (auto ac = as_int_const(a); ac && bc && *bc != 0) return int_const(python_floordiv(*ac, *bc));
  if (auto divisor = as_unit_monomial(poly_from_expr(b))) {
    if (auto parts = split_multiples(pa, *divisor)) {
      Poly result = parts->first;
      if (!parts->second.terms.empty() || parts->second.constant != 0) {
        result.add(poly_from_expr(make_node(ExprOp::FloorDiv, DType::I64, {canonical(parts->second), b})));
      }
      return canonical(result);
    }
  }
  return make_node(ExprOp::FloorDiv, DType::I64, {a, b});
}

Expr int_mod(const Expr& a, const Expr& b) {
  const auto bc = as_int_const(b);
  if (bc && *bc == 1) return int_const(0);
  if (bc && *bc > 0) return mod_by_const(poly_from_expr(a), *bc);
  if (auto ac = as_int_const(a); ac && bc && *bc != 0) return int_const(python_mod(*ac, *bc));
  if (auto divisor = as_unit_monomial(poly_from_expr(b))) {
    if (auto parts = split_multiples(poly_from_expr(a), *divisor)) {
      const Poly& rest = parts->second;
      if (rest.terms.empty() && rest.constant == 0) return int_const(0);
      return make_node(ExprOp::Mod, DType::I64, {canonical(rest), b});
    }
  }
  return make_node(ExprOp::Mod, DType::I64, {a, b});
}

// Folds an i64 op on constants through the op table; nullptr for a zero divisor (left to run time).
Expr fold_int_binary(ExprOp op, int64_t x, int64_t y) {
  if ((op_info(op).classes & op_class::DividesInt) && y == 0) return nullptr;
  const int64_t value = eval_int(op, x, y, IntLane{});
  return is_comparison_op(op) ? bool_const(value != 0) : int_const(value);
}

// "operands must be ..." for an operand dtype the op's row excludes.
std::string operand_requirement(ExprOp op, DType dtype) {
  const uint8_t classes = op_info(op).classes & op_class::All;
  const char* what = classes == op_class::F                     ? "must be floating point"
                     : classes == op_class::B                   ? "must be bool"
                     : classes == op_class::I                   ? "must be integral"
                     : classes == (op_class::I | op_class::B) ? "must be integral or bool"
                     : classes == (op_class::F | op_class::I) ? "must not be bool"
                                                                : "are not supported";
  return str_cat("operands ", what, ", got ", dtype_name(dtype));
}

bool is_rounding_op(ExprOp op) {
  return op == ExprOp::Floor || op == ExprOp::Ceil || op == ExprOp::Trunc || op == ExprOp::Round;
}

}  // namespace

Expr add(Expr a, Expr b) { return binary(ExprOp::Add, std::move(a), std::move(b)); }
Expr sub(Expr a, Expr b) { return binary(ExprOp::Sub, std::move(a), std::move(b)); }
Expr mul(Expr a, Expr b) { return binary(ExprOp::Mul, std::move(a), std::move(b)); }
Expr floordiv(Expr a, Expr b) { return binary(ExprOp::FloorDiv, std::move(a), std::move(b)); }
Expr mod(Expr a, Expr b) { return binary(ExprOp::Mod, std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return binary(ExprOp::Max, std::move(a), std::move(b)); }
Expr min(Expr a, Expr b) { return binary(ExprOp::Min, std::move(a), std::move(b)); }
Expr logical_and(Expr a, Expr b) { return binary(ExprOp::And, std::move(a), std::move(b)); }
Expr lt(Expr a, Expr b) { return binary(ExprOp::Lt, std::move(a), std::move(b)); }
Expr ge(Expr a, Expr b) { return binary(ExprOp::Ge, std::move(a), std::move(b)); }
Expr eq(Expr a, Expr b) { return binary(ExprOp::Eq, std::move(a), std::move(b)); }

Expr product(const std::vector<Expr>& factors) {
  Expr out = int_const(1);
  for (const Expr& f : factors) out = mul(out, f);
  return out;
}

Expr unary(ExprOp op, Expr a) {
  require(is_unary_op(op), expr_op_name(op), "not a unary op");
  require(a != nullptr, expr_op_name(op), "missing operand");
  require(op_accepts(op, a->dtype), expr_op_name(op), operand_requirement(op, a->dtype));
  if (op == ExprOp::Not) {
    if (auto c = as_int_const(a)) return bool_const(eval_int(op, *c, 0, int_lane(DType::Bool)) != 0);
  }
  if (op == ExprOp::Neg && is_i64(a)) return binary(ExprOp::Mul, a, int_const(-1));
  if (is_rounding_op(op) && !is_floating(a->dtype)) return a;  // identity on integers, as in torch
  const DType result = op_info(op).kind == OpKind::Test ? DType::Bool : a->dtype;
  return make_node(op, result, {std::move(a)});
}

Expr binary(ExprOp op, Expr a, Expr b) {
  require(is_binary_op(op), expr_op_name(op), "not a binary op");
  require(a != nullptr && b != nullptr, expr_op_name(op), "missing operand");
  require(a->dtype == b->dtype, expr_op_name(op),
          str_cat("operand dtypes differ (", dtype_short_name(a->dtype), " vs ", dtype_short_name(b->dtype), ")"));
  const DType dtype = a->dtype;
  require(op_accepts(op, dtype), expr_op_name(op), operand_requirement(op, dtype));
  const bool logical = op == ExprOp::And || op == ExprOp::Or;
  const DType result = (is_comparison_op(op) || logical) ? DType::Bool : dtype;

  // Logical simplifications.
  if (logical) {
    const auto ca = as_int_const(a), cb = as_int_const(b);
    if (op == ExprOp::And) {
      if ((ca && *ca == 0) || (cb && *cb == 0)) return bool_const(false);
      if (ca) return b;
      if (cb) return a;
    } else {
      if ((ca && *ca) || (cb && *cb)) return bool_const(true);
      if (ca) return b;
      if (cb) return a;
    }
    if (expr_equal(a, b)) return a;
  }

  if (dtype == DType::I64) {
    const auto ca = as_int_const(a), cb = as_int_const(b);
    if (op == ExprOp::Add || op == ExprOp::Sub || op == ExprOp::Mul) {
      Poly pa = poly_from_expr(a);
      Poly pb = poly_from_expr(b);
      if (op == ExprOp::Mul) return canonical(Poly::multiply(pa, pb));
      if (op == ExprOp::Sub) pb.scale(-1);
      pa.add(pb);
      return canonical(pa);
    }
    if (op == ExprOp::FloorDiv) return int_floordiv(a, b);
    if (op == ExprOp::Mod) return int_mod(a, b);
    if (ca && cb) {
      if (Expr folded = fold_int_binary(op, *ca, *cb)) return folded;
    }
    if ((op == ExprOp::Max || op == ExprOp::Min) && expr_equal(a, b)) return a;
    if (is_comparison_op(op)) {
      // Decide comparisons whose difference is a constant.
      Poly diff = poly_from_expr(a);
      Poly nb = poly_from_expr(b);
      nb.scale(-1);
      diff.add(nb);
      if (diff.terms.empty()) return bool_const(eval_int(op, diff.constant, 0, IntLane{}) != 0);
    }
    // Canonical operand order for commutative ops.
    if ((op == ExprOp::Max || op == ExprOp::Min || op == ExprOp::Eq || op == ExprOp::Ne) &&
        expr_compare(a, b) > 0) {
      std::swap(a, b);
    }
    return make_node(op, result, {std::move(a), std::move(b)});
  }

  if (is_floating(dtype)) {
    const auto fa = as_float_const(a), fb = as_float_const(b);
    // x*1 and x/1 are exact; other float identities (x+0 with -0.0) are not.
    if (op == ExprOp::Mul && fb && *fb == 1.0) return a;
    if (op == ExprOp::Mul && fa && *fa == 1.0) return b;
    if (op == ExprOp::Div && fb && *fb == 1.0) return a;
    // x ** 2 is x * x, exactly for every x (NaN and infinities included), and what eager computes
    // (ATen's pow with a scalar exponent of 2). pow's general algorithm branches on its special
    // cases, which in a CUDA loop kept each element's loads from overlapping the previous one's.
    if (op == ExprOp::Pow && fb && *fb == 2.0) return make_node(ExprOp::Mul, result, {a, a});
    if (fa && fb && is_comparison_op(op)) return bool_const(eval_float(op, *fa, *fb) != 0.0);
  } else if (!logical) {
    const auto ca = as_int_const(a), cb = as_int_const(b);
    if (ca && cb && is_comparison_op(op)) return bool_const(eval_int(op, *ca, *cb, int_lane(dtype)) != 0);
  }
  return make_node(op, result, {std::move(a), std::move(b)});
}

Expr where(Expr cond, Expr a, Expr b) {
  require(cond && a && b, "where", "missing operand");
  require(cond->dtype == DType::Bool, "where", str_cat("condition must be bool, got ", dtype_name(cond->dtype)));
  require(a->dtype == b->dtype, "where",
          str_cat("branch dtypes differ (", dtype_short_name(a->dtype), " vs ", dtype_short_name(b->dtype), ")"));
  if (auto c = as_int_const(cond)) return *c ? a : b;
  // A branch selected under the same condition again takes its matching side.
  if (a->op == ExprOp::Where && expr_equal(a->args[0], cond)) a = a->args[1];
  if (b->op == ExprOp::Where && expr_equal(b->args[0], cond)) b = b->args[2];
  if (expr_equal(a, b)) return a;
  const DType dtype = a->dtype;
  return make_node(ExprOp::Where, dtype, {std::move(cond), std::move(a), std::move(b)});
}

Expr cast(Expr a, DType dtype) {
  require(a != nullptr, "cast", "missing operand");
  if (a->dtype == dtype) return a;
  if (a->op == ExprOp::Const) {
    if (is_floating(a->dtype)) {
      // The constant's value is its number rounded to its dtype (a half constant 1e5 is inf), and
      // the cast converts that value: cast(cast(0.1 as f32, f16), f32) is 0.0999755859375.
      const double v = float_value_in(a->dtype, a->float_value);
      if (is_floating(dtype)) return float_const(v, dtype);
      if (dtype == DType::Bool) return bool_const(v != 0.0);
    } else if (is_floating(dtype)) {
      return float_const(static_cast<double>(a->int_value), dtype);
    } else if (dtype == DType::Bool) {
      return bool_const(a->int_value != 0);
    } else if (dtype == DType::I64) {
      return int_const(a->int_value, dtype);
    }
  }
  ExprNode node;
  node.op = ExprOp::Cast;
  node.dtype = dtype;
  node.args = {std::move(a)};
  return finish(std::move(node));
}

namespace {

Expr make_check(Expr index, Expr bound, Expr mask, std::string label, bool value_check) {
  require(index && bound, "check_index", "missing operand");
  require(is_i64(index) && is_i64(bound), "check_index", "index and bound must be i64");
  if (mask && mask->is_int_const(0)) return int_const(0);
  const auto ci = as_int_const(index), cb = as_int_const(bound);
  if (ci && cb && *ci >= 0 && *ci < *cb) return index;
  ExprNode node;
  node.op = ExprOp::CheckIndex;
  node.dtype = DType::I64;
  node.int_value = value_check ? 1 : 0;
  node.symbol = std::move(label);
  node.args = {std::move(index), std::move(bound)};
  if (mask && !mask->is_int_const(1)) {
    require(mask->dtype == DType::Bool, "check_index", "mask must be bool");
    node.args.push_back(std::move(mask));
    node.masked = true;
  }
  return finish(std::move(node));
}

}  // namespace

Expr check_index(Expr index, Expr bound, Expr mask, std::string label) {
  return make_check(std::move(index), std::move(bound), std::move(mask), std::move(label), false);
}

Expr check_value(Expr value, Expr bound, std::string label, Expr mask) {
  return make_check(std::move(value), std::move(bound), std::move(mask), std::move(label), true);
}

bool is_value_check(const ExprNode& node) { return node.op == ExprOp::CheckIndex && node.int_value == 1; }

Expr check_like(const ExprNode& original, Expr index, Expr bound, Expr mask) {
  require(original.op == ExprOp::CheckIndex, "check_like", "the original is not a check");
  return make_check(std::move(index), std::move(bound), std::move(mask), original.symbol, is_value_check(original));
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Any: return "any";
    case ReduceOp::All: return "all";
  }
  return "?";
}

Expr reduction_identity(ReduceOp op, DType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Any: return scalar_const(0, dtype);
    case ReduceOp::Prod:
    case ReduceOp::All: return scalar_const(1, dtype);
    case ReduceOp::Max:
      if (is_floating(dtype)) return float_const(-inf, dtype);
      return dtype == DType::Bool ? bool_const(false) : int_const(std::numeric_limits<int64_t>::min(), dtype);
    case ReduceOp::Min:
      if (is_floating(dtype)) return float_const(inf, dtype);
      return dtype == DType::Bool ? bool_const(true) : int_const(std::numeric_limits<int64_t>::max(), dtype);
  }
  fail("invalid reduce op");
}

Expr fold(ReduceOp op, int var, Expr extent, Expr body) {
  require(extent && body, "fold", "missing operand");
  require(is_i64(extent), "fold", "extent must be i64");
  require(var >= 0, "fold", "negative variable id");
  if ((op == ReduceOp::Any || op == ReduceOp::All)) require(body->dtype == DType::Bool, "fold", "any/all need bool");
  const auto count = as_int_const(extent);
  if (count && *count <= 0) return reduction_identity(op, body->dtype);
  if (count && *count == 1) {
    // A single step: the body at r = 0.
    return transform(body, [var](const Expr& e, const std::vector<Expr>&) -> Expr {
      return e->op == ExprOp::ReduceVar && e->index == var ? int_const(0) : nullptr;
    });
  }
  ExprNode node;
  node.op = ExprOp::Fold;
  node.dtype = body->dtype;
  node.index = var;
  node.int_value = static_cast<int64_t>(op);
  node.args = {std::move(extent), std::move(body)};
  return finish(std::move(node));
}

}  // namespace luminal::ir
