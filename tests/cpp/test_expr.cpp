#include <gtest/gtest.h>

#include <limits>

#include "common/error.h"
#include "ir/expr.h"
#include "ir/expr_memo.h"
#include "ir/simplify.h"

using namespace luminal;
using namespace luminal::ir;

namespace {

std::string s(const Expr& e) { return to_string(e); }

}  // namespace

TEST(Expr, IntegerArithmeticIsCanonical) {
  const Expr i0 = loop_var(0), i1 = loop_var(1), s0 = symbol("s0");
  // (i0*27 + i1)*16 == i0*432 + i1*16
  const Expr a = mul(add(mul(i0, int_const(27)), i1), int_const(16));
  const Expr b = add(mul(i1, int_const(16)), mul(int_const(432), i0));
  EXPECT_TRUE(expr_equal(a, b)) << s(a) << " vs " << s(b);
  EXPECT_TRUE(expr_equal(sub(add(i0, s0), s0), i0));
  EXPECT_TRUE(expr_equal(mul(s0, int_const(0)), int_const(0)));
  EXPECT_EQ(as_int_const(add(int_const(3), int_const(4))), 7);
  EXPECT_TRUE(expr_equal(mul(s0, i0), mul(i0, s0)));
}

TEST(Expr, FloorDivAndModSplitMultiples) {
  const Expr i0 = loop_var(0), i1 = loop_var(1), s0 = symbol("s0");
  // (i0*16 + i1) // 16 == i0 + i1 // 16 ; (i0*16 + i1) % 16 == i1 % 16
  EXPECT_TRUE(expr_equal(floordiv(add(mul(i0, int_const(16)), i1), int_const(16)),
                         add(i0, floordiv(i1, int_const(16)))));
  EXPECT_TRUE(expr_equal(mod(add(mul(i0, int_const(16)), i1), int_const(16)), mod(i1, int_const(16))));
  // symbolic divisor
  EXPECT_TRUE(expr_equal(floordiv(add(mul(i0, s0), i1), s0), add(i0, floordiv(i1, s0))));
  EXPECT_TRUE(expr_equal(mod(mul(i0, s0), s0), int_const(0)));
  // python semantics on constants
  EXPECT_EQ(as_int_const(floordiv(int_const(-7), int_const(2))), -4);
  EXPECT_EQ(as_int_const(mod(int_const(-7), int_const(2))), 1);
  // (x // a) // b == x // (a*b)
  EXPECT_TRUE(expr_equal(floordiv(floordiv(i0, int_const(3)), int_const(5)), floordiv(i0, int_const(15))));
}

TEST(Expr, QuotientRemainderIdentity) {
  const Expr x = add(loop_var(0), mul(loop_var(1), int_const(7)));
  const Expr c = int_const(12);
  const Expr rebuilt = add(mul(floordiv(x, c), c), mod(x, c));
  EXPECT_TRUE(expr_equal(rebuilt, x)) << s(rebuilt);
}

TEST(Expr, NestedRemaindersCollapseToTheFlatIndex) {
  // A flat index unflattened over [N, 56, 56] and flattened back (a reshape's view of a reshape):
  // (i0 // 3136)*3136 + ((i0 // 56) % 56)*56 + i0 % 56 == i0, for every integer i0.
  const Expr i0 = loop_var(0);
  const Expr c56 = int_const(56), c3136 = int_const(3136);
  const Expr flat = add(add(mul(floordiv(i0, c3136), c3136), mul(mod(floordiv(i0, c56), c56), c56)), mod(i0, c56));
  EXPECT_TRUE(expr_equal(flat, i0)) << s(flat);
  // a*((x // a) % b) + x % a == x % (a*b); scaled by k too.
  const Expr two = mul(int_const(3), add(mul(mod(floordiv(i0, c56), int_const(4)), c56), mod(i0, c56)));
  EXPECT_TRUE(expr_equal(two, mul(int_const(3), mod(i0, int_const(224))))) << s(two);
  // Coefficients that do not match stay as they are.
  const Expr other = add(mul(mod(floordiv(i0, c56), int_const(4)), int_const(55)), mod(i0, c56));
  EXPECT_NE(s(other).find("floordiv"), std::string::npos) << s(other);
  // The identity over negative values too (floor semantics): checked by evaluation.
  for (int64_t x : {-100001, -3137, -57, -1, 0, 55, 56, 3135, 3136, 99999}) {
    const int64_t a = 56, b = 56;
    const auto fmod = [](int64_t v, int64_t m) { return ((v % m) + m) % m; };
    const auto fdiv = [&](int64_t v, int64_t m) { return (v - fmod(v, m)) / m; };
    EXPECT_EQ(a * fmod(fdiv(x, a), b) + fmod(x, a), fmod(x, a * b)) << x;
  }
}

TEST(Expr, TypeRulesRaise) {
  EXPECT_THROW(add(float_const(1.0), int_const(1)), Error);
  EXPECT_THROW(where(int_const(1), float_const(1.0), float_const(2.0)), Error);
  EXPECT_THROW(unary(ExprOp::Exp, int_const(2)), Error);
  EXPECT_THROW(binary(ExprOp::Div, int_const(2), int_const(1)), Error);
  EXPECT_THROW(load(0, DType::F32, {float_const(1.0)}), Error);
}

TEST(Expr, FloatIdentitiesAreExactOnly) {
  const Expr x = load(0, DType::F32, {loop_var(0)});
  EXPECT_TRUE(expr_equal(mul(x, float_const(1.0)), x));
  // x + 0.0 is not x for x = -0.0, so it must stay.
  EXPECT_FALSE(expr_equal(add(x, float_const(0.0)), x));
}

// A float constant means its number rounded to its dtype; a cast of one converts that value. The
// cast folding once kept the number, so a float16 round trip of 0.1 stayed 0.1 and a float16
// 1e5 (inf) came back as 1e5.
TEST(Expr, CastOfAConstantConvertsItsRoundedValue) {
  const Expr tenth = cast(cast(float_const(0.1, DType::F32), DType::F16), DType::F32);
  ASSERT_EQ(tenth->op, ExprOp::Const);
  EXPECT_EQ(tenth->float_value, 0.0999755859375);
  EXPECT_EQ(cast(cast(float_const(0.1, DType::F64), DType::BF16), DType::F64)->float_value, 0.10009765625);
  EXPECT_EQ(cast(float_const(1e5, DType::F16), DType::F32)->float_value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(cast(float_const(0.1, DType::F64), DType::F32)->float_value, 0.1);  // f32 rounds it at use
  EXPECT_EQ(cast(float_const(1e-50, DType::F32), DType::Bool)->int_value, 0);  // float32's 0
}

TEST(Expr, WhereUnderItsOwnConditionTakesTheMatchingSide) {
  // Inlining a producer under a masked load selects 0 where the mask is false; a consumer that
  // already selects under that mask keeps one select.
  const Expr i0 = loop_var(0);
  const Expr inside = lt(i0, int_const(4));
  const Expr x = load(0, DType::F32, {i0}, inside), pad = float_const(-1.0);
  const Expr inner = where(inside, unary(ExprOp::Exp, x), float_const(0.0));
  EXPECT_TRUE(expr_equal(where(inside, inner, pad), where(inside, unary(ExprOp::Exp, x), pad)));
  EXPECT_TRUE(expr_equal(where(inside, pad, inner), where(inside, pad, float_const(0.0))));
  // Another condition keeps both.
  const Expr other = lt(i0, int_const(3));
  EXPECT_EQ(where(other, inner, pad)->args[1]->op, ExprOp::Where);
}

TEST(Simplify, RangesRemoveDivModAndChecks) {
  const Expr i0 = loop_var(0), i1 = loop_var(1);
  IndexRanges ranges{{symbol("s0"), int_const(16)}, {}};
  // i1 // 16 == 0 and i1 % 16 == i1 when i1 < 16
  EXPECT_TRUE(expr_equal(simplify(floordiv(add(mul(i0, int_const(16)), i1), int_const(16)), ranges), i0));
  EXPECT_TRUE(expr_equal(simplify(mod(add(mul(i0, int_const(16)), i1), int_const(16)), ranges), i1));
  // i0 < s0 so i0 % s0 == i0 and a check against s0 always passes
  EXPECT_TRUE(expr_equal(simplify(mod(i0, symbol("s0")), ranges), i0));
  EXPECT_TRUE(expr_equal(simplify(check_index(i0, symbol("s0")), ranges), i0));
  // but a check against a smaller bound stays
  EXPECT_EQ(simplify(check_index(i1, int_const(8)), ranges)->op, ExprOp::CheckIndex);
  // symbolic: i0*16 + i1 < s0*16
  EXPECT_TRUE(expr_equal(simplify(floordiv(add(mul(i0, int_const(16)), i1), mul(symbol("s0"), int_const(16))), ranges),
                         int_const(0)));
  // min(i1, 100) == i1 ; comparisons decided
  EXPECT_TRUE(expr_equal(simplify(min(i1, int_const(100)), ranges), i1));
  EXPECT_TRUE(expr_equal(simplify(lt(i1, int_const(16)), ranges), bool_const(true)));
  EXPECT_TRUE(expr_equal(simplify(ge(i1, int_const(16)), ranges), bool_const(false)));
  // unknown relation stays
  EXPECT_EQ(simplify(lt(i1, int_const(5)), ranges)->op, ExprOp::Lt);
}

TEST(Simplify, ReshapeRoundTrip) {
  // [s0, 27, 16] viewed as [s0, 432] and back: the composed index must collapse.
  const Expr i0 = loop_var(0), i1 = loop_var(1), i2 = loop_var(2);
  IndexRanges ranges{{symbol("s0"), int_const(27), int_const(16)}, {}};
  const Expr flat = add(mul(i1, int_const(16)), i2);  // index into the 432-wide dim
  const Expr back1 = simplify(floordiv(flat, int_const(16)), ranges);
  const Expr back2 = simplify(mod(flat, int_const(16)), ranges);
  EXPECT_TRUE(expr_equal(back1, i1)) << s(back1);
  EXPECT_TRUE(expr_equal(back2, i2)) << s(back2);
  (void)i0;
}

TEST(Simplify, ScaledComparisonsReduceToTheAxis) {
  // i1*4 + i2 < 8 with i2 < 4 is i1 < 2: concatenation boundaries seen through a reshape.
  const Expr i1 = loop_var(1), i2 = loop_var(2);
  IndexRanges ranges{{symbol("s0"), int_const(9), int_const(4)}, {}};
  const Expr flat = add(mul(i1, int_const(4)), i2);
  EXPECT_TRUE(expr_equal(simplify(lt(flat, int_const(8)), ranges), lt(i1, int_const(2))));
  EXPECT_TRUE(expr_equal(simplify(ge(flat, int_const(12)), ranges), ge(i1, int_const(3))));
  // Not a multiple of the scale: unchanged.
  EXPECT_TRUE(expr_equal(simplify(lt(flat, int_const(6)), ranges), lt(flat, int_const(6))));
  // A remainder that can reach the scale: unchanged.
  IndexRanges wide{{symbol("s0"), int_const(9), int_const(5)}, {}};
  EXPECT_TRUE(expr_equal(simplify(lt(flat, int_const(8)), wide), lt(flat, int_const(8))));
}

TEST(Expr, TransformAppliesSubstitutionsOnce) {
  // Substituting i1 -> i1 + 4 into (i1 + -4) must give i1: rebuilding the parent collapses it to
  // a bare loop variable, which must not be substituted a second time.
  const Expr i1 = loop_var(1);
  const Expr body = load(0, DType::F32, {add(i1, int_const(-4))}, ge(i1, int_const(4)));
  const Expr shifted = transform(body, [](const Expr& e, const std::vector<Expr>&) -> Expr {
    return e->op == ExprOp::LoopVar ? add(e, int_const(4)) : nullptr;
  });
  EXPECT_EQ(to_string(shifted), "load0[i1] if ge((i1 + 4), 4)");
  // A swap i0 <-> i1 is applied once per original node.
  const Expr swap = transform(add(loop_var(0), mul(loop_var(1), int_const(3))),
                              [](const Expr& e, const std::vector<Expr>&) -> Expr {
                                if (e->op != ExprOp::LoopVar) return nullptr;
                                return loop_var(1 - e->index);
                              });
  EXPECT_TRUE(expr_equal(swap, add(loop_var(1), mul(loop_var(0), int_const(3)))));
}

TEST(Expr, RebaseFoldVarsRenamesBoundVariables) {
  // sum(r0 < 3: max(r1 < 4: x[r0, r1])) + sum(r0 < 2: x[r0, 0]): sibling folds sharing r0 keep
  // sharing one id, the nested one gets the next.
  const Expr r0 = reduce_var(0), r1 = reduce_var(1);
  const Expr nested = fold(ReduceOp::Sum, 0, int_const(3), fold(ReduceOp::Max, 1, int_const(4), load(0, DType::F32, {r0, r1})));
  const Expr sibling = fold(ReduceOp::Sum, 0, int_const(2), load(0, DType::F32, {r0, int_const(0)}));
  const Expr e = binary(ExprOp::Add, nested, sibling);
  const Expr rebased = rebase_fold_vars(e, 5);
  const Expr expected = binary(
      ExprOp::Add,
      fold(ReduceOp::Sum, 5, int_const(3), fold(ReduceOp::Max, 6, int_const(4), load(0, DType::F32, {reduce_var(5), reduce_var(6)}))),
      fold(ReduceOp::Sum, 5, int_const(2), load(0, DType::F32, {reduce_var(5), int_const(0)})));
  EXPECT_TRUE(expr_equal(rebased, expected)) << s(rebased);
  EXPECT_TRUE(free_reduce_vars(rebased).empty());
  // Ids already at or past `first` stay.
  EXPECT_EQ(rebase_fold_vars(rebased, 5).get(), rebased.get());
  // A free reduce variable belongs to an enclosing scope: renaming it would change the meaning.
  EXPECT_THROW(rebase_fold_vars(add(r0, int_const(1)), 3), Error);
}

// A memo keyed by node identity keeps its keys alive: a temporary dropped after its entry was made
// cannot free its address for a new node, which a memo keyed by the address alone would then answer
// with the dropped node's result (the allocator reuses a freed node's memory for the next node).
TEST(ExprMemo, ADroppedTemporaryDoesNotAnswerForANewNode) {
  ExprMemo<int> memo;
  const ExprNode* dropped_address = nullptr;
  {
    const Expr temporary = add(loop_var(0), reduce_var(0));
    dropped_address = temporary.get();
    memo.insert(temporary, 1);
  }
  for (int k = 0; k < 64; ++k) {
    const Expr other = add(loop_var(1), int_const(k + 2));
    EXPECT_NE(other.get(), dropped_address);
    EXPECT_EQ(memo.find(other), nullptr);
  }
  const Expr kept = mul(loop_var(2), int_const(3));
  EXPECT_EQ(memo.insert(kept, 7), 7);
  ASSERT_NE(memo.find(kept), nullptr);
  EXPECT_EQ(*memo.find(kept), 7);
}
