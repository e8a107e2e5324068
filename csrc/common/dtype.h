// Element types understood by the core. Their PT2 serde numbering lives in pt2/dtype_codes.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminal {

enum class DType : uint8_t { Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64 };

inline constexpr DType kAllDTypes[] = {DType::Bool, DType::U8,  DType::I8,   DType::I16, DType::I32,
                                       DType::I64,  DType::F16, DType::BF16, DType::F32, DType::F64};

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // torch spelling: "float32", "int64", ...
const char* dtype_short_name(DType dtype);  // IR spelling: "f32", "i64", ...
bool is_floating(DType dtype);
bool is_integral(DType dtype);  // integer types, excluding bool
bool is_signed_integral(DType dtype);
// The values an integer type holds (bool: 0 and 1).
struct IntRange {
  int64_t min = 0;
  int64_t max = 0;
};
IntRange int_range(DType dtype);
// What floating-point math in `dtype` computes in, as torch's kernels do: f64 for f64, else f32
// (f16/bf16 are computed in f32 and rounded once).
DType float_compute_dtype(DType dtype);
// The value a number has once stored in the floating `dtype`: rounded to it (through float32 for
// the half types, as c10's Scalar conversion goes). An IR float constant of `dtype` holding
// `value` means this value.
double float_value_in(DType dtype, double value);
// Whether a float -> `to` cast converts through int32 as eager on the CPU does (int32, int16, int8:
// scalar_ops.h lm_f2i32) rather than through int64 (lm_f2i). Codegen and the interpreter both ask.
bool float_cast_goes_through_int32(DType to);

}  // namespace luminal
