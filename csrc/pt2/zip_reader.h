// A small, strict reader of zip containers, for the archives torch.export.save writes.
//
// Why not a zip library: the core only ever reads archives, torch's writer (PyTorchFileWriter,
// miniz) stores every entry uncompressed, and a library brings a shared-library dependency (libzip
// pulls libcrypto, libbz2 and libz) that the wheel would have to ship. What a PT2 reader needs is
// small enough to own and check completely:
//   - the end-of-central-directory record, searched for in the last 64 KiB + 22 bytes only (its
//     comment must run exactly to the end of the file), and the ZIP64 locator and record;
//   - the central directory, every offset and size checked against the file (no arithmetic that
//     can wrap), ZIP64 extra fields, duplicate names refused, entries that would share bytes
//     refused (a directory whose records all point at one large stored file would otherwise
//     multiply the memory a small archive takes);
//   - each entry's local header, checked against its central record before its data is read;
//   - stored entries only (method 0): their data is read directly, and its CRC-32 verified. Any
//     compression method raises a luminal::Error naming the entry and the method.
// Nothing here scans the file for signatures: torch's archives hold pickles and weights whose
// bytes may look like zip records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pt2/crc32.h"

namespace luminal::pt2 {

// The bytes of a zip archive: held in memory, or read from an open regular file with pread (so
// concurrent reads need no shared file position). Move-only; owns the file descriptor.
class ZipBytes {
 public:
  explicit ZipBytes(std::string bytes);
  ZipBytes(int fd, uint64_t size);  // takes ownership of `fd`, a regular file of `size` bytes
  ZipBytes(ZipBytes&& other) noexcept;
  ZipBytes& operator=(ZipBytes&& other) noexcept;
  ZipBytes(const ZipBytes&) = delete;
  ZipBytes& operator=(const ZipBytes&) = delete;
  ~ZipBytes();

  uint64_t size() const { return size_; }
  // Copies [offset, offset + n) into `out`. The range must lie within size() (a caller bug
  // otherwise, raised all the same); a file that shrank since it was opened raises, naming `what`.
  void read(uint64_t offset, char* out, size_t n, const std::string& what) const;

 private:
  std::string buffer_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// One central-directory record, with its ZIP64 fields resolved.
struct ZipEntry {
  std::string name;  // as stored: raw bytes, no NUL
  uint16_t flags = 0;
  uint16_t method = 0;  // 0: stored; anything else is compressed (8: deflate)
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;  // uncompressed, as declared
  uint64_t local_header_offset = 0;
  // Where the next entry's local header (or the central directory) begins: this entry's header
  // and data must end at or before it.
  uint64_t end_bound = 0;

  bool encrypted() const { return (flags & 0x0001) != 0 || (flags & 0x0040) != 0; }
};

// Reads and checks the whole central directory; entries in directory order. Raises
// luminal::Error: "<not_a_zip>: ..." when there is no end-of-central-directory record at all,
// "corrupt zip archive <source>: ..." for anything malformed after it.
std::vector<ZipEntry> read_zip_directory(const ZipBytes& bytes, const std::string& source,
                                         const std::string& not_a_zip);

// Checks the entry's local header against its central record (signature, name, method, flags,
// and the CRC and sizes when the header carries them) and returns the offset of its data, which
// is checked to end within entry.end_bound.
uint64_t zip_data_offset(const ZipBytes& bytes, const ZipEntry& entry, const std::string& source);

}  // namespace luminal::pt2
