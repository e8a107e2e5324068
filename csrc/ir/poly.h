// Canonical polynomial form of i64 expressions: a sum of monomials (sorted products of atoms)
// with integer coefficients plus a constant. Atoms are any non-arithmetic expression (loop vars,
// symbols, loads, floordiv/mod nodes, ...). Used by the smart constructors and range analysis.
#pragma once

#include <map>
#include <vector>

#include "ir/expr.h"

namespace luminal::ir {

using Monomial = std::vector<Expr>;  // atoms sorted by expr_compare

struct MonomialLess {
  bool operator()(const Monomial& a, const Monomial& b) const;
};

struct Poly {
  std::map<Monomial, int64_t, MonomialLess> terms;  // no zero coefficients
  int64_t constant = 0;

  void add(const Poly& other);
  void scale(int64_t factor);
  static Poly multiply(const Poly& a, const Poly& b);
  bool is_constant() const { return terms.empty(); }
};

Poly poly_from_expr(const Expr& e);
Expr expr_from_poly(const Poly& p);

}  // namespace luminal::ir
