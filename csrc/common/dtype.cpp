#include "common/dtype.h"

#include "common/error.h"

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

bool is_integral(DType dtype) {
  return dtype == DType::U8 || dtype == DType::I8 || dtype == DType::I16 || dtype == DType::I32 ||
         dtype == DType::I64;
}

bool is_signed_integral(DType dtype) { return is_integral(dtype) && dtype != DType::U8; }

std::optional<DType> dtype_from_serde_code(int code) {
  switch (code) {
    case 1: return DType::U8;
    case 2: return DType::I8;
    case 3: return DType::I16;
    case 4: return DType::I32;
    case 5: return DType::I64;
    case 6: return DType::F16;
    case 7: return DType::F32;
    case 8: return DType::F64;
    case 12: return DType::Bool;
    case 13: return DType::BF16;
    default: return std::nullopt;
  }
}

std::string serde_code_name(int code) {
  switch (code) {
    case 0: return "UNKNOWN";
    case 1: return "BYTE";
    case 2: return "CHAR";
    case 3: return "SHORT";
    case 4: return "INT";
    case 5: return "LONG";
    case 6: return "HALF";
    case 7: return "FLOAT";
    case 8: return "DOUBLE";
    case 9: return "COMPLEXHALF";
    case 10: return "COMPLEXFLOAT";
    case 11: return "COMPLEXDOUBLE";
    case 12: return "BOOL";
    case 13: return "BFLOAT16";
    case 28: return "UINT16";
    case 29: return "FLOAT8E4M3FN";
    case 30: return "FLOAT8E5M2";
    case 31: return "FLOAT8E4M3FNUZ";
    case 32: return "FLOAT8E5M2FNUZ";
    default: return str_cat("code ", code);
  }
}

int serde_code(DType dtype) {
  switch (dtype) {
    case DType::U8: return 1;
    case DType::I8: return 2;
    case DType::I16: return 3;
    case DType::I32: return 4;
    case DType::I64: return 5;
    case DType::F16: return 6;
    case DType::F32: return 7;
    case DType::F64: return 8;
    case DType::Bool: return 12;
    case DType::BF16: return 13;
  }
  fail("serde_code: invalid dtype ", static_cast<int>(dtype));
}

}  // namespace luminal
