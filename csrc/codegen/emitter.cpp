// The kernel writer's core: nested scopes with structural CSE (emit), folds as loops, kernel
// parameters and names.
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>

#include "codegen/kernel_writer.h"
#include "ir/simplify.h"

namespace luminal::codegen::detail {

std::string sanitize(const std::string& symbol) {
  std::string out = "s_";
  for (char c : symbol) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::optional<int64_t> small_static_count(const std::vector<Expr>& extents) {
  int64_t count = 1;
  for (const Expr& extent : extents) {
    const std::optional<int64_t> value = ir::as_int_const(extent);
    if (!value || *value < 0) return std::nullopt;
    if (*value == 0) return 0;
    if (count > (kIndex32Limit - 1) / *value) return std::nullopt;  // the product would reach 2^31
    count *= *value;
  }
  return count;
}

// ---- shape expressions (i64, symbols only) ----
std::string KernelWriter::shape_code(const Expr& e) {
  switch (e->op) {
    case ExprOp::Const: return str_cat(e->int_value, "LL");
    case ExprOp::Symbol: return "p." + sanitize(e->symbol);
    LUMINAL_BINARY_OP_CASES return shape_op_code(e);
    LUMINAL_NON_SHAPE_OP_CASES break;  // not shape arithmetic
  }
  fail("internal error: cannot emit shape expression ", ir::to_string(e));
}

// The binary ops of shape arithmetic (divisors are positive sizes: lm_floordiv_s/lm_mod_s).
std::string KernelWriter::shape_op_code(const Expr& e) {
  const std::string a = shape_code(e->args[0]), b = shape_code(e->args[1]);
  if (e->op == ExprOp::Add) return str_cat("(", a, " + ", b, ")");
  if (e->op == ExprOp::Mul) return str_cat("(", a, " * ", b, ")");
  if (e->op == ExprOp::FloorDiv) return str_cat("lm_floordiv_s(", a, ", ", b, ")");
  if (e->op == ExprOp::Mod) return str_cat("lm_mod_s(", a, ", ", b, ")");
  if (e->op == ExprOp::Max) return str_cat("max(", a, ", ", b, ")");
  if (e->op == ExprOp::Min) return str_cat("min(", a, ", ", b, ")");
  fail("internal error: cannot emit shape expression ", ir::to_string(e));
}

std::string KernelWriter::replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

// ---- parameters ----
// A node kernel's parameters: output, inputs, error flag, symbols, then the run-time strides of
// strided (graph input) operands.
void KernelWriter::add_node_params() {
  add_param(ParamKind::Output);
  for (size_t slot = 0; slot < operands_.size(); ++slot) add_param(ParamKind::Input, static_cast<int>(slot));
  add_param(ParamKind::ErrorFlag);
  add_param(ParamKind::CheckBase);
  collect_symbols();
  for (size_t slot = 0; slot < operands_.size(); ++slot) {
    if (operands_[slot].layout != Layout::Strided) continue;
    for (size_t d = 0; d < operands_[slot].shape.size(); ++d) {
      add_param(ParamKind::InputStride, static_cast<int>(slot), static_cast<int>(d));
    }
  }
}

// Names the kernel by its text, so that equal kernels share one compiled function.
void KernelWriter::name_and_finish(Kernel& kernel, const std::string& text) const {
  kernel.name = str_cat("lm_", hex_bits(std::hash<std::string>{}(text)).substr(2));
  kernel.source = replace_all(text, "LM_KERNEL", kernel.name);
  kernel.params = params_;
  kernel.check_labels = *check_labels_;
  kernel.schedule = schedule_;
  kernel.block_size = schedule_.block_size;
  kernel.threads_per_output = schedule_.threads_per_output;
  kernel.grid_y = schedule_.pieces;
}

// The kernel-local id of a check label.
size_t KernelWriter::check_label_id(const std::string& label) {
  const auto found = std::find(check_labels_->begin(), check_labels_->end(), label);
  if (found != check_labels_->end()) return static_cast<size_t>(found - check_labels_->begin());
  check_labels_->push_back(label);
  return check_labels_->size() - 1;
}

void KernelWriter::add_param(ParamKind kind, int slot, int dim, std::string symbol) {
  KernelParam p;
  p.kind = kind;
  p.slot = slot;
  p.dim = dim;
  p.symbol = std::move(symbol);
  params_.push_back(std::move(p));
}

void KernelWriter::collect_symbols() {
  std::vector<std::string> names;
  auto collect = [&](const Expr& e) { ir::collect_symbols(e, names); };
  for (const Expr& dim : node_.shape) collect(dim);
  if (node_.body) collect(node_.body);
  for (const Expr& e : node_.reduce_extents) collect(e);
  for (const Expr& e : node_.scatter_domain) collect(e);
  for (const Expr& e : node_.scatter_targets) collect(e);
  for (const OperandInfo& op : operands_) {
    for (const Expr& dim : op.shape) collect(dim);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string& name : names) add_param(ParamKind::Symbol, -1, -1, name);
}

std::string KernelWriter::params_declaration() const {
  std::ostringstream out;
  out << "struct LM_KERNEL_params {\n";
  for (size_t k = 0; k < params_.size(); ++k) {
    const KernelParam& p = params_[k];
    switch (p.kind) {
      case ParamKind::Output: out << "  " << storage_type(node_.dtype) << "* out;\n"; break;
      case ParamKind::Input:
        out << "  const " << storage_type(operands_[p.slot].dtype) << "* __restrict__ in" << p.slot << ";\n";
        break;
      case ParamKind::ErrorFlag: out << "  lm_i64* error;\n"; break;
      case ParamKind::CheckBase: out << "  lm_i64 check_base;\n"; break;
      case ParamKind::Symbol: out << "  lm_i64 " << sanitize(p.symbol) << ";\n"; break;
      case ParamKind::InputStride: out << "  lm_i64 stride" << p.slot << "_" << p.dim << ";\n"; break;
      case ParamKind::NodePointer:  // an attention's early rows (schedule: an i64 input), named by `symbol`
        LUMINAL_CHECK(!p.symbol.empty(), "internal error: an unnamed node pointer in a node kernel");
        out << "  const lm_i64* __restrict__ " << p.symbol << ";\n";
        break;
      case ParamKind::NodeStride: fail("internal error: row-kernel parameter in a node kernel");
    }
  }
  out << "};\n";
  return out.str();
}

int KernelWriter::open_scope(int parent, std::vector<int> vars, bool branch) {
  auto scope = std::make_unique<Scope>();
  scope->parent = parent;
  scope->vars = std::move(vars);
  scope->branch = branch;
  scope->indent = parent >= 0 ? scopes_[parent]->indent + 2 : 4;
  scopes_.push_back(std::move(scope));
  return static_cast<int>(scopes_.size()) - 1;
}

bool KernelWriter::inside_loop(int scope) const {
  for (int s = scope; s >= 0; s = scopes_[s]->parent) {
    if (!scopes_[s]->vars.empty()) return true;
  }
  return false;
}

int KernelWriter::placement(const Expr& e, int scope) {
  const std::vector<int>& vars = free_vars(e);
  while (scopes_[scope]->parent >= 0 && !scopes_[scope]->branch) {
    bool binds = false;
    for (int v : scopes_[scope]->vars) binds = binds || std::find(vars.begin(), vars.end(), v) != vars.end();
    if (binds) break;
    scope = scopes_[scope]->parent;
  }
  return scope;
}

const std::vector<int>& KernelWriter::free_vars(const Expr& e) { return ir::free_reduce_vars(e, free_vars_); }

void KernelWriter::line(int scope, const std::string& text) {
  scopes_[scope]->code << std::string(scopes_[scope]->indent, ' ') << text << "\n";
}

// Emits `e` (as needed from `scope`) and returns the C expression naming its value.
std::string KernelWriter::emit(const Expr& e, int scope) {
  const int target = placement(e, scope);
  for (int s = target; s >= 0; s = scopes_[s]->parent) {
    if (auto it = scopes_[s]->names.find(e); it != scopes_[s]->names.end()) return it->second;
  }
  if (e->op == ExprOp::Fold) return emit_fold(e, target);
  if (e->op == ExprOp::Where && (expensive(e->args[1]) || expensive(e->args[2]))) return emit_lazy_where(e, target);
  const std::string value = value_code(e, target);
  // Variables, symbols and literals are used in place; everything else gets a name.
  if (e->op == ExprOp::LoopVar || e->op == ExprOp::ReduceVar || e->op == ExprOp::Symbol || e->op == ExprOp::Const) {
    scopes_[target]->names.emplace(e, value);
    return value;
  }
  const std::string name = fresh();
  line(target, str_cat("const ", value_type(e->dtype), " ", name, " = ", value, ";"));
  scopes_[target]->names.emplace(e, name);
  return name;
}

// Branches that load memory or loop are evaluated only when selected.
bool KernelWriter::expensive(const Expr& e) { return ir::loads_or_folds(e, expensive_); }

std::string KernelWriter::emit_lazy_where(const Expr& e, int scope) {
  const std::string cond = emit(e->args[0], scope);
  const std::string name = fresh();
  line(scope, str_cat(value_type(e->dtype), " ", name, ";"));
  const int then_scope = open_scope(scope, {}, true);
  const std::string then_value = emit(e->args[1], then_scope);
  const int else_scope = open_scope(scope, {}, true);
  const std::string else_value = emit(e->args[2], else_scope);
  line(scope, str_cat("if (", cond, ") {"));
  scopes_[scope]->code << scopes_[then_scope]->code.str() << indented(then_scope, str_cat(name, " = ", then_value, ";"));
  line(scope, "} else {");
  scopes_[scope]->code << scopes_[else_scope]->code.str() << indented(else_scope, str_cat(name, " = ", else_value, ";"));
  line(scope, "}");
  scopes_[scope]->names.emplace(e, name);
  return name;
}

std::string KernelWriter::indented(int scope, const std::string& text) const {
  return std::string(scopes_[scope]->indent, ' ') + text + "\n";
}

// fold(op, r < extent: body): a loop in its own scope; invariant parts of the body are hoisted.
std::string KernelWriter::emit_fold(const Expr& e, int scope) {
  const auto op = static_cast<ir::ReduceOp>(e->int_value);
  const Combine c = combine_code(op, e->dtype);
  const std::string extent = emit(e->args[0], scope);
  note_fold_extent(e);
  const std::string var = str_cat("r", e->index);
  const std::string acc = fresh();
  const int body_scope = open_scope(scope, {e->index}, false);
  scopes_[body_scope]->names.emplace(ir::reduce_var(e->index), var);
  const std::string value = emit(e->args[1], body_scope);
  // In warp mode a fold outside any loop is shared by the warp's lanes (the element is
  // warp-uniform); its partial results are combined across lanes with shuffles.
  const bool cooperative = warp_mode_ && !inside_loop(scope);
  std::optional<VectorFold> vector;
  if (!cooperative && !unroll_folds_ && schedule_.vector_width == schedule::kFloat4) {
    vector = emit_vector_fold(e, scope, c, acc);
  }
  std::optional<VectorFold> row_vector;
  if (cooperative && schedule_.row_vector > 1) row_vector = emit_row_vector_fold(e, scope, c, acc);
  line(scope, str_cat(c.acc_type, " ", acc, " = ", c.init, ";"));
  if (vector) {
    line(scope, str_cat("if (", vector->condition, ") {"));
    line(scope, "#pragma unroll");
    line(scope, str_cat("for (lm_i64 ", var, " = 0; ", var, " < ", extent, "; ", var, " += ", schedule_.vector_width, ") {"));
    scopes_[scope]->code << vector->code;
    line(scope, "}");
    line(scope, "} else {");
  }
  if (row_vector) {
    const int width = schedule_.row_vector;
    line(scope, str_cat("if (", row_vector->condition, ") {"));
    line(scope, "#pragma unroll 4");
    line(scope, str_cat("for (lm_i64 ", var, " = lm_lane * ", width, "; ", var, " < ", extent, "; ", var, " += ",
                        lanes_ * width, ") {"));
    scopes_[scope]->code << row_vector->code;
    line(scope, "}");
    line(scope, "} else {");
  }
  // Row kernels unroll static folds, so that the row arrays they index stay in registers. A fold a
  // warp's lanes share is unrolled 4 times: each lane keeps 4 loads in flight, where one at a time
  // left a LayerNorm row waiting on memory latency (24 us for BERT's 3072 rows of 768 on an H100).
  if (unroll_folds_ && ir::as_int_const(e->args[0])) line(scope, "#pragma unroll");
  if (cooperative) line(scope, "#pragma unroll 4");
  line(scope, str_cat("for (lm_i64 ", var, " = ", cooperative ? "lm_lane" : "0", "; ", var, " < ", extent, "; ",
                      var, cooperative ? str_cat(" += ", lanes_) : std::string("++"), ") {"));
  scopes_[scope]->code << scopes_[body_scope]->code.str()
                       << indented(body_scope, str_cat("{ const ", c.acc_type, " val = (", c.acc_type, ")", value, "; ",
                                                       replace_all(c.step, "acc", acc), " }"));
  line(scope, "}");
  if (vector) line(scope, "}");
  if (row_vector) line(scope, "}");
  if (cooperative) line(scope, replace_all(lanes_combine(c), "acc", acc));
  const std::string name = fresh();
  line(scope, str_cat("const ", value_type(e->dtype), " ", name, " = ", rounding(e->dtype, str_cat("(", value_type(e->dtype), ")", acc)), ";"));
  scopes_[scope]->names.emplace(e, name);
  return name;
}

// A device function computing `e` from loop variables i0..i<arity-1> (its parameters).
std::string KernelWriter::element_function(const std::string& name, const std::string& type, const Expr& e, int arity) {
  const int root = open_scope(-1, {}, false);
  const std::string value = emit(e, root);
  std::ostringstream out;
  out << "__device__ __forceinline__ " << type << " " << name << "(const LM_KERNEL_params& p";
  for (int v = 0; v < arity; ++v) out << ", lm_i64 i" << v;
  out << ") {\n    bool lm_ok = true; (void)lm_ok;\n" << scopes_[root]->code.str() << "    return " << value << ";\n}\n";
  return out.str();
}

// The coordinates of flat index `flat` over `shape` (row-major), as lm_i64 loop variables i0...
// When the element count is static and below 2^31 (so is `flat`, which the caller keeps below
// it), the decomposition runs in unsigned 32-bit arithmetic, which a GPU does in a few
// instructions where 64-bit division takes dozens; the coordinates are widened to lm_i64, so
// that every index expression computed from them stays 64-bit.
std::string KernelWriter::unravel(const std::string& flat, int indent, const ir::Shape& shape) const {
  std::ostringstream out;
  const std::string pad(indent, ' ');
  const bool narrow = small_static_count(shape).has_value();
  if (narrow) {
    out << pad << "unsigned int lm_rest = (unsigned int)" << flat << ";\n";
  } else {
    out << pad << "lm_i64 lm_rest = " << flat << ";\n";
  }
  for (size_t d = shape.size(); d-- > 0;) {
    if (d == 0) {
      out << pad << "const lm_i64 i0 = " << (narrow ? "(lm_i64)lm_rest" : "lm_rest") << ";\n";
    } else if (shape[d]->is_int_const(1)) {
      out << pad << "const lm_i64 i" << d << " = 0;\n";
    } else if (narrow) {
      const int64_t dim = ir::as_int_const(shape[d]).value();
      out << pad << "const lm_i64 i" << d << " = (lm_i64)(lm_rest % " << dim << "u); lm_rest /= " << dim << "u;\n";
    } else {
      const std::string dim = shape_code(shape[d]);
      out << pad << "const lm_i64 i" << d << " = lm_rest % " << dim << "; lm_rest /= " << dim << ";\n";
    }
  }
  out << pad << "(void)lm_rest;\n";
  return out.str();
}

// Loop variable d ranges over [0, loop_extents[d]); the node's reduce variables over its static
// reduce extents; a fold's variable over its fold's extent. A variable id bound with different
// extents (a fold variable reused, or shadowing a reduce variable) gets no upper bound.
void KernelWriter::set_index_ranges(const ir::Shape& loop_extents) {
  std::map<int, std::vector<Expr>> bindings;  // variable id -> the extent of every binding
  if (node_.kind == NodeKind::Reduce) {
    for (size_t r = 0; r < node_.reduce_extents.size(); ++r) bindings[static_cast<int>(r)].push_back(node_.reduce_extents[r]);
  }
  std::vector<Expr> roots = node_.scatter_targets;
  if (node_.body) roots.push_back(node_.body);
  for (const Expr& root : roots) {
    ir::visit(root, [&](const Expr& e) {
      if (e->op == ExprOp::Fold) bindings[e->index].push_back(e->args[0]);
    });
  }
  ir::IndexRanges ranges{loop_extents, {}};
  for (const auto& [var, extents] : bindings) {
    const Expr& first = extents.front();
    const bool known = ir::is_shape_expr(first) && std::all_of(extents.begin(), extents.end(), [&](const Expr& extent) {
                         return ir::expr_equal(extent, first);
                       });
    if (ranges.reduce_extents.size() <= static_cast<size_t>(var)) ranges.reduce_extents.resize(var + 1);
    ranges.reduce_extents[var] = known ? first : nullptr;
  }
  ranges_ = std::move(ranges);
}

std::string KernelWriter::store_code(const std::string& value) const {
  switch (node_.dtype) {
    case DType::F16: return "lm_f2h(" + value + ")";
    case DType::BF16: return "lm_f2bf(" + value + ")";
    case DType::Bool: return "(unsigned char)(" + value + ")";
    default: return value;
  }
}

}  // namespace luminal::codegen::detail
