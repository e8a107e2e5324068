// CUDA programs (runtime/cuda/program.h): the plan of steps and generated code an Executor
// instantiates. Building one needs no GPU; compiling its module is checked by the Python suite
// (LUMINAL_CHECK_CUDA_CODEGEN).
#if LUMINAL_HAVE_CUDA
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "graph_helpers.h"
#include "passes/stage_library_operands.h"
#include "passes/passes.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/executor.h"
#include "runtime/cuda/program.h"
#include "schedule/plan.h"

namespace luminal {
namespace {

using ir::Expr;
using ir::int_const;
using ir::NodeId;
using runtime::gpu::CudaProgram;
using schedule::StepKind;
using testing::GraphFixture;

Expr twice(const std::vector<Expr>& v) { return ir::add(v[0], v[0]); }

CudaProgram general_program(const ir::Graph& graph) { return runtime::gpu::build_general_cuda_program(graph); }

TEST(CudaProgram, StepsOwnTheirKernelsInModuleOrder) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(6), int_const(4)});
  const NodeId index = f.input(DType::I64, {int_const(2)});
  const NodeId values = f.input(DType::F32, {int_const(2), int_const(4)});
  const NodeId w = f.input(DType::F32, {int_const(6), int_const(3)});
  const NodeId doubled = f.b().elementwise({frontend::Operand::of(x)}, DType::F32, DType::F32, twice);
  const Expr row = ir::load(1, DType::I64, {ir::loop_var(0)});  // slot 0 is the base
  const NodeId scattered = f.b().scatter(doubled, {int_const(2), int_const(4)}, {index, values},
                                         {ir::check_index(row, int_const(6)), ir::loop_var(1)},
                                         ir::load(2, DType::F32, {ir::loop_var(0), ir::loop_var(1)}), false);
  const NodeId weight = f.b().elementwise({frontend::Operand::of(w)}, DType::F32, DType::F32, twice);
  f.output(f.b().matmul(f.b().transpose(scattered, 0, 1), weight));
  const CudaProgram program = general_program(f.graph());
  const ir::Graph& g = *program.graph;
  EXPECT_EQ(program.staging_copies, 1u);  // the matmul's output, copied out of the arena
  ASSERT_EQ(program.step_kernels.size(), program.plan.steps.size());
  size_t next_kernel = 0;
  bool saw_scatter = false, saw_matmul = false;
  for (size_t s = 0; s < program.plan.steps.size(); ++s) {
    const schedule::Step& step = program.plan.steps[s];
    const runtime::gpu::StepKernels& kernels = program.step_kernels[s];
    switch (step.kind) {
      case StepKind::LibraryMatmul:
        saw_matmul = true;
        EXPECT_EQ(kernels.kernel, -1);
        EXPECT_EQ(g.node(step.node).kind, ir::NodeKind::MatMul);
        break;
      case StepKind::Scatter:
        saw_scatter = true;
        EXPECT_EQ(kernels.copy_kernel, static_cast<int>(next_kernel));  // the base copy comes first
        EXPECT_EQ(kernels.kernel, static_cast<int>(next_kernel) + 1);
        next_kernel += 2;
        break;
      case StepKind::Kernel:
      case StepKind::Convolution:  // its generated kernel, run where it measures faster than cuDNN
        EXPECT_EQ(kernels.kernel, static_cast<int>(next_kernel++));
        EXPECT_EQ(kernels.copy_kernel, -1);
        break;
      case StepKind::RowKernel: ADD_FAILURE() << "a node-by-node plan has no row kernel"; break;
    }
  }
  EXPECT_TRUE(saw_scatter && saw_matmul);
  // After the steps' kernels: one per group of steps that share a launch (the scatter and the
  // weight's kernel: independent, consecutive).
  ASSERT_EQ(program.kernel_groups.size(), 1u);
  EXPECT_EQ(program.kernel_groups[0].kernel, static_cast<int>(next_kernel));
  EXPECT_EQ(next_kernel + 1, program.kernels.size());
  ASSERT_EQ(program.plan.views.size(), 1u);  // the transpose is read by strides
  EXPECT_EQ(program.buffers.placement[program.plan.views[0]], runtime::Placement::VirtualView);
  // Check labels are indexed per kernel and name the node they belong to (the scatter's index check).
  ASSERT_EQ(program.check_base.size(), program.kernels.size());
  bool scatter_label = false;
  for (const runtime::gpu::CheckLabel& label : program.check_labels) scatter_label |= label.origin == "test";
  EXPECT_TRUE(scatter_label);
  EXPECT_NE(program.module_source.find(runtime::gpu::kExportErrorsKernelName), std::string::npos);
  for (const codegen::Kernel& kernel : program.kernels) {
    EXPECT_NE(program.module_source.find(kernel.name), std::string::npos) << kernel.name;
  }
}

TEST(CudaProgram, RowKernelPlanIsOneKernelWhoseChecksNameTheRowKernel) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {ir::symbol("s0"), int_const(4)});
  const NodeId a = f.b().elementwise({frontend::Operand::of(x)}, DType::F32, DType::F32, twice);
  f.output(f.b().elementwise({frontend::Operand::of(a)}, DType::F32, DType::F32, twice));
  auto graph = std::make_shared<const ir::Graph>(f.graph());
  const CudaProgram program =
      runtime::gpu::build_cuda_program(graph, schedule::plan_row_kernel_steps(*graph, ir::symbol("s0")));
  ASSERT_EQ(program.kernels.size(), 1u);
  ASSERT_EQ(program.step_kernels.size(), 1u);
  EXPECT_EQ(program.step_kernels[0].kernel, 0);
  EXPECT_TRUE(program.plan.is_row_kernel());
  EXPECT_EQ(program.buffers.placement[a], runtime::Placement::Register);
  for (const runtime::gpu::CheckLabel& label : program.check_labels) EXPECT_EQ(label.origin, "the row kernel");
}

// The plan carries each kernel's schedule and code generation renders exactly that one: a search
// can swap a candidate in before the program is built.
TEST(CudaProgram, RendersTheScheduleThePlanCarries) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(5), int_const(96)});
  f.output(f.b().reduce_dims(x, {1}, false, ir::ReduceOp::Sum, DType::F32));
  auto graph = std::make_shared<const ir::Graph>(passes::optimize(f.graph()));
  schedule::Plan plan = schedule::plan_steps(*graph, true);
  schedule::schedule_kernels(plan, *graph);
  ASSERT_EQ(plan.steps.size(), 1u);
  ASSERT_TRUE(plan.steps[0].schedule.has_value());
  const ir::Node& node = graph->node(plan.steps[0].node);
  const auto candidates = schedule::candidate_schedules(node, schedule::kernel_operands(*graph, node));
  ASSERT_GT(candidates.size(), 1u);
  EXPECT_EQ(*plan.steps[0].schedule, candidates[0]);  // today's rule comes first
  for (const schedule::KernelSchedule& candidate : candidates) {
    schedule::Plan swapped = plan;
    swapped.steps[0].schedule = candidate;
    const CudaProgram program = runtime::gpu::build_cuda_program(graph, swapped);
    ASSERT_EQ(program.kernels.size(), 1u);
    EXPECT_EQ(program.kernels[0].schedule, candidate) << schedule::to_string(candidate);
    runtime::gpu::check_codegen(program, "sm_90");  // NVRTC, no GPU needed
  }
  schedule::Plan unscheduled = schedule::plan_steps(*graph, true);
  EXPECT_THROW(runtime::gpu::build_cuda_program(graph, unscheduled), Error);
}

}  // namespace
}  // namespace luminal
// A batch multiplying one shared b with a's batches one after the other is one taller product;
// anything else (b with its own batches, a with gaps between batches or transposed) is left alone.
TEST(CudaMatmul, FoldsABatchThatSharesItsRightOperand) {
  using luminal::cuda::MatmulShape;
  using luminal::cuda::MatrixOperand;
  MatmulShape shape;
  shape.batch = 32, shape.m = 197, shape.n = 2304, shape.k = 768;
  MatrixOperand a{nullptr, 197 * 768, 768, 1};
  const MatrixOperand shared_b{nullptr, 0, 2304, 1};
  luminal::cuda::fold_shared_batch(shape, a, shared_b);
  EXPECT_EQ(shape.batch, 1);
  EXPECT_EQ(shape.m, 32 * 197);
  EXPECT_EQ(a.batch_stride, 0);
  EXPECT_EQ(a.row_stride, 768);

  const auto unchanged = [](const MatrixOperand& a_in, const MatrixOperand& b) {
    MatmulShape s;
    s.batch = 4, s.m = 5, s.n = 6, s.k = 7;
    MatrixOperand a = a_in;
    luminal::cuda::fold_shared_batch(s, a, b);
    return s.batch == 4 && s.m == 5 && a.batch_stride == a_in.batch_stride;
  };
  EXPECT_TRUE(unchanged({nullptr, 35, 7, 1}, {nullptr, 42, 6, 1}));   // b has its own batches
  EXPECT_TRUE(unchanged({nullptr, 40, 7, 1}, {nullptr, 0, 6, 1}));    // gaps between a's batches
  EXPECT_TRUE(unchanged({nullptr, 35, 1, 5}, {nullptr, 0, 6, 1}));    // a transposed
  EXPECT_TRUE(unchanged({nullptr, 0, 7, 1}, {nullptr, 0, 6, 1}));     // a broadcast too
}

#endif
