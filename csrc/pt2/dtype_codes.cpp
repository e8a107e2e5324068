#include "pt2/dtype_codes.h"

#include "common/error.h"

namespace luminal {

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
    case 33: return "FLOAT8E8M0FNU";
    case 34: return "UINT32";
    case 35: return "UINT64";
    default: return str_cat("code ", code);
  }
}

}  // namespace luminal
