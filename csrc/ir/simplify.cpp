#include "ir/simplify.h"

#include <unordered_map>

#include "ir/expr_memo.h"

namespace luminal::ir {

namespace {

Poly constant_poly(int64_t value) {
  Poly p;
  p.constant = value;
  return p;
}

Poly negate(Poly p) {
  p.scale(-1);
  return p;
}

Poly difference(const Poly& a, const Poly& b) {
  Poly out = a;
  out.add(negate(b));
  return out;
}

bool symbols_only(const Poly& p) {
  for (const auto& [monomial, coefficient] : p.terms) {
    for (const Expr& atom : monomial) {
      if (atom->op != ExprOp::Symbol) return false;
    }
  }
  return true;
}

std::optional<Poly> shape_poly(const Expr& extent) {
  if (!extent || !is_shape_expr(extent)) return std::nullopt;
  Poly p = poly_from_expr(extent);
  if (!symbols_only(p)) return std::nullopt;
  return p;
}

std::optional<Poly> minus_one(const std::optional<Poly>& p) {
  if (!p) return std::nullopt;
  Poly out = *p;
  out.constant -= 1;
  return out;
}

bool nonnegative(const std::optional<Poly>& p) { return p && prove_nonnegative(*p); }

class BoundsAnalysis {
 public:
  explicit BoundsAnalysis(const IndexRanges& ranges) : ranges_(ranges) {}

  Bounds of(const Expr& e) {
    if (const Bounds* known = memo_.find(e)) return *known;
    return memo_.insert(e, compute(e));
  }

 private:
  Bounds compute(const Expr& e) {
    if (e->dtype != DType::I64) return {};
    switch (e->op) {
      case ExprOp::Const: return {constant_poly(e->int_value), constant_poly(e->int_value)};
      case ExprOp::Symbol: {
        Poly p = poly_from_expr(e);
        return {p, p};
      }
      case ExprOp::LoopVar: return range_var(e->index, ranges_.loop_extents);
      case ExprOp::ReduceVar: return range_var(e->index, ranges_.reduce_extents);
      case ExprOp::CheckIndex:
        // A value check promises nothing: what is computed from it must keep it (see check_value).
        if (is_value_check(*e)) return {};
        return {constant_poly(0), minus_one(shape_poly(e->args[1]))};
      case ExprOp::Load:
      case ExprOp::Where:
      case ExprOp::Cast:
      case ExprOp::Fold: return {};
      LUMINAL_SCALAR_OP_CASES return scalar_op(e);
    }
    return {};
  }

  // Bounds of the integer scalar ops the analysis understands (the others are unknown).
  Bounds scalar_op(const Expr& e) {
    if (e->op == ExprOp::Add || e->op == ExprOp::Mul) return polynomial(e);
    if (e->op == ExprOp::FloorDiv) return floordiv(e);
    if (e->op == ExprOp::Mod) return modulo(e);
    if (e->op == ExprOp::Max) {
      // max(a, b) >= either lower bound; its upper bound is the larger upper bound, if provable.
      const Bounds a = of(e->args[0]), b = of(e->args[1]);
      Bounds out{a.lo ? a.lo : b.lo, std::nullopt};
      if (a.hi && b.hi) {
        if (prove_nonnegative(difference(*a.hi, *b.hi))) {
          out.hi = a.hi;
        } else if (prove_nonnegative(difference(*b.hi, *a.hi))) {
          out.hi = b.hi;
        }
      }
      return out;
    }
    if (e->op == ExprOp::Min) {
      const Bounds a = of(e->args[0]), b = of(e->args[1]);
      Bounds out{std::nullopt, a.hi ? a.hi : b.hi};
      if (a.lo && b.lo) {
        if (prove_nonnegative(difference(*b.lo, *a.lo))) {
          out.lo = a.lo;
        } else if (prove_nonnegative(difference(*a.lo, *b.lo))) {
          out.lo = b.lo;
        }
      }
      return out;
    }
    return {};
  }

  Bounds range_var(int axis, const std::vector<Expr>& extents) {
    Bounds b{constant_poly(0), std::nullopt};
    if (axis >= 0 && static_cast<size_t>(axis) < extents.size()) b.hi = minus_one(shape_poly(extents[axis]));
    return b;
  }

  // Bounds of a sum of monomials: each monomial's atoms must be non-negative (or it must be linear).
  Bounds polynomial(const Expr& e) {
    const Poly p = poly_from_expr(e);
    Poly lo = constant_poly(p.constant), hi = constant_poly(p.constant);
    bool lo_known = true, hi_known = true;
    for (const auto& [monomial, coefficient] : p.terms) {
      std::optional<Poly> term_lo = constant_poly(1), term_hi = constant_poly(1);
      bool all_nonnegative = true;
      for (const Expr& atom : monomial) {
        const Bounds ab = of(atom);
        all_nonnegative = all_nonnegative && nonnegative(ab.lo);
        term_lo = (term_lo && ab.lo) ? std::optional<Poly>(Poly::multiply(*term_lo, *ab.lo)) : std::nullopt;
        term_hi = (term_hi && ab.hi) ? std::optional<Poly>(Poly::multiply(*term_hi, *ab.hi)) : std::nullopt;
      }
      if (!all_nonnegative && monomial.size() > 1) return {};
      if (!all_nonnegative) {  // linear atom of unknown sign: bounds still scale
        const Bounds ab = of(monomial[0]);
        term_lo = ab.lo;
        term_hi = ab.hi;
      }
      std::optional<Poly> add_lo = coefficient > 0 ? term_lo : term_hi;
      std::optional<Poly> add_hi = coefficient > 0 ? term_hi : term_lo;
      if (add_lo && lo_known) {
        add_lo->scale(coefficient);
        lo.add(*add_lo);
      } else {
        lo_known = false;
      }
      if (add_hi && hi_known) {
        add_hi->scale(coefficient);
        hi.add(*add_hi);
      } else {
        hi_known = false;
      }
    }
    Bounds out;
    if (lo_known) out.lo = lo;
    if (hi_known) out.hi = hi;
    return out;
  }

  Bounds floordiv(const Expr& e) {
    const Bounds x = of(e->args[0]);
    const auto c = as_int_const(e->args[1]);
    if (!nonnegative(x.lo)) return {};
    Bounds out{constant_poly(0), std::nullopt};
    if (c && *c > 0) {
      if (x.lo && x.lo->is_constant()) out.lo = constant_poly(x.lo->constant / *c);
      if (x.hi) out.hi = divide_upper(*x.hi, *c);
      return out;
    }
    if (nonnegative(of(e->args[1]).lo)) out.hi = x.hi;  // x // d <= x for d >= 1
    return out;
  }

  // Upper bound of hi // c for a polynomial upper bound.
  static std::optional<Poly> divide_upper(const Poly& hi, int64_t c) {
    Poly out;
    for (const auto& [monomial, coefficient] : hi.terms) {
      if (coefficient % c != 0) return hi;  // loose: x // c <= x for x >= 0
      out.terms.emplace(monomial, coefficient / c);
    }
    out.constant = hi.constant >= 0 ? hi.constant / c : -((-hi.constant + c - 1) / c);
    return out;
  }

  Bounds modulo(const Expr& e) {
    const Bounds x = of(e->args[0]);
    const Bounds d = of(e->args[1]);
    if (!nonnegative(minus_one(d.lo))) return {};  // divisor must be >= 1
    Bounds out{constant_poly(0), minus_one(d.hi)};
    // Already in range: x % d == x keeps x's tighter bounds.
    if (nonnegative(x.lo) && x.hi && d.lo && prove_nonnegative(difference(minus_one(d.lo).value(), *x.hi))) {
      return x;
    }
    return out;
  }

  const IndexRanges& ranges_;
  ExprMemo<Bounds> memo_;
};

// a <= b provably, from bounds.
bool provably_le(BoundsAnalysis& analysis, const Expr& a, const Expr& b) {
  const Bounds ba = analysis.of(a), bb = analysis.of(b);
  return ba.hi && bb.lo && prove_nonnegative(difference(*bb.lo, *ba.hi));
}

bool provably_lt(BoundsAnalysis& analysis, const Expr& a, const Expr& b) {
  const Bounds ba = analysis.of(a), bb = analysis.of(b);
  return ba.hi && bb.lo && prove_nonnegative(minus_one(difference(*bb.lo, *ba.hi)).value());
}

bool provably_in_range(BoundsAnalysis& analysis, const Expr& x, const Expr& bound) {
  return nonnegative(analysis.of(x).lo) && provably_lt(analysis, x, bound);
}

// g*q + r < g*k with 0 <= r < g is q < k (likewise >=). Such conditions come from concatenations
// seen through a reshape; in the reduced form they compare a loop variable with a constant.
Expr reduce_scaled_comparison(BoundsAnalysis& analysis, const Expr& e) {
  if ((e->op != ExprOp::Lt && e->op != ExprOp::Ge) || e->args[0]->dtype != DType::I64) return nullptr;
  const auto bound = as_int_const(e->args[1]);
  if (!bound) return nullptr;
  const Poly p = poly_from_expr(e->args[0]);
  for (const auto& [candidate_monomial, g] : p.terms) {
    if (g <= 1 || *bound % g != 0) continue;
    Poly quotient, remainder;
    remainder.constant = p.constant;
    for (const auto& [m, c] : p.terms) {
      if (c % g == 0) {
        quotient.terms.emplace(m, c / g);
      } else {
        remainder.terms.emplace(m, c);
      }
    }
    const Expr r = expr_from_poly(remainder);
    if (!nonnegative(analysis.of(r).lo) || !provably_lt(analysis, r, int_const(g))) continue;
    return binary(e->op, expr_from_poly(quotient), int_const(*bound / g));
  }
  return nullptr;
}

}  // namespace

bool prove_nonnegative(const Poly& p) {
  // With every symbol >= 1, a polynomial with non-negative coefficients is minimal at all-ones.
  int64_t at_ones = p.constant;
  for (const auto& [monomial, coefficient] : p.terms) {
    for (const Expr& atom : monomial) {
      if (atom->op != ExprOp::Symbol) return false;
    }
    if (coefficient < 0) return false;
    at_ones += coefficient;
  }
  return at_ones >= 0;
}

Bounds bounds_of(const Expr& e, const IndexRanges& ranges) {
  BoundsAnalysis analysis(ranges);
  return analysis.of(e);
}

bool prove_less_equal(const Expr& a, const Expr& b, const IndexRanges& ranges) {
  BoundsAnalysis analysis(ranges);
  return provably_le(analysis, a, b);
}

bool prove_in_range(const Expr& index, const Expr& size, const IndexRanges& ranges) {
  BoundsAnalysis analysis(ranges);
  return provably_in_range(analysis, index, size);
}

namespace {

// One rewrite step on a node whose operands are already simplified; nullptr when none applies.
Expr simplify_node(const Expr& e, const IndexRanges& ranges) {
    if (e->args.empty()) return nullptr;
    if (e->dtype != DType::I64 && !(is_comparison_op(e->op) && e->args[0]->dtype == DType::I64)) {
      return nullptr;
    }
    BoundsAnalysis analysis(ranges);
    // Rules per op; ops without one stay as they are.
    if (e->op == ExprOp::FloorDiv) {
      if (provably_in_range(analysis, e->args[0], e->args[1])) return int_const(0);
      return nullptr;
    }
    if (e->op == ExprOp::Mod) {
      if (provably_in_range(analysis, e->args[0], e->args[1])) return e->args[0];
      return nullptr;
    }
    if (e->op == ExprOp::Max) {
      if (provably_le(analysis, e->args[1], e->args[0])) return e->args[0];
      if (provably_le(analysis, e->args[0], e->args[1])) return e->args[1];
      return nullptr;
    }
    if (e->op == ExprOp::Min) {
      if (provably_le(analysis, e->args[0], e->args[1])) return e->args[0];
      if (provably_le(analysis, e->args[1], e->args[0])) return e->args[1];
      return nullptr;
    }
    if (e->op == ExprOp::Lt) {
      if (provably_lt(analysis, e->args[0], e->args[1])) return bool_const(true);
      if (provably_le(analysis, e->args[1], e->args[0])) return bool_const(false);
      return reduce_scaled_comparison(analysis, e);
    }
    if (e->op == ExprOp::Ge) {
      if (provably_le(analysis, e->args[1], e->args[0])) return bool_const(true);
      if (provably_lt(analysis, e->args[0], e->args[1])) return bool_const(false);
      return reduce_scaled_comparison(analysis, e);
    }
    if (e->op == ExprOp::Le) {
      if (provably_le(analysis, e->args[0], e->args[1])) return bool_const(true);
      if (provably_lt(analysis, e->args[1], e->args[0])) return bool_const(false);
      return nullptr;
    }
    if (e->op == ExprOp::Gt) {
      if (provably_lt(analysis, e->args[1], e->args[0])) return bool_const(true);
      if (provably_le(analysis, e->args[0], e->args[1])) return bool_const(false);
      return nullptr;
    }
    if (e->op == ExprOp::CheckIndex) {
      if (provably_in_range(analysis, e->args[0], e->args[1])) return e->args[0];
      return nullptr;
    }
    return nullptr;
}

}  // namespace

Expr simplify(const Expr& root, const IndexRanges& ranges) {
  // Each rewrite creates new nodes, so bounds are recomputed on a fresh analysis per rewrite
  // (expressions are small; correctness over cleverness). A rule's result may enable another.
  return transform(root, [&](const Expr& original, const std::vector<Expr>& args) -> Expr {
    Expr e = rebuild(original, args);
    for (int step = 0; step < 8; ++step) {
      Expr simpler = simplify_node(e, ranges);
      if (!simpler) break;
      e = std::move(simpler);
    }
    return e;
  });
}



}  // namespace luminal::ir
