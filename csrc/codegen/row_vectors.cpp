// Row vectors (schedule::KernelSchedule::row_vector): a warp per row whose lanes take `width`
// consecutive elements per step, along the row and along the folds they share. Each load that
// reads at unit stride along the loop becomes one load of width * element size bytes (at most
// 16), and the row's `width` results one store. The vector loop runs when every such pointer is
// aligned at run time; the scalar loop stays for the other case. Loads that do not qualify (a
// transposed read, an index computed from the element) are read one element per copy, as in the
// scalar loop: the vector loop changes how memory is read, never what is computed.
#include <algorithm>
#include <functional>
#include <unordered_set>

#include "codegen/kernel_writer.h"

namespace luminal::codegen::detail {

namespace {

// The C type of a vector of `bytes` bytes (2, 4, 8 or 16) and its zero.
const char* vector_type(size_t bytes) {
  switch (bytes) {
    case 2: return "unsigned short";
    case 4: return "unsigned int";
    case 8: return "uint2";
    case 16: return "uint4";
    default: fail("internal error: no ", bytes, "-byte vector type");
  }
}

const char* vector_zero(size_t bytes) {
  switch (bytes) {
    case 2: return "(unsigned short)0";
    case 4: return "0u";
    case 8: return "make_uint2(0u, 0u)";
    case 16: return "make_uint4(0u, 0u, 0u, 0u)";
    default: fail("internal error: no ", bytes, "-byte vector type");
  }
}

}  // namespace

// The loads `body` performs whatever its data (not inside a fold, nor in a lazily evaluated
// branch: a vector read hoisted out of a branch could read where the branch would not) that
// qualify for vectors along reduce variable `var`.
std::vector<Expr> KernelWriter::row_vector_loads(const Expr& body, int var, int width) {
  std::vector<Expr> found;
  std::unordered_set<const ir::ExprNode*> seen;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (!seen.insert(e.get()).second || e->op == ExprOp::Fold) return;
    if (e->op == ExprOp::Load && schedule::row_vector_load(e, var, width, operands_)) {
      found.push_back(e);
      return;
    }
    if (e->op == ExprOp::Where && (expensive(e->args[1]) || expensive(e->args[2]))) {
      walk(e->args[0]);
      return;
    }
    for (const Expr& arg : e->args) walk(arg);
  };
  walk(body);
  return found;
}

// The run-time condition under which every load of `loads` may be read as a vector: its pointer
// aligned to the vector's size and, for strided operands, a unit innermost stride and outer
// strides that are multiples of `width`. "true" when there is nothing to test.
std::string KernelWriter::row_vector_condition(const std::vector<Expr>& loads, int width) {
  std::vector<std::string> conditions;
  for (const Expr& load : loads) {
    const OperandInfo& op = operands_.at(load->index);
    const size_t bytes = dtype_size(op.dtype) * width;
    conditions.push_back(str_cat("(((unsigned long long)", operand_pointer(load->index), ") & ", bytes - 1, "ull) == 0ull"));
    if (op.layout == Layout::Strided) {
      const std::vector<std::string> strides = operand_strides(load->index);
      const size_t last = load->load_rank() - 1;
      conditions.push_back(str_cat(strides[last], " == 1"));
      for (size_t d = 0; d < last; ++d) {
        // An index that is always 0 adds nothing to the offset, whatever the stride (size-1 dims).
        if (!load->args[d]->is_int_const(0)) conditions.push_back(str_cat("(", strides[d], " % ", width, ") == 0"));
      }
    }
  }
  std::sort(conditions.begin(), conditions.end());
  conditions.erase(std::unique(conditions.begin(), conditions.end()), conditions.end());
  std::string condition;
  for (const std::string& c : conditions) condition += (condition.empty() ? "" : " && ") + c;
  return condition.empty() ? "true" : condition;
}

// Emits the vector reads of `loads` into `loop` (whose loop variable r<var> is the first element
// of the step), then `body` once per element of the step, each copy in its own scope binding
// `var` (r<var> + j) and reading the loads as the vectors' components.
std::vector<KernelWriter::RowCopy> KernelWriter::emit_row_vector_copies(const Expr& body, int var, int loop,
                                                                       const std::vector<Expr>& loads, int width) {
  const std::string r = str_cat("r", var);
  std::vector<std::string> vectors;
  for (const Expr& load : loads) {
    const OperandInfo& op = operands_.at(load->index);
    const size_t bytes = dtype_size(op.dtype) * width;
    const std::string offset = vector_offset(load, r, loop);
    vectors.push_back(fresh());
    // lm_ok: an index check that failed (the kernel reports it) must not read out of bounds.
    line(loop, str_cat("const ", vector_type(bytes), " ", vectors.back(), " = lm_ok ? *reinterpret_cast<const ",
                       vector_type(bytes), "*>(", operand_pointer(load->index), " + (", offset, ")) : ",
                       vector_zero(bytes), ";"));
  }
  std::vector<RowCopy> copies;
  for (int j = 0; j < width; ++j) {
    const int scope = open_scope(loop, {var}, false);
    scopes_[scope]->names.emplace(ir::reduce_var(var), str_cat("(", r, " + ", j, ")"));
    for (size_t k = 0; k < loads.size(); ++k) {
      const DType dtype = operands_.at(loads[k]->index).dtype;
      const std::string element = str_cat("reinterpret_cast<const ", storage_type(dtype), "*>(&", vectors[k], ")[", j, "]");
      scopes_[scope]->names.emplace(loads[k], loaded_value(dtype, element));
    }
    copies.push_back({scope, emit(body, scope)});
  }
  return copies;
}

// A fold the lanes share (a warp, or a block per row), with row vectors: the lanes step by `width`
// elements (lanes * width per step of them all), accumulating the step's elements in order. nullopt
// when the fold's extent is not a
// static multiple of the width or none of its loads qualifies.
std::optional<KernelWriter::VectorFold> KernelWriter::emit_row_vector_fold(const Expr& fold, int scope,
                                                                           const Combine& c, const std::string& acc) {
  const int width = schedule_.row_vector;
  const std::optional<int64_t> extent = ir::as_int_const(fold->args[0]);
  if (width < 2 || !extent || *extent % width != 0) return std::nullopt;
  const std::vector<Expr> loads = row_vector_loads(fold->args[1], fold->index, width);
  if (loads.empty()) return std::nullopt;
  VectorFold vector;
  vector.condition = row_vector_condition(loads, width);
  const int loop = open_scope(scope, {}, false);  // binds nothing: invariants are hoisted out of it
  for (const RowCopy& copy : emit_row_vector_copies(fold->args[1], fold->index, loop, loads, width)) {
    scopes_[loop]->code << scopes_[copy.scope]->code.str()
                        << indented(copy.scope, str_cat("{ const ", c.acc_type, " val = (", c.acc_type, ")", copy.value,
                                                         "; ", replace_all(c.step, "acc", acc), " }"));
  }
  vector.code = scopes_[loop]->code.str();
  return vector;
}

// The row loop with row vectors: `width` elements per lane and step, stored with one vector store
// (the row is contiguous in the output and its static length a multiple of `width`).
std::optional<KernelWriter::VectorFold> KernelWriter::emit_row_vector_loop(const Expr& body, int along, int root,
                                                                           const std::string& length) {
  const int width = schedule_.row_vector;
  if (width < 2) return std::nullopt;
  const std::vector<Expr> loads = row_vector_loads(body, along, width);
  const size_t out_bytes = dtype_size(node_.dtype) * width;
  VectorFold vector;
  vector.condition = str_cat("(((unsigned long long)p.out) & ", out_bytes - 1, "ull) == 0ull");
  if (!loads.empty()) vector.condition += " && " + row_vector_condition(loads, width);
  const int loop = open_scope(root, {}, false);
  const std::vector<RowCopy> copies = emit_row_vector_copies(body, along, loop, loads, width);
  vector.code = store_row_vector(loop, copies, along, length);
  return vector;
}

// Pastes the copies' code into `scope`, then stores their values as one vector at the row's
// element r<along>; returns the scope's code.
std::string KernelWriter::store_row_vector(int scope, const std::vector<RowCopy>& copies, int along,
                                           const std::string& length) {
  const int width = static_cast<int>(copies.size());
  std::ostringstream& code = scopes_[scope]->code;
  for (const RowCopy& copy : copies) code << scopes_[copy.scope]->code.str();
  line(scope, str_cat("alignas(16) ", storage_type(node_.dtype), " lm_o[", width, "];"));
  for (int j = 0; j < width; ++j) line(scope, str_cat("lm_o[", j, "] = ", store_code(copies[j].value), ";"));
  const char* type = vector_type(dtype_size(node_.dtype) * width);
  line(scope, str_cat("*reinterpret_cast<", type, "*>(p.out + (lm_flat * ", length, " + r", along,
                      ")) = *reinterpret_cast<const ", type, "*>(lm_o);"));
  return code.str();
}

// A row that the lanes cover in one step each (its static length is lanes * width): the row's
// vector loads are issued first, then its folds, so that what the outputs read besides the folds
// (a norm's weight) is in flight with the folds' loads instead of being requested after their
// combine, a second trip to memory on the critical path of a small kernel (a decode step's
// residual sum and RMSNorm). The loads and the body are the vector loop's; only their order
// changes (the lanes' shared folds are emitted in the same root scope, so they still see every
// lane). nullopt when the row takes more than one step or nothing is read as vectors.
std::optional<KernelWriter::VectorFold> KernelWriter::emit_single_step_row(const Expr& body, int along,
                                                                           const std::string& length) {
  const int width = schedule_.row_vector;
  const std::optional<int64_t> extent = ir::as_int_const(node_.shape.back());
  if (width < 2 || !extent || *extent != int64_t{lanes_} * width) return std::nullopt;
  const std::vector<Expr> loads = row_vector_loads(body, along, width);
  if (loads.empty()) return std::nullopt;
  const size_t out_bytes = dtype_size(node_.dtype) * width;
  VectorFold single;
  single.condition = str_cat("(((unsigned long long)p.out) & ", out_bytes - 1, "ull) == 0ull && ",
                             row_vector_condition(loads, width));
  const int root = open_scope(-1, {}, false);
  line(root, str_cat("const lm_i64 r", along, " = (lm_i64)lm_lane * ", width, ";"));
  single.code = store_row_vector(root, emit_row_vector_copies(body, along, root, loads, width), along, length);
  return single;
}

// An unrolled elementwise kernel's group of `unroll` consecutive elements with vectors: the body
// once per element, its innermost coordinate the reduce variable `along` (r<along> = the group's
// first element), the qualifying loads read as vectors and the group stored with one vector store.
// Emitted in its own root scope (what does not vary along the group is computed once per group);
// nullopt when a group's outputs exceed 16 bytes.
std::optional<KernelWriter::VectorFold> KernelWriter::emit_elementwise_vector(int unroll) {
  const size_t out_bytes = dtype_size(node_.dtype) * unroll;
  if (unroll < 2 || out_bytes > 16 || node_.shape.empty()) return std::nullopt;
  int along = 0;
  const Expr body = innermost_as_reduce_var(along);
  const std::vector<Expr> loads = row_vector_loads(body, along, unroll);
  VectorFold vector;
  vector.condition = str_cat("(((unsigned long long)p.out) & ", out_bytes - 1, "ull) == 0ull");
  if (!loads.empty()) vector.condition += " && " + row_vector_condition(loads, unroll);
  const int root = open_scope(-1, {}, false);
  scopes_[root]->indent = 6;
  const int loop = open_scope(root, {}, false);
  const std::vector<RowCopy> copies = emit_row_vector_copies(body, along, loop, loads, unroll);
  std::ostringstream code;
  code << "      const lm_i64 r" << along << " = lm_group * " << unroll << ";\n";
  code << "      bool lm_ok = true; (void)lm_ok;\n";
  code << scopes_[root]->code.str() << scopes_[loop]->code.str();
  for (const RowCopy& copy : copies) code << scopes_[copy.scope]->code.str();
  const char* storage = storage_type(node_.dtype);
  code << "      alignas(16) " << storage << " lm_o[" << unroll << "];\n";
  for (int j = 0; j < unroll; ++j) code << "      lm_o[" << j << "] = " << store_code(copies[j].value) << ";\n";
  const char* type = vector_type(out_bytes);
  code << "      *reinterpret_cast<" << type << "*>(p.out + lm_flat * " << unroll << ") = *reinterpret_cast<const "
       << type << "*>(lm_o);\n";
  vector.code = code.str();
  return vector;
}

}  // namespace luminal::codegen::detail
