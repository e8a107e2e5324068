// Queries, traversal and printing of expressions (construction and simplification: expr.cpp).
#include <algorithm>
#include <functional>
#include <sstream>
#include <unordered_map>

#include "common/error.h"
#include "ir/expr.h"

namespace luminal::ir {

// ------------------------------------------------------------------------------------------------
// Queries and traversal
// ------------------------------------------------------------------------------------------------
namespace {

template <typename Visit>
void visit_unique(const Expr& root, Visit&& visit) {
  std::vector<const ExprNode*> stack{root.get()};
  std::unordered_map<const ExprNode*, bool> seen;
  while (!stack.empty()) {
    const ExprNode* n = stack.back();
    stack.pop_back();
    if (!seen.emplace(n, true).second) continue;
    visit(*n);
    for (const Expr& arg : n->args) stack.push_back(arg.get());
  }
}

}  // namespace

bool contains_op(const Expr& e, ExprOp op) {
  bool found = false;
  visit_unique(e, [&](const ExprNode& n) { found = found || n.op == op; });
  return found;
}

bool is_shape_expr(const Expr& e) {
  bool ok = true;
  visit_unique(e, [&](const ExprNode& n) {
    if (n.op == ExprOp::LoopVar || n.op == ExprOp::ReduceVar || n.op == ExprOp::Load ||
        n.op == ExprOp::CheckIndex) {
      ok = false;
    }
  });
  return ok && e->dtype == DType::I64;
}

void collect_symbols(const Expr& e, std::vector<std::string>& out) {
  visit_unique(e, [&](const ExprNode& n) {
    if (n.op == ExprOp::Symbol && std::find(out.begin(), out.end(), n.symbol) == out.end()) {
      out.push_back(n.symbol);
    }
  });
  // visit order is not source order; keep a deterministic order
  std::sort(out.begin(), out.end());
}

std::vector<int> free_reduce_vars(const Expr& root) {
  std::unordered_map<const ExprNode*, std::vector<int>> memo;
  std::function<const std::vector<int>&(const Expr&)> go = [&](const Expr& e) -> const std::vector<int>& {
    if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
    std::vector<int> vars;
    if (e->op == ExprOp::ReduceVar) vars.push_back(e->index);
    for (size_t k = 0; k < e->args.size(); ++k) {
      for (int v : go(e->args[k])) {
        const bool bound_here = e->op == ExprOp::Fold && k == 1 && v == e->index;
        if (!bound_here && std::find(vars.begin(), vars.end(), v) == vars.end()) vars.push_back(v);
      }
    }
    std::sort(vars.begin(), vars.end());
    return memo.emplace(e.get(), std::move(vars)).first->second;
  };
  return go(root);
}

bool reads_loop_var(const Expr& e, int axis) {
  bool found = false;
  visit_unique(e, [&](const ExprNode& n) { found = found || (n.op == ExprOp::LoopVar && n.index == axis); });
  return found;
}

int max_reduce_var(const Expr& e) {
  int best = -1;
  visit_unique(e, [&](const ExprNode& n) {
    if (n.op == ExprOp::ReduceVar || n.op == ExprOp::Fold) best = std::max(best, n.index);
  });
  return best;
}

Expr rebase_fold_vars(const Expr& e, int first) {
  LUMINAL_CHECK(first >= 0, "invalid expression rebase_fold_vars: negative first variable id");
  const std::vector<int> free = free_reduce_vars(e);
  if (!free.empty()) {
    fail("rebase_fold_vars: the expression reads free reduce variable r", free[0], ": ", to_string(e));
  }
  std::vector<int> ids;  // distinct fold ids, ascending
  visit_unique(e, [&](const ExprNode& n) {
    if (n.op == ExprOp::Fold) ids.push_back(n.index);
  });
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty() || ids.front() >= first) return e;
  // Every reduce variable is bound by a fold, so renaming all of them renames each fold's own.
  auto renamed = [&](int id) {
    return first + static_cast<int>(std::lower_bound(ids.begin(), ids.end(), id) - ids.begin());
  };
  return transform(e, [&](const Expr& original, const std::vector<Expr>& args) -> Expr {
    if (original->op == ExprOp::ReduceVar) return reduce_var(renamed(original->index));
    if (original->op == ExprOp::Fold) {
      return fold(static_cast<ReduceOp>(original->int_value), renamed(original->index), args[0], args[1]);
    }
    return nullptr;
  });
}

Expr canonical_fold_vars(const Expr& e, int first) {
  LUMINAL_CHECK(first >= 0, "invalid expression canonical_fold_vars: negative first variable id");
  int folds = 0;
  visit_unique(e, [&](const ExprNode& n) { folds += n.op == ExprOp::Fold ? 1 : 0; });
  if (folds == 0) return e;
  // Old ids move above every id the numbering below can give, so that no renaming captures one.
  const int high = std::max(first, max_reduce_var(e) + 1) + folds;
  const Expr moved = rebase_fold_vars(e, high);
  return transform(moved, [&](const Expr& original, const std::vector<Expr>& args) -> Expr {
    if (original->op != ExprOp::Fold) return nullptr;
    // args[1] is the body with its own folds renumbered already (ids below `high`).
    int height = 0;
    visit(args[1], [&](const Expr& x) {
      if (x->op == ExprOp::Fold && x->index < high) height = std::max(height, x->index - first + 1);
    });
    const Expr own = reduce_var(first + height);
    const Expr body = transform(args[1], [&](const Expr& x, const std::vector<Expr>&) -> Expr {
      return x->op == ExprOp::ReduceVar && x->index == original->index ? own : nullptr;
    });
    return fold(static_cast<ReduceOp>(original->int_value), first + height, args[0], body);
  });
}

Expr rebuild(const Expr& node, std::vector<Expr> args) {
  switch (node->op) {
    case ExprOp::Const:
    case ExprOp::LoopVar:
    case ExprOp::ReduceVar:
    case ExprOp::Symbol: return node;
    case ExprOp::Load: {
      Expr mask = node->masked ? args.back() : nullptr;
      if (node->masked) args.pop_back();
      return load(node->index, node->dtype, std::move(args), std::move(mask));
    }
    case ExprOp::Where: return where(args[0], args[1], args[2]);
    case ExprOp::Cast: return cast(args[0], node->dtype);
    case ExprOp::CheckIndex:
      return check_like(*node, args[0], args[1], node->masked ? args[2] : nullptr);
    case ExprOp::Fold: return fold(static_cast<ReduceOp>(node->int_value), node->index, args[0], args[1]);
    LUMINAL_UNARY_OP_CASES return unary(node->op, args[0]);
    LUMINAL_BINARY_OP_CASES return binary(node->op, args[0], args[1]);
  }
  fail("invalid expression op ", static_cast<int>(node->op));
}

Expr transform(const Expr& root, const Rewrite& rewrite) {
  std::unordered_map<const ExprNode*, Expr> done;
  std::function<Expr(const Expr&)> go = [&](const Expr& e) -> Expr {
    if (auto it = done.find(e.get()); it != done.end()) return it->second;
    std::vector<Expr> args;
    args.reserve(e->args.size());
    bool changed = false;
    for (const Expr& arg : e->args) {
      args.push_back(go(arg));
      changed = changed || args.back().get() != arg.get();
    }
    Expr result = rewrite(e, args);
    if (!result) result = changed ? rebuild(e, std::move(args)) : e;
    done.emplace(e.get(), result);
    return result;
  };
  return go(root);
}

void visit(const Expr& root, const std::function<void(const Expr&)>& fn) {
  std::unordered_map<const ExprNode*, bool> seen;
  std::function<void(const Expr&)> go = [&](const Expr& e) {
    if (!seen.emplace(e.get(), true).second) return;
    for (const Expr& arg : e->args) go(arg);
    fn(e);
  };
  go(root);
}

// ------------------------------------------------------------------------------------------------
// Printing
// ------------------------------------------------------------------------------------------------
namespace {

void print(const Expr& e, std::ostream& out);

void print_list(const std::vector<Expr>& items, size_t count, std::ostream& out) {
  for (size_t i = 0; i < count; ++i) {
    if (i) out << ", ";
    print(items[i], out);
  }
}

void print_const(const ExprNode& n, std::ostream& out) {
  if (n.dtype == DType::Bool) {
    out << (n.int_value ? "true" : "false");
  } else if (is_floating(n.dtype)) {
    std::ostringstream text;
    text.precision(9);
    text << n.float_value;
    out << text.str();
    if (n.dtype != DType::F32) out << ":" << dtype_short_name(n.dtype);
  } else {
    out << n.int_value;
    if (n.dtype != DType::I64) out << ":" << dtype_short_name(n.dtype);
  }
}

void print(const Expr& e, std::ostream& out) {
  const ExprNode& n = *e;
  switch (n.op) {
    case ExprOp::Const: print_const(n, out); return;
    case ExprOp::LoopVar: out << "i" << n.index; return;
    case ExprOp::ReduceVar: out << "r" << n.index; return;
    case ExprOp::Symbol: out << n.symbol; return;
    case ExprOp::Load:
      out << "load" << n.index << "[";
      print_list(n.args, n.load_rank(), out);
      out << "]";
      if (n.masked) {
        out << " if ";
        print(n.mask(), out);
      }
      return;
    case ExprOp::Cast:
      out << dtype_short_name(n.dtype) << "(";
      print(n.args[0], out);
      out << ")";
      return;
    case ExprOp::Fold:
      out << reduce_op_name(static_cast<ReduceOp>(n.int_value)) << "(r" << n.index << " < ";
      print(n.args[0], out);
      out << ": ";
      print(n.args[1], out);
      out << ")";
      return;
    case ExprOp::CheckIndex:
      out << (is_value_check(n) ? "check_value(" : "check_index(");
      print_list(n.args, n.args.size(), out);
      out << ")";
      return;
    case ExprOp::Where:
      LUMINAL_SCALAR_OP_CASES break;  // op(args)
  }
  if (n.dtype == DType::I64 && (n.op == ExprOp::Add || n.op == ExprOp::Mul)) {
    const bool is_add = n.op == ExprOp::Add;
    if (is_add) out << "(";
    print(n.args[0], out);
    out << (is_add ? " + " : "*");
    print(n.args[1], out);
    if (is_add) out << ")";
    return;
  }
  out << expr_op_name(n.op) << "(";
  print_list(n.args, n.args.size(), out);
  out << ")";
}

}  // namespace

std::string to_string(const Expr& e) {
  if (!e) return "<null>";
  std::ostringstream out;
  print(e, out);
  return out.str();
}

}  // namespace luminal::ir
