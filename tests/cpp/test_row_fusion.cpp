// Row fusion for the CUDA engine's node kernels (passes::fuse_row_broadcasts, rendered as
// schedule::Mapping::WarpPerRow), the canonical numbering of fold variables it relies on for
// sharing a fold, reshape views of row-major nodes (passes::as_affine_view) and the bias of a
// matmul read through a view (passes::fuse_matmul_epilogues).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <unordered_set>
#include <vector>

#include "graph_helpers.h"
#include "ir/simplify.h"
#include "kernel_helpers.h"
#include "codegen/cuda_codegen.h"
#include "schedule/kernel_schedule.h"
#include "schedule/plan.h"
#if LUMINAL_HAVE_CUDA
#include "runtime/cuda/executor.h"
#include "runtime/cuda/program.h"
#endif

namespace luminal {
namespace {

using ir::Expr;
using ir::ExprOp;
using ir::int_const;
using ir::NodeId;
using testing::GraphFixture;
using testing::Host;

// Sum over dimension 1 of x [rows, cols], kept as [rows, 1], times `scale`.
NodeId row_mean(GraphFixture& f, NodeId x, double scale, DType dtype = DType::F32) {
  const NodeId sum = f.b().reduce_dims(x, {1}, true, ir::ReduceOp::Sum, dtype);
  return f.b().elementwise({frontend::Operand::of(sum), frontend::Operand::number(scale, dtype)}, dtype, dtype,
                           [](const std::vector<Expr>& v) { return ir::mul(v[0], v[1]); });
}

NodeId binary(GraphFixture& f, NodeId a, NodeId b, ExprOp op, DType dtype = DType::F32) {
  return f.b().elementwise({frontend::Operand::of(a), frontend::Operand::of(b)}, dtype, dtype,
                           [op](const std::vector<Expr>& v) { return ir::binary(op, v[0], v[1]); });
}

// LayerNorm without affine parameters over the rows of (a + b), as the frontend decomposes it:
// the sum in f32 (f64 for f64), mean, variance of the centred values, normalized output stored in
// the inputs' dtype.
NodeId layer_norm_of_sum(GraphFixture& f, int64_t rows, int64_t cols, DType dtype = DType::F32) {
  const DType compute = dtype == DType::F64 ? DType::F64 : DType::F32;
  const NodeId a = f.input(dtype, {int_const(rows), int_const(cols)});
  const NodeId b = f.input(dtype, {int_const(rows), int_const(cols)});
  const NodeId x = f.b().elementwise({frontend::Operand::of(a), frontend::Operand::of(b)}, compute, compute,
                                     [](const std::vector<Expr>& v) { return ir::add(v[0], v[1]); });
  const NodeId mean = row_mean(f, x, 1.0 / static_cast<double>(cols), compute);
  const NodeId centred = binary(f, x, mean, ExprOp::Sub, compute);
  const NodeId variance =
      row_mean(f, binary(f, centred, centred, ExprOp::Mul, compute), 1.0 / static_cast<double>(cols), compute);
  const NodeId rstd = f.b().elementwise({frontend::Operand::of(variance)}, compute, compute,
                                        [compute](const std::vector<Expr>& v) {
                                          return ir::unary(ExprOp::Rsqrt, ir::add(v[0], ir::float_const(1e-5, compute)));
                                        });
  return f.b().elementwise({frontend::Operand::of(centred), frontend::Operand::of(rstd)}, compute, dtype,
                           [](const std::vector<Expr>& v) { return ir::mul(v[0], v[1]); });
}

std::vector<Host> random_inputs(const ir::Graph& graph, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  std::vector<Host> inputs;
  for (NodeId id : graph.inputs) {
    const ir::Node& node = graph.node(id);
    std::vector<int64_t> sizes;
    int64_t n = 1;
    for (const Expr& dim : node.shape) {
      sizes.push_back(ir::as_int_const(dim).value());
      n *= sizes.back();
    }
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = normal(rng);
    inputs.push_back(Host::of(DType::F32, sizes, values));
  }
  return inputs;
}

// The graph's outputs on the CPU reference executor.
std::vector<Host> run(const ir::Graph& graph, std::vector<Host> inputs) {
  return testing::run_on_cpu(std::make_shared<const ir::Graph>(graph), std::move(inputs));
}

size_t compute_nodes(const ir::Graph& graph) {
  size_t n = 0;
  for (const ir::Node& node : graph.nodes()) n += node.is_compute() ? 1 : 0;
  return n;
}

TEST(RowFusion, LayerNormOfASumBecomesOneRowNodeWithTheSameValues) {
  GraphFixture f;
  f.output(layer_norm_of_sum(f, 7, 45));
  const ir::Graph optimized = passes::optimize(f.graph());
  ASSERT_GT(compute_nodes(optimized), 1u);
  const ir::Graph fused = passes::fuse_row_broadcasts(optimized);
  ASSERT_EQ(compute_nodes(fused), 1u) << fused.to_string();
  const ir::Node& row = fused.node(fused.outputs[0].node);
  EXPECT_TRUE(schedule::has_row_invariant_fold(row));
  EXPECT_EQ(schedule::choose_schedule(row, schedule::kernel_operands(fused, row)).mapping, schedule::Mapping::WarpPerRow);
  // The mean appears twice (directly and inside the variance) as one structurally equal fold.
  std::unordered_set<Expr, ir::ExprHash, ir::ExprEqual> folds;
  ir::visit(row.body, [&](const Expr& e) {
    if (e->op == ExprOp::Fold) folds.insert(e);
  });
  EXPECT_EQ(folds.size(), 2u) << ir::to_string(row.body);

  const std::vector<Host> inputs = random_inputs(fused, 3);
  const std::vector<Host> expected = run(optimized, inputs), got = run(fused, inputs);
  ASSERT_EQ(got[0].bytes.size(), expected[0].bytes.size());
  EXPECT_EQ(got[0].bytes, expected[0].bytes);  // the same expressions: bit-identical
  const float* y = got[0].data<float>();
  for (int64_t r = 0; r < 7; ++r) {  // a normalized row: mean 0, variance 1
    double sum = 0, squares = 0;
    for (int64_t c = 0; c < 45; ++c) sum += y[r * 45 + c], squares += y[r * 45 + c] * y[r * 45 + c];
    EXPECT_NEAR(sum / 45, 0.0, 1e-4);
    EXPECT_NEAR(squares / 45, 1.0, 1e-3);
  }
}

// RMSNorm of a residual sum that a later residual sum also reads (a decoder layer): the fused row
// recomputes the small sum from its inputs instead of waiting for it, and the sum stays a node of
// its own for the other reader. The outputs are bit-identical.
NodeId rms_norm_of(GraphFixture& f, NodeId x, int64_t cols) {
  const NodeId square = binary(f, x, x, ExprOp::Mul);
  const NodeId mean = row_mean(f, square, 1.0 / static_cast<double>(cols));
  const auto rsqrt = [](const std::vector<Expr>& v) {
    return ir::unary(ExprOp::Rsqrt, ir::add(v[0], ir::float_const(1e-6, DType::F32)));
  };
  const NodeId rstd = f.b().elementwise({frontend::Operand::of(mean)}, DType::F32, DType::F32, rsqrt);
  return binary(f, x, rstd, ExprOp::Mul);
}

void check_residual_norm(int64_t rows, int64_t cols, bool recomputed) {
  GraphFixture f;
  const NodeId a = f.input(DType::F32, {int_const(rows), int_const(cols)});
  const NodeId b = f.input(DType::F32, {int_const(rows), int_const(cols)});
  const NodeId c = f.input(DType::F32, {int_const(rows), int_const(cols)});
  const NodeId sum = binary(f, a, b, ExprOp::Add);
  f.output(rms_norm_of(f, sum, cols));
  f.output(binary(f, sum, c, ExprOp::Add));  // the next residual sum reads it too
  const ir::Graph optimized = passes::optimize(f.graph());
  const ir::Graph fused = passes::fuse_row_broadcasts(optimized);
  const ir::Node& row = fused.node(fused.outputs[0].node);
  ASSERT_TRUE(ir::contains_op(row.body, ExprOp::Fold)) << fused.to_string();
  const ir::Node& next = fused.node(fused.outputs[1].node);
  // The sum node the next residual sum reads: kept in both cases.
  NodeId kept = -1;
  for (const NodeId input : next.inputs) kept = fused.node(input).kind == ir::NodeKind::Pointwise ? input : kept;
  ASSERT_GE(kept, 0) << fused.to_string();
  const bool row_reads_sum = std::find(row.inputs.begin(), row.inputs.end(), kept) != row.inputs.end();
  EXPECT_EQ(row_reads_sum, !recomputed) << fused.to_string();
  const std::vector<Host> inputs = random_inputs(fused, 5);
  const std::vector<Host> expected = run(optimized, inputs), got = run(fused, inputs);
  for (size_t k = 0; k < 2; ++k) EXPECT_EQ(got[k].bytes, expected[k].bytes);
}

TEST(RowFusion, ASmallSharedResidualSumIsRecomputedInTheNormRow) { check_residual_norm(1, 2048, true); }

// Past 65536 elements the row reads the sum: recomputing it would read its inputs twice.
TEST(RowFusion, ALargeSharedResidualSumIsReadByTheNormRow) { check_residual_norm(64, 2048, false); }

TEST(RowFusion, RowCodeComputesTheFoldsOncePerRowAndCompiles) {
  GraphFixture f;
  f.output(layer_norm_of_sum(f, 5, 96));
  const ir::Graph fused = passes::fuse_row_broadcasts(passes::optimize(f.graph()));
  const ir::Node& row = fused.node(fused.outputs[0].node);
  const codegen::Kernel kernel = codegen::render_kernel(row, schedule::kernel_operands(fused, row),
                                                        schedule::choose_schedule(row, schedule::kernel_operands(fused, row)));
  // Two shared folds (lanes start at lm_lane, combined with shuffles), then the lanes stride along the row.
  size_t cooperative = 0;
  for (size_t at = kernel.source.find("= lm_lane;"); at != std::string::npos; at = kernel.source.find("= lm_lane;", at + 1)) {
    ++cooperative;
  }
  EXPECT_EQ(cooperative, 3u) << kernel.source;
  EXPECT_NE(kernel.source.find("__shfl_xor_sync"), std::string::npos);
  EXPECT_NE(kernel.source.find("p.out[lm_flat * 96LL + r"), std::string::npos) << kernel.source;
  EXPECT_EQ(kernel.threads_per_output, 32);
}

// A row the lanes cover in one vector each (a block of 256 lanes, 4 floats each: 1024): its
// vectors, the norm's weight among them, are read before the fold's first shuffle, so that the
// weight is not requested after the combine. Rows of two steps keep the loop alone.
TEST(RowFusion, ARowOfOneVectorPerLaneReadsItsVectorsBeforeItsFolds) {
  for (const int64_t cols : {1024, 2048}) {
    GraphFixture f;
    const NodeId a = f.input(DType::F32, {int_const(1), int_const(cols)});
    const NodeId b = f.input(DType::F32, {int_const(1), int_const(cols)});
    const NodeId weight = f.input(DType::F32, {int_const(1), int_const(cols)});
    f.output(binary(f, rms_norm_of(f, binary(f, a, b, ExprOp::Add), cols), weight, ExprOp::Mul));
    const ir::Graph fused = passes::fuse_row_broadcasts(passes::optimize(f.graph()));
    ASSERT_EQ(compute_nodes(fused), 1u) << fused.to_string();
    const ir::Node& row = fused.node(fused.outputs[0].node);
    const std::vector<schedule::OperandInfo> operands = schedule::kernel_operands(fused, row);
    const schedule::KernelSchedule s = schedule::choose_schedule(row, operands);
    ASSERT_EQ(s.mapping, schedule::Mapping::BlockPerRow);
    ASSERT_EQ(s.block_size * s.row_vector, 1024);
    const std::string source = codegen::render_kernel(row, operands, s).source;
    const size_t single = source.find("= (lm_i64)lm_lane * 4;");
    if (cols == 2048) {
      EXPECT_EQ(single, std::string::npos) << source;
      continue;
    }
    ASSERT_NE(single, std::string::npos) << source;
    const size_t combine = source.find("__shfl_xor_sync", single);
    ASSERT_NE(combine, std::string::npos) << source;
    for (int operand = 0; operand < 3; ++operand) {
      const size_t read = source.find(str_cat("*>(p.in", operand, " + (r"), single);
      EXPECT_LT(read, combine) << "operand " << operand << " read after the fold's combine:\n" << source;
    }
  }
}

#if LUMINAL_HAVE_CUDA
// Every dtype a LayerNorm row is stored in: the fused plan is one warp-per-row kernel, and its
// module compiles with NVRTC (no GPU needed; the CUDA suites check the values on a device).
TEST(RowFusion, RowKernelsOfEveryFloatDtypeCompile) {
  for (const DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    GraphFixture f;
    f.output(layer_norm_of_sum(f, 9, 70, dtype));
    const ir::Graph fused = passes::fuse_row_broadcasts(passes::optimize(f.graph()));
    ASSERT_EQ(compute_nodes(fused), 1u) << dtype_name(dtype) << "\n" << fused.to_string();
    const runtime::gpu::CudaProgram program = runtime::gpu::build_general_cuda_program(fused);
    ASSERT_EQ(program.kernels.size(), 1u) << dtype_name(dtype);
    EXPECT_EQ(program.kernels[0].schedule.mapping, schedule::Mapping::WarpPerRow) << dtype_name(dtype);
    EXPECT_NO_THROW(runtime::gpu::check_codegen(program, "sm_90")) << dtype_name(dtype);
  }
}
#endif

TEST(RowFusion, LeavesAFoldThatEveryRowWouldRecompute) {
  // x / sum(x over everything): the total is one value read by every row; inlining it would make
  // each row recompute the whole reduction.
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(6), int_const(40)});
  const NodeId total = f.b().reduce_dims(x, {0, 1}, true, ir::ReduceOp::Sum, DType::F32);
  f.output(binary(f, x, total, ExprOp::Div));
  const ir::Graph optimized = passes::optimize(f.graph());
  const ir::Graph fused = passes::fuse_row_broadcasts(optimized);
  EXPECT_EQ(compute_nodes(fused), compute_nodes(optimized)) << fused.to_string();
}

TEST(RowFusion, KeepsAProducerWhoseFoldsVaryAlongTheRow) {
  // y = relu(x @ w) with a short K (a fold per element), then y minus its row mean: y's folds
  // depend on the column, so inlining y into the row would repeat them at every read it makes.
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(6), int_const(4)});
  const NodeId w = f.input(DType::F32, {int_const(4), int_const(40)});
  const NodeId y = f.b().elementwise({frontend::Operand::of(f.b().matmul(x, w))}, DType::F32, DType::F32,
                                     [](const std::vector<Expr>& v) { return ir::unary(ExprOp::Relu, v[0]); });
  f.output(binary(f, y, row_mean(f, y, 1.0 / 40), ExprOp::Sub));
  const ir::Graph optimized = passes::optimize(f.graph());
  const ir::Graph fused = passes::fuse_row_broadcasts(optimized);
  for (const ir::Node& node : fused.nodes()) {
    if (!schedule::has_row_invariant_fold(node)) continue;
    ir::visit(node.body, [&](const Expr& e) {
      if (e->op != ExprOp::Fold) return;
      EXPECT_FALSE(ir::reads_loop_var(e, 1)) << "a row repeats a per-element fold: " << ir::to_string(node.body);
    });
  }
  EXPECT_EQ(compute_nodes(fused), 2u) << fused.to_string();  // y stays a kernel of its own
  const std::vector<Host> inputs = random_inputs(fused, 7);
  EXPECT_EQ(run(fused, inputs)[0].bytes, run(optimized, inputs)[0].bytes);
}

TEST(RowFusion, CanonicalFoldVarsGiveEqualFoldsEqualVariables) {
  const Expr x = [] {
    return ir::load(0, DType::F32, {ir::loop_var(0), ir::reduce_var(4)});
  }();
  const Expr a = ir::fold(ir::ReduceOp::Sum, 4, int_const(8), x);
  const Expr b = ir::fold(ir::ReduceOp::Sum, 9, int_const(8),
                          ir::load(0, DType::F32, {ir::loop_var(0), ir::reduce_var(9)}));
  EXPECT_FALSE(ir::expr_equal(a, b));
  const Expr sum = ir::canonical_fold_vars(ir::add(a, ir::unary(ExprOp::Exp, b)), 0);
  ASSERT_EQ(sum->op, ExprOp::Add);
  const Expr& left = sum->args[0]->op == ExprOp::Fold ? sum->args[0] : sum->args[1];
  const Expr& right = sum->args[0]->op == ExprOp::Fold ? sum->args[1]->args[0] : sum->args[0]->args[0];
  EXPECT_TRUE(ir::expr_equal(left, right)) << ir::to_string(sum);
  // Nested folds keep distinct variables: the inner one binds r0, the outer r1, and the inner
  // fold's body still reads the outer variable.
  const Expr inner = ir::fold(ir::ReduceOp::Sum, 3, int_const(4),
                              ir::load(0, DType::F32, {ir::reduce_var(7), ir::reduce_var(3)}));
  const Expr nested = ir::canonical_fold_vars(ir::fold(ir::ReduceOp::Max, 7, int_const(5), inner), 0);
  ASSERT_EQ(nested->op, ExprOp::Fold);
  EXPECT_EQ(nested->index, 1);
  EXPECT_EQ(nested->args[1]->index, 0);
  EXPECT_EQ(ir::to_string(nested->args[1]->args[1]), ir::to_string(ir::load(0, DType::F32, {ir::reduce_var(1), ir::reduce_var(0)})));
  EXPECT_TRUE(ir::free_reduce_vars(nested).empty());
}

TEST(AffineView, ReshapeOfAComputedNodeIsAFlatView) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(2), int_const(16), int_const(12)});
  const NodeId y = f.b().elementwise({frontend::Operand::of(x)}, DType::F32, DType::F32,
                                     [](const std::vector<Expr>& v) { return ir::unary(ExprOp::Exp, v[0]); });
  const NodeId merged = f.b().reshape(y, {int_const(32), int_const(12)});
  const auto view = passes::as_affine_view(f.graph(), merged);
  ASSERT_TRUE(view.has_value());
  EXPECT_TRUE(view->flattened);
  EXPECT_EQ(ir::as_int_const(view->coefficients[2][0]), 12);
  EXPECT_EQ(ir::as_int_const(view->coefficients[2][1]), 1);
  EXPECT_NO_THROW(passes::require_row_major_base(*view, {2, 16, 12}, {192, 12, 1}));
  EXPECT_THROW(passes::require_row_major_base(*view, {2, 16, 12}, {192, 1, 16}), Error);
  // A caller's input may have any strides: its reshape is no view.
  EXPECT_FALSE(passes::as_affine_view(f.graph(), f.b().reshape(x, {int_const(32), int_const(12)})).has_value());
}

TEST(MatmulEpilogue, BiasAddedThroughAHeadViewMovesIntoTheMatmul) {
  GraphFixture f;
  const NodeId a = f.input(DType::F32, {int_const(6), int_const(40)});
  const NodeId w = f.input(DType::F32, {int_const(40), int_const(8)});
  const NodeId bias = f.input(DType::F32, {int_const(8)});
  const NodeId mm = f.b().matmul(a, w);
  // [6, 8] -> [2, 3, 2, 4] -> heads first: [2, 2, 3, 4], plus the bias of each column.
  const NodeId heads = f.b().permute(f.b().reshape(mm, {int_const(2), int_const(3), int_const(2), int_const(4)}), {0, 2, 1, 3});
  const NodeId bias_heads = f.b().permute(f.b().reshape(bias, {int_const(1), int_const(1), int_const(2), int_const(4)}), {0, 2, 1, 3});
  f.output(binary(f, heads, bias_heads, ExprOp::Add));
  const std::vector<Host> inputs = random_inputs(f.graph(), 5);
  passes::OptimizeOptions unfused;
  unfused.fuse_matmul_epilogues = false;
  const std::vector<Host> reference = f.run(inputs, unfused);
  const ir::Graph optimized = passes::optimize(f.graph());
  const ir::Node& out = optimized.node(optimized.outputs[0].node);
  ASSERT_EQ(out.kind, ir::NodeKind::Pointwise) << optimized.to_string();
  const ir::Node& product = optimized.node(out.inputs.at(0));
  EXPECT_EQ(product.epilogue, ir::MatMulEpilogue::Bias) << optimized.to_string();
  EXPECT_TRUE(passes::as_affine_view(optimized, out.id).has_value());
  const std::vector<Host> got = run(optimized, inputs);
  ASSERT_EQ(got[0].bytes.size(), reference[0].bytes.size());
  const float* g = got[0].data<float>();
  const float* r = reference[0].data<float>();
  for (size_t k = 0; k < got[0].bytes.size() / sizeof(float); ++k) EXPECT_NEAR(g[k], r[k], 1e-5f) << k;
}

}  // namespace
}  // namespace luminal
