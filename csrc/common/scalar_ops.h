// Scalar semantics of the IR's primitive ops, written once for the host and the device.
//
// The host includes this header (constant folding, symbol evaluation, the CPU interpreter: they
// reach these functions through the op table, ir/op_table.h). The device gets its text: the build
// embeds this file into the CUDA prelude (cmake/embed_text.cmake -> codegen::prelude()), and NVRTC
// compiles it with __CUDACC_RTC__ defined, so it must include nothing there. Kernels call the
// lm_*_f / lm_*_d names below; the host calls the overloaded lm_* templates.
//
// Semantics follow eager torch on the CPU: integer arithmetic wraps, integer division and modulo
// floor (Python), max/min propagate NaN, sign(NaN) is 0, i0 and erfinv use torch's algorithms
// (aten/src/ATen/native/Math.h: calc_i0, calc_erfinv), shifts by a negative or too large amount
// shift everything out, float -> int64 conversion gives INT64_MIN for NaN and out of range.
#ifndef LUMINAL_COMMON_SCALAR_OPS_H
#define LUMINAL_COMMON_SCALAR_OPS_H

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define LM_HD __host__ __device__ __forceinline__
#else
#define LM_HD inline
#endif

#ifdef __CUDACC_RTC__
typedef long long lm_i64;
typedef unsigned long long lm_u64;
// libm by value type: NVRTC has no float overloads of the C math functions.
#define LM_MATH(name) lm_math_##name
#define LM_MATH_OVERLOADS1(name)                                      \
  LM_HD float lm_math_##name(float x) { return name##f(x); }          \
  LM_HD double lm_math_##name(double x) { return name(x); }
#define LM_MATH_OVERLOADS2(name)                                                  \
  LM_HD float lm_math_##name(float x, float y) { return name##f(x, y); }          \
  LM_HD double lm_math_##name(double x, double y) { return name(x, y); }
LM_MATH_OVERLOADS1(fabs)
LM_MATH_OVERLOADS1(exp)
LM_MATH_OVERLOADS1(log)
LM_MATH_OVERLOADS1(sqrt)
LM_MATH_OVERLOADS1(tanh)
LM_MATH_OVERLOADS1(erf)
LM_MATH_OVERLOADS2(fmod)
LM_MATH_OVERLOADS2(copysign)
#define LM_NAN_F __int_as_float(0x7fc00000)
#define LM_NAN_D __longlong_as_double(0x7ff8000000000000ull)
#define LM_INF_F __int_as_float(0x7f800000)
#define LM_INF_D __longlong_as_double(0x7ff0000000000000ull)
#else
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#define LM_MATH(name) std::name
#define LM_NAN_F std::numeric_limits<float>::quiet_NaN()
#define LM_NAN_D std::numeric_limits<double>::quiet_NaN()
#define LM_INF_F std::numeric_limits<float>::infinity()
#define LM_INF_D std::numeric_limits<double>::infinity()
namespace luminal::scalar {
using lm_i64 = std::int64_t;
using lm_u64 = std::uint64_t;
#endif

// ---- integers (two's complement, no undefined behaviour) ---------------------------------------
LM_HD lm_i64 lm_wrap_add(lm_i64 a, lm_i64 b) { return (lm_i64)((lm_u64)a + (lm_u64)b); }
LM_HD lm_i64 lm_wrap_sub(lm_i64 a, lm_i64 b) { return (lm_i64)((lm_u64)a - (lm_u64)b); }
LM_HD lm_i64 lm_wrap_mul(lm_i64 a, lm_i64 b) { return (lm_i64)((lm_u64)a * (lm_u64)b); }

// Python floor division and modulo for a non-zero divisor. b == -1 is explicit: INT64_MIN / -1
// overflows in C++ (the quotient wraps to INT64_MIN, the remainder is 0).
LM_HD lm_i64 lm_floordiv_nonzero(lm_i64 a, lm_i64 b) {
  if (b == -1) return (lm_i64)(0ull - (lm_u64)a);
  const lm_i64 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
LM_HD lm_i64 lm_mod_nonzero(lm_i64 a, lm_i64 b) {
  if (b == -1) return 0;
  const lm_i64 r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// Division by zero calls report(dividend) and gives 0: the device records the error and carries
// on (the host raises it after the launch); the host's report throws.
template <typename Report>
LM_HD lm_i64 lm_floordiv_checked(lm_i64 a, lm_i64 b, Report report) {
  if (b == 0) {
    report(a);
    return 0;
  }
  return lm_floordiv_nonzero(a, b);
}
template <typename Report>
LM_HD lm_i64 lm_mod_checked(lm_i64 a, lm_i64 b, Report report) {
  if (b == 0) {
    report(a);
    return 0;
  }
  return lm_mod_nonzero(a, b);
}
// Shape arithmetic: divisors are sizes, which are positive.
LM_HD lm_i64 lm_floordiv_s(lm_i64 a, lm_i64 b) { return lm_floordiv_nonzero(a, b); }
LM_HD lm_i64 lm_mod_s(lm_i64 a, lm_i64 b) { return lm_mod_nonzero(a, b); }

// torch's shifts of a `bits`-wide integer held sign- (or zero-) extended in 64 bits: shifting left
// by a negative or too large amount gives 0, shifting right by one gives the sign fill.
LM_HD lm_i64 lm_shl(lm_i64 a, lm_i64 b, int bits) {
  if (b < 0 || b >= bits) return 0;
  return (lm_i64)((lm_u64)a << b);
}
LM_HD lm_i64 lm_shr(lm_i64 a, lm_i64 b, int bits, bool is_signed) {
  const int max_shift = bits - (is_signed ? 1 : 0);
  if (b < 0 || b >= max_shift) return max_shift >= 64 ? 0 : a >> max_shift;
  return a >> b;
}

// Float -> int64 without undefined behaviour: NaN and out-of-range values give INT64_MIN, what
// the x86 conversion instruction (and so eager torch on the CPU) produces.
LM_HD lm_i64 lm_f2i(double v) {
  return (v > -9223372036854775808.0 && v < 9223372036854775808.0) ? (lm_i64)v : (lm_i64)0x8000000000000000ull;
}
// Float -> int32, int16 or int8 (narrowed by the caller), as eager on the CPU converts: through
// x86's 32-bit conversion, so NaN and values outside int32 give INT32_MIN (int16 and int8 then get
// its low bits, 0). uint8 goes through int64 (lm_f2i), as c10's static_cast_with_inter_type does.
LM_HD lm_i64 lm_f2i32(double v) {
  return (v > -2147483649.0 && v < 2147483648.0) ? (lm_i64)(int)v : (lm_i64)(-2147483647 - 1);
}
// Which of the two a float -> integer cast takes (`narrow`: a signed integer of at most 32 bits).
LM_HD lm_i64 lm_f2int(double v, bool narrow) { return narrow ? lm_f2i32(v) : lm_f2i(v); }

// ---- floating point (T: float or double, computed in T) -----------------------------------------
template <typename T>
LM_HD T lm_max(T a, T b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }  // NaN wins
template <typename T>
LM_HD T lm_min(T a, T b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
template <typename T>
LM_HD T lm_sign(T x) { return (T)((T(0) < x) - (x < T(0))); }  // NaN -> 0, as torch
// torch.remainder: the result takes the divisor's sign.
template <typename T>
LM_HD T lm_pymod(T a, T b) {
  T m = LM_MATH(fmod)(a, b);
  if (m != T(0) && ((b < T(0)) != (m < T(0)))) m += b;
  return m;
}
// GELU with the tanh approximation, in torch's order of operations.
template <typename T>
LM_HD T lm_gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + LM_MATH(tanh)(T(0.7978845608028654) * (x + T(0.044715) * (x * x * x))));
}

// Clenshaw evaluation of a Chebyshev series (Cephes chbevl; see torch's Math.h and its note on the
// 3-clause BSD license of the Cephes Math Library, from which calc_i0 derives).
template <typename T>
LM_HD T lm_chbevl(T x, const T* array, int len) {
  T b0 = array[0], b1 = T(0), b2 = T(0);
  for (int i = 1; i < len; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = x * b1 - b2 + array[i];
  }
  return T(0.5) * (b0 - b2);
}
// Modified Bessel function of the first kind, order 0: torch's calc_i0 (two Chebyshev expansions
// of exp(-x) I0(x), over [0, 8] and (8, inf)). +-inf gives NaN, as in torch.
template <typename T>
LM_HD T lm_i0(T x_in) {
  const T i0e_a[30] = {
      T(-4.41534164647933937950E-18), T(3.33079451882223809783E-17), T(-2.43127984654795469359E-16),
      T(1.71539128555513303061E-15),  T(-1.16853328779934516808E-14), T(7.67618549860493561688E-14),
      T(-4.85644678311192946090E-13), T(2.95505266312963983461E-12), T(-1.72682629144155570723E-11),
      T(9.67580903537323691224E-11),  T(-5.18979560163526290666E-10), T(2.65982372468238665035E-9),
      T(-1.30002500998624804212E-8),  T(6.04699502254191894932E-8),  T(-2.67079385394061173391E-7),
      T(1.11738753912010371815E-6),   T(-4.41673835845875056359E-6), T(1.64484480707288970893E-5),
      T(-5.75419501008210370398E-5),  T(1.88502885095841655729E-4),  T(-5.76375574538582365885E-4),
      T(1.63947561694133579842E-3),   T(-4.32430999505057594430E-3), T(1.05464603945949983183E-2),
      T(-2.37374148058994688156E-2),  T(4.93052842396707084878E-2),  T(-9.49010970480476444210E-2),
      T(1.71620901522208775349E-1),   T(-3.04682672343198398683E-1), T(6.76795274409476084995E-1)};
  const T i0e_b[25] = {
      T(-7.23318048787475395456E-18), T(-4.83050448594418207126E-18), T(4.46562142029675999901E-17),
      T(3.46122286769746109310E-17),  T(-2.82762398051658348494E-16), T(-3.42548561967721913462E-16),
      T(1.77256013305652638360E-15),  T(3.81168066935262242075E-15),  T(-9.55484669882830764870E-15),
      T(-4.15056934728722208663E-14), T(1.54008621752140982691E-14),  T(3.85277838274214270114E-13),
      T(7.18012445138366623367E-13),  T(-1.79417853150680611778E-12), T(-1.32158118404477131188E-11),
      T(-3.14991652796324136454E-11), T(1.18891471078464383424E-11),  T(4.94060238822496958910E-10),
      T(3.39623202570838634515E-9),   T(2.26666899049817806459E-8),   T(2.04891858946906374183E-7),
      T(2.89137052083475648297E-6),   T(6.88975834691682398426E-5),   T(3.36911647825569408990E-3),
      T(8.04490411014108831608E-1)};
  const T x = LM_MATH(fabs)(x_in);
  if (x <= T(8)) return LM_MATH(exp)(x) * lm_chbevl(x / T(2) - T(2), i0e_a, 30);
  return LM_MATH(exp)(x) * lm_chbevl(T(32) / x - T(2), i0e_b, 25) / LM_MATH(sqrt)(x);
}
// Inverse error function: torch's calc_erfinv (a rational first guess, two Newton steps on erf).
// |y| > 1 and NaN give NaN, +-1 give +-inf.
template <typename T>
LM_HD T lm_erfinv(T y, T nan, T inf) {
  const T y_abs = LM_MATH(fabs)(y);
  if (!(y_abs <= T(1))) return nan;
  if (y_abs == T(1)) return LM_MATH(copysign)(inf, y);
  T x;
  if (y_abs <= T(0.7)) {
    const T z = y * y;
    const T num = ((T(-0.140543331) * z + T(0.914624893)) * z + T(-1.645349621)) * z + T(0.886226899);
    const T dem = (((T(0.012229801) * z + T(-0.329097515)) * z + T(1.442710462)) * z + T(-2.118377725)) * z + T(1);
    x = y * num / dem;
  } else {
    const T z = LM_MATH(sqrt)(-LM_MATH(log)((T(1) - y_abs) / T(2)));
    const T num = ((T(1.641345311) * z + T(3.429567803)) * z + T(-1.624906493)) * z + T(-1.970840454);
    const T dem = (T(1.637067800) * z + T(3.543889200)) * z + T(1);
    x = LM_MATH(copysign)(num, y) / dem;
  }
  const T two_over_sqrt_pi = T(2) * T(0.564189583547756286948);
  x = x - (LM_MATH(erf)(x) - y) / (two_over_sqrt_pi * LM_MATH(exp)(-x * x));
  x = x - (LM_MATH(erf)(x) - y) / (two_over_sqrt_pi * LM_MATH(exp)(-x * x));
  return x;
}
LM_HD float lm_erfinv(float y) { return lm_erfinv<float>(y, LM_NAN_F, LM_INF_F); }
LM_HD double lm_erfinv(double y) { return lm_erfinv<double>(y, LM_NAN_D, LM_INF_D); }

// The names kernels call (one per value type: kernels compute f16/bf16 in float).
LM_HD float lm_max_f(float a, float b) { return lm_max(a, b); }
LM_HD float lm_min_f(float a, float b) { return lm_min(a, b); }
LM_HD double lm_max_d(double a, double b) { return lm_max(a, b); }
LM_HD double lm_min_d(double a, double b) { return lm_min(a, b); }
LM_HD float lm_sign_f(float x) { return lm_sign(x); }
LM_HD double lm_sign_d(double x) { return lm_sign(x); }
LM_HD float lm_i0_f(float x) { return lm_i0(x); }
LM_HD double lm_i0_d(double x) { return lm_i0(x); }
LM_HD float lm_erfinv_f(float x) { return lm_erfinv(x); }
LM_HD double lm_erfinv_d(double x) { return lm_erfinv(x); }
LM_HD float lm_pymod_f(float a, float b) { return lm_pymod(a, b); }
LM_HD double lm_pymod_d(double a, double b) { return lm_pymod(a, b); }
LM_HD float lm_gelu_tanh_f(float x) { return lm_gelu_tanh(x); }
LM_HD double lm_gelu_tanh_d(double x) { return lm_gelu_tanh(x); }

// ---- bfloat16 (round to nearest even; NaN stays a quiet NaN) ---------------------------------------
LM_HD unsigned int lm_float_bits(float f) {
#ifdef __CUDACC_RTC__
  return __float_as_uint(f);
#else
  unsigned int u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
LM_HD float lm_bits_float(unsigned int u) {
#ifdef __CUDACC_RTC__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
LM_HD float lm_bf2f(unsigned short b) { return lm_bits_float(((unsigned int)b) << 16); }
LM_HD unsigned short lm_f2bf(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // One instruction instead of about fourteen: bf16 rounding dominated the instruction count of
  // bf16 elementwise kernels. Same rounding (to nearest even, denormals kept); a NaN becomes the
  // canonical 0x7fff, as torch's own CUDA kernels produce (c10::BFloat16 uses __float2bfloat16).
  unsigned short b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
#else
  unsigned int u = lm_float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u) return (unsigned short)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
#endif
}

#ifndef __CUDACC_RTC__
}  // namespace luminal::scalar
#endif

#endif  // LUMINAL_COMMON_SCALAR_OPS_H
