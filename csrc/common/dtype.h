// Element types understood by the core, and their mapping from the PT2 serde numbering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

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
// What floating-point math in `dtype` computes in, as torch's kernels do: f64 for f64, else f32
// (f16/bf16 are computed in f32 and rounded once).
DType float_compute_dtype(DType dtype);

// Serde ScalarType codes (torch/_export/serde/schema.py) — not c10::ScalarType.
std::optional<DType> dtype_from_serde_code(int code);
std::string serde_code_name(int code);  // "FLOAT", "COMPLEXFLOAT", ... or "code <n>"
int serde_code(DType dtype);

}  // namespace luminal
