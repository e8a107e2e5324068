// Every scalar op of the table (ir/op_table.h) x every dtype its row accepts, over edge inputs
// (NaN, +-inf, -0.0, denormals, extremes, INT64_MIN / -1, shifts out of range), through
//   (a) the evaluator constant folding uses (ir::eval_float / ir::eval_int, and ir::binary on i64
//       constants, which must fold to the same value),
//   (b) the CPU interpreter (one graph, one pointwise node per op and dtype, cpu::Executor),
//   (c) the generated CUDA module: always compiled with NVRTC (no GPU needed), and run and compared
//       when a CUDA device is present,
// against an independent reference: long double <cmath> for floats, exact (__int128) arithmetic
// narrowed to the dtype for integers and bools. Integers and bools compare bit-exactly; floats
// within the per-op tolerance of `tolerance()`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/half.h"
#include "graph_helpers.h"
#include "ir/scalar_eval.h"
#ifdef LUMINAL_HAVE_CUDA
#include "runtime/cuda/api.h"
#include "runtime/cuda/executor.h"
#endif

namespace luminal {
namespace {

using ir::Expr;
using ir::ExprOp;
using ir::OpKind;
using testing::Host;
using LD = long double;

constexpr DType kDtypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64,
                             DType::I32, DType::I16, DType::I8,  DType::U8,   DType::Bool};

std::vector<ExprOp> scalar_ops() {
  std::vector<ExprOp> ops;
#define LUMINAL_TEST_OP(name, ...) \
  if (ir::is_unary_op(ExprOp::name) || ir::is_binary_op(ExprOp::name)) ops.push_back(ExprOp::name);
  LUMINAL_EXPR_OPS(LUMINAL_TEST_OP)
#undef LUMINAL_TEST_OP
  return ops;
}

bool is_unary(ExprOp op) { return ir::is_unary_op(op); }
DType result_dtype(ExprOp op, DType dtype) {
  const OpKind kind = ir::op_info(op).kind;
  return kind == OpKind::Test || kind == OpKind::Compare ? DType::Bool : dtype;
}
bool divides(ExprOp op) { return (ir::op_info(op).classes & ir::op_class::DividesInt) != 0; }

// ---- inputs ---------------------------------------------------------------------------------------
std::vector<double> float_edges() {
  const double inf = std::numeric_limits<double>::infinity();
  return {0.0,  -0.0,  1.0,   -1.0,   0.5,   -2.5,   3.0,   1e-3,  7.25,    -7.75,   100.0, -100.0,
          1e30, -1e30, 0.9999, -0.3,  20.0,  8.5,    -1e-40, 3e-45, 2.2e-310, 1e300, inf,   -inf,
          std::numeric_limits<double>::quiet_NaN(),   0.7,   -0.95, 2.0,     65504.0, 1e-7};
}

std::vector<int64_t> int_edges() {
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  return {0, 1, -1, 2, -2, 3, -7, 7, 8, 15, 16, 31, 32, 63, 64, 100, -100, 127, 128, 200, 255, 65535,
          int64_t{1} << 31, -(int64_t{1} << 31), lo, hi, lo + 1, hi - 1};
}

// The value an input element of `dtype` holds after storing `v` (rounded or wrapped).
double round_float(double v, DType dtype) {
  switch (dtype) {
    case DType::F16: return half_bits_to_float(float_to_half_bits(static_cast<float>(v)));
    case DType::BF16: return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(v)));
    case DType::F32: return static_cast<float>(v);
    default: return v;
  }
}

int64_t wrap_int(__int128 v, DType dtype) {
  const auto u = static_cast<unsigned __int128>(v);
  switch (dtype) {
    case DType::Bool: return v != 0;
    case DType::U8: return static_cast<uint8_t>(u);
    case DType::I8: return static_cast<int8_t>(static_cast<uint8_t>(u));
    case DType::I16: return static_cast<int16_t>(static_cast<uint16_t>(u));
    case DType::I32: return static_cast<int32_t>(static_cast<uint32_t>(u));
    default: return static_cast<int64_t>(static_cast<uint64_t>(u));
  }
}

// ---- reference ------------------------------------------------------------------------------------
LD ref_i0(LD x) {  // power series, positive terms
  if (std::isinf(x)) return std::numeric_limits<LD>::quiet_NaN();
  const LD q = x * x / 4;
  LD term = 1, sum = 1;
  for (int k = 1; k < 5000 && term > sum * 1e-21L && std::isfinite(sum); ++k) {
    term *= q / (static_cast<LD>(k) * k);
    sum += term;
  }
  return sum;
}

LD ref_erfinv(LD y) {  // bisection on erfl
  if (std::isnan(y) || std::fabs(y) > 1) return std::numeric_limits<LD>::quiet_NaN();
  if (std::fabs(y) == 1) return std::copysign(std::numeric_limits<LD>::infinity(), y);
  // Near zero, the Maclaurin series (bisection's absolute resolution would not do).
  const LD half_sqrt_pi = 0.886226925452758013649083741671L;
  if (std::fabs(y) < 1e-6L) return half_sqrt_pi * y * (1 + 3.14159265358979323846L / 12 * y * y);
  LD lo = -10, hi = 10;
  for (int i = 0; i < 200; ++i) {
    const LD mid = (lo + hi) / 2;
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

LD ref_max(LD x, LD y, bool is_max) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<LD>::quiet_NaN();
  return is_max ? std::fmax(x, y) : std::fmin(x, y);
}

// Floating reference. FloorDiv is defined as the floor of the quotient rounded to the computing type
// (what every backend computes), so that one rounding is the reference's too.
LD ref_float(ExprOp op, LD x, LD y, DType dtype) {
  const LD nan = std::numeric_limits<LD>::quiet_NaN();
  switch (op) {
    case ExprOp::Neg: return -x;
    case ExprOp::Abs: return std::fabs(x);
    case ExprOp::Relu: return x < 0 ? 0 : x;
    case ExprOp::Sigmoid: return 1 / (1 + std::exp(-x));
    case ExprOp::Tanh: return std::tanh(x);
    case ExprOp::Exp: return std::exp(x);
    case ExprOp::Log: return std::log(x);
    case ExprOp::Sqrt: return std::sqrt(x);
    case ExprOp::Rsqrt: return 1 / std::sqrt(x);
    case ExprOp::Recip: return 1 / x;
    case ExprOp::Sin: return std::sin(x);
    case ExprOp::Cos: return std::cos(x);
    case ExprOp::Erf: return std::erf(x);
    case ExprOp::GeluTanh: return x / 2 * (1 + std::tanh(0.7978845608028653558798921198687637L * (x + 0.044715L * x * x * x)));
    case ExprOp::Floor: return std::floor(x);
    case ExprOp::Ceil: return std::ceil(x);
    case ExprOp::Trunc: return std::trunc(x);
    case ExprOp::Round: return std::nearbyint(x);
    case ExprOp::Sign: return x > 0 ? 1 : x < 0 ? -1 : 0;
    case ExprOp::IsNan: return std::isnan(x) ? 1 : 0;
    case ExprOp::Tan: return std::tan(x);
    case ExprOp::Asin: return std::asin(x);
    case ExprOp::Acos: return std::acos(x);
    case ExprOp::Atan: return std::atan(x);
    case ExprOp::Sinh: return std::sinh(x);
    case ExprOp::Cosh: return std::cosh(x);
    case ExprOp::Asinh: return std::asinh(x);
    case ExprOp::Acosh: return std::acosh(x);
    case ExprOp::Atanh: return std::atanh(x);
    case ExprOp::Expm1: return std::expm1(x);
    case ExprOp::Log1p: return std::log1p(x);
    case ExprOp::Log2: return std::log2(x);
    case ExprOp::Log10: return std::log10(x);
    case ExprOp::Exp2: return std::exp2(x);
    case ExprOp::Erfc: return std::erfc(x);
    case ExprOp::Erfinv: return ref_erfinv(x);
    case ExprOp::Lgamma: return std::lgamma(x);
    case ExprOp::I0: return ref_i0(x);
    case ExprOp::Add: return x + y;
    case ExprOp::Sub: return x - y;
    case ExprOp::Mul: return x * y;
    case ExprOp::Div: return x / y;
    case ExprOp::FloorDiv: {  // f16/bf16 compute in f32
      const DType computed = dtype == DType::F64 ? DType::F64 : DType::F32;
      return std::floor(static_cast<LD>(round_float(static_cast<double>(x / y), computed)));
    }
    case ExprOp::Mod: {
      LD m = std::fmod(x, y);
      if (m != 0 && ((y < 0) != (m < 0))) m += y;
      return m;
    }
    case ExprOp::Max: return ref_max(x, y, true);
    case ExprOp::Min: return ref_max(x, y, false);
    case ExprOp::Pow: return std::pow(x, y);
    case ExprOp::Atan2: return std::atan2(x, y);
    case ExprOp::Hypot: return std::hypot(x, y);
    case ExprOp::Fmod: return std::fmod(x, y);
    case ExprOp::Copysign: return std::copysign(x, y);
    case ExprOp::Eq: return x == y;
    case ExprOp::Ne: return x != y;
    case ExprOp::Lt: return x < y;
    case ExprOp::Le: return x <= y;
    case ExprOp::Gt: return x > y;
    case ExprOp::Ge: return x >= y;
    case ExprOp::Not:
    case ExprOp::BitNot:
    case ExprOp::Shl:
    case ExprOp::Shr:
    case ExprOp::BitAnd:
    case ExprOp::BitOr:
    case ExprOp::BitXor:
    case ExprOp::And:
    case ExprOp::Or:
    case ExprOp::Const:
    case ExprOp::LoopVar:
    case ExprOp::ReduceVar:
    case ExprOp::Symbol:
    case ExprOp::Load:
    case ExprOp::Where:
    case ExprOp::Cast:
    case ExprOp::CheckIndex:
    case ExprOp::Fold: break;
  }
  ADD_FAILURE() << "no float reference for " << ir::expr_op_name(op);
  return nan;
}

// Integer and bool reference: exact arithmetic, then narrowing to the result dtype.
__int128 floor_div(__int128 a, __int128 b) {
  __int128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t ref_int(ExprOp op, __int128 x, __int128 y, DType dtype) {
  const int bits = static_cast<int>(dtype_size(dtype) * 8);
  const bool is_signed = dtype != DType::U8 && dtype != DType::Bool;
  const DType out = result_dtype(op, dtype);
  auto wrap = [&](__int128 v) { return wrap_int(v, out); };
  switch (op) {
    case ExprOp::Neg: return wrap(-x);
    case ExprOp::Abs: return wrap(x < 0 ? -x : x);
    case ExprOp::Relu: return wrap(x < 0 ? 0 : x);
    case ExprOp::Sign: return wrap(x > 0 ? 1 : x < 0 ? -1 : 0);
    case ExprOp::Floor:
    case ExprOp::Ceil:
    case ExprOp::Trunc:
    case ExprOp::Round: return wrap(x);
    case ExprOp::Not: return x == 0;
    case ExprOp::BitNot: return dtype == DType::Bool ? (x == 0) : wrap(~x);
    case ExprOp::IsNan: return 0;
    case ExprOp::Add: return wrap(x + y);
    case ExprOp::Sub: return wrap(x - y);
    case ExprOp::Mul: {  // modulo 2^128 is enough: every dtype is at most 64 bits wide
      const auto p = static_cast<unsigned __int128>(x) * static_cast<unsigned __int128>(y);
      return wrap(static_cast<__int128>(p));
    }
    case ExprOp::FloorDiv: return wrap(floor_div(x, y));
    case ExprOp::Mod: return wrap(x - floor_div(x, y) * y);
    case ExprOp::Max: return wrap(x > y ? x : y);
    case ExprOp::Min: return wrap(x < y ? x : y);
    case ExprOp::Shl:
      if (y < 0 || y >= bits) return 0;
      return wrap(static_cast<__int128>(static_cast<unsigned __int128>(x) << static_cast<int>(y)));
    case ExprOp::Shr:
      if (y < 0 || y >= bits) return is_signed && x < 0 ? -1 : 0;
      return wrap(floor_div(x, static_cast<__int128>(1) << static_cast<int>(y)));
    case ExprOp::BitAnd: return wrap(x & y);
    case ExprOp::BitOr: return wrap(x | y);
    case ExprOp::BitXor: return wrap(x ^ y);
    case ExprOp::And: return x != 0 && y != 0;
    case ExprOp::Or: return x != 0 || y != 0;
    case ExprOp::Eq: return x == y;
    case ExprOp::Ne: return x != y;
    case ExprOp::Lt: return x < y;
    case ExprOp::Le: return x <= y;
    case ExprOp::Gt: return x > y;
    case ExprOp::Ge: return x >= y;
    case ExprOp::Sigmoid:
    case ExprOp::Tanh:
    case ExprOp::Exp:
    case ExprOp::Log:
    case ExprOp::Sqrt:
    case ExprOp::Rsqrt:
    case ExprOp::Recip:
    case ExprOp::Sin:
    case ExprOp::Cos:
    case ExprOp::Erf:
    case ExprOp::GeluTanh:
    case ExprOp::Tan:
    case ExprOp::Asin:
    case ExprOp::Acos:
    case ExprOp::Atan:
    case ExprOp::Sinh:
    case ExprOp::Cosh:
    case ExprOp::Asinh:
    case ExprOp::Acosh:
    case ExprOp::Atanh:
    case ExprOp::Expm1:
    case ExprOp::Log1p:
    case ExprOp::Log2:
    case ExprOp::Log10:
    case ExprOp::Exp2:
    case ExprOp::Erfc:
    case ExprOp::Erfinv:
    case ExprOp::Lgamma:
    case ExprOp::I0:
    case ExprOp::Div:
    case ExprOp::Pow:
    case ExprOp::Atan2:
    case ExprOp::Hypot:
    case ExprOp::Fmod:
    case ExprOp::Copysign:
    case ExprOp::Const:
    case ExprOp::LoopVar:
    case ExprOp::ReduceVar:
    case ExprOp::Symbol:
    case ExprOp::Load:
    case ExprOp::Where:
    case ExprOp::Cast:
    case ExprOp::CheckIndex:
    case ExprOp::Fold: break;
  }
  ADD_FAILURE() << "no integer reference for " << ir::expr_op_name(op);
  return 0;
}

// ---- tolerances -----------------------------------------------------------------------------------
struct Tolerance {
  double ulps;  // in units of the value type's epsilon (f32 for f16/bf16, which compute in f32)
  bool scale_by_input = false;        // error relative to |x| (GELU: cancellation in 1 + tanh)
  bool scale_by_conditioning = false;  // erfinv: an input ulp moves the result by 1 / erf'(result)
};

Tolerance tolerance(ExprOp op) {
  switch (op) {
    // exact: the result is representable
    case ExprOp::Neg:
    case ExprOp::Abs:
    case ExprOp::Relu:
    case ExprOp::Floor:
    case ExprOp::Ceil:
    case ExprOp::Trunc:
    case ExprOp::Round:
    case ExprOp::Sign:
    case ExprOp::Max:
    case ExprOp::Min:
    case ExprOp::Copysign:
    case ExprOp::Fmod:
    case ExprOp::Mod:
    case ExprOp::IsNan:
    case ExprOp::Eq:
    case ExprOp::Ne:
    case ExprOp::Lt:
    case ExprOp::Le:
    case ExprOp::Gt:
    case ExprOp::Ge: return {0};
    // correctly rounded (the reference rounds twice: long double, then the dtype)
    case ExprOp::Add:
    case ExprOp::Sub:
    case ExprOp::Mul:
    case ExprOp::Div:
    case ExprOp::Sqrt:
    case ExprOp::Recip:
    case ExprOp::FloorDiv: return {1};
    case ExprOp::Rsqrt: return {2};
    case ExprOp::GeluTanh: return {8, true};
    case ExprOp::Erfinv: return {8, false, true};
    case ExprOp::I0: return {32};
    case ExprOp::Lgamma: return {16, true};  // near its zeros (x = 1, 2, -2.5...) CUDA's error is absolute
    default: return {8};  // libm (CPU and CUDA: at most a few ulp)
  }
}

double epsilon(DType dtype) {
  return dtype == DType::F64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
}
double storage_epsilon(DType dtype) {
  if (dtype == DType::F16) return 1.0 / 1024;
  if (dtype == DType::BF16) return 1.0 / 128;
  return 0;
}

// Empty when `got` is within tolerance of the reference (rounded to the dtype), else why not.
std::string compare_float(ExprOp op, DType dtype, double x, double got, LD ref) {
  const double expected = round_float(static_cast<double>(ref), dtype);
  if (std::isnan(expected) || std::isnan(got)) {
    return std::isnan(expected) == std::isnan(got) ? "" : "NaN mismatch";
  }
  if (std::isinf(expected) || std::isinf(got)) return expected == got ? "" : "infinity mismatch";
  const Tolerance tol = tolerance(op);
  double scale = std::fabs(expected);
  if (tol.scale_by_input) scale = std::max(scale, std::fabs(x));
  if (tol.scale_by_conditioning) {
    // d erfinv(y) = dy / erf'(erfinv(y)); an input ulp is eps * |y|.
    scale = std::max(scale, std::fabs(x) * 0.886226925452758 * std::exp(static_cast<double>(ref * ref)));
  }
  double allowed = tol.ulps * epsilon(dtype) * scale;
  // f16/bf16: the f32 result rounds once more; ties may round either way when the f32 result
  // differs from the reference by an ulp.
  if (tol.ulps > 0) allowed += storage_epsilon(dtype) * scale;
  // Results below the normal range: composite ops may underflow early (1 / (1 + exp(100)) in f32
  // is 0), so inexact ops get an absolute tolerance of the smallest normal number.
  if (tol.ulps > 0) {
    allowed = std::max(allowed, dtype == DType::F64 ? std::numeric_limits<double>::min()
                                                    : static_cast<double>(std::numeric_limits<float>::min()));
  }
  if (std::fabs(got - expected) <= allowed) return "";
  std::ostringstream why;
  why.precision(17);
  why << "got " << got << ", expected " << expected << " (reference " << static_cast<double>(ref) << "), tolerance " << allowed;
  return why.str();
}

// ---- the cases --------------------------------------------------------------------------------------
struct Case {
  ExprOp op;
  DType dtype;
  std::vector<double> xf, yf;    // floating inputs (already rounded to the dtype)
  std::vector<int64_t> xi, yi;   // integer inputs (already wrapped to the dtype)
  size_t size() const { return is_floating(dtype) ? xf.size() : xi.size(); }
};

Case make_case(ExprOp op, DType dtype) {
  Case c{op, dtype, {}, {}, {}, {}};
  if (is_floating(dtype)) {
    std::vector<double> edges;
    for (double v : float_edges()) edges.push_back(round_float(v, dtype));
    for (double x : edges) {
      if (is_unary(op)) {
        c.xf.push_back(x);
        c.yf.push_back(x);
        continue;
      }
      for (double y : edges) {
        c.xf.push_back(x);
        c.yf.push_back(y);
      }
    }
    return c;
  }
  std::vector<int64_t> edges;
  for (int64_t v : int_edges()) edges.push_back(wrap_int(v, dtype));
  for (int64_t x : edges) {
    if (is_unary(op)) {
      c.xi.push_back(x);
      c.yi.push_back(x);
      continue;
    }
    for (int64_t y : edges) {
      if (divides(op) && y == 0) continue;  // division by zero: its own test
      c.xi.push_back(x);
      c.yi.push_back(y);
    }
  }
  return c;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (ExprOp op : scalar_ops()) {
    for (DType dtype : kDtypes) {
      if (ir::op_accepts(op, dtype)) cases.push_back(make_case(op, dtype));
    }
  }
  return cases;
}

std::string describe(const Case& c, size_t i) {
  std::ostringstream out;
  out.precision(17);
  out << ir::expr_op_name(c.op) << " " << dtype_name(c.dtype) << " x=";
  if (is_floating(c.dtype)) {
    out << c.xf[i];
    if (!is_unary(c.op)) out << " y=" << c.yf[i];
  } else {
    out << c.xi[i];
    if (!is_unary(c.op)) out << " y=" << c.yi[i];
  }
  return out.str();
}

Host input_tensor(const Case& c, bool second) {
  const size_t n = c.size();
  Host h;
  h.dtype = c.dtype;
  h.sizes = {static_cast<int64_t>(n)};
  h.bytes.resize(n * dtype_size(c.dtype));
  for (size_t i = 0; i < n; ++i) {
    void* at = h.bytes.data() + i * dtype_size(c.dtype);
    const double f = is_floating(c.dtype) ? (second ? c.yf[i] : c.xf[i]) : 0;
    const int64_t v = is_floating(c.dtype) ? 0 : (second ? c.yi[i] : c.xi[i]);
    switch (c.dtype) {
      case DType::F16: *static_cast<uint16_t*>(at) = float_to_half_bits(static_cast<float>(f)); break;
      case DType::BF16: *static_cast<uint16_t*>(at) = float_to_bf16_bits(static_cast<float>(f)); break;
      case DType::F32: *static_cast<float*>(at) = static_cast<float>(f); break;
      case DType::F64: *static_cast<double*>(at) = f; break;
      case DType::Bool:
      case DType::U8: *static_cast<uint8_t*>(at) = static_cast<uint8_t>(v); break;
      case DType::I8: *static_cast<int8_t*>(at) = static_cast<int8_t>(v); break;
      case DType::I16: *static_cast<int16_t*>(at) = static_cast<int16_t>(v); break;
      case DType::I32: *static_cast<int32_t*>(at) = static_cast<int32_t>(v); break;
      case DType::I64: *static_cast<int64_t*>(at) = v; break;
    }
  }
  return h;
}

double read_float(const Host& h, size_t i) {
  const uint8_t* at = h.bytes.data() + i * dtype_size(h.dtype);
  uint16_t bits;
  switch (h.dtype) {
    case DType::F16: std::memcpy(&bits, at, 2); return half_bits_to_float(bits);
    case DType::BF16: std::memcpy(&bits, at, 2); return bf16_bits_to_float(bits);
    case DType::F32: return *reinterpret_cast<const float*>(at);
    default: return *reinterpret_cast<const double*>(at);
  }
}

int64_t read_int(const Host& h, size_t i) {
  const uint8_t* at = h.bytes.data() + i * dtype_size(h.dtype);
  switch (h.dtype) {
    case DType::Bool:
    case DType::U8: return *at;
    case DType::I8: return *reinterpret_cast<const int8_t*>(at);
    case DType::I16: return *reinterpret_cast<const int16_t*>(at);
    case DType::I32: return *reinterpret_cast<const int32_t*>(at);
    default: return *reinterpret_cast<const int64_t*>(at);
  }
}

// Checks one output against the reference; `path` names the backend. Returns the failures.
int check_output(const Case& c, const Host& out, const std::string& path) {
  int failures = 0;
  const DType out_dtype = result_dtype(c.op, c.dtype);
  for (size_t i = 0; i < c.size() && failures < 5; ++i) {
    std::string why;
    if (is_floating(c.dtype) && is_floating(out_dtype)) {
      why = compare_float(c.op, c.dtype, c.xf[i], read_float(out, i), ref_float(c.op, c.xf[i], c.yf[i], c.dtype));
    } else {
      const int64_t expected = is_floating(c.dtype) ? static_cast<int64_t>(ref_float(c.op, c.xf[i], c.yf[i], c.dtype))
                                                    : ref_int(c.op, c.xi[i], c.yi[i], c.dtype);
      const int64_t got = read_int(out, i);
      if (got != expected) why = "expected " + std::to_string(expected) + ", got " + std::to_string(got);
    }
    if (!why.empty()) {
      ADD_FAILURE() << path << ": " << describe(c, i) << ": " << why;
      ++failures;
    }
  }
  return failures;
}

// (a) The evaluator behind constant folding, element by element.
Host fold_output(const Case& c) {
  const DType out_dtype = result_dtype(c.op, c.dtype);
  std::vector<double> f;
  std::vector<int64_t> v;
  for (size_t i = 0; i < c.size(); ++i) {
    if (!is_floating(c.dtype)) {
      v.push_back(wrap_int(ir::eval_int(c.op, c.xi[i], c.yi[i], ir::int_lane(c.dtype)), out_dtype));
    } else if (c.dtype == DType::F64) {
      const double r = ir::eval_float<double>(c.op, c.xf[i], c.yf[i]);
      is_floating(out_dtype) ? f.push_back(r) : v.push_back(r != 0);
    } else {
      const float r = ir::eval_float<float>(c.op, static_cast<float>(c.xf[i]), static_cast<float>(c.yf[i]));
      is_floating(out_dtype) ? f.push_back(round_float(r, c.dtype)) : v.push_back(r != 0);
    }
  }
  Host h;
  h.dtype = is_floating(out_dtype) ? DType::F64 : DType::I64;
  h.sizes = {static_cast<int64_t>(c.size())};
  if (is_floating(out_dtype)) {
    h = Host::of(DType::F64, h.sizes, f);
  } else {
    h = Host::of(DType::I64, h.sizes, v);
  }
  return h;
}

// The graph: per case one or two inputs and a pointwise node applying the op to them.
struct CaseGraph {
  testing::GraphFixture fixture;
  std::vector<Host> inputs;
};

void build(CaseGraph& g, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const int64_t n = static_cast<int64_t>(c.size());
    const ir::NodeId x = g.fixture.input(c.dtype, {ir::int_const(n)});
    g.inputs.push_back(input_tensor(c, false));
    std::vector<ir::NodeId> inputs{x};
    const Expr lx = ir::load(0, c.dtype, {ir::loop_var(0)});
    Expr body;
    if (is_unary(c.op)) {
      body = ir::unary(c.op, lx);
    } else {
      inputs.push_back(g.fixture.input(c.dtype, {ir::int_const(n)}));
      g.inputs.push_back(input_tensor(c, true));
      body = ir::binary(c.op, lx, ir::load(1, c.dtype, {ir::loop_var(0)}));
    }
    g.fixture.output(g.fixture.b().pointwise(body->dtype, {ir::int_const(n)}, inputs, body));
  }
}

std::vector<Host> run_cpu(const ir::Graph& graph, std::vector<Host> inputs) {
  runtime::cpu::Executor executor(std::make_shared<const ir::Graph>(graph));
  std::vector<runtime::TensorView> views;
  for (Host& h : inputs) views.push_back(h.view());
  const runtime::SymbolValues symbols = runtime::bind_inputs(graph, views);
  std::vector<Host> outputs(graph.outputs.size());
  std::vector<runtime::TensorView> out_views;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const ir::Node& node = graph.node(graph.outputs[k].node);
    outputs[k].dtype = node.dtype;
    outputs[k].sizes = runtime::evaluate(node.shape, symbols);
    outputs[k].bytes.assign(static_cast<size_t>(outputs[k].sizes[0]) * dtype_size(node.dtype), 0xFF);  // poison
    out_views.push_back(outputs[k].view());
  }
  executor.run(views, out_views, symbols);
  return outputs;
}

#ifdef LUMINAL_HAVE_CUDA
// (c) on a GPU: device copies of the inputs, the generated module run once, outputs copied back.
class DriverAllocator : public runtime::gpu::DeviceAllocator {
 public:
  std::shared_ptr<void> allocate(size_t bytes, int) override {
    const cuda::DriverApi& api = cuda::driver();
    CUdeviceptr ptr = 0;
    LUMINAL_CU(api.cuMemAlloc(&ptr, bytes == 0 ? 1 : bytes));
    return std::shared_ptr<void>(reinterpret_cast<void*>(ptr),
                                 [](void* p) { cuda::driver().cuMemFree(reinterpret_cast<CUdeviceptr>(p)); });
  }
};

std::vector<Host> run_gpu(const ir::Graph& graph, const std::vector<Host>& inputs) {
  const cuda::DriverApi& api = cuda::driver();
  LUMINAL_CU(api.cuInit(0));
  CUdevice device;
  LUMINAL_CU(api.cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  LUMINAL_CU(api.cuDevicePrimaryCtxRetain(&context, device));
  LUMINAL_CU(api.cuCtxSetCurrent(context));
  DriverAllocator allocator;
  std::vector<std::shared_ptr<void>> buffers;
  std::vector<runtime::TensorView> views;
  for (const Host& h : inputs) {
    buffers.push_back(allocator.allocate(h.bytes.size(), 0));
    LUMINAL_CU(api.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(buffers.back().get()), h.bytes.data(), h.bytes.size()));
    runtime::TensorView v = Host(h).view();
    v.data = buffers.back().get();
    v.device = runtime::Device{runtime::DeviceType::CUDA, 0};
    views.push_back(v);
  }
  const runtime::SymbolValues symbols = runtime::bind_inputs(graph, views);
  std::vector<Host> outputs(graph.outputs.size());
  std::vector<runtime::TensorView> out_views;
  std::vector<std::shared_ptr<void>> out_buffers;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const ir::Node& node = graph.node(graph.outputs[k].node);
    outputs[k].dtype = node.dtype;
    outputs[k].sizes = runtime::evaluate(node.shape, symbols);
    outputs[k].bytes.assign(static_cast<size_t>(outputs[k].sizes[0]) * dtype_size(node.dtype), 0);
    out_buffers.push_back(allocator.allocate(outputs[k].bytes.size(), 0));
    runtime::TensorView v = outputs[k].view();
    v.data = out_buffers.back().get();
    v.device = runtime::Device{runtime::DeviceType::CUDA, 0};
    out_views.push_back(v);
  }
  runtime::gpu::Executor executor(
      std::make_shared<const runtime::gpu::CudaProgram>(runtime::gpu::build_general_cuda_program(graph)));
  runtime::gpu::CallContext call;
  call.allocator = &allocator;
  executor.run(views, out_views, symbols, call);
  for (size_t k = 0; k < outputs.size(); ++k) {
    LUMINAL_CU(api.cuMemcpyDtoHAsync(outputs[k].bytes.data(), reinterpret_cast<CUdeviceptr>(out_buffers[k].get()),
                                     outputs[k].bytes.size(), nullptr));
  }
  LUMINAL_CU(api.cuStreamSynchronize(nullptr));
  return outputs;
}
#endif

TEST(ScalarOps, EveryOpAndDtypeAgreesWithTheReference) {
  const std::vector<Case> cases = all_cases();
  ASSERT_GT(cases.size(), 200u);
  // (a) folding's evaluator
  for (const Case& c : cases) check_output(c, fold_output(c), "fold");
  // (b) the CPU interpreter
  CaseGraph g;
  build(g, cases);
  const ir::Graph graph = passes::optimize(g.fixture.graph(), {});
  ASSERT_EQ(graph.outputs.size(), cases.size());
  const std::vector<Host> cpu = run_cpu(graph, g.inputs);
  for (size_t k = 0; k < cases.size(); ++k) check_output(cases[k], cpu[k], "cpu");
#ifdef LUMINAL_HAVE_CUDA
  // (c) the generated CUDA module: NVRTC always, a run where a device is present
  const std::string source = runtime::gpu::check_codegen(runtime::gpu::build_general_cuda_program(graph), "sm_90");
  for (const char* device_function : {"lm_erfinv_f(", "lm_i0_d(", "lm_pymod_f(", "lm_floordiv(", "lm_max_d("}) {
    EXPECT_NE(source.find(device_function), std::string::npos) << device_function;
  }
  if (cuda::device_available()) {
    const std::vector<Host> gpu = run_gpu(graph, g.inputs);
    for (size_t k = 0; k < cases.size(); ++k) check_output(cases[k], gpu[k], "cuda");
  }
#endif
}

// Constant folding proper: i64 ops on constants fold to the reference; a zero divisor is left
// for run time (where it raises), never folded.
TEST(ScalarOps, I64ConstantsFoldToTheReference) {
  for (ExprOp op : scalar_ops()) {
    if (!ir::is_binary_op(op) || !ir::op_accepts(op, DType::I64)) continue;
    for (int64_t x : int_edges()) {
      for (int64_t y : int_edges()) {
        const Expr folded = ir::binary(op, ir::int_const(x), ir::int_const(y));
        if (divides(op) && y == 0) {
          EXPECT_FALSE(folded->is_const()) << ir::to_string(folded);
          continue;
        }
        ASSERT_TRUE(folded->is_const()) << ir::expr_op_name(op) << " " << x << " " << y << ": " << ir::to_string(folded);
        EXPECT_EQ(folded->int_value, ref_int(op, x, y, DType::I64)) << ir::expr_op_name(op) << " " << x << " " << y;
      }
    }
  }
  EXPECT_EQ(ir::unary(ExprOp::Not, ir::bool_const(true))->int_value, 0);
  EXPECT_TRUE(ir::binary(ExprOp::Lt, ir::float_const(1.0, DType::F64), ir::float_const(2.0, DType::F64))->int_value);
}

// Integer division by zero: the interpreter and symbol evaluation raise, naming what failed.
TEST(ScalarOps, IntegerDivisionByZeroRaises) {
  for (ExprOp op : {ExprOp::FloorDiv, ExprOp::Mod}) {
    for (DType dtype : {DType::I64, DType::I32, DType::U8}) {
      testing::GraphFixture g;
      const ir::NodeId a = g.input(dtype, {ir::int_const(2)});
      const ir::NodeId b = g.input(dtype, {ir::int_const(2)});
      const Expr body = ir::binary(op, ir::load(0, dtype, {ir::loop_var(0)}), ir::load(1, dtype, {ir::loop_var(0)}));
      g.output(g.b().pointwise(dtype, {ir::int_const(2)}, {a, b}, body));
      Case c{op, dtype, {}, {}, {7, 7}, {3, 0}};
      try {
        g.run({input_tensor(c, false), input_tensor(c, true)});
        ADD_FAILURE() << ir::expr_op_name(op) << " " << dtype_name(dtype) << " by zero did not raise";
      } catch (const luminal::Error& e) {
        EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos) << e.what();
      }
    }
    const Expr shape = ir::binary(op, ir::symbol("s0"), ir::symbol("s1"));
    EXPECT_THROW(runtime::evaluate(shape, {{"s0", 5}, {"s1", 0}}), luminal::Error);
    EXPECT_EQ(runtime::evaluate(shape, {{"s0", -7}, {"s1", 2}}), op == ExprOp::FloorDiv ? -4 : 1);
  }
}

// The shared scalar functions against torch's documented special values.
TEST(ScalarOps, SharedFunctionsSpecialValues) {
  using namespace scalar;
  EXPECT_EQ(lm_floordiv_nonzero(std::numeric_limits<int64_t>::min(), -1), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(lm_mod_nonzero(std::numeric_limits<int64_t>::min(), -1), 0);
  EXPECT_EQ(lm_f2i(std::nan("")), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(lm_f2i(1e19), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(lm_f2i(-3.9), -3);
  EXPECT_EQ(lm_f2i32(std::nan("")), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(lm_f2i32(3e10), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(lm_f2i32(-2147483648.9), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(lm_f2i32(2147483647.9), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(lm_f2i32(-3.9), -3);
  EXPECT_EQ(lm_shl(1, 64, 64), 0);
  EXPECT_EQ(lm_shr(-8, 100, 64, true), -1);
  EXPECT_EQ(lm_shr(200, 8, 8, false), 0);
  EXPECT_TRUE(std::isnan(lm_i0(std::numeric_limits<double>::infinity())));
  EXPECT_EQ(lm_erfinv(1.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(lm_erfinv(1.5)));
  EXPECT_EQ(lm_sign(std::nan("")), 0.0);
  EXPECT_EQ(lm_f2bf(1.0f), 0x3f80);
  EXPECT_EQ(lm_f2bf(std::nanf("")) & 0x7fc0, 0x7fc0);
  EXPECT_EQ(lm_f2bf(1.00390625f), 0x3f80);  // a tie rounds to even
  EXPECT_EQ(lm_f2bf(1.01171875f), 0x3f82);  // a tie rounds to even (up)
  EXPECT_EQ(lm_f2bf(-3.14159f), 0xc049);
  EXPECT_EQ(lm_f2bf(65504.0f), 0x4780);
  EXPECT_EQ(lm_f2bf(1e-40f), 0x0001);  // denormal
}

}  // namespace
}  // namespace luminal
