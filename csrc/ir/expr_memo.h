#pragma once

#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/expr.h"

namespace luminal::ir {

// Results per expression node, keyed by the node's identity, for analyses that outlive the
// expressions they are asked about (a kernel writer emits temporaries it builds and drops). The
// memo holds a reference to every node it has a result for: keyed by the address alone, a node
// freed after its entry was made and a new one allocated at that address would be given the old
// node's result (a placement outside the loop of the variable it depends on), depending on what
// the allocator had reused.
template <typename Value>
class ExprMemo {
 public:
  const Value* find(const Expr& e) const {
    const auto it = entries_.find(e.get());
    return it == entries_.end() ? nullptr : &it->second.value;
  }

  // The stored value (references stay valid as the memo grows).
  const Value& insert(const Expr& e, Value value) {
    return entries_.insert_or_assign(e.get(), Entry{e, std::move(value)}).first->second.value;
  }

  // The value for `e`: the stored one, or compute() stored (compute may use the memo itself).
  template <typename Compute>
  const Value& get(const Expr& e, Compute&& compute) {
    if (const Value* known = find(e)) return *known;
    return insert(e, compute());
  }

 private:
  struct Entry {
    Expr node;  // keeps the key's address from being reused while the entry exists
    Value value;
  };
  std::unordered_map<const ExprNode*, Entry> entries_;
};

// The reduce variables `e` depends on but does not bind (ir::free_reduce_vars), memoized.
inline const std::vector<int>& free_reduce_vars(const Expr& e, ExprMemo<std::vector<int>>& memo) {
  return memo.get(e, [&] { return free_reduce_vars(e); });
}

// Whether `e` loads memory or folds anywhere: a where() branch that does is evaluated only when
// selected. The kernel writer and the float4 analysis must agree on it (the analysis predicts the
// loops the writer emits), so both ask this.
inline bool loads_or_folds(const Expr& e, ExprMemo<bool>& memo) {
  return memo.get(e, [&] {
    bool result = e->op == ExprOp::Load || e->op == ExprOp::Fold;
    for (const Expr& arg : e->args) result = result || loads_or_folds(arg, memo);
    return result;
  });
}

}  // namespace luminal::ir
