// A strict reader and writer of NumPy's .npy format (versions 1.0, 2.0 and 3.0), torch-free.
//
// Accepted: little-endian, C-order arrays of float32 ('<f4'), float64 ('<f8'), float16 ('<f2'),
// int64 ('<i8'), int32 ('<i4'), int16 ('<i2'), int8 ('|i1'), uint8 ('|u1') and bool ('|b1').
// bfloat16 has no NumPy dtype: it is stored as raw 2-byte records ('|V2', what NumPy writes for
// `array.view("V2")`), holding the bfloat16 bits; a '|V2' file read here is bfloat16.
// Everything else (big-endian, Fortran order, structured or object dtypes, unsigned 16/32/64-bit)
// is refused with an error naming the file and what it holds.
//
// A .npy file is data from outside: the header is parsed strictly (exactly the three keys NumPy
// writes, bounded length), every size is overflow-checked, and the data must be exactly as long as
// the header says, so that nothing is allocated beyond the file's own size.
#pragma once

#include <string>
#include <string_view>

#include "runner/host_tensor.h"

namespace luminal::runner {

// The longest header accepted (NumPy's own reader refuses more than 10,000 bytes by default).
inline constexpr size_t kMaxNpyHeaderBytes = 65536;

// Parses a whole .npy file held in memory; `what` names it in errors (e.g. the path).
HostTensor parse_npy(std::string_view bytes, const std::string& what);
// Reads a regular file (at most `max_bytes`; raises for a larger one) and parses it.
HostTensor read_npy(const std::string& path, size_t max_bytes = size_t{64} << 30);

// A version 1.0 .npy file holding the tensor (header padded to 64 bytes, as NumPy writes).
std::string encode_npy(const HostTensor& tensor);
void write_npy(const std::string& path, const HostTensor& tensor);

// The .npy descr of a dtype ("<f4", "|V2" for bfloat16).
const char* npy_descr(DType dtype);

}  // namespace luminal::runner
