// The grouped-rows GEMM kernel: the template text (grouped_rows.cuh, embedded at build time)
// with its shapes, strides and element types filled in.
#include "codegen/kernel_writer.h"
#include "ir/simplify.h"

namespace luminal::embedded {
// grouped_rows.cuh, embedded at build time (cmake/embed_text.cmake).
extern const char kGroupedRowsTemplate[];
}  // namespace luminal::embedded

namespace luminal::codegen::detail {

// A grouped-rows contraction (ir::Contraction::GroupedRows) as a tiled grouped GEMM: 64x64
// output tiles of one group each, K in steps of 32 staged through shared memory, four warps of
// 32x32. bf16/f16 multiply on tensor cores (mma.sync, sm_80+); f32, and older GPUs, with FMAs.
// Operands are read through the same load code as any kernel (any layout, run-time strides).
Kernel KernelWriter::write_grouped_rows() {
  const DType in = operands_.at(0).dtype;
  const Expr rows = node_.shape[0], cols = node_.shape[1];
  const Expr inner = operands_.at(0).shape[1], groups = operands_.at(1).shape[0];
  const bool transposed = node_.contraction == ir::Contraction::GroupedRowsTransposedB;  // b is [G, N, K]
  Kernel kernel;
  kernel.block_size = kGroupedThreads;
  kernel.threads_per_output = kGroupedThreads;
  // Tiles: per column tile, at most ceil(M / 64) + G row tiles (one partial tile per group) plus
  // the tail of rows past the last end (written as zeros).
  const Expr tile = ir::int_const(kGroupedTile);
  const auto tiles_of = [&](const Expr& n) { return ir::floordiv(ir::add(n, ir::int_const(kGroupedTile - 1)), tile); };
  kernel.outputs = ir::simplify(ir::mul(ir::add(ir::add(tiles_of(rows), groups), ir::int_const(1)), tiles_of(cols)), {});

  add_node_params();
  const Expr i0 = ir::loop_var(0), i1 = ir::loop_var(1), i2 = ir::loop_var(2);
  std::ostringstream text;
  text << params_declaration();
  text << element_function("LM_KERNEL_a", "float", ir::cast(ir::load(0, in, {i0, i1}), DType::F32), 2);
  // LM_KERNEL_b(p, g, k, n)
  const std::vector<Expr> b_index = transposed ? std::vector<Expr>{i0, i2, i1} : std::vector<Expr>{i0, i1, i2};
  text << element_function("LM_KERNEL_b", "float", ir::cast(ir::load(1, in, b_index), DType::F32), 3);
  text << element_function("LM_KERNEL_end", "lm_i64", ir::cast(ir::load(2, DType::I32, {i0}), DType::I64), 1);
  const bool half = in == DType::BF16 || in == DType::F16;
  text << "__device__ __forceinline__ " << storage_type(node_.dtype) << " LM_KERNEL_store(float v) { return "
       << store_code("v") << "; }\n";
  std::string body = str_cat("\n", embedded::kGroupedRowsTemplate);
  body = replace_all(body, "@M@", shape_code(rows));
  body = replace_all(body, "@N@", shape_code(cols));
  body = replace_all(body, "@K@", shape_code(inner));
  body = replace_all(body, "@G@", shape_code(groups));
  const std::vector<std::string> a_strides = operand_strides(0), b_strides = operand_strides(1);
  body = replace_all(body, "@A_ROW_STRIDE@", str_cat("(", a_strides.at(0), ")"));
  body = replace_all(body, "@A_K_STRIDE@", str_cat("(", a_strides.at(1), ")"));
  body = replace_all(body, "@B_GROUP_STRIDE@", str_cat("(", b_strides.at(0), ")"));
  body = replace_all(body, "@B_K_STRIDE@", str_cat("(", b_strides.at(transposed ? 2 : 1), ")"));
  body = replace_all(body, "@B_COL_STRIDE@", str_cat("(", b_strides.at(transposed ? 1 : 2), ")"));
  body = replace_all(body, "@SMEM_T@", half ? "unsigned short" : "float");
  body = replace_all(body, "@TO_SMEM@", in == DType::BF16 ? "lm_f2bf" : in == DType::F16 ? "lm_f2h" : "");
  body = replace_all(body, "@FROM_SMEM@", in == DType::BF16 ? "lm_bf2f" : in == DType::F16 ? "lm_h2f" : "");
  body = replace_all(body, "@USE_MMA@", half ? "1" : "0");
  body = replace_all(body, "@MMA_TYPE@", in == DType::F16 ? "f16" : "bf16");
  text << body;
  name_and_finish(kernel, text.str());
  return kernel;
}

}  // namespace luminal::codegen::detail
