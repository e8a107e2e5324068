// IEEE half and bfloat16 conversions (round to nearest even), host side. (Kernels convert f16
// with the hardware instructions.)
#pragma once

#include <cstdint>
#include <cstring>

#include "common/scalar_ops.h"

namespace luminal {

inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// bfloat16 rounding is common/scalar_ops.h's, which kernels use too.
inline uint16_t float_to_bf16_bits(float value) { return scalar::lm_f2bf(value); }

inline float bf16_bits_to_float(uint16_t bits) { return scalar::lm_bf2f(bits); }

inline uint16_t float_to_half_bits(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x0200u : 0u));
  }
  if (abs_bits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs_bits < 0x38800000u) {  // result is subnormal or zero
    // Adding 0.5 (as float) aligns the mantissa so that float rounding does the work.
    const float shifted = bits_float(abs_bits) + 0.5f;
    return static_cast<uint16_t>(sign | (float_bits(shifted) - 0x3f000000u));
  }
  const uint32_t mantissa_odd = (abs_bits >> 13) & 1u;
  const uint32_t rounded = abs_bits + 0xc8000fffu + mantissa_odd;  // rebias exponent, round
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

inline float half_bits_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    // Subnormal or zero: value = mantissa * 2^-24.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline float round_to_bf16(float value) { return bf16_bits_to_float(float_to_bf16_bits(value)); }
inline float round_to_half(float value) { return half_bits_to_float(float_to_half_bits(value)); }

}  // namespace luminal
