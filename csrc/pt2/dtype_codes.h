// PT2 serde ScalarType codes (torch/_export/serde/schema.py, not c10::ScalarType) and the core's
// DType they stand for. The archive and its translation speak these codes; the core below them
// knows only DType.
#pragma once

#include <optional>
#include <string>

#include "common/dtype.h"

namespace luminal {

std::optional<DType> dtype_from_serde_code(int code);
std::string serde_code_name(int code);  // "FLOAT", "COMPLEXFLOAT", ... or "code <n>"

}  // namespace luminal
