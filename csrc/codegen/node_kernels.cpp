// Kernels of single IR nodes: elementwise (a thread or a warp per element), pieces of a
// concatenation, reductions (a thread or a warp per output) and scatters.
#include <functional>

#include "codegen/kernel_writer.h"
#include "common/checked.h"
#include "ir/simplify.h"

namespace luminal::codegen::detail {

Kernel KernelWriter::write() {
  Kernel kernel;
  kernel.outputs = ir::product(unrolled_shape());
  if (schedule::is_row_mapping(schedule_.mapping)) kernel.outputs = ir::simplify(ir::product(row_shape()), {});
  std::vector<passes::PointwisePiece> pieces;
  if (schedule_.mapping == Mapping::Pieces) {
    pieces = passes::split_pointwise(node_);
    Expr largest = ir::int_const(0);
    for (const passes::PointwisePiece& piece : pieces) largest = ir::max(largest, ir::product(piece_shape(piece)));
    kernel.outputs = ir::simplify(largest, {});
  }

  add_node_params();

  std::string body;
  switch (schedule_.mapping) {
    case Mapping::Elementwise: body = elementwise_body(); break;
    case Mapping::Pieces: body = pieces_body(pieces); break;
    case Mapping::WarpPerOutput: body = node_.kind == NodeKind::Reduce ? reduce_body() : elementwise_body(); break;
    case Mapping::ThreadPerOutput: body = reduce_body(); break;
    case Mapping::WarpPerRow:
    case Mapping::BlockPerRow: body = row_body(); break;
    case Mapping::Scatter:
    case Mapping::GroupedRows:
    case Mapping::ThreadPerRow:
    case Mapping::Attention:
      fail("internal error: KernelWriter::write with schedule ", to_string(schedule_));
  }
  finish_node_kernel(kernel, params_declaration() + body);
  return kernel;
}

std::string KernelWriter::launch_bounds() const { return str_cat("__launch_bounds__(", schedule_.block_size, ")"); }

// A scatter (ir::NodeKind::Scatter): one thread per element of the domain computes its target
// and value and writes it (an assignment's winner among duplicate targets is unspecified, as in
// eager), or adds it atomically, rounded once per add. The base was copied into the output
// before (or the output is the base's own memory). A failed bounds check writes nothing.
Kernel KernelWriter::write_scatter() {
  Kernel kernel;
  kernel.outputs = ir::simplify(ir::product(node_.scatter_domain), {});
  add_node_params();
  const int root = open_scope(-1, {}, false);
  set_index_ranges(node_.scatter_domain);
  std::vector<std::string> coordinates;
  for (const Expr& target : node_.scatter_targets) coordinates.push_back(emit(target, root));
  const std::string value = emit(node_.body, root);
  std::ostringstream out;
  out << kernel_opening();
  out << "  const lm_i64 lm_n = " << shape_code(kernel.outputs) << ";\n";
  out << "  for (lm_i64 lm_flat = (lm_i64)lm_block * blockDim.x + threadIdx.x; lm_flat < lm_n;"
      << " lm_flat += (lm_i64)lm_grid * blockDim.x) {\n";
  out << "    bool lm_ok = true; (void)lm_ok;\n";
  out << unravel("lm_flat", 4, node_.scatter_domain);
  out << scopes_[root]->code.str();
  std::string offset = "0LL";
  Expr stride = ir::int_const(1);
  for (size_t d = node_.rank(); d-- > 0;) {
    offset = str_cat("(", offset, " + ", coordinates[d], " * ", shape_code(ir::simplify(stride, {})), ")");
    stride = ir::mul(stride, node_.shape[d]);
  }
  out << "    if (!lm_ok) continue;\n";
  out << "    " << storage_type(node_.dtype) << "* const lm_target = p.out + " << offset << ";\n";
  out << "    " << (node_.scatter_accumulate ? accumulate_code("lm_target", value) : str_cat("*lm_target = ", store_code(value), ";")) << "\n";
  out << "  }\n}\n";
  finish_node_kernel(kernel, params_declaration() + out.str());
  return kernel;
}

// An atomic `*target = round(*target + value)` in the node's dtype (prelude helpers).
std::string KernelWriter::accumulate_code(const std::string& target, const std::string& value) const {
  switch (node_.dtype) {
    case DType::F32: return str_cat("atomicAdd(", target, ", ", value, ");");
    case DType::F64: return str_cat("atomicAdd(", target, ", ", value, ");");
    case DType::F16: return str_cat("lm_atomic_add_h(", target, ", ", value, ");");
    case DType::BF16: return str_cat("lm_atomic_add_bf(", target, ", ", value, ");");
    case DType::I64: return str_cat("atomicAdd((lm_u64*)", target, ", (lm_u64)", value, ");");
    case DType::I32: return str_cat("atomicAdd((unsigned int*)", target, ", (unsigned int)", value, ");");
    case DType::I16: return str_cat("lm_atomic_add_narrow(", target, ", (unsigned int)", value, ", 16u);");
    case DType::I8:
    case DType::U8: return str_cat("lm_atomic_add_narrow(", target, ", (unsigned int)", value, ", 8u);");
    case DType::Bool: return str_cat("if (", value, " != 0) *", target, " = 1;");
  }
  fail("internal error: scatter accumulation of ", dtype_name(node_.dtype));
}

// The shape whose elements the threads of an elementwise kernel iterate: the node's, with the
// innermost dimension divided by the schedule's unroll (each thread then computes that many
// consecutive elements).
ir::Shape KernelWriter::unrolled_shape() const {
  ir::Shape shape = node_.shape;
  if (schedule_.unroll > 1) shape.back() = ir::int_const(ir::as_int_const(shape.back()).value() / schedule_.unroll);
  return shape;
}

std::string KernelWriter::elementwise_body() {
  const int root = open_scope(-1, {}, false);
  set_index_ranges(node_.shape);
  const std::string result = emit(node_.body, root);
  const ir::Shape groups = unrolled_shape();
  const int unroll = schedule_.unroll;
  std::ostringstream out;
  out << kernel_opening();
  out << "  const lm_i64 lm_n = " << shape_code(ir::simplify(ir::product(groups), {})) << ";\n";
  if (warp_mode_) {
    // A warp per element: every lane runs the element's code, lanes split its top-level folds.
    out << "  const int lm_lane = threadIdx.x & 31;\n";
    out << "  for (lm_i64 lm_flat = ((lm_i64)lm_block * blockDim.x + threadIdx.x) >> 5; lm_flat < lm_n;"
        << " lm_flat += ((lm_i64)lm_grid * blockDim.x) >> 5) {\n";
  } else {
    out << "  for (lm_i64 lm_flat = (lm_i64)lm_block * blockDim.x + threadIdx.x; lm_flat < lm_n;"
        << " lm_flat += (lm_i64)lm_grid * blockDim.x) {\n";
  }
  if (unroll == 1) {
    out << "    bool lm_ok = true; (void)lm_ok;\n";
    out << unravel("lm_flat", 4);
    out << scopes_[root]->code.str();
    out << "    " << (warp_mode_ ? "if (lm_lane == 0) " : "") << "p.out[lm_flat] = " << store_code(result) << ";\n";
    out << "  }\n}\n";
    return out.str();
  }
  // `unroll` consecutive elements: the group's coordinates once, then the innermost one per element.
  const size_t last = node_.shape.size() - 1;
  std::string coordinates = unravel("lm_flat", 4, groups);
  const std::string inner = str_cat("const lm_i64 i", last, " = ");
  const size_t at = coordinates.find(inner);
  LUMINAL_CHECK(at != std::string::npos, "internal error: no innermost coordinate in the unrolled kernel of ", node_.origin);
  coordinates.replace(at, inner.size(), "const lm_i64 lm_group = ");
  out << coordinates;
  // The group with vector loads and one vector store where the pointers are aligned at run time.
  const std::optional<VectorFold> vector = emit_elementwise_vector(unroll);
  if (vector) {
    out << "    if (" << vector->condition << ") {\n" << vector->code << "    } else {\n";
  }
  out << "#pragma unroll\n";
  out << "    for (int lm_u = 0; lm_u < " << unroll << "; ++lm_u) {\n";
  out << "    const lm_i64 i" << last << " = lm_group * " << unroll << " + lm_u;\n";
  out << "    bool lm_ok = true; (void)lm_ok;\n";
  out << scopes_[root]->code.str();
  out << "    p.out[lm_flat * " << unroll << " + lm_u] = " << store_code(result) << ";\n";
  out << "    }\n";
  if (vector) out << "    }\n";
  out << "  }\n}\n";
  return out.str();
}

// The node's body with its innermost loop variable replaced by a fresh reduce variable (`along`),
// whose range, the innermost extent, joins the index ranges (set_index_ranges first): the loop
// along the row of a warp per row, the group of an unrolled elementwise kernel.
Expr KernelWriter::innermost_as_reduce_var(int& along) {
  const size_t last = node_.rank() - 1;
  along = std::max(ir::max_reduce_var(node_.body) + 1, 0);
  const Expr element_var = ir::reduce_var(along);
  if (ranges_->reduce_extents.size() <= static_cast<size_t>(along)) ranges_->reduce_extents.resize(along + 1);
  ranges_->reduce_extents[along] = node_.shape[last];
  return ir::transform(node_.body, [&](const Expr& e, const std::vector<Expr>&) -> Expr {
    return e->op == ExprOp::LoopVar && e->index == static_cast<int>(last) ? element_var : nullptr;
  });
}

ir::Shape KernelWriter::row_shape() const { return ir::Shape(node_.shape.begin(), node_.shape.end() - 1); }

// A warp (or a block) per row: the innermost loop variable becomes a fresh reduce variable bound by
// the loop over the row, so that everything that does not vary along the row (its folds above all)
// is placed before that loop, once per row, where warp mode shares each fold among the lanes (every
// lane ends with the combined value). The lanes then stride along the row. A block's threads are
// its lanes; its rows are whole blocks' (the folds' barriers are reached by every thread).
std::string KernelWriter::row_body() {
  LUMINAL_CHECK(node_.rank() > 0, "internal error: a warp per row of the rank-0 node ", node_.origin);
  const size_t last = node_.rank() - 1;
  const int root = open_scope(-1, {}, false);
  set_index_ranges(node_.shape);
  int along = 0;
  const Expr body = innermost_as_reduce_var(along);
  const int element = open_scope(root, {along}, false);
  scopes_[element]->names.emplace(ir::reduce_var(along), str_cat("r", along));
  const std::string result = emit(body, element);
  const std::string length = shape_code(node_.shape[last]);
  const std::optional<VectorFold> vector = emit_row_vector_loop(body, along, root, length);
  const std::optional<VectorFold> single = emit_single_step_row(body, along, length);
  std::ostringstream out;
  out << kernel_opening();
  out << "  const lm_i64 lm_n = " << shape_code(ir::simplify(ir::product(row_shape()), {})) << ";\n";
  if (lanes_ == 32) {
    out << "  const int lm_lane = threadIdx.x & 31;\n";
    out << "  for (lm_i64 lm_flat = ((lm_i64)lm_block * blockDim.x + threadIdx.x) >> 5; lm_flat < lm_n;"
        << " lm_flat += ((lm_i64)lm_grid * blockDim.x) >> 5) {\n";
  } else {
    out << "  const int lm_lane = threadIdx.x;\n";
    out << "  for (lm_i64 lm_flat = lm_block; lm_flat < lm_n; lm_flat += lm_grid) {\n";
  }
  out << "    bool lm_ok = true; (void)lm_ok;\n";
  out << unravel("lm_flat", 4, row_shape());
  if (single) out << "    if (" << single->condition << ") {\n" << single->code << "    } else {\n";
  out << scopes_[root]->code.str();
  const std::string r = str_cat("r", along);
  if (vector) {
    const int width = schedule_.row_vector;
    out << "    if (" << vector->condition << ") {\n";
    out << "#pragma unroll 4\n";
    out << "    for (lm_i64 " << r << " = lm_lane * " << width << "; " << r << " < " << length << "; " << r
        << " += " << lanes_ * width << ") {\n";
    out << vector->code;
    out << "    }\n    } else {\n";
  }
  out << "#pragma unroll 4\n";
  out << "    for (lm_i64 " << r << " = lm_lane; " << r << " < " << length << "; " << r << " += " << lanes_ << ") {\n";
  out << scopes_[element]->code.str();
  out << "      p.out[lm_flat * " << length << " + " << r << "] = " << store_code(result) << ";\n";
  out << "    }\n";
  if (vector) out << "    }\n";
  if (single) out << "    }\n";
  out << "  }\n}\n";
  return out.str();
}

ir::Shape KernelWriter::piece_shape_of(const Node& node, const passes::PointwisePiece& piece) {
  ir::Shape shape = node.shape;
  if (piece.axis >= 0) shape[piece.axis] = piece.extent;
  return shape;
}

// One case per piece, selected by blockIdx.y; each piece iterates its own box of the output.
std::string KernelWriter::pieces_body(const std::vector<passes::PointwisePiece>& pieces) {
  std::ostringstream out;
  out << kernel_opening();
  out << "  switch (blockIdx.y) {\n";
  // Contiguous output strides.
  std::vector<std::string> strides(node_.rank());
  {
    Expr stride = ir::int_const(1);
    for (size_t d = node_.rank(); d-- > 0;) {
      strides[d] = shape_code(ir::simplify(stride, {}));
      stride = ir::mul(stride, node_.shape[d]);
    }
  }
  for (size_t k = 0; k < pieces.size(); ++k) {
    const passes::PointwisePiece& piece = pieces[k];
    const ir::Shape box = piece_shape(piece);
    const int root = open_scope(-1, {}, false);
    scopes_[root]->indent = 6;
    set_index_ranges(box);
    const std::string result = emit(piece.body, root);
    std::string offset;
    for (size_t d = 0; d < node_.rank(); ++d) {
      std::string index = str_cat("i", d);
      if (static_cast<int>(d) == piece.axis && !piece.begin->is_int_const(0)) {
        index = str_cat("(i", d, " + ", shape_code(piece.begin), ")");
      }
      const std::string term = strides[d] == "1LL" ? index : str_cat(index, " * ", strides[d]);
      offset = offset.empty() ? term : str_cat(offset, " + ", term);
    }
    if (offset.empty()) offset = "0";
    out << "    case " << k << ": {\n";
    out << "    const lm_i64 lm_n = " << shape_code(ir::simplify(ir::product(box), {})) << ";\n";
    out << "    for (lm_i64 lm_flat = (lm_i64)lm_block * blockDim.x + threadIdx.x; lm_flat < lm_n;"
        << " lm_flat += (lm_i64)lm_grid * blockDim.x) {\n";
    out << "      bool lm_ok = true; (void)lm_ok;\n";
    out << unravel("lm_flat", 6, box);
    out << scopes_[root]->code.str();
    out << "      p.out[" << offset << "] = " << store_code(result) << ";\n";
    out << "    }\n";
    out << "    } break;\n";
  }
  out << "  }\n}\n";
  return out.str();
}

KernelWriter::Combine KernelWriter::combine_code(ir::ReduceOp op, DType t) {
  const bool floating = is_floating(t);
  const std::string acc = floating ? (t == DType::F64 ? "double" : "float") : "lm_i64";
  const std::string sfx = t == DType::F64 ? "d" : "f";
  switch (op) {
    case ir::ReduceOp::Sum: return {acc, "0", "acc = acc + val;"};
    case ir::ReduceOp::Prod: return {acc, "1", "acc = acc * val;"};
    case ir::ReduceOp::Max:
      if (floating) return {acc, "-__int_as_float(0x7f800000)", "acc = lm_max_" + sfx + "(acc, val);"};
      return {acc, "(-9223372036854775807LL - 1)", "acc = acc > val ? acc : val;"};
    case ir::ReduceOp::Min:
      if (floating) return {acc, "__int_as_float(0x7f800000)", "acc = lm_min_" + sfx + "(acc, val);"};
      return {acc, "9223372036854775807LL", "acc = acc < val ? acc : val;"};
    case ir::ReduceOp::Any: return {acc, "0", "acc = (acc != 0 || val != 0);"};
    case ir::ReduceOp::All: return {acc, "1", "acc = (acc != 0 && val != 0);"};
  }
  return {acc, "0", ""};
}

std::string KernelWriter::warp_combine(const Combine& c) const {
  // The same step, with `val` taken from another lane.
  return str_cat("for (int lm_o = 16; lm_o > 0; lm_o >>= 1) { const ", c.acc_type,
                 " val = __shfl_xor_sync(0xffffffffu, acc, lm_o); ", c.step, " }");
}

// A node kernel is a device function of its block (`lm_block` of `lm_grid`; blockIdx.y selects a
// piece) and an entry point that calls it with the launch's own: a grouped launch
// (render_kernel_group) calls several such functions, each with its share of the blocks.
std::string KernelWriter::kernel_opening() const {
  std::string prefetches;
  for (size_t slot = 0; slot < operands_.size(); ++slot) {
    if (const std::optional<std::string> bytes = prefetch_bytes(static_cast<int>(slot))) {
      prefetches += str_cat("  lm_prefetch_l2(", operand_pointer(static_cast<int>(slot)), ", ", *bytes, ", ",
                            kPrefetchBytes, "LL, lm_block, lm_grid);\n");
    }
  }
  return str_cat("__device__ __forceinline__ void LM_KERNEL_run(const LM_KERNEL_params& p, const unsigned int lm_block, "
                 "const unsigned int lm_grid) {\n",
                 prefetches, "  lm_kernel_entry();\n");
}

// The bytes from input `slot`'s pointer to its last element, as C, where its shape is static and
// (when its strides are constant) it holds at most kPrefetchBytes; nullopt otherwise. Strided
// inputs are measured at run time, and lm_prefetch_l2 leaves those past kPrefetchBytes alone.
std::optional<std::string> KernelWriter::prefetch_bytes(int slot) const {
  const OperandInfo& op = operands_.at(static_cast<size_t>(slot));
  if (op.layout == Layout::Row) return std::nullopt;
  std::vector<int64_t> sizes;
  for (const Expr& dim : op.shape) {
    const std::optional<int64_t> size = ir::as_int_const(dim);
    if (!size || *size <= 0) return std::nullopt;  // symbolic or empty
    sizes.push_back(*size);
  }
  const int64_t element = static_cast<int64_t>(dtype_size(op.dtype));
  if (op.layout == Layout::Strided) {
    // 1 + sum((size - 1) * stride) elements: within the tensor whatever the strides' signs.
    const std::vector<std::string> strides = operand_strides(slot);
    std::string span = "1LL";
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] > 1) span = str_cat(span, " + ", sizes[d] - 1, "LL * ", strides[d]);
    }
    return str_cat("(", span, ") * ", element, "LL");
  }
  // Contiguous: the product of the sizes. A constant's strides were checked when it was read
  // (non-negative, its reach within int64: strided_storage_elements, as here).
  int64_t span = 1;
  if (op.layout == Layout::Fixed) {
    span = strided_storage_elements(sizes, op.fixed_strides, 0, "a constant's layout");
  } else {
    for (const int64_t size : sizes) {
      if (__builtin_mul_overflow(span, size, &span) || span > kPrefetchBytes / element) return std::nullopt;
    }
  }
  if (span > kPrefetchBytes / element) return std::nullopt;
  return str_cat(span * element, "LL");
}

std::string KernelWriter::entry_point() const {
  return str_cat("extern \"C\" __global__ void ", launch_bounds(),
                 " LM_KERNEL(const LM_KERNEL_params p) { LM_KERNEL_run(p, blockIdx.x, gridDim.x); }\n");
}

void KernelWriter::finish_node_kernel(Kernel& kernel, const std::string& text) const {
  name_and_finish(kernel, text + entry_point());
  // A piece's blocks are told apart by blockIdx.y, which a grouped launch (one-dimensional) lacks.
  if (kernel.grid_y == 1) kernel.group_entry = kernel.name + "_run";
}

std::string KernelWriter::lanes_combine(const Combine& c) {
  if (lanes_ == 32) return warp_combine(c);
  // Warp w's total goes to slot w; after the barrier every thread adds the slots in order (the same
  // order everywhere: the block agrees on the value). The second barrier keeps the slots until
  // every thread has read them (the next row's fold writes them again).
  const std::string slots = fresh();
  return str_cat(warp_combine(c), " { __shared__ ", c.acc_type, " ", slots, "[", lanes_ / 32,
                 "]; if ((threadIdx.x & 31) == 0) ", slots, "[threadIdx.x >> 5] = acc; __syncthreads(); acc = ",
                 slots, "[0]; for (int lm_w = 1; lm_w < ", lanes_ / 32, "; ++lm_w) { const ", c.acc_type, " val = ",
                 slots, "[lm_w]; ", c.step, " } __syncthreads(); }");
}

std::string KernelWriter::reduce_body() {
  // The accumulator has the body's dtype: a convolution's body (f32) is wider than its f16/bf16
  // node, and the sum is rounded once, by store_code (ir::Convolution).
  const Combine c = combine_code(node_.reduce_op, node_.body->dtype);
  const bool ragged = !ir::is_shape_expr(node_.reduce_extents[0]);
  set_index_ranges(node_.shape);
  const int outer = open_scope(-1, {}, false);
  std::vector<int> node_vars;
  for (size_t d = 0; d < node_.reduce_extents.size(); ++d) node_vars.push_back(static_cast<int>(d));
  const int inner = open_scope(outer, node_vars, false);
  for (int v : node_vars) scopes_[inner]->names.emplace(ir::reduce_var(v), str_cat("r", v));
  // Extents: static ones are products of shape expressions; a ragged one is evaluated per output.
  std::string extent_code;
  std::vector<std::string> static_extents;
  if (ragged) {
    extent_code = emit(node_.reduce_extents[0], outer);
  } else {
    for (const Expr& extent : node_.reduce_extents) static_extents.push_back(shape_code(extent));
    extent_code = shape_code(ir::simplify(ir::product(node_.reduce_extents), {}));
  }
  // Reduction variables from the flat reduction index lm_r (< the static total extent: in 32 bits
  // where that is below 2^31, widened to lm_i64 as the output's coordinates are, see unravel).
  std::ostringstream rvars;
  {
    const std::string pad(scopes_[inner]->indent, ' ');
    const bool narrow = !ragged && small_static_count(node_.reduce_extents).has_value();
    if (ragged) {
      rvars << pad << "const lm_i64 r0 = lm_r;\n";
    } else {
      rvars << pad << (narrow ? "unsigned int lm_rr = (unsigned int)lm_r;\n" : "lm_i64 lm_rr = lm_r;\n");
      for (size_t d = static_extents.size(); d-- > 0;) {
        if (d == 0) {
          rvars << pad << "const lm_i64 r0 = " << (narrow ? "(lm_i64)lm_rr" : "lm_rr") << ";\n";
        } else if (narrow) {
          const int64_t extent = ir::as_int_const(node_.reduce_extents[d]).value();
          rvars << pad << "const lm_i64 r" << d << " = (lm_i64)(lm_rr % " << extent << "u); lm_rr /= " << extent << "u;\n";
        } else {
          rvars << pad << "const lm_i64 r" << d << " = lm_rr % " << static_extents[d] << "; lm_rr /= "
                << static_extents[d] << ";\n";
        }
      }
      rvars << pad << "(void)lm_rr;\n";
    }
  }
  const std::string value = emit(node_.body, inner);
  const std::string cast_value = str_cat("(", c.acc_type, ")", value);

  std::ostringstream out;
  const bool warp = warp_mode_;
  out << kernel_opening();
  out << "  const lm_i64 lm_n = " << shape_code(ir::simplify(ir::product(node_.shape), {})) << ";\n";
  if (warp) {
    out << "  const int lm_lane = threadIdx.x & 31;\n";
    out << "  const lm_i64 lm_first = ((lm_i64)lm_block * blockDim.x + threadIdx.x) >> 5;\n";
    out << "  const lm_i64 lm_step = ((lm_i64)lm_grid * blockDim.x) >> 5;\n";
  } else {
    out << "  const lm_i64 lm_first = (lm_i64)lm_block * blockDim.x + threadIdx.x;\n";
    out << "  const lm_i64 lm_step = (lm_i64)lm_grid * blockDim.x;\n";
  }
  out << "  for (lm_i64 lm_flat = lm_first; lm_flat < lm_n; lm_flat += lm_step) {\n";
  out << "    bool lm_ok = true; (void)lm_ok;\n";
  out << unravel("lm_flat", 4);
  out << scopes_[outer]->code.str();
  out << "    const lm_i64 lm_extent = " << extent_code << ";\n";
  out << "    " << c.acc_type << " acc = " << c.init << ";\n";
  out << "    for (lm_i64 lm_r = " << (warp ? "lm_lane" : "0") << "; lm_r < lm_extent; lm_r += " << (warp ? "32" : "1")
      << ") {\n";
  out << rvars.str();
  out << scopes_[inner]->code.str();
  out << "      const " << c.acc_type << " val = " << cast_value << ";\n";
  out << "      " << c.step << "\n";
  out << "    }\n";
  if (warp) {
    out << "    " << warp_combine(c) << "\n";
    out << "    if (lm_lane == 0) p.out[lm_flat] = " << store_code(str_cat("(", value_type(node_.dtype), ")acc")) << ";\n";
  } else {
    out << "    p.out[lm_flat] = " << store_code(str_cat("(", value_type(node_.dtype), ")acc")) << ";\n";
  }
  out << "  }\n}\n";
  return out.str();
}

}  // namespace luminal::codegen::detail
