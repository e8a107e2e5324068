// Vectorized (float4) folds, and fold groups that share one loop (row kernels).
#include <algorithm>
#include <functional>

#include "codegen/kernel_writer.h"

namespace luminal::codegen::detail {

// ---- vectorized folds ----
// A fold that qualifies (schedule::float4_fold_loads: f32 loads at [..., r], unit stride, over a
// static multiple of 4) gets a second loop, taken when each of its pointers is 16-byte aligned at
// run time: it steps by 4, reads one float4 per load, and writes the body out for the 4 elements
// in order, so the sums are the scalar loop's. It saves L1 traffic where neighbouring threads read
// different rows (DLRM's pairwise dot products).

// The run-time condition under which `load` (a qualifying load) may read 4 elements at once.
std::string KernelWriter::vector_load_condition(const Expr& load) {
  const OperandInfo& op = operands_.at(load->index);
  const std::string pointer = operand_pointer(load->index);
  const size_t last = load->load_rank() - 1;
  std::string condition = str_cat("(((unsigned long long)", pointer, ") & 15ull) == 0ull");
  switch (op.layout) {
    case Layout::Contiguous:  // outer strides are multiples of the innermost size (a multiple of 4)
    case Layout::Fixed: break;
    case Layout::Strided: {
      const std::vector<std::string> strides = operand_strides(load->index);
      condition += str_cat(" && ", strides[last], " == 1");
      for (size_t d = 0; d < last; ++d) condition += str_cat(" && (", strides[d], " & 3) == 0");
      break;
    }
    case Layout::Row: fail("internal error: a float4 load of a row operand");
  }
  return condition;
}

// The element offset of a vector read by `load` whose innermost index starts at `first`: the outer
// indices (emitted from `scope`; they do not vary along the vector) times their strides.
std::string KernelWriter::vector_offset(const Expr& load, const std::string& first, int scope) {
  const std::vector<std::string> strides = operand_strides(load->index);
  std::string offset = first;
  for (size_t d = 0; d + 1 < load->load_rank(); ++d) {
    const std::string index = emit(load->args[d], scope);
    offset += str_cat(" + ", index, strides[d] == "1LL" ? "" : str_cat(" * ", strides[d]));
  }
  return offset;
}

std::optional<KernelWriter::VectorFold> KernelWriter::emit_vector_fold(const Expr& fold, int scope, const Combine& c, const std::string& acc) {
  const std::optional<std::vector<Expr>> qualifying = schedule::float4_fold_loads(fold, operands_);
  if (!qualifying) return std::nullopt;
  const std::vector<Expr>& loads = *qualifying;
  const int var = fold->index;
  std::vector<std::string> conditions;
  for (const Expr& load : loads) conditions.push_back(vector_load_condition(load));
  std::sort(conditions.begin(), conditions.end());
  conditions.erase(std::unique(conditions.begin(), conditions.end()), conditions.end());
  VectorFold vector;
  for (const std::string& condition : conditions) {
    vector.condition += (vector.condition.empty() ? "" : " && ") + condition;
  }
  // The loop scope binds nothing, so what does not vary with r is still hoisted out of it.
  const int loop = open_scope(scope, {}, false);
  const std::string r = str_cat("r", var);
  std::vector<std::string> vectors;
  for (const Expr& load : loads) {
    const std::string offset = vector_offset(load, r, loop);
    const std::string pointer = operand_pointer(load->index);
    vectors.push_back(fresh());
    line(loop, str_cat("const float4 ", vectors.back(), " = lm_ok ? *reinterpret_cast<const float4*>(", pointer, " + (",
                       offset, ")) : make_float4(0.f, 0.f, 0.f, 0.f);"));
  }
  static constexpr const char* kComponents[schedule::kFloat4] = {".x", ".y", ".z", ".w"};
  for (int lane = 0; lane < schedule::kFloat4; ++lane) {
    const int body = open_scope(loop, {var}, false);
    scopes_[body]->names.emplace(ir::reduce_var(var), str_cat("(", r, " + ", lane, ")"));
    for (size_t k = 0; k < loads.size(); ++k) scopes_[body]->names.emplace(loads[k], vectors[k] + kComponents[lane]);
    const std::string value = emit(fold->args[1], body);
    scopes_[loop]->code << scopes_[body]->code.str()
                        << indented(body, str_cat("{ const ", c.acc_type, " val = (", c.acc_type, ")", value, "; ",
                                                  replace_all(c.step, "acc", acc), " }"));
  }
  vector.code = scopes_[loop]->code.str();
  return vector;
}

// Folds `e` evaluates whatever its data (not inside another fold or a lazy branch), each once.
std::vector<Expr> KernelWriter::unconditional_folds(const Expr& root) {
  std::vector<Expr> found;
  std::unordered_set<const ir::ExprNode*> seen;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (!seen.insert(e.get()).second) return;
    if (e->op == ExprOp::Fold) {
      found.push_back(e);
      return;
    }
    if (e->op == ExprOp::Where) {
      walk(e->args[0]);
      return;
    }
    for (const Expr& arg : e->args) walk(arg);
  };
  walk(root);
  return found;
}

// Groups of folds (each group: one reduction and extent) as one loop with an accumulator per
// fold. A single static group loops over its own variable (unrolled); several groups loop to the
// longest extent and guard each group's body by its own extent.
void KernelWriter::emit_fold_groups(const std::vector<std::vector<Expr>>& groups, int scope) {
  struct Member {
    const Expr* fold;
    std::string acc, value;
    Combine c;
  };
  const bool single = groups.size() == 1;
  std::vector<std::string> extents;
  for (const std::vector<Expr>& group : groups) {
    extents.push_back(emit(group.front()->args[0], scope));
    for (const Expr& fold : group) note_fold_extent(fold);
  }
  std::string counter = str_cat("r", groups.front().front()->index);
  std::string limit = extents.front();
  if (!single) {
    counter = fresh();
    limit = fresh();
    std::string longest = extents.front();
    for (size_t g = 1; g < extents.size(); ++g) longest = str_cat("max(", longest, ", ", extents[g], ")");
    line(scope, str_cat("const lm_i64 ", limit, " = ", longest, ";"));
  }
  std::vector<Member> members;
  std::ostringstream loop_body;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Expr& first = groups[g].front();
    const std::string var = str_cat("r", first->index);
    const int body_scope = open_scope(scope, {first->index}, /*branch=*/!single);
    scopes_[body_scope]->names.emplace(ir::reduce_var(first->index), var);
    const Combine c = combine_code(static_cast<ir::ReduceOp>(first->int_value), first->dtype);
    std::vector<Member> group_members;
    for (const Expr& fold : groups[g]) {
      group_members.push_back({&fold, fresh(), emit(fold->args[1], body_scope), c});
      line(scope, str_cat(c.acc_type, " ", group_members.back().acc, " = ", c.init, ";"));
    }
    if (!single) loop_body << indented(body_scope, str_cat("if (", counter, " < ", extents[g], ") { const lm_i64 ", var,
                                                           " = ", counter, ";"));
    loop_body << scopes_[body_scope]->code.str();
    for (const Member& m : group_members) {
      loop_body << indented(body_scope, str_cat("{ const ", m.c.acc_type, " val = (", m.c.acc_type, ")", m.value, "; ",
                                                replace_all(m.c.step, "acc", m.acc), " }"));
    }
    if (!single) loop_body << indented(body_scope, "}");
    members.insert(members.end(), group_members.begin(), group_members.end());
  }
  if (single && ir::as_int_const(groups.front().front()->args[0])) line(scope, "#pragma unroll");
  line(scope, str_cat("for (lm_i64 ", counter, " = 0; ", counter, " < ", limit, "; ", counter, "++) {"));
  scopes_[scope]->code << loop_body.str();
  line(scope, "}");
  for (const Member& m : members) {
    const std::string name = fresh();
    const DType t = (*m.fold)->dtype;
    line(scope, str_cat("const ", value_type(t), " ", name, " = ", rounding(t, str_cat("(", value_type(t), ")", m.acc)),
                        ";"));
    scopes_[scope]->names.emplace(*m.fold, name);
  }
}

}  // namespace luminal::codegen::detail
