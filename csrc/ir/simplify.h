// Range-aware simplification of index expressions.
//
// The smart constructors in expr.h keep i64 arithmetic canonical without context. Knowing the
// extent of every loop variable lets us go further: drop floordiv/mod whose operand is already in
// range, decide comparisons, and remove bounds checks that can never fail. Symbols are sizes and
// are assumed to be >= 1.
#pragma once

#include <optional>
#include <vector>

#include "ir/expr.h"
#include "ir/poly.h"

namespace luminal::ir {

struct IndexRanges {
  std::vector<Expr> loop_extents;    // extent of LoopVar(d): a shape expression
  std::vector<Expr> reduce_extents;  // extent of ReduceVar(r), or nullptr when it varies per element
};

// Inclusive bounds as polynomials over symbols; nullopt means unbounded on that side.
struct Bounds {
  std::optional<Poly> lo;
  std::optional<Poly> hi;
};

Bounds bounds_of(const Expr& e, const IndexRanges& ranges);

// True when `p` is provably >= 0 for all symbol values >= 1.
bool prove_nonnegative(const Poly& p);
// True when a <= b provably (both i64 shape or index expressions).
bool prove_less_equal(const Expr& a, const Expr& b, const IndexRanges& ranges);

// True when 0 <= index < size provably.
bool prove_in_range(const Expr& index, const Expr& size, const IndexRanges& ranges);

Expr simplify(const Expr& e, const IndexRanges& ranges);

}  // namespace luminal::ir
