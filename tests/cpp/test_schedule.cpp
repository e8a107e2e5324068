// The schedule rules (schedule::choose_schedule) on small hand-built IR nodes: which mapping, vector
// width and launch shape each kind of kernel gets, and the alternatives candidate_schedules lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernel_helpers.h"
#include "schedule/kernel_schedule.h"
#include "schedule/plan.h"

namespace luminal {
namespace {

using ir::int_const;
using ir::NodeId;
using schedule::KernelSchedule;
using schedule::Layout;
using schedule::Mapping;
using testing::GraphFixture;
using testing::operands_of;

KernelSchedule chosen(GraphFixture& f, NodeId id, Layout layout = Layout::Contiguous) {
  return schedule::choose_schedule(f.graph().node(id), operands_of(f.graph(), id, layout));
}

TEST(ScheduleRules, ReductionOverTheInnermostAxisGetsAWarpPerOutput) {
  GraphFixture f;
  const KernelSchedule s = chosen(f, testing::sum_over(f, DType::F32, 8, 1000, /*reduce_axis=*/1));
  EXPECT_EQ(s.mapping, Mapping::WarpPerOutput);
  EXPECT_EQ(s.threads_per_output, 32);
  EXPECT_EQ(s.block_size, 256);
  EXPECT_EQ(s.vector_width, 1);  // the node's own reduction is not a fold
}

TEST(ScheduleRules, ReductionOverAnOuterAxisGetsAThreadPerOutput) {
  // Consecutive reduction steps are a row apart: a warp would gain nothing.
  GraphFixture f;
  const KernelSchedule s = chosen(f, testing::sum_over(f, DType::F32, 1000, 8, /*reduce_axis=*/0));
  EXPECT_EQ(s.mapping, Mapping::ThreadPerOutput);
  EXPECT_EQ(s.threads_per_output, 1);
}

// out[c, y] = max over a window of x[c, y + r0, r1] (the innermost load index varies with r1).
NodeId window_max(GraphFixture& f, const std::vector<ir::Expr>& window) {
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(64), int_const(64)});
  const ir::Expr body =
      ir::load(0, DType::F32, {ir::loop_var(0), ir::add(ir::loop_var(1), ir::reduce_var(0)), ir::reduce_var(1)});
  return f.b().reduce(DType::F32, {int_const(4), int_const(32)}, {x}, body, ir::ReduceOp::Max, window);
}

TEST(ScheduleRules, ShortStaticReductionOverTheInnermostAxisGetsAThreadPerOutput) {
  // A 3x3 window (9 steps) would leave 23 of a warp's 32 lanes idle; 31 steps still would not fill it.
  for (const std::vector<ir::Expr>& window : {std::vector<ir::Expr>{int_const(3), int_const(3)},
                                               std::vector<ir::Expr>{int_const(1), int_const(31)}}) {
    GraphFixture f;
    const KernelSchedule s = chosen(f, window_max(f, window));
    EXPECT_EQ(s.mapping, Mapping::ThreadPerOutput);
    EXPECT_EQ(s.threads_per_output, 1);
  }
}

TEST(ScheduleRules, StaticReductionOf32OrMoreOverTheInnermostAxisGetsAWarpPerOutput) {
  for (const std::vector<ir::Expr>& window : {std::vector<ir::Expr>{int_const(4), int_const(8)},
                                               std::vector<ir::Expr>{int_const(1), int_const(32)},
                                               std::vector<ir::Expr>{int_const(2), int_const(40)}}) {
    GraphFixture f;
    EXPECT_EQ(chosen(f, window_max(f, window)).mapping, Mapping::WarpPerOutput);
  }
  // A symbolic extent may be long: it keeps the warp.
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), ir::symbol("k")});
  const NodeId sum = f.b().reduce(DType::F32, {int_const(4)}, {x}, ir::load(0, DType::F32, {ir::loop_var(0), ir::reduce_var(0)}),
                                  ir::ReduceOp::Sum, {ir::symbol("k")});
  EXPECT_EQ(chosen(f, sum).mapping, Mapping::WarpPerOutput);
}

TEST(ScheduleRules, RaggedReductionGetsAThreadPerOutput) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(64)});
  const NodeId lengths = f.input(DType::I64, {int_const(4)});
  const ir::Expr i = ir::loop_var(0), r = ir::reduce_var(0);
  const NodeId sum = f.b().reduce(DType::F32, {int_const(4)}, {x, lengths}, ir::load(0, DType::F32, {i, r}),
                                  ir::ReduceOp::Sum, {ir::load(1, DType::I64, {i})});
  EXPECT_EQ(chosen(f, sum).mapping, Mapping::ThreadPerOutput);
}

TEST(ScheduleRules, LongTopLevelFoldGetsAWarpPerOutput) {
  GraphFixture f;
  const KernelSchedule s = chosen(f, testing::pairwise_dots(f, DType::F32, 4, 3, 64));
  EXPECT_EQ(s.mapping, Mapping::WarpPerOutput);
  EXPECT_EQ(s.threads_per_output, 32);
  // The fold qualifies for float4 loads (the warp's lanes share it, so the kernel has no float4 loop).
  EXPECT_EQ(s.vector_width, 4);
}

TEST(ScheduleRules, ShortFoldOverAlignedF32RowsGetsFloat4) {
  GraphFixture f;
  const KernelSchedule s = chosen(f, testing::pairwise_dots(f, DType::F32, 4, 3, 16));
  EXPECT_EQ(s.mapping, Mapping::Elementwise);
  EXPECT_EQ(s.threads_per_output, 1);
  EXPECT_EQ(s.vector_width, 4);
}

TEST(ScheduleRules, Float4NeedsF32AndRowsOfAMultipleOfFour) {
  {
    GraphFixture f;  // f64
    EXPECT_EQ(chosen(f, testing::pairwise_dots(f, DType::F64, 4, 3, 16)).vector_width, 1);
  }
  {
    GraphFixture f;  // rows of 18 floats: neither the fold nor the rows split into float4s
    EXPECT_EQ(chosen(f, testing::pairwise_dots(f, DType::F32, 4, 3, 18)).vector_width, 1);
  }
  {
    GraphFixture f;  // strided operands: the strides are tested at run time
    EXPECT_EQ(chosen(f, testing::pairwise_dots(f, DType::F32, 4, 3, 16), Layout::Strided).vector_width, 4);
  }
  {
    GraphFixture f;  // constant strides that are not unit innermost
    const NodeId dots = testing::pairwise_dots(f, DType::F32, 4, 3, 16);
    std::vector<schedule::OperandInfo> operands = operands_of(f.graph(), dots, Layout::Fixed);
    operands[0].fixed_strides = {1, 64, 4};
    EXPECT_EQ(schedule::choose_schedule(f.graph().node(dots), operands).vector_width, 1);
    operands[0].fixed_strides = {48, 16, 1};
    EXPECT_EQ(schedule::choose_schedule(f.graph().node(dots), operands).vector_width, 4);
  }
}

TEST(ScheduleRules, FoldWithABoundsCheckKeepsTheScalarLoop) {
  // A gather inside the fold: its index is checked per step, which rules the float4 loop out.
  GraphFixture f;
  const NodeId table = f.input(DType::F32, {int_const(10), int_const(16)});
  const NodeId index = f.input(DType::I64, {int_const(4), int_const(16)});
  const ir::Expr i = ir::loop_var(0), r = ir::reduce_var(0);
  const ir::Expr row = ir::check_index(ir::load(1, DType::I64, {i, r}), int_const(10));
  const NodeId bag = f.b().pointwise(DType::F32, {int_const(4)}, {table, index},
                                     ir::fold(ir::ReduceOp::Sum, 0, int_const(16), ir::load(0, DType::F32, {row, r})));
  EXPECT_EQ(chosen(f, bag).vector_width, 1);
}

TEST(ScheduleRules, ConcatenationGetsOnePiecePerPart) {
  GraphFixture f;
  const NodeId a = f.input(DType::F32, {int_const(3), int_const(5)});
  const NodeId b = f.input(DType::F32, {int_const(4), int_const(5)});
  const NodeId c = f.input(DType::F32, {int_const(2), int_const(5)});
  const KernelSchedule s = chosen(f, f.b().concat({a, b, c}, 0));
  EXPECT_EQ(s.mapping, Mapping::Pieces);
  EXPECT_EQ(s.pieces, 3);
  EXPECT_EQ(s.threads_per_output, 1);
}

TEST(ScheduleRules, PlainPointwiseIsElementwise) {
  GraphFixture f;
  const NodeId x = f.input(DType::BF16, {int_const(7), int_const(9)});
  const KernelSchedule s = chosen(f, f.b().copy(x));
  EXPECT_EQ(s, KernelSchedule{});
  EXPECT_EQ(s.mapping, Mapping::Elementwise);
  EXPECT_EQ(s.block_size, 256);
  EXPECT_EQ(s.vector_width, 1);
  EXPECT_EQ(s.pieces, 1);
  EXPECT_EQ(s.unroll, 1);
}

TEST(ScheduleRules, ScatterGroupedRowsAndRowKernels) {
  GraphFixture f;
  const NodeId base = f.input(DType::F32, {int_const(10)});
  const NodeId index = f.input(DType::I64, {int_const(3)});
  const NodeId src = f.input(DType::F32, {int_const(3)});
  const ir::Expr i = ir::loop_var(0);
  const NodeId scatter = f.b().scatter(base, {int_const(3)}, {index, src}, {ir::load(1, DType::I64, {i})},
                                       ir::load(2, DType::F32, {i}), /*accumulate=*/true);
  EXPECT_EQ(chosen(f, scatter).mapping, Mapping::Scatter);

  const NodeId a = f.input(DType::BF16, {int_const(40), int_const(32)});
  const NodeId w = f.input(DType::BF16, {int_const(2), int_const(32), int_const(64)});
  const NodeId ends = f.input(DType::I32, {int_const(2)});
  const NodeId grouped = f.b().grouped_rows_matmul(a, w, ends, DType::BF16);
  ASSERT_NE(f.graph().node(grouped).contraction, ir::Contraction::None);
  const KernelSchedule g = chosen(f, grouped);
  EXPECT_EQ(g.mapping, Mapping::GroupedRows);
  EXPECT_EQ(g.block_size, 128);
  EXPECT_EQ(g.threads_per_output, 128);

  const KernelSchedule rows = schedule::choose_row_schedule();
  EXPECT_EQ(rows.mapping, Mapping::ThreadPerRow);
  EXPECT_EQ(rows.block_size, 32);
  EXPECT_EQ(rows.vector_width, 1);
}

// A decode row's keys are split over up to eight blocks, each with at least 32 keys of a static
// count; a symbolic count gets eight.
TEST(ScheduleRules, AttentionSplitsKeysByTheirCount) {
  const auto split_for = [](ir::Expr keys) {
    GraphFixture f;
    const NodeId q = f.input(DType::BF16, {int_const(1), int_const(4), int_const(1), int_const(64)});
    const NodeId k = f.input(DType::BF16, {int_const(1), int_const(4), keys, int_const(64)});
    const NodeId v = f.input(DType::BF16, {int_const(1), int_const(4), keys, int_const(64)});
    const KernelSchedule s = chosen(f, f.b().attention(q, k, v, std::nullopt, 0.125, false), Layout::Strided);
    EXPECT_EQ(s.mapping, Mapping::Attention);
    return s.key_split;
  };
  EXPECT_EQ(split_for(int_const(256)), 8);
  EXPECT_EQ(split_for(int_const(300)), 8);
  EXPECT_EQ(split_for(int_const(255)), 4);
  EXPECT_EQ(split_for(int_const(70)), 2);
  EXPECT_EQ(split_for(int_const(63)), 1);
  EXPECT_EQ(split_for(int_const(1)), 1);
  EXPECT_EQ(split_for(ir::symbol("s0")), 8);
}

TEST(ScheduleRules, NodesWithoutKernelsAreRefused) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4)});
  EXPECT_THROW(schedule::choose_schedule(f.graph().node(x), {}), Error);
}

TEST(ScheduleCandidates, StartWithTheChosenScheduleAndHoldNoDuplicates) {
  GraphFixture f;
  const NodeId dots = testing::pairwise_dots(f, DType::F32, 4, 3, 64);
  const auto operands = operands_of(f.graph(), dots);
  const std::vector<KernelSchedule> candidates = schedule::candidate_schedules(f.graph().node(dots), operands);
  ASSERT_FALSE(candidates.empty());
  EXPECT_EQ(candidates.front(), schedule::choose_schedule(f.graph().node(dots), operands));
  for (size_t a = 0; a < candidates.size(); ++a) {
    for (size_t b = a + 1; b < candidates.size(); ++b) EXPECT_NE(candidates[a], candidates[b]) << a << " " << b;
  }
  const auto has = [&](Mapping mapping, int width) {
    return std::any_of(candidates.begin(), candidates.end(),
                       [&](const KernelSchedule& s) { return s.mapping == mapping && s.vector_width == width; });
  };
  EXPECT_TRUE(has(Mapping::Elementwise, 4));
  EXPECT_TRUE(has(Mapping::Elementwise, 1));
  EXPECT_TRUE(has(Mapping::WarpPerOutput, 1));
  EXPECT_FALSE(has(Mapping::ThreadPerOutput, 1));  // a reduction's mapping
  EXPECT_FALSE(has(Mapping::Pieces, 1));
}

TEST(ScheduleCandidates, ReductionsOfferBothMappingsAndNoFloat4WithoutAFold) {
  GraphFixture f;
  const NodeId sum = testing::sum_over(f, DType::F32, 8, 100, 1);
  const std::vector<KernelSchedule> candidates =
      schedule::candidate_schedules(f.graph().node(sum), operands_of(f.graph(), sum));
  bool thread = false, warp = false;
  for (const KernelSchedule& s : candidates) {
    thread = thread || s.mapping == Mapping::ThreadPerOutput;
    warp = warp || s.mapping == Mapping::WarpPerOutput;
    EXPECT_EQ(s.vector_width, 1) << schedule::to_string(s);
  }
  EXPECT_TRUE(thread);
  EXPECT_TRUE(warp);
}

TEST(ScheduleValues, PrintAndCompare) {
  KernelSchedule s;
  s.mapping = Mapping::WarpPerOutput;
  s.threads_per_output = 32;
  s.vector_width = 4;
  EXPECT_EQ(schedule::to_string(s), "warp_per_output(block 256, 32 threads/output, vector 4, unroll 1)");
  KernelSchedule pieces;
  pieces.mapping = Mapping::Pieces;
  pieces.pieces = 3;
  EXPECT_EQ(schedule::to_string(pieces), "pieces(block 256, 1 threads/output, vector 1, unroll 1, 3 pieces)");
  EXPECT_NE(s, pieces);
  KernelSchedule split;
  split.mapping = Mapping::Attention;
  split.block_size = split.threads_per_output = 128;
  split.key_split = 4;
  EXPECT_EQ(schedule::to_string(split), "attention(block 128, 128 threads/output, vector 1, unroll 1, key split 4)");
  KernelSchedule one = split;
  one.key_split = 1;
  EXPECT_NE(one, split);
  KernelSchedule copy = s;
  EXPECT_EQ(copy, s);
  copy.block_size = 128;
  EXPECT_NE(copy, s);
}

enum class Counter { MovesAfter, MovesFirst, Stays };

// A decode layer (schedule::mark_early_attention_rows): the k and v caches written at the step
// counter, attention over them, and the counter moved on, as an output that updates it, after the
// attention or before it, or not at all (a fresh index tensor per call). `new_rows` rows are
// written from the counter on; with `rows_from_0_first`, the keys are written at rows 0.. first and
// the counter's rows onto that result. Returns the attention's schedule.
KernelSchedule decode_attention_schedule(Counter counter_update, int64_t new_rows, bool rows_from_0_first = false) {
  GraphFixture f;
  ir::Graph& g = f.graph();
  const ir::Shape cache{int_const(1), int_const(2), int_const(64), int_const(16)};
  const ir::Shape fresh{int_const(1), int_const(2), int_const(new_rows), int_const(16)};
  const NodeId cache_k = f.input(DType::BF16, cache), cache_v = f.input(DType::BF16, cache);
  const NodeId counter = f.input(DType::I64, {});
  const NodeId k = f.input(DType::BF16, fresh), v = f.input(DType::BF16, fresh);
  const NodeId q = f.input(DType::BF16, {int_const(1), int_const(4), int_const(1), int_const(16)});
  const auto move_counter = [&] {
    const NodeId moved = f.b().pointwise(DType::I64, {}, {counter}, ir::add(ir::load(0, DType::I64, {}), int_const(1)));
    g.outputs.push_back(ir::GraphOutput{ir::GraphOutput::Kind::Tensor, moved, nullptr, g.node(counter).input_position,
                                        "counter", ""});
  };
  if (counter_update == Counter::MovesFirst) move_counter();
  const std::vector<ir::Expr> i{ir::loop_var(0), ir::loop_var(1), ir::loop_var(2), ir::loop_var(3)};
  // The counter's rows of `cache` (or of `base`, a write onto it) become `values`: the output that
  // updates the cache.
  const auto write = [&](NodeId cache, NodeId values, NodeId base) {
    const ir::Expr row = ir::add(i[2], ir::load(1, DType::I64, {}));
    const NodeId written =
        f.b().scatter(base, fresh, {counter, values}, {i[0], i[1], row, i[3]}, ir::load(2, DType::BF16, i), false);
    g.outputs.push_back(ir::GraphOutput{ir::GraphOutput::Kind::Tensor, written, nullptr, g.node(cache).input_position,
                                        "cache", ""});
    return written;
  };
  const NodeId key_base =
      rows_from_0_first ? f.b().scatter(cache_k, fresh, {counter, k}, i, ir::load(2, DType::BF16, i), false) : cache_k;
  const NodeId keys = write(cache_k, k, key_base), values = write(cache_v, v, cache_v);
  const NodeId attention = f.b().attention(q, keys, values, std::nullopt, 0.25, false);
  f.output(attention);
  if (counter_update == Counter::MovesAfter) move_counter();
  schedule::Plan plan = schedule::plan_steps(g);
  schedule::schedule_kernels(plan, g);
  for (const schedule::Step& step : plan.steps) {
    if (step.node == attention) return *step.schedule;
  }
  ADD_FAILURE() << "no attention step";
  return {};
}

// The decode attention requests its keys before waiting only where every row the kernel ahead may
// be writing is a value of the counter, the graph's state, and the counter is not written before
// the attention.
TEST(ScheduleRules, AttentionRequestsKeysEarlyOnlyWhereTheWrittenRowsAreProven) {
  const KernelSchedule proven = decode_attention_schedule(Counter::MovesAfter, 1);
  EXPECT_TRUE(proven.has_early_rows());
  EXPECT_EQ(proven.key_rows.count, 1);
  EXPECT_EQ(proven.key_rows.input, proven.value_rows.input);
  // The counter's update is a step before the attention: the kernel would read the moved value.
  EXPECT_FALSE(decode_attention_schedule(Counter::MovesFirst, 1).has_early_rows());
  // A per-call index: its new pointer would be a parameter update per attention and call.
  EXPECT_FALSE(decode_attention_schedule(Counter::Stays, 1).has_early_rows());
  // Two rows from the counter on: the second is no value of the counter.
  EXPECT_FALSE(decode_attention_schedule(Counter::MovesAfter, 2).has_early_rows());
  // Another write onto the key cache ahead of the attention (rows 0..): a kernel ahead of the
  // attention may still be running when it starts, so that row could be read stale.
  EXPECT_FALSE(decode_attention_schedule(Counter::MovesAfter, 1, /*rows_from_0_first=*/true).has_early_rows());
}

}  // namespace
}  // namespace luminal
