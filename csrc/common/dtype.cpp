#include "common/dtype.h"

#include "common/error.h"
#include "common/half.h"

namespace luminal {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::U8:
    case DType::I8: return 1;
    case DType::I16:
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I32:
    case DType::F32: return 4;
    case DType::I64:
    case DType::F64: return 8;
  }
  fail("dtype_size: invalid dtype ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::U8: return "uint8";
    case DType::I8: return "int8";
    case DType::I16: return "int16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::F32: return "float32";
    case DType::F64: return "float64";
  }
  return "invalid";
}

const char* dtype_short_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::U8: return "u8";
    case DType::I8: return "i8";
    case DType::I16: return "i16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
  }
  return "invalid";
}

bool is_floating(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32 || dtype == DType::F64;
}

DType float_compute_dtype(DType dtype) { return dtype == DType::F64 ? DType::F64 : DType::F32; }

double float_value_in(DType dtype, double value) {
  switch (dtype) {
    case DType::F64: return value;
    case DType::F32: return static_cast<float>(value);
    case DType::F16: return round_to_half(static_cast<float>(value));
    case DType::BF16: return round_to_bf16(static_cast<float>(value));
    default: fail("float_value_in: ", dtype_name(dtype), " is not a floating dtype");
  }
}

bool is_integral(DType dtype) {
  return dtype == DType::U8 || dtype == DType::I8 || dtype == DType::I16 || dtype == DType::I32 ||
         dtype == DType::I64;
}

bool is_signed_integral(DType dtype) { return is_integral(dtype) && dtype != DType::U8; }

IntRange int_range(DType dtype) {
  switch (dtype) {
    case DType::Bool: return {0, 1};
    case DType::U8: return {0, 255};
    case DType::I8: return {-128, 127};
    case DType::I16: return {-32768, 32767};
    case DType::I32: return {INT32_MIN, INT32_MAX};
    case DType::I64: return {INT64_MIN, INT64_MAX};
    default: break;
  }
  fail("int_range of ", dtype_name(dtype), ", which is not an integer type");
}

bool float_cast_goes_through_int32(DType to) { return to == DType::I32 || to == DType::I16 || to == DType::I8; }

}  // namespace luminal
