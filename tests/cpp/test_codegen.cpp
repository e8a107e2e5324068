// CUDA code generation from hand-built IR nodes: the golden text of one kernel per mapping, NVRTC
// compiles of each (NVRTC is loaded at run time and needs no GPU), every alternative schedule the
// renderer accepts compiles, and schedules it cannot render are refused with a ScheduleError.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

#include "codegen/cuda_codegen.h"
#include "kernel_helpers.h"
#include "passes/row_plan.h"
#include "schedule/kernel_schedule.h"
#ifdef LUMINAL_HAVE_CUDA
#include "nvrtc_helpers.h"
#include "runtime/cuda/api.h"
#include "runtime/cuda/nvrtc.h"
#endif

namespace luminal {
namespace {

using codegen::Kernel;
using ir::int_const;
using ir::NodeId;
using schedule::KernelSchedule;
using schedule::Layout;
using schedule::Mapping;
using testing::GraphFixture;
using testing::operands_of;

// The kernel's source with its name (a hash of the text) written as LM_KERNEL.
std::string golden(const Kernel& kernel) {
  std::string text = kernel.source;
  for (size_t pos = text.find(kernel.name); pos != std::string::npos; pos = text.find(kernel.name, pos)) {
    text.replace(pos, kernel.name.size(), "LM_KERNEL");
  }
  return text;
}

// Compiles the kernels as one module for sm_90; a compile error fails with NVRTC's log.
void expect_compiles(const std::vector<Kernel>& kernels) {
#ifdef LUMINAL_HAVE_CUDA
  const std::string source = codegen::module_source(kernels);
  try {
    EXPECT_FALSE(cuda::compile_to_cubin(source, "sm_90").empty());
  } catch (const Error& error) {
    ADD_FAILURE() << error.what() << "\n" << source;
  }
#else
  GTEST_SKIP() << "built without the CUDA toolkit's headers: no NVRTC";
#endif
}

Kernel render(GraphFixture& f, NodeId id, const KernelSchedule& schedule, Layout layout = Layout::Contiguous) {
  return codegen::render_kernel(f.graph().node(id), operands_of(f.graph(), id, layout), schedule);
}

Kernel generate(GraphFixture& f, NodeId id, Layout layout = Layout::Contiguous) {
  return codegen::generate_kernel(f.graph().node(id), operands_of(f.graph(), id, layout));
}

// Expected texts (tests/cpp/test_codegen_golden.inc): one raw string per kernel.
#include "test_codegen_golden.inc"

void expect_golden(const Kernel& kernel, const char* expected, const char* what) {
  const std::string actual = golden(kernel);
  EXPECT_EQ(actual, expected) << what << ": the generated text changed; the new text:\n" << actual;
}

// ------------------------------------------------------------------------------------------------
// Golden kernels
// ------------------------------------------------------------------------------------------------

TEST(CodegenGolden, ElementwiseThreadPerElement) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(3), int_const(5)});
  const NodeId y = f.input(DType::F32, {int_const(5)});
  const ir::Expr i0 = ir::loop_var(0), i1 = ir::loop_var(1);
  const ir::Expr body = ir::add(ir::mul(ir::load(0, DType::F32, {i0, i1}), ir::load(1, DType::F32, {i1})),
                                ir::float_const(1.0));
  const NodeId out = f.b().pointwise(DType::F32, {int_const(3), int_const(5)}, {x, y}, body);
  const Kernel k = generate(f, out);
  EXPECT_EQ(k.schedule, KernelSchedule{});
  EXPECT_EQ(k.block_size, 256);
  EXPECT_EQ(k.threads_per_output, 1);
  expect_golden(k, kGoldenElementwise, "elementwise");
  expect_compiles({k});
}

// A node kernel requests each small input into L2 before its wait for the kernels ahead (so that
// an input an earlier step left in memory is on its way meanwhile), and leaves alone inputs past
// kPrefetchBytes and inputs of symbolic size, which stream with the kernel's own loads.
TEST(Codegen, SmallInputsAreRequestedIntoL2BeforeTheWait) {
  GraphFixture f;
  const NodeId row = f.input(DType::BF16, {int_const(1), int_const(2048)});    // 4 KiB
  const NodeId table = f.input(DType::BF16, {int_const(64), int_const(2048)});  // 256 KiB
  const NodeId ragged = f.input(DType::BF16, {ir::symbol("n"), int_const(2048)});
  const ir::Expr i1 = ir::loop_var(1);
  const ir::Expr zero = int_const(0);
  const ir::Expr body = ir::add(ir::add(ir::load(0, DType::BF16, {zero, i1}), ir::load(1, DType::BF16, {zero, i1})),
                                ir::load(2, DType::BF16, {zero, i1}));
  const NodeId out = f.b().pointwise(DType::BF16, {int_const(1), int_const(2048)}, {row, table, ragged}, body);
  const std::string text = generate(f, out).source;
  const size_t wait = text.find("lm_kernel_entry();");
  ASSERT_NE(wait, std::string::npos) << text;
  const size_t prefetch = text.find(str_cat("lm_prefetch_l2(p.in0, 4096LL, ", codegen::kPrefetchBytes, "LL"));
  EXPECT_LT(prefetch, wait) << text;
  EXPECT_EQ(text.find("lm_prefetch_l2(p.in1"), std::string::npos) << "256 KiB is past the limit:\n" << text;
  EXPECT_EQ(text.find("lm_prefetch_l2(p.in2"), std::string::npos) << "a symbolic size:\n" << text;
  // Strided inputs are measured at run time: the prelude's check leaves the large ones alone.
  const NodeId strided = f.b().pointwise(DType::BF16, {int_const(1), int_const(2048)}, {table},
                                         ir::load(0, DType::BF16, {zero, i1}));
  const std::string strided_text = generate(f, strided, Layout::Strided).source;
  EXPECT_NE(strided_text.find("lm_prefetch_l2(p.in0, (1LL + 63LL * p.stride0_0 + 2047LL * p.stride0_1) * 2LL"),
            std::string::npos)
      << strided_text;
  expect_compiles({generate(f, out), generate(f, strided, Layout::Strided)});
}

TEST(CodegenGolden, StridedBf16Elementwise) {
  // Graph inputs arrive with run-time strides; bf16 is computed in f32 and rounded.
  GraphFixture f;
  const NodeId x = f.input(DType::BF16, {int_const(4), int_const(6)});
  const ir::Expr i0 = ir::loop_var(0), i1 = ir::loop_var(1);
  const NodeId out = f.b().pointwise(DType::BF16, {int_const(4), int_const(6)}, {x},
                                     ir::unary(ir::ExprOp::Exp, ir::load(0, DType::BF16, {i0, i1})));
  const Kernel k = generate(f, out, Layout::Strided);
  expect_golden(k, kGoldenStridedBf16, "strided_bf16");
  expect_compiles({k});
}

TEST(CodegenGolden, ReduceThreadPerOutput) {
  GraphFixture f;
  const Kernel k = generate(f, testing::sum_over(f, DType::F32, 6, 4, /*reduce_axis=*/0));
  EXPECT_EQ(k.schedule.mapping, Mapping::ThreadPerOutput);
  expect_golden(k, kGoldenReduceThread, "reduce_thread");
  expect_compiles({k});
}

TEST(CodegenGolden, ReduceWarpPerOutput) {
  GraphFixture f;
  const Kernel k = generate(f, testing::sum_over(f, DType::F32, 6, 100, /*reduce_axis=*/1));
  EXPECT_EQ(k.schedule.mapping, Mapping::WarpPerOutput);
  EXPECT_EQ(k.threads_per_output, 32);
  expect_golden(k, kGoldenReduceWarp, "reduce_warp");
  expect_compiles({k});
}

// A bf16 convolution (ir::Convolution): the accumulator is float (its f32 body), the node is
// stored as bf16, rounded once from the float sum.
TEST(CodegenGolden, HalfConvolutionSumsInFloatAndStoresItsDtype) {
  GraphFixture f;
  const Kernel k = generate(f, testing::conv1d(f, DType::BF16, 2, 3, 4, 9, 3));
  EXPECT_NE(k.source.find("unsigned short* out;"), std::string::npos) << k.source;
  EXPECT_NE(k.source.find("float acc = 0;"), std::string::npos) << k.source;
  EXPECT_NE(k.source.find("= lm_f2bf((float)acc);"), std::string::npos) << k.source;
  expect_compiles({k});
}

TEST(CodegenGolden, Pieces) {
  GraphFixture f;
  const NodeId a = f.input(DType::F32, {int_const(2), int_const(3)});
  const NodeId b = f.input(DType::F32, {int_const(1), int_const(3)});
  const Kernel k = generate(f, f.b().concat({a, b}, 0));
  EXPECT_EQ(k.schedule.mapping, Mapping::Pieces);
  EXPECT_EQ(k.grid_y, 2);
  expect_golden(k, kGoldenPieces, "pieces");
  expect_compiles({k});
}

TEST(CodegenGolden, VectorFold) {
  GraphFixture f;
  const Kernel k = generate(f, testing::pairwise_dots(f, DType::F32, 2, 2, 8));
  EXPECT_EQ(k.schedule.mapping, Mapping::Elementwise);
  EXPECT_EQ(k.schedule.vector_width, 4);
  expect_golden(k, kGoldenVectorFold, "vector_fold");
  expect_compiles({k});
}

TEST(CodegenGolden, WarpSharedFold) {
  GraphFixture f;
  const Kernel k = generate(f, testing::pairwise_dots(f, DType::F32, 2, 2, 64));
  EXPECT_EQ(k.schedule.mapping, Mapping::WarpPerOutput);
  expect_golden(k, kGoldenWarpFold, "warp_fold");
  expect_compiles({k});
}

TEST(CodegenGolden, ScatterAccumulate) {
  GraphFixture f;
  const NodeId base = f.input(DType::F32, {int_const(10)});
  const NodeId index = f.input(DType::I64, {int_const(3)});
  const NodeId src = f.input(DType::F32, {int_const(3)});
  const ir::Expr i = ir::loop_var(0);
  const NodeId scatter = f.b().scatter(base, {int_const(3)}, {index, src}, {ir::load(1, DType::I64, {i})},
                                       ir::load(2, DType::F32, {i}), /*accumulate=*/true);
  const Kernel k = generate(f, scatter);
  EXPECT_EQ(k.schedule.mapping, Mapping::Scatter);
  ASSERT_EQ(k.check_labels.size(), 1u);  // the target's bounds check
  expect_golden(k, kGoldenScatter, "scatter");
  expect_compiles({k});
}

TEST(CodegenGolden, RowKernel) {
  // relu(x * 2) summed over each row: one row-local graph, one thread per row.
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(64), int_const(4)});
  const ir::Expr i0 = ir::loop_var(0), i1 = ir::loop_var(1);
  const ir::Expr twice = ir::mul(ir::load(0, DType::F32, {i0, i1}), ir::float_const(2.0));
  const NodeId relu = f.b().pointwise(DType::F32, {int_const(64), int_const(4)}, {x},
                                      ir::binary(ir::ExprOp::Max, twice, ir::float_const(0.0)));
  f.output(f.b().reduce_dims(relu, {1}, /*keepdim=*/false, ir::ReduceOp::Sum, DType::F32));
  const passes::RowPlan plan = passes::plan_row_kernel(f.graph());
  ASSERT_TRUE(plan.accepted) << plan.reason;
  const Kernel k = codegen::generate_row_kernel(plan.graph, plan.rows);
  EXPECT_EQ(k.schedule.mapping, Mapping::ThreadPerRow);
  EXPECT_EQ(k.block_size, 32);
  expect_golden(k, kGoldenRowKernel, "row_kernel");
  expect_compiles({k});
}

// The row kernel reads constants and inputs that nothing writes through the non-coherent cache
// (__ldg), which NVVM optimizes in a fraction of the time plain loads of an unrolled MLP take; an
// input the graph updates in place is written by the kernel itself, so its loads stay coherent.
TEST(RowKernel, ReadsThroughTheNonCoherentCacheOnlyWhatNothingWrites) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(8), int_const(4)});
  const NodeId state = f.input(DType::F32, {int_const(8), int_const(4)});
  const ir::Expr i0 = ir::loop_var(0), i1 = ir::loop_var(1);
  const ir::Expr sum = ir::add(ir::load(0, DType::F32, {i0, i1}), ir::load(1, DType::F32, {i0, i1}));
  const NodeId updated = f.b().pointwise(DType::F32, {int_const(8), int_const(4)}, {x, state}, sum);
  f.output(updated);
  f.graph().outputs.back().mutated_input = 1;  // state.add_(x)
  f.output(f.b().reduce_dims(updated, {1}, /*keepdim=*/false, ir::ReduceOp::Sum, DType::F32));
  const passes::RowPlan plan = passes::plan_row_kernel(f.graph());
  ASSERT_TRUE(plan.accepted) << plan.reason;
  const Kernel k = codegen::generate_row_kernel(plan.graph, plan.rows);
  const std::string text = golden(k);
  EXPECT_NE(text.find("__ldg(&p.g0["), std::string::npos) << text;
  EXPECT_EQ(text.find("__ldg(&p.g1["), std::string::npos) << text;
  EXPECT_NE(text.find("= p.g1["), std::string::npos) << text;
  expect_compiles({k});
}

// A grouped-rows contraction: the template's text is long; its shapes and types are checked here.
TEST(CodegenGolden, GroupedRowsFillsTheTemplate) {
  GraphFixture f;
  const NodeId a = f.input(DType::BF16, {int_const(40), int_const(32)});
  const NodeId w = f.input(DType::BF16, {int_const(2), int_const(32), int_const(64)});
  const NodeId ends = f.input(DType::I32, {int_const(2)});
  const NodeId grouped = f.b().grouped_rows_matmul(a, w, ends, DType::BF16);
  const Kernel k = generate(f, grouped);
  EXPECT_EQ(k.schedule.mapping, Mapping::GroupedRows);
  EXPECT_EQ(k.block_size, 128);
  const std::string text = golden(k);
  EXPECT_NE(text.find("const lm_i64 lm_m = 40LL, lm_n = 64LL, lm_k = 32LL, lm_groups = 2LL;"), std::string::npos) << text;
  EXPECT_NE(text.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos) << text;
  EXPECT_NE(text.find("#if 1 && defined(__CUDA_ARCH__)"), std::string::npos) << text;
  EXPECT_NE(text.find("__launch_bounds__(128)"), std::string::npos) << text;
  EXPECT_EQ(text.find('@'), std::string::npos) << "a template placeholder was left:\n" << text;
  expect_compiles({k});
}

// Attention: the template filled in for every float dtype (tensor cores for f16/bf16 with head
// sizes that are multiples of 16), with and without a broadcast mask, a head size too large to
// stage in shared memory, and symbolic sequence lengths; each compiles with NVRTC.
TEST(CodegenGolden, AttentionFillsTheTemplateForEveryDtype) {
  const ir::Expr queries = ir::symbol("s0"), keys = ir::symbol("s1");
  struct Case {
    DType dtype;
    int64_t head_size, value_size;
    bool mask, causal;
  };
  const Case cases[] = {{DType::F32, 40, 40, true, false},  {DType::F64, 64, 32, false, true},
                        {DType::F16, 64, 64, true, true},   {DType::BF16, 64, 64, false, true},
                        {DType::BF16, 128, 128, true, false}, {DType::BF16, 40, 24, false, false},
                        {DType::F64, 256, 256, false, false}};
  std::vector<Kernel> kernels;
  for (const Case& c : cases) {
    GraphFixture f;
    const NodeId q = f.input(c.dtype, {int_const(2), int_const(8), queries, int_const(c.head_size)});
    const NodeId k = f.input(c.dtype, {int_const(2), int_const(2), keys, int_const(c.head_size)});
    const NodeId v = f.input(c.dtype, {int_const(2), int_const(2), keys, int_const(c.value_size)});
    std::optional<NodeId> mask;
    if (c.mask) mask = f.input(DType::Bool, {int_const(2), int_const(1), int_const(1), keys});
    f.b().set_origin("attention");
    const NodeId out = f.b().attention(q, k, v, mask, 0.125, c.causal);
    const Kernel kernel = generate(f, out, Layout::Strided);
    EXPECT_EQ(kernel.schedule.mapping, Mapping::Attention);
    EXPECT_EQ(kernel.block_size, schedule::kAttentionThreads);
    const std::string text = golden(kernel);
    EXPECT_EQ(text.find('@'), std::string::npos) << "a template placeholder was left:\n" << text;
    EXPECT_NE(text.find(c.causal ? "(true && " : "(false && "), std::string::npos) << text;
    if (c.mask) EXPECT_NE(text.find("p.stride3_3"), std::string::npos) << "the mask is read by strides:\n" << text;
    const bool half = c.dtype == DType::F16 || c.dtype == DType::BF16;
    const bool tensor_cores = half && c.head_size % 16 == 0 && c.value_size % 16 == 0;
    EXPECT_EQ(text.find("mma.sync.aligned.m16n8k16") != std::string::npos, tensor_cores) << text;
    kernels.push_back(kernel);
  }
  expect_compiles(kernels);
}

// The codegen check (LUMINAL_CHECK_CUDA_CODEGEN) compiles at the fast-compile level, and still finds
// what it is there for: C++ errors in generated code and PTX that the assembler rejects.
TEST(CodegenCheck, FastCompileCheckStillRejectsBadCodeAndBadPtx) {
#ifdef LUMINAL_HAVE_CUDA
  const std::string good = R"(extern "C" __global__ void k(float* out) { out[threadIdx.x] = 2.0f * threadIdx.x; })";
  EXPECT_NO_THROW(cuda::check_compiles(good, "sm_90"));
  const std::string type_error = R"(extern "C" __global__ void k(float* out) { out[threadIdx.x] = out; })";
  EXPECT_THROW(cuda::check_compiles(type_error, "sm_90"), Error);
  const std::string bad_ptx = R"(extern "C" __global__ void k(float* out) { asm volatile("not.an.instruction;"); })";
  EXPECT_THROW(cuda::check_compiles(bad_ptx, "sm_90"), Error);
  const std::string bad_operand = R"(extern "C" __global__ void k(float* out) {
  unsigned r; asm volatile("mov.u32 %0, %%nosuchreg;" : "=r"(r)); out[0] = r; })";
  EXPECT_THROW(cuda::check_compiles(bad_operand, "sm_90"), Error);
#else
  GTEST_SKIP() << "built without the CUDA toolkit's headers: no NVRTC";
#endif
}

// The tensor-core attention kernel's launch bounds cap its registers (four blocks per SM at head
// size 64 without a mask, three with one, two above 64): every variant must fit without spilling
// to local memory, which would cost more than the occupancy gains.
TEST(CodegenGolden, TensorCoreAttentionDoesNotSpill) {
#ifdef LUMINAL_HAVE_CUDA
  struct Case {
    int64_t head_size;
    bool mask, causal;
  };
  for (const Case c : {Case{64, false, false}, Case{64, false, true}, Case{64, true, false}, Case{128, false, true},
                       Case{128, true, false}}) {
    GraphFixture f;
    const NodeId q = f.input(DType::BF16, {int_const(2), int_const(12), int_const(197), int_const(c.head_size)});
    const NodeId k = f.input(DType::BF16, {int_const(2), int_const(12), int_const(197), int_const(c.head_size)});
    const NodeId v = f.input(DType::BF16, {int_const(2), int_const(12), int_const(197), int_const(c.head_size)});
    std::optional<NodeId> mask;
    if (c.mask) mask = f.input(DType::BF16, {int_const(2), int_const(1), int_const(197), int_const(197)});
    f.b().set_origin("attention");
    const NodeId out = f.b().attention(q, k, v, mask, 0.125, c.causal);
    const std::string report =
        testing::compile_for_sm90(codegen::module_source({generate(f, out, Layout::Strided)}), true).log;
    const size_t kernel = report.find("Compiling entry function 'lm_", report.find("'lm_export_errors'") + 1);
    ASSERT_NE(kernel, std::string::npos) << report;
    EXPECT_NE(report.find(" 0 bytes spill stores, 0 bytes spill loads", kernel), std::string::npos)
        << "head size " << c.head_size << (c.mask ? ", masked" : "") << (c.causal ? ", causal" : "") << ":\n"
        << report;
  }
#else
  GTEST_SKIP() << "built without the CUDA toolkit's headers: no NVRTC";
#endif
}

// A decode step's attention (at most four queries) runs attention_decode.cuh: one block per
// query, registers for eight key and value rows in flight per warp. Its variants must not spill.
TEST(CodegenGolden, DecodeAttentionKernelDoesNotSpill) {
#ifdef LUMINAL_HAVE_CUDA
  struct Case {
    DType dtype;
    int64_t queries, head_size;
    bool mask;
  };
  for (const Case c : {Case{DType::BF16, 1, 64, true}, Case{DType::BF16, 4, 128, false}, Case{DType::F32, 1, 256, true},
                       Case{DType::F16, 2, 80, false}}) {
    GraphFixture f;
    const NodeId q = f.input(c.dtype, {int_const(1), int_const(32), int_const(c.queries), int_const(c.head_size)});
    const NodeId k = f.input(c.dtype, {int_const(1), int_const(8), int_const(300), int_const(c.head_size)});
    const NodeId v = f.input(c.dtype, {int_const(1), int_const(8), int_const(300), int_const(c.head_size)});
    std::optional<NodeId> mask;
    if (c.mask) mask = f.input(c.dtype, {int_const(1), int_const(1), int_const(c.queries), int_const(300)});
    f.b().set_origin("attention");
    const NodeId out = f.b().attention(q, k, v, mask, 0.125, false);
    const Kernel kernel = generate(f, out, Layout::Strided);
    EXPECT_NE(kernel.source.find("LM_KEYS_IN_FLIGHT"), std::string::npos) << "not the decode kernel:\n" << kernel.source;
    EXPECT_EQ(kernel.source.find('@'), std::string::npos) << "a template placeholder was left:\n" << kernel.source;
    const std::string report = testing::compile_for_sm90(codegen::module_source({kernel}), true).log;
    const size_t entry = report.find("Compiling entry function 'lm_", report.find("'lm_export_errors'") + 1);
    ASSERT_NE(entry, std::string::npos) << report;
    EXPECT_NE(report.find(" 0 bytes spill stores, 0 bytes spill loads", entry), std::string::npos)
        << c.queries << " queries, head size " << c.head_size << ":\n" << report;
  }
#else
  GTEST_SKIP() << "built without the CUDA toolkit's headers: no NVRTC";
#endif
}

// The schedule's key_split: the decode kernel's blocks per row (the launch's outputs) and its
// LM_SPLIT; one block per row where the vector path is not compiled (a head of 40 f32 elements is
// no power of two of 16-byte vectors); other splits are refused.
TEST(CodegenSchedules, DecodeAttentionRendersTheKeySplit) {
  const auto render_split = [](DType dtype, int64_t head_size, int split) {
    GraphFixture f;
    const NodeId q = f.input(dtype, {int_const(2), int_const(4), int_const(1), int_const(head_size)});
    const NodeId k = f.input(dtype, {int_const(2), int_const(4), int_const(256), int_const(head_size)});
    const NodeId v = f.input(dtype, {int_const(2), int_const(4), int_const(256), int_const(head_size)});
    f.b().set_origin("attention");
    const NodeId out = f.b().attention(q, k, v, std::nullopt, 0.125, false);
    KernelSchedule s = schedule::choose_schedule(f.graph().node(out), operands_of(f.graph(), out, Layout::Strided));
    s.key_split = split;
    return codegen::render_kernel(f.graph().node(out), operands_of(f.graph(), out, Layout::Strided), s);
  };
  for (const int split : {1, 2, 8}) {
    const Kernel kernel = render_split(DType::BF16, 64, split);
    EXPECT_EQ(ir::as_int_const(kernel.outputs).value_or(-1), 2 * 4 * split) << split;
    EXPECT_NE(kernel.source.find(str_cat("#define LM_SPLIT ", split, " ")), std::string::npos) << kernel.source;
  }
  const Kernel scalar = render_split(DType::F32, 40, 8);
  EXPECT_EQ(ir::as_int_const(scalar.outputs).value_or(-1), 2 * 4);
  EXPECT_NE(scalar.source.find("#define LM_SPLIT 1 "), std::string::npos) << scalar.source;
  EXPECT_THROW(render_split(DType::BF16, 64, 3), schedule::ScheduleError);
  EXPECT_THROW(render_split(DType::BF16, 64, 16), schedule::ScheduleError);
}

// ------------------------------------------------------------------------------------------------
// Schedules as inputs
// ------------------------------------------------------------------------------------------------

TEST(CodegenSchedules, TheScheduleDecidesTheVectorWidthAndBlock) {
  GraphFixture f;
  const NodeId dots = testing::pairwise_dots(f, DType::F32, 2, 2, 8);
  KernelSchedule s = schedule::choose_schedule(f.graph().node(dots), operands_of(f.graph(), dots));
  ASSERT_EQ(s.vector_width, 4);
  const Kernel vector = render(f, dots, s);
  EXPECT_NE(vector.source.find("float4"), std::string::npos);
  s.vector_width = 1;
  s.block_size = 128;
  const Kernel scalar = render(f, dots, s);
  EXPECT_EQ(scalar.source.find("float4"), std::string::npos) << scalar.source;
  EXPECT_NE(scalar.source.find("__launch_bounds__(128)"), std::string::npos);
  EXPECT_EQ(scalar.block_size, 128);
  EXPECT_EQ(scalar.schedule, s);
  EXPECT_NE(scalar.name, vector.name);
}

// Every alternative schedule of a node renders and compiles.
void expect_candidates_compile(GraphFixture& f, NodeId id, Layout layout, size_t at_least) {
  const ir::Node& node = f.graph().node(id);
  const std::vector<schedule::OperandInfo> operands = operands_of(f.graph(), id, layout);
  const std::vector<KernelSchedule> candidates = schedule::candidate_schedules(node, operands);
  EXPECT_GE(candidates.size(), at_least);
  std::vector<Kernel> kernels;
  for (const KernelSchedule& s : candidates) {
    try {
      kernels.push_back(codegen::render_kernel(node, operands, s));
    } catch (const Error& error) {
      ADD_FAILURE() << schedule::to_string(s) << ": " << error.what();
      continue;
    }
    EXPECT_EQ(kernels.back().schedule, s);
    EXPECT_EQ(kernels.back().block_size, s.block_size);
    EXPECT_EQ(kernels.back().threads_per_output, s.threads_per_output);
    EXPECT_EQ(kernels.back().grid_y, s.pieces);
  }
  expect_compiles(kernels);
}

TEST(CodegenSchedules, EveryCandidateCompiles) {
  {
    GraphFixture f;  // elementwise / warp, scalar and float4 folds
    expect_candidates_compile(f, testing::pairwise_dots(f, DType::F32, 2, 3, 64), Layout::Contiguous, 12);
  }
  {
    GraphFixture f;  // run-time float4 test of strided operands
    expect_candidates_compile(f, testing::pairwise_dots(f, DType::F32, 2, 3, 16), Layout::Strided, 12);
  }
  {
    GraphFixture f;  // f64 folds: no float4
    expect_candidates_compile(f, testing::pairwise_dots(f, DType::F64, 2, 3, 64), Layout::Contiguous, 6);
  }
  {
    GraphFixture f;  // thread / warp reductions, f16
    expect_candidates_compile(f, testing::sum_over(f, DType::F16, 5, 70, 1), Layout::Strided, 6);
  }
  {
    GraphFixture f;  // pieces and elementwise
    const NodeId a = f.input(DType::I32, {int_const(2), int_const(3)});
    const NodeId b = f.input(DType::I32, {int_const(5), int_const(3)});
    expect_candidates_compile(f, f.b().concat({a, b}, 0), Layout::Contiguous, 6);
  }
  {
    GraphFixture f;  // scatter
    const NodeId base = f.input(DType::BF16, {int_const(10)});
    const NodeId index = f.input(DType::I64, {int_const(3)});
    const NodeId src = f.input(DType::BF16, {int_const(3)});
    const ir::Expr i = ir::loop_var(0);
    expect_candidates_compile(f,
                              f.b().scatter(base, {int_const(3)}, {index, src}, {ir::load(1, DType::I64, {i})},
                                            ir::load(2, DType::BF16, {i}), true),
                              Layout::Strided, 3);
  }
  for (const DType dtype : {DType::BF16, DType::F16}) {
    GraphFixture f;  // a half-precision convolution: an f32 body summed, stored rounded once
    expect_candidates_compile(f, testing::conv1d(f, dtype, 2, 3, 4, 9, 3), Layout::Strided, 2);
  }
  {
    GraphFixture f;  // grouped rows, f32 (FMA path)
    const NodeId a = f.input(DType::F32, {int_const(40), int_const(32)});
    const NodeId w = f.input(DType::F32, {int_const(2), int_const(32), int_const(64)});
    const NodeId ends = f.input(DType::I32, {int_const(2)});
    expect_candidates_compile(f, f.b().grouped_rows_matmul(a, w, ends, DType::F32), Layout::Strided, 1);
  }
}

// ------------------------------------------------------------------------------------------------
// Schedules the renderer refuses
// ------------------------------------------------------------------------------------------------

// The ScheduleError of rendering `id` with `s`, or a failure.
std::string refusal(GraphFixture& f, NodeId id, const KernelSchedule& s) {
  try {
    render(f, id, s);
  } catch (const schedule::ScheduleError& error) {
    EXPECT_EQ(error.node(), f.graph().node(id).origin);
    EXPECT_EQ(error.schedule(), s);
    EXPECT_NE(std::string(error.what()).find(schedule::to_string(s)), std::string::npos) << error.what();
    return error.reason();
  }
  ADD_FAILURE() << "rendered " << schedule::to_string(s);
  return "";
}

NodeId sum_over_for_unroll(GraphFixture& f) { return testing::sum_over(f, DType::F32, 4, 4, 1); }

KernelSchedule with(Mapping mapping, int threads_per_output = 1) {
  KernelSchedule s;
  s.mapping = mapping;
  s.threads_per_output = threads_per_output;
  return s;
}

TEST(CodegenSchedules, RefusesWhatItCannotRender) {
  GraphFixture f;
  const NodeId f64_dots = testing::pairwise_dots(f, DType::F64, 2, 2, 8);
  KernelSchedule float4 = with(Mapping::Elementwise);
  float4.vector_width = 4;
  EXPECT_NE(refusal(f, f64_dots, float4).find("float4"), std::string::npos);

  const NodeId x = f.input(DType::F32, {int_const(8)});
  const NodeId copy = f.b().copy(x);
  EXPECT_NE(refusal(f, copy, with(Mapping::WarpPerOutput, 32)).find("no top-level fold"), std::string::npos);
  EXPECT_NE(refusal(f, copy, with(Mapping::ThreadPerOutput)).find("cannot be rendered as"), std::string::npos);
  KernelSchedule pieces = with(Mapping::Pieces);
  pieces.pieces = 2;
  EXPECT_NE(refusal(f, copy, pieces).find("pieces"), std::string::npos);
  KernelSchedule odd_block;
  odd_block.block_size = 100;
  EXPECT_NE(refusal(f, copy, odd_block).find("block size"), std::string::npos);
  KernelSchedule unrolled;
  unrolled.unroll = 3;  // not a factor the writer renders
  EXPECT_NE(refusal(f, copy, unrolled).find("unroll"), std::string::npos);
  unrolled.unroll = 2;
  const NodeId odd = f.b().copy(f.input(DType::F32, {int_const(7)}));
  EXPECT_NE(refusal(f, odd, unrolled).find("unroll"), std::string::npos);
  KernelSchedule unrolled_reduction = with(Mapping::ThreadPerOutput);
  unrolled_reduction.unroll = 2;
  EXPECT_NE(refusal(f, sum_over_for_unroll(f), unrolled_reduction).find("unroll"), std::string::npos);
  EXPECT_NE(refusal(f, copy, with(Mapping::Elementwise, 32)).find("threads per output"), std::string::npos);

  const NodeId sum = testing::sum_over(f, DType::F32, 4, 4, 1);
  EXPECT_NE(refusal(f, sum, with(Mapping::Elementwise)).find("cannot be rendered as"), std::string::npos);

  const NodeId a = f.input(DType::F32, {int_const(40), int_const(32)});
  const NodeId w = f.input(DType::F32, {int_const(2), int_const(32), int_const(64)});
  const NodeId ends = f.input(DType::I32, {int_const(2)});
  const NodeId grouped = f.b().grouped_rows_matmul(a, w, ends, DType::F32);
  KernelSchedule tile = with(Mapping::GroupedRows, 128);
  EXPECT_NE(refusal(f, grouped, tile).find("128 threads per block"), std::string::npos);  // block 256
  EXPECT_NE(refusal(f, grouped, with(Mapping::Elementwise)).find("grouped-rows"), std::string::npos);
}

TEST(CodegenSchedules, RowKernelsRefuseOtherSchedules) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(64), int_const(4)});
  f.output(f.b().copy(x));
  const passes::RowPlan plan = passes::plan_row_kernel(f.graph());
  ASSERT_TRUE(plan.accepted) << plan.reason;
  KernelSchedule s = schedule::choose_row_schedule();
  s.vector_width = 4;
  EXPECT_THROW(codegen::render_row_kernel(plan.graph, plan.rows, s), schedule::ScheduleError);
  EXPECT_THROW(codegen::render_row_kernel(plan.graph, plan.rows, KernelSchedule{}), schedule::ScheduleError);
  s = schedule::choose_row_schedule();
  s.block_size = 64;
  const Kernel k = codegen::render_row_kernel(plan.graph, plan.rows, s);
  EXPECT_EQ(k.block_size, 64);
  EXPECT_NE(k.source.find("__launch_bounds__(64)"), std::string::npos) << k.source;
  expect_compiles({k});
}

}  // namespace
}  // namespace luminal

namespace luminal {
namespace {

// A gather out[i] = x[index(idx[i])] + y[i] after a bounds check: which reads wait for the checks
// (lm_ok). Reads whose indices stay in range whatever a check found (y[i]; x at a check of a
// constant bound no larger than x's dimension, which yields 0 on failure) issue unguarded.
std::string gather_source(ir::Shape x_shape, const std::function<ir::Expr(const ir::Expr&)>& index) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, std::move(x_shape));
  const NodeId idx = f.input(DType::I64, {int_const(6)});
  const NodeId y = f.input(DType::F32, {int_const(6)});
  const ir::Expr i = ir::loop_var(0);
  const ir::Expr checked = ir::check_index(ir::load(1, DType::I64, {i}), int_const(10));
  const ir::Expr body = ir::add(ir::load(0, DType::F32, {index(checked)}), ir::load(2, DType::F32, {i}));
  const NodeId out = f.b().pointwise(DType::F32, {int_const(6)}, {x, idx, y}, body);
  f.output(out);
  const Kernel k = generate(f, out);
  expect_compiles({k});
  return k.source;
}

TEST(CodegenGuards, ReadsInRangeWhateverTheChecksFoundDoNotWaitForThem) {
  const auto same = [](const ir::Expr& checked) { return checked; };
  const std::string exact = gather_source({int_const(10)}, same);
  EXPECT_EQ(exact.find("lm_ok) ?"), std::string::npos) << exact;  // neither x[checked] nor y[i] waits
  EXPECT_NE(exact.find("lm_check("), std::string::npos) << exact;    // the check itself stays
  const std::string larger = gather_source({int_const(16)}, same);
  EXPECT_EQ(larger.find("lm_ok) ?"), std::string::npos) << larger;
}

TEST(CodegenGuards, ReadsThatMayLeaveTheirRangeAfterAFailedCheckWait) {
  const auto same = [](const ir::Expr& checked) { return checked; };
  const auto shifted = [](const ir::Expr& checked) { return ir::add(checked, int_const(3)); };
  for (const std::string& source : {gather_source({int_const(8)}, same),  // bound 10 > 8 elements
                                    gather_source({ir::symbol("n")}, same),  // a size that may be 0
                                    gather_source({int_const(16)}, shifted)}) {
    EXPECT_NE(source.find("((lm_ok) ? p.in0["), std::string::npos) << source;
    EXPECT_EQ(source.find("lm_ok) ? p.in2["), std::string::npos) << source;  // y[i] never waits
  }
}

}  // namespace
}  // namespace luminal
