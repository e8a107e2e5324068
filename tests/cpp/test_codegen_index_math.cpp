// Index arithmetic in generated kernels: the flat index is decomposed in 32 bits only where the
// element count is static and below 2^31, and floordiv/mod become plain C division only where the
// dividend is proven non-negative and the divisor is a positive constant. Everything else keeps
// 64-bit arithmetic and the checked, floor-rounding lm_floordiv/lm_mod.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "codegen/cuda_codegen.h"
#include "kernel_helpers.h"
#ifdef LUMINAL_HAVE_CUDA
#include "runtime/cuda/nvrtc.h"
#endif

namespace luminal {
namespace {

using ir::Expr;
using ir::int_const;
using ir::NodeId;
using testing::GraphFixture;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string source_of(GraphFixture& f, NodeId id) {
  const codegen::Kernel kernel = codegen::generate_kernel(f.graph().node(id), testing::operands_of(f.graph(), id));
#ifdef LUMINAL_HAVE_CUDA
  try {
    EXPECT_FALSE(cuda::compile_to_cubin(codegen::module_source({kernel}), "sm_90").empty());
  } catch (const Error& error) {
    ADD_FAILURE() << error.what() << "\n" << kernel.source;
  }
#endif
  return kernel.source;
}

// out[i0, i1] = x[i0, i1] + 1 over `shape`.
std::string add_one_kernel(const ir::Shape& shape) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, shape);
  const Expr body = ir::add(ir::load(0, DType::F32, {ir::loop_var(0), ir::loop_var(1)}), ir::float_const(1.0));
  return source_of(f, f.b().pointwise(DType::F32, shape, {x}, body));
}

// out[i0] = `index` (an i64 expression of i0 and of x[i0], an i64 input), over `extent` elements.
std::string index_kernel(const Expr& extent, const std::function<Expr(Expr, Expr)>& index) {
  GraphFixture f;
  const NodeId x = f.input(DType::I64, {extent});
  const Expr i0 = ir::loop_var(0);
  return source_of(f, f.b().pointwise(DType::I64, {extent}, {x}, index(i0, ir::load(0, DType::I64, {i0}))));
}

TEST(CodegenIndexMath, StaticSmallOutputsDecomposeIn32Bits) {
  const std::string text = add_one_kernel({int_const(4), int_const(6)});
  EXPECT_TRUE(contains(text, "unsigned int lm_rest = (unsigned int)lm_flat;")) << text;
  EXPECT_TRUE(contains(text, "const lm_i64 i1 = (lm_i64)(lm_rest % 6u); lm_rest /= 6u;")) << text;
  EXPECT_TRUE(contains(text, "const lm_i64 i0 = (lm_i64)lm_rest;")) << text;
  EXPECT_FALSE(contains(text, "% 6LL")) << text;
}

TEST(CodegenIndexMath, OutputsJustBelow2To31StayNarrow) {
  const std::string text = add_one_kernel({int_const(2), int_const(1073741823)});  // 2^31 - 2 elements
  EXPECT_TRUE(contains(text, "(lm_i64)(lm_rest % 1073741823u)")) << text;
}

TEST(CodegenIndexMath, OutputsFrom2To31Keep64Bits) {
  // (An innermost size of 2 keeps one element per thread: unrolled kernels iterate fewer groups.)
  for (const ir::Shape& shape : {ir::Shape{int_const(1073741824), int_const(2)},      // exactly 2^31
                                 ir::Shape{int_const(2147483648LL), int_const(2)}}) {  // 2^32
    const std::string text = add_one_kernel(shape);
    EXPECT_TRUE(contains(text, "lm_i64 lm_rest = lm_flat;")) << text;
    EXPECT_FALSE(contains(text, "unsigned int lm_rest")) << text;
  }
}

TEST(CodegenIndexMath, LargeElementwiseKernelsComputeFourElementsPerThread) {
  const std::string text = add_one_kernel({int_const(64), int_const(1024)});  // 2^16 elements
  EXPECT_TRUE(contains(text, "const lm_i64 lm_n = 16384LL;")) << text;
  EXPECT_TRUE(contains(text, "const lm_i64 lm_group = (lm_i64)(lm_rest % 256u); lm_rest /= 256u;")) << text;
  EXPECT_TRUE(contains(text, "for (int lm_u = 0; lm_u < 4; ++lm_u)")) << text;
  EXPECT_TRUE(contains(text, "const lm_i64 i1 = lm_group * 4 + lm_u;")) << text;
  EXPECT_TRUE(contains(text, "p.out[lm_flat * 4 + lm_u] =")) << text;
  const std::string small = add_one_kernel({int_const(4), int_const(6)});
  EXPECT_FALSE(contains(small, "lm_u")) << small;
  const std::string odd = add_one_kernel({int_const(65536), int_const(3)});
  EXPECT_FALSE(contains(odd, "lm_u")) << odd;
}

TEST(CodegenIndexMath, SymbolicOutputsKeep64Bits) {
  const std::string text = add_one_kernel({ir::symbol("n"), int_const(6)});
  EXPECT_TRUE(contains(text, "lm_i64 lm_rest = lm_flat;")) << text;
  EXPECT_TRUE(contains(text, "const lm_i64 i1 = lm_rest % 6LL; lm_rest /= 6LL;")) << text;
  EXPECT_FALSE(contains(text, "unsigned int lm_rest")) << text;
}

TEST(CodegenIndexMath, FloorDivAndModOfALoopVariableArePlainDivision) {
  const std::string text = index_kernel(int_const(100), [](const Expr& i0, const Expr&) {
    return ir::add(ir::mul(ir::floordiv(i0, int_const(7)), int_const(1000)), ir::mod(i0, int_const(7)));
  });
  EXPECT_TRUE(contains(text, "((lm_i64)((unsigned int)i0 / 7u))")) << text;
  EXPECT_TRUE(contains(text, "((lm_i64)((unsigned int)i0 % 7u))")) << text;
  EXPECT_FALSE(contains(text, "lm_floordiv(")) << text;
  EXPECT_FALSE(contains(text, "lm_mod(")) << text;
}

TEST(CodegenIndexMath, FloorDivOfAnUnboundedNonNegativeValueIs64BitDivision) {
  // i0 < n: non-negative, but not provably below 2^31.
  const std::string text = index_kernel(ir::symbol("n"), [](const Expr& i0, const Expr&) {
    return ir::floordiv(i0, int_const(7));
  });
  EXPECT_TRUE(contains(text, "(i0 / 7LL)")) << text;
  EXPECT_FALSE(contains(text, "lm_floordiv(")) << text;
}

TEST(CodegenIndexMath, FloorDivOfAPossiblyNegativeValueStaysChecked) {
  const std::string shifted = index_kernel(int_const(100), [](const Expr& i0, const Expr&) {
    return ir::floordiv(ir::sub(int_const(5), i0), int_const(3));  // 5 - i0 < 0 for i0 > 5
  });
  EXPECT_TRUE(contains(shifted, "lm_floordiv(")) << shifted;
  const std::string loaded = index_kernel(int_const(100), [](const Expr&, const Expr& value) {
    return ir::add(ir::floordiv(value, int_const(3)), ir::mod(value, int_const(3)));
  });
  EXPECT_TRUE(contains(loaded, "lm_floordiv(")) << loaded;
  EXPECT_TRUE(contains(loaded, "lm_mod(")) << loaded;
  // A negative or non-constant divisor keeps the checked form too.
  const std::string negative = index_kernel(int_const(100), [](const Expr& i0, const Expr&) {
    return ir::floordiv(i0, int_const(-3));
  });
  EXPECT_TRUE(contains(negative, "lm_floordiv(")) << negative;
  const std::string by_value = index_kernel(int_const(100), [](const Expr& i0, const Expr& value) {
    return ir::mod(i0, value);
  });
  EXPECT_TRUE(contains(by_value, "lm_mod(")) << by_value;
}

TEST(CodegenIndexMath, SmallStaticReductionsDecomposeIn32Bits) {
  // out[c] = max over a 3x3 window of x[c, r0, r1].
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), int_const(3), int_const(3)});
  const Expr body = ir::load(0, DType::F32, {ir::loop_var(0), ir::reduce_var(0), ir::reduce_var(1)});
  const std::string text =
      source_of(f, f.b().reduce(DType::F32, {int_const(4)}, {x}, body, ir::ReduceOp::Max, {int_const(3), int_const(3)}));
  EXPECT_TRUE(contains(text, "unsigned int lm_rr = (unsigned int)lm_r;")) << text;
  EXPECT_TRUE(contains(text, "const lm_i64 r1 = (lm_i64)(lm_rr % 3u); lm_rr /= 3u;")) << text;
  EXPECT_TRUE(contains(text, "const lm_i64 r0 = (lm_i64)lm_rr;")) << text;
}

TEST(CodegenIndexMath, SymbolicReductionsKeep64Bits) {
  GraphFixture f;
  const NodeId x = f.input(DType::F32, {int_const(4), ir::symbol("k"), int_const(3)});
  const Expr body = ir::load(0, DType::F32, {ir::loop_var(0), ir::reduce_var(0), ir::reduce_var(1)});
  const std::string text = source_of(
      f, f.b().reduce(DType::F32, {int_const(4)}, {x}, body, ir::ReduceOp::Sum, {ir::symbol("k"), int_const(3)}));
  EXPECT_TRUE(contains(text, "lm_i64 lm_rr = lm_r;")) << text;
  EXPECT_TRUE(contains(text, "const lm_i64 r1 = lm_rr % 3LL; lm_rr /= 3LL;")) << text;
}

}  // namespace
}  // namespace luminal
