// CRC-32 as zip uses it (ISO-HDLC: reflected polynomial 0xEDB88320, initial and final inversion).
#pragma once

#include <cstddef>
#include <cstdint>

namespace luminal::pt2 {

// crc32_update(0, data, n) is the checksum of data; feed the result back in to continue over more
// bytes. Uses carry-less multiplication (PCLMULQDQ) where the CPU has it: weights can be
// gigabytes, and checking them should cost little next to reading them (16 GB/s on the
// development machine, against 3 GB/s with tables and 7 GB/s for zlib's crc32).
uint32_t crc32_update(uint32_t crc, const char* data, size_t n);

// The table-driven version (slicing by 8) that crc32_update falls back to, for tests.
uint32_t crc32_update_portable(uint32_t crc, const char* data, size_t n);

}  // namespace luminal::pt2
