// The memory planner (runtime/memory_plan.h): the pure arena layout, and placement/lifetimes of a
// graph's plan of steps (schedule/plan.h) as both executors use them.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "graph_helpers.h"
#include "passes/stage_library_operands.h"
#include "runtime/memory_plan.h"
#include "schedule/plan.h"

namespace luminal {
namespace {

using ir::Expr;
using ir::int_const;
using ir::NodeId;
using runtime::BufferRequest;
using runtime::kArenaAlignment;
using runtime::MemoryPlan;
using runtime::Placement;
using testing::GraphFixture;

BufferRequest request(size_t bytes, int first, int last, int take_over = -1) {
  BufferRequest r;
  r.bytes = bytes;
  r.first_step = first;
  r.last_step = last;
  r.take_over = take_over;
  return r;
}

// The slot a request uses (takers use their chain's root slot).
size_t root_of(const std::vector<BufferRequest>& requests, size_t k) {
  while (requests[k].take_over >= 0) k = static_cast<size_t>(requests[k].take_over);
  return k;
}

// No two slots whose lifetimes overlap share a byte; every slot lies inside the total.
void expect_no_live_overlap(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  std::vector<int> end(requests.size());
  for (size_t k = 0; k < requests.size(); ++k) end[k] = requests[k].last_step;
  for (size_t k = 0; k < requests.size(); ++k) {
    const size_t root = root_of(requests, k);
    end[root] = std::max(end[root], requests[k].last_step);
  }
  const auto size_of = [&](size_t k) { return std::max<size_t>(requests[k].bytes, 1); };
  for (size_t a = 0; a < requests.size(); ++a) {
    if (root_of(requests, a) != a) continue;
    EXPECT_EQ(plan.offsets[a] % kArenaAlignment, 0u) << a;
    EXPECT_LE(plan.offsets[a] + size_of(a), plan.total) << a;
    for (size_t b = a + 1; b < requests.size(); ++b) {
      if (root_of(requests, b) != b) continue;
      const bool live_together = requests[a].first_step <= end[b] && requests[b].first_step <= end[a];
      const bool disjoint =
          plan.offsets[a] + size_of(a) <= plan.offsets[b] || plan.offsets[b] + size_of(b) <= plan.offsets[a];
      EXPECT_TRUE(!live_together || disjoint) << "buffers " << a << " and " << b << " overlap while both live";
    }
  }
}

TEST(MemoryPlan, LiveBuffersNeverOverlap) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferRequest> requests;
    for (int k = 0; k < 30; ++k) {
      const int first = static_cast<int>(random() % 20);
      requests.push_back(request(random() % 5000, first, first + static_cast<int>(random() % 6)));
    }
    expect_no_live_overlap(requests, runtime::plan_memory(requests, "test arena"));
  }
}

TEST(MemoryPlan, MemoryIsReusedAfterTheLastUse) {
  // a lives over steps 0..1; b is written at step 2, after a's last reader: it reuses a's memory.
  const std::vector<BufferRequest> requests{request(1000, 0, 1), request(1000, 2, 3)};
  const MemoryPlan plan = runtime::plan_memory(requests, "test arena");
  EXPECT_EQ(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.total, 1024u);
  // Read at step 2 by the step that writes b: both live, so they do not share.
  const MemoryPlan busy = runtime::plan_memory({request(1000, 0, 2), request(1000, 2, 3)}, "test arena");
  EXPECT_NE(busy.offsets[0], busy.offsets[1]);
  EXPECT_EQ(busy.total, 2048u);
}

TEST(MemoryPlan, OffsetsAndTotalAreAligned) {
  const std::vector<BufferRequest> requests{request(1, 0, 5), request(257, 1, 5), request(300, 2, 5)};
  const MemoryPlan plan = runtime::plan_memory(requests, "test arena");
  EXPECT_EQ(plan.offsets[0], 0u);
  EXPECT_EQ(plan.offsets[1], 256u);
  EXPECT_EQ(plan.offsets[2], 768u);  // 257 bytes take two aligned blocks
  EXPECT_EQ(plan.total, 1280u);
}

TEST(MemoryPlan, FirstFitFillsAGapThatIsLargeEnough) {
  // b dies at step 1, leaving a 512-byte hole between a and c; d (256 bytes) fits in it, e does not.
  const std::vector<BufferRequest> requests{request(256, 0, 9), request(512, 0, 1), request(256, 0, 9),
                                            request(256, 2, 9), request(1024, 2, 9)};
  const MemoryPlan plan = runtime::plan_memory(requests, "test arena");
  EXPECT_EQ(plan.offsets[1], 256u);
  EXPECT_EQ(plan.offsets[3], 256u);
  EXPECT_EQ(plan.offsets[4], 1024u);
  expect_no_live_overlap(requests, plan);
}

TEST(MemoryPlan, TakeOverChainsShareOneSlotThatLivesUntilTheLastReader) {
  // A base (steps 0..1), a scatter into it at step 1 (read until 2), a second scatter at step 2
  // (read until 6). A buffer written at step 3 must not reuse the chain's slot: it is still live.
  const std::vector<BufferRequest> requests{request(512, 0, 1), request(512, 1, 2, 0), request(512, 2, 6, 1),
                                            request(512, 3, 4)};
  const MemoryPlan plan = runtime::plan_memory(requests, "test arena");
  EXPECT_EQ(plan.offsets[1], plan.offsets[0]);
  EXPECT_EQ(plan.offsets[2], plan.offsets[0]);
  EXPECT_NE(plan.offsets[3], plan.offsets[0]);
  EXPECT_EQ(plan.total, 1024u);
  expect_no_live_overlap(requests, plan);
}

TEST(MemoryPlan, TakeOverOfABufferStillReadRaises) {
  // The base is read at step 3, after the scatter (step 1) would have overwritten it.
  EXPECT_THROW(runtime::plan_memory({request(512, 0, 3), request(512, 1, 2, 0)}, "test arena"), Error);
  // A larger buffer cannot take over a smaller one; a taker must come after what it takes over.
  EXPECT_THROW(runtime::plan_memory({request(256, 0, 1), request(512, 1, 2, 0)}, "test arena"), Error);
  EXPECT_THROW(runtime::plan_memory({request(256, 0, 1, 1), request(256, 1, 2)}, "test arena"), Error);
}

TEST(MemoryPlan, ZeroByteBuffersGetDistinctSlots) {
  const std::vector<BufferRequest> requests{request(0, 0, 2), request(0, 1, 2), request(16, 1, 2)};
  const MemoryPlan plan = runtime::plan_memory(requests, "test arena");
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.total, 3 * kArenaAlignment);
  EXPECT_EQ(runtime::plan_memory({}, "test arena").total, 0u);
}

TEST(MemoryPlan, OverflowRaisesNamingTheArena) {
  const size_t huge = size_t{1} << 63;
  try {
    runtime::plan_memory({request(huge, 0, 1), request(huge, 0, 1)}, "the test arena");
    FAIL() << "expected an overflow error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the test arena"), std::string::npos) << e.what();
  }
  EXPECT_THROW(runtime::align_to_arena(std::numeric_limits<size_t>::max(), "x"), Error);
}

// ---- placement and lifetimes of a graph's plan ----------------------------------------------------
Expr twice(const std::vector<Expr>& v) { return ir::add(v[0], v[0]); }

TEST(BufferPlan, IntermediatesLiveUntilTheirLastReader) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(8)});
  const NodeId a = f.b().elementwise({frontend::Operand::of(x)}, DType::F32, DType::F32, twice);
  const NodeId b = f.b().elementwise({frontend::Operand::of(a)}, DType::F32, DType::F32, twice);
  const NodeId c = f.b().elementwise({frontend::Operand::of(b)}, DType::F32, DType::F32, twice);
  const NodeId d = f.b().elementwise({frontend::Operand::of(c), frontend::Operand::of(a)}, DType::F32, DType::F32,
                                     [](const std::vector<Expr>& v) { return ir::add(v[0], v[1]); });
  f.output(d);
  const ir::Graph& g = f.graph();
  const schedule::Plan plan = schedule::plan_steps(g);
  ASSERT_EQ(plan.steps.size(), 4u);
  EXPECT_TRUE(plan.views.empty());
  const runtime::BufferPlan buffers = runtime::plan_buffers(g, plan);
  EXPECT_EQ(buffers.placement[x], Placement::Input);
  EXPECT_EQ(buffers.placement[a], Placement::Arena);
  EXPECT_EQ(buffers.placement[d], Placement::Output);
  EXPECT_EQ(buffers.last_use[a], buffers.step_of[d]);  // read by the last step
  EXPECT_EQ(buffers.last_use[b], buffers.step_of[c]);
  EXPECT_EQ(buffers.arena_nodes, (std::vector<NodeId>{a, b, c}));
  // b and c are 128 bytes each; b dies at c's step, so c cannot reuse it, but nothing later needs more.
  std::vector<size_t> bytes(g.size(), 128);
  const runtime::ArenaLayout layout = runtime::layout_arena(buffers, bytes, "test arena");
  EXPECT_NE(layout.offset[a], layout.offset[b]);
  EXPECT_NE(layout.offset[b], layout.offset[c]);
  EXPECT_NE(layout.offset[a], layout.offset[c]);
}

TEST(BufferPlan, ViewReadByAMatmulIsNoStepAndKeepsItsBaseAlive) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(3), int_const(4)});
  const NodeId w = f.input(DType::F32, {int_const(5), int_const(4)});
  const NodeId h = f.b().elementwise({frontend::Operand::of(w)}, DType::F32, DType::F32, twice);
  const NodeId t = f.b().permute(h, {1, 0});
  const NodeId y = f.b().matmul(x, t);
  f.output(y);
  const ir::Graph& g = f.graph();
  const schedule::Plan plan = schedule::plan_steps(g);
  ASSERT_EQ(plan.views, (std::vector<NodeId>{t}));
  const runtime::BufferPlan buffers = runtime::plan_buffers(g, plan);
  EXPECT_EQ(buffers.placement[t], Placement::VirtualView);
  EXPECT_EQ(buffers.step_of[t], -1);
  EXPECT_EQ(buffers.last_use[h], buffers.step_of[y]);  // the matmul reads h through the view
  EXPECT_EQ(plan.steps.back().kind, schedule::StepKind::LibraryMatmul);
}

TEST(BufferPlan, ScatterIntoADeadIntermediateTakesItsMemory) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(3), int_const(2)});
  const NodeId index = f.input(DType::I64, {int_const(1)});
  const NodeId values = f.input(DType::F32, {int_const(1), int_const(2)});
  const NodeId doubled = f.b().elementwise({frontend::Operand::of(x)}, DType::F32, DType::F32, twice);
  const Expr row = ir::load(1, DType::I64, {ir::loop_var(0)});  // slot 0 is the base
  const NodeId first = f.b().scatter(doubled, {int_const(1), int_const(2)}, {index, values}, {row, ir::loop_var(1)},
                                     ir::load(2, DType::F32, {ir::loop_var(0), ir::loop_var(1)}), false);
  const NodeId second = f.b().elementwise({frontend::Operand::of(first)}, DType::F32, DType::F32, twice);
  f.output(second);
  const ir::Graph& g = f.graph();
  const schedule::Plan plan = schedule::plan_steps(g);
  const runtime::BufferPlan buffers = runtime::plan_buffers(g, plan);
  EXPECT_EQ(plan.steps[buffers.step_of[first]].kind, schedule::StepKind::Scatter);
  EXPECT_EQ(buffers.takes_over[first], doubled);
  EXPECT_EQ(buffers.memory_of[first], doubled);
  const runtime::ArenaLayout layout = runtime::layout_arena(buffers, std::vector<size_t>(g.size(), 24), "test");
  EXPECT_EQ(layout.offset[first], layout.offset[doubled]);
  EXPECT_EQ(layout.total, kArenaAlignment);
}

TEST(Plan, RowKernelPlanIsOneStepNamedAfterTheFirstOutput) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(8)});
  const NodeId a = f.b().elementwise({frontend::Operand::of(x)}, DType::F32, DType::F32, twice);
  const NodeId b = f.b().elementwise({frontend::Operand::of(a)}, DType::F32, DType::F32, twice);
  f.output(b);
  const schedule::Plan plan = schedule::plan_row_kernel_steps(f.graph(), int_const(4));
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].kind, schedule::StepKind::RowKernel);
  EXPECT_EQ(plan.steps[0].node, b);
  const runtime::BufferPlan buffers = runtime::plan_buffers(f.graph(), plan);
  EXPECT_EQ(buffers.placement[a], Placement::Register);
  EXPECT_TRUE(buffers.arena_nodes.empty());
  EXPECT_FALSE(schedule::plan_steps(f.graph()).is_row_kernel());
}

TEST(StageLibraryOperands, UserInputsAndOutputsOfMatmulsAreCopiedThroughTheArena) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(3), int_const(4)});
  const NodeId w = f.input(DType::F32, {int_const(4), int_const(5)});
  f.output(f.b().matmul(x, w));
  const passes::StagedGraph staged = passes::stage_library_operands(f.graph());
  EXPECT_EQ(staged.copies, 3u);  // both user inputs, and the matmul's output copied out
  const ir::Graph& g = staged.graph;
  const ir::Node& out = g.node(g.outputs[0].node);
  ASSERT_EQ(out.kind, ir::NodeKind::Pointwise);
  const ir::Node& matmul = g.node(out.inputs[0]);
  ASSERT_EQ(matmul.kind, ir::NodeKind::MatMul);
  for (NodeId operand : matmul.inputs) EXPECT_EQ(g.node(operand).kind, ir::NodeKind::Pointwise);
  const runtime::BufferPlan buffers = runtime::plan_buffers(g, schedule::plan_steps(g));
  EXPECT_EQ(buffers.placement[matmul.id], Placement::Arena);  // library calls write fixed memory
}

}  // namespace
}  // namespace luminal
