#pragma once

#include <unordered_map>
#include <utility>

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

 private:
  struct Entry {
    Expr node;  // keeps the key's address from being reused while the entry exists
    Value value;
  };
  std::unordered_map<const ExprNode*, Entry> entries_;
};

}  // namespace luminal::ir
