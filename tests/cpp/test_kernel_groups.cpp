// Kernel groups of a CUDA program (runtime/cuda/program.h, KernelGroup): consecutive independent
// node kernels planned to share one launch, and the group kernel that runs them
// (codegen::render_kernel_group). Needs no GPU: NVRTC compiles the module.
#if LUMINAL_HAVE_CUDA
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph_helpers.h"
#include "runtime/cuda/executor.h"
#include "runtime/cuda/program.h"

namespace luminal {
namespace {

using ir::Expr;
using ir::int_const;
using ir::NodeId;
using runtime::gpu::CudaProgram;
using testing::GraphFixture;

Expr twice(const std::vector<Expr>& v) { return ir::add(v[0], v[0]); }

NodeId doubled(GraphFixture& f, NodeId x) {
  return f.b().elementwise({frontend::Operand::of(x)}, DType::F32, DType::F32, twice);
}

// The step of the program that computes node `id`.
size_t step_of(const CudaProgram& program, NodeId id) {
  for (size_t s = 0; s < program.plan.steps.size(); ++s) {
    if (program.plan.steps[s].node == id) return s;
  }
  ADD_FAILURE() << "no step computes node " << id;
  return 0;
}

TEST(KernelGroups, IndependentKernelsShareOneLaunch) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(7), int_const(5)});
  const NodeId y = f.input(DType::F32, {int_const(3)});
  const NodeId z = f.input(DType::F32, {int_const(1000)});
  f.output(doubled(f, x));
  f.output(doubled(f, y));
  f.output(doubled(f, z));
  const CudaProgram program = runtime::gpu::build_general_cuda_program(f.graph());
  ASSERT_EQ(program.plan.steps.size(), 3u);
  ASSERT_EQ(program.kernel_groups.size(), 1u);
  const runtime::gpu::KernelGroup& group = program.kernel_groups[0];
  EXPECT_EQ(group.first_step, 0u);
  EXPECT_EQ(group.steps, 3u);
  const codegen::Kernel& kernel = program.kernels.at(group.kernel);
  ASSERT_EQ(kernel.group_members.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const codegen::Kernel& member = program.kernels.at(kernel.group_members[k]);
    EXPECT_EQ(kernel.group_members[k], program.step_kernels[k].kernel);
    EXPECT_EQ(member.block_size, kernel.block_size);
    EXPECT_NE(kernel.source.find(member.group_entry), std::string::npos) << kernel.source;
  }
  ASSERT_EQ(program.check_base.size(), program.kernels.size());
  runtime::gpu::check_codegen(program, "sm_90");  // NVRTC: the group kernel calls the members' functions
}

TEST(KernelGroups, AKernelReadingAnotherOnesResultLaunchesAfterIt) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(4)});
  const NodeId a = doubled(f, x);
  f.output(a);
  f.output(doubled(f, a));
  const CudaProgram program = runtime::gpu::build_general_cuda_program(f.graph());
  ASSERT_EQ(program.plan.steps.size(), 2u);
  EXPECT_TRUE(program.kernel_groups.empty());
}

// A scatter may update its base (here an input) in place: a kernel that reads the base does not
// share its launch (its read could see the update), while one that reads other memory does.
TEST(KernelGroups, AScatterLaunchesApartFromReadersOfItsBase) {
  GraphFixture f;
  const NodeId cache = f.input(DType::F32, {int_const(8), int_const(4)});
  const NodeId index = f.input(DType::I64, {int_const(1)});
  const NodeId row = f.input(DType::F32, {int_const(1), int_const(4)});
  const NodeId other = f.input(DType::F32, {int_const(6)});
  const Expr position = ir::load(1, DType::I64, {ir::loop_var(0)});  // slot 0 is the base
  const NodeId written = f.b().scatter(cache, {int_const(1), int_const(4)}, {index, row},
                                       {ir::check_index(position, int_const(8)), ir::loop_var(1)},
                                       ir::load(2, DType::F32, {ir::loop_var(0), ir::loop_var(1)}), false);
  const NodeId reads_base = doubled(f, cache);
  const NodeId unrelated = doubled(f, other);
  f.output(written);
  f.output(reads_base);
  f.output(unrelated);
  const CudaProgram program = runtime::gpu::build_general_cuda_program(f.graph());
  const size_t scatter = step_of(program, written), reader = step_of(program, reads_base);
  const size_t free_kernel = step_of(program, unrelated);
  ASSERT_EQ(scatter + 1, reader);
  ASSERT_EQ(reader + 1, free_kernel);
  // The reader of the base launches apart from the scatter; it shares one with the unrelated kernel.
  ASSERT_EQ(program.kernel_groups.size(), 1u);
  EXPECT_EQ(program.kernel_groups[0].first_step, reader);
  EXPECT_EQ(program.kernel_groups[0].steps, 2u);
}

// At most kMaxGroupMembers kernels share a launch; the rest form the next group.
TEST(KernelGroups, GroupsAreCappedInSize) {
  GraphFixture f;
  const size_t count = runtime::gpu::kMaxGroupMembers + 3;
  for (size_t k = 0; k < count; ++k) f.output(doubled(f, f.input(DType::F32, {int_const(2)})));
  const CudaProgram program = runtime::gpu::build_general_cuda_program(f.graph());
  ASSERT_EQ(program.kernel_groups.size(), 2u);
  EXPECT_EQ(program.kernel_groups[0].steps, runtime::gpu::kMaxGroupMembers);
  EXPECT_EQ(program.kernel_groups[1].first_step, runtime::gpu::kMaxGroupMembers);
  EXPECT_EQ(program.kernel_groups[1].steps, 3u);
}

}  // namespace
}  // namespace luminal
#endif
