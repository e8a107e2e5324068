#include "pt2/zip_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "common/error.h"

namespace luminal::pt2 {
namespace {

// Record layouts (APPNOTE.TXT 6.3), little-endian.
constexpr uint32_t kLocalHeaderSignature = 0x04034b50;    // "PK\3\4"
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;  // "PK\1\2"
constexpr uint32_t kZip64EndSignature = 0x06064b50;       // "PK\6\6"
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;   // "PK\6\7"
constexpr uint64_t kLocalHeaderBytes = 30;
constexpr uint64_t kCentralHeaderBytes = 46;
constexpr uint64_t kEndBytes = 22;
constexpr uint64_t kZip64EndBytes = 56;
constexpr uint64_t kZip64LocatorBytes = 20;
constexpr uint64_t kMaxCommentBytes = 0xFFFF;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kDataDescriptorFlag = 0x0008;
constexpr uint32_t kSentinel32 = 0xFFFFFFFF;
constexpr uint16_t kSentinel16 = 0xFFFF;
// The central directory is read into memory whole: a PT2 archive has one record per weight, a
// few hundred bytes each, so this allows hundreds of thousands of entries.
constexpr uint64_t kMaxCentralDirectoryBytes = uint64_t{64} << 20;

// Does [offset, offset + length) lie within [0, end)? Written so that nothing can wrap.
bool within(uint64_t offset, uint64_t length, uint64_t end) { return offset <= end && length <= end - offset; }

// Little-endian fields of a record held in memory; reading past its end raises.
class Fields {
 public:
  Fields(std::string_view data, const std::string& error_prefix) : data_(data), error_prefix_(error_prefix) {}

  uint16_t u16(size_t at) const { return static_cast<uint16_t>(get(at, 2)); }
  uint32_t u32(size_t at) const { return static_cast<uint32_t>(get(at, 4)); }
  uint64_t u64(size_t at) const { return get(at, 8); }
  std::string_view bytes(size_t at, size_t n) const {
    check(at, n);
    return data_.substr(at, n);
  }
  size_t size() const { return data_.size(); }

 private:
  void check(size_t at, size_t n) const {
    if (!within(at, n, data_.size())) fail(error_prefix_, ": a record runs past the end of its area");
  }
  uint64_t get(size_t at, size_t n) const {
    check(at, n);
    uint64_t value = 0;
    for (size_t i = n; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(data_[at + i]);
    return value;
  }

  std::string_view data_;
  const std::string& error_prefix_;
};

std::string read_range(const ZipBytes& bytes, uint64_t offset, uint64_t n, const std::string& what) {
  std::string out(static_cast<size_t>(n), '\0');
  bytes.read(offset, out.data(), out.size(), what);
  return out;
}

struct EndRecord {
  uint64_t position = 0;  // of the (ZIP64 or classic) end record that bounds the central directory
  uint64_t entries = 0;
  uint64_t directory_size = 0;
  uint64_t directory_offset = 0;
};

// The classic end record: the last "PK\5\6" in the final 64 KiB + 22 bytes whose comment length
// runs exactly to the end of the file (a signature inside a comment does not satisfy that unless
// it was built to, and then the directory it points at is checked like any other).
std::optional<uint64_t> find_end_record(const std::string& tail, uint64_t tail_offset) {
  if (tail.size() < kEndBytes) return std::nullopt;
  for (size_t at = tail.size() - kEndBytes + 1; at-- > 0;) {
    if (tail.compare(at, 4, "PK\x05\x06") != 0) continue;
    const size_t comment = static_cast<unsigned char>(tail[at + 20]) | (static_cast<unsigned char>(tail[at + 21]) << 8);
    if (at + kEndBytes + comment == tail.size()) return tail_offset + at;
  }
  return std::nullopt;
}

// Fills `end` from the ZIP64 locator and record that precede the classic end record, when the
// locator is there. Every classic field must then be its sentinel or agree with the ZIP64 one.
void read_zip64_end(const ZipBytes& bytes, uint64_t classic_position, const Fields& classic, EndRecord& end,
                    const std::string& corrupt) {
  if (classic_position < kZip64LocatorBytes) return;
  const uint64_t locator_position = classic_position - kZip64LocatorBytes;
  const std::string locator_bytes = read_range(bytes, locator_position, kZip64LocatorBytes, corrupt);
  const Fields locator(locator_bytes, corrupt);
  if (locator.u32(0) != kZip64LocatorSignature) return;
  if (locator.u32(4) != 0 || locator.u32(16) > 1)
    fail(corrupt, ": multi-disk (spanned) zip archives are not supported");
  const uint64_t record_position = locator.u64(8);
  if (!within(record_position, kZip64EndBytes, locator_position)) {
    fail(corrupt, ": the ZIP64 end record offset ", record_position, " lies outside the archive");
  }
  const std::string record_bytes = read_range(bytes, record_position, kZip64EndBytes, corrupt);
  const Fields record(record_bytes, corrupt);
  if (record.u32(0) != kZip64EndSignature) fail(corrupt, ": no ZIP64 end record where its locator points");
  if (record.u64(4) < kZip64EndBytes - 12 || !within(record_position, record.u64(4), locator_position - 12)) {
    fail(corrupt, ": the ZIP64 end record declares an impossible size");
  }
  if (record.u32(16) != 0 || record.u32(20) != 0)
    fail(corrupt, ": multi-disk (spanned) zip archives are not supported");
  if (record.u64(24) != record.u64(32)) fail(corrupt, ": the ZIP64 end record's entry counts disagree");
  end.position = record_position;
  end.entries = record.u64(32);
  end.directory_size = record.u64(40);
  end.directory_offset = record.u64(48);
  const auto agrees = [](uint64_t classic_value, uint64_t sentinel, uint64_t zip64_value) {
    return classic_value == sentinel || classic_value == zip64_value;
  };
  if (!agrees(classic.u16(10), kSentinel16, end.entries) || !agrees(classic.u32(12), kSentinel32, end.directory_size) ||
      !agrees(classic.u32(16), kSentinel32, end.directory_offset)) {
    fail(corrupt, ": the end record and the ZIP64 end record disagree");
  }
}

EndRecord read_end(const ZipBytes& bytes, const std::string& corrupt, const std::string& not_a_zip) {
  const uint64_t tail_bytes = std::min(bytes.size(), kMaxCommentBytes + kEndBytes);
  const uint64_t tail_offset = bytes.size() - tail_bytes;
  const std::string tail = read_range(bytes, tail_offset, tail_bytes, corrupt);
  const std::optional<uint64_t> position = find_end_record(tail, tail_offset);
  if (!position) fail(not_a_zip, ": no end-of-central-directory record");
  const Fields classic(std::string_view(tail).substr(*position - tail_offset, kEndBytes), corrupt);
  EndRecord end;
  end.position = *position;
  end.entries = classic.u16(10);
  end.directory_size = classic.u32(12);
  end.directory_offset = classic.u32(16);
  read_zip64_end(bytes, *position, classic, end, corrupt);
  const bool zip64 = end.position != *position;
  if (!zip64 && (classic.u16(4) != 0 || classic.u16(6) != 0 || classic.u16(8) != classic.u16(10))) {
    fail(corrupt, ": multi-disk (spanned) zip archives are not supported");
  }
  if (!within(end.directory_offset, end.directory_size, end.position)) {
    fail(corrupt, ": the central directory (", end.directory_size, " bytes at offset ", end.directory_offset,
         ") does not lie before the end record at offset ", end.position);
  }
  if (end.directory_size > kMaxCentralDirectoryBytes) {
    fail(corrupt, ": the central directory takes ", end.directory_size, " bytes, over the limit of ",
         kMaxCentralDirectoryBytes, " (a fixed limit)");
  }
  if (end.entries > end.directory_size / kCentralHeaderBytes) {
    fail(corrupt, ": ", end.entries, " entries cannot fit in a central directory of ", end.directory_size, " bytes");
  }
  return end;
}

// Replaces the sentinel fields of `entry` with the values of its ZIP64 extra field, which holds,
// in this order, only those that are sentinels.
void apply_zip64_extra(std::string_view extra, bool size_sentinel, bool compressed_sentinel, bool offset_sentinel,
                       bool disk_sentinel, ZipEntry& entry, const std::string& where) {
  if (!size_sentinel && !compressed_sentinel && !offset_sentinel && !disk_sentinel) return;
  const Fields fields(extra, where);
  size_t at = 0;
  while (at < fields.size()) {
    const uint16_t id = fields.u16(at);
    const uint16_t length = fields.u16(at + 2);
    const Fields data(fields.bytes(at + 4, length), where);
    if (id == kZip64ExtraId) {
      size_t field = 0;
      const auto next = [&](uint64_t& value) {
        value = data.u64(field);
        field += 8;
      };
      if (size_sentinel) next(entry.size);
      if (compressed_sentinel) next(entry.compressed_size);
      if (offset_sentinel) next(entry.local_header_offset);
      if (disk_sentinel && data.u32(field) != 0) fail(where, ": multi-disk (spanned) zip archives are not supported");
      return;
    }
    at += 4 + length;
  }
  fail(where, ": a size or offset is marked as ZIP64 but the entry has no ZIP64 extra field");
}

// One central record at `at` within the directory; returns the offset of the next.
size_t read_central_record(const Fields& directory, size_t at, ZipEntry& entry, const std::string& corrupt,
                           size_t index) {
  const std::string where = str_cat(corrupt, ": central directory record ", index);
  if (directory.u32(at) != kCentralHeaderSignature) fail(where, ": bad signature");
  entry.flags = directory.u16(at + 8);
  entry.method = directory.u16(at + 10);
  entry.crc32 = directory.u32(at + 16);
  entry.compressed_size = directory.u32(at + 20);
  entry.size = directory.u32(at + 24);
  const uint16_t name_length = directory.u16(at + 28);
  const uint16_t extra_length = directory.u16(at + 30);
  const uint16_t comment_length = directory.u16(at + 32);
  const uint16_t disk = directory.u16(at + 34);
  entry.local_header_offset = directory.u32(at + 42);
  const size_t name_at = at + kCentralHeaderBytes;
  entry.name = std::string(directory.bytes(name_at, name_length));
  const std::string_view extra = directory.bytes(name_at + name_length, extra_length);
  directory.bytes(name_at + name_length + extra_length, comment_length);  // must lie inside too
  if (entry.name.find('\0') != std::string::npos) fail(where, ": the entry name holds a NUL byte");
  apply_zip64_extra(extra, entry.size == kSentinel32, entry.compressed_size == kSentinel32,
                    entry.local_header_offset == kSentinel32, disk == kSentinel16, entry,
                    str_cat(where, " (", entry.name, ")"));
  if (disk != 0 && disk != kSentinel16) fail(where, ": multi-disk (spanned) zip archives are not supported");
  return name_at + name_length + extra_length + comment_length;
}

// Entries must not share bytes: sorted by local header, each one's header, name and data must end
// before the next begins (the local extra field's length is only known when the entry is read:
// zip_data_offset checks it against end_bound). Sets end_bound.
void check_entries_are_disjoint(std::vector<ZipEntry>& entries, uint64_t directory_offset, const std::string& corrupt) {
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return entries[a].local_header_offset < entries[b].local_header_offset; });
  for (size_t k = 0; k < order.size(); ++k) {
    ZipEntry& entry = entries[order[k]];
    entry.end_bound = k + 1 < order.size() ? entries[order[k + 1]].local_header_offset : directory_offset;
    const uint64_t header = kLocalHeaderBytes + entry.name.size();
    if (!within(entry.local_header_offset, header, entry.end_bound) ||
        !within(entry.local_header_offset + header, entry.compressed_size, entry.end_bound)) {
      if (k + 1 < order.size()) {
        fail(corrupt, ": entries overlap (", entry.name, ", ", entry.compressed_size, " bytes at offset ",
             entry.local_header_offset, ", runs into ", entries[order[k + 1]].name, " at offset ", entry.end_bound,
             ")");
      }
      fail(corrupt, ": entry ", entry.name, " (", entry.compressed_size, " bytes at offset ", entry.local_header_offset,
           ") runs into the central directory at offset ", directory_offset);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ZipBytes
// ---------------------------------------------------------------------------------------------

ZipBytes::ZipBytes(std::string bytes) : buffer_(std::move(bytes)), size_(buffer_.size()) {}
ZipBytes::ZipBytes(int fd, uint64_t size) : fd_(fd), size_(size) {}
ZipBytes::ZipBytes(ZipBytes&& other) noexcept
    : buffer_(std::move(other.buffer_)), fd_(std::exchange(other.fd_, -1)), size_(std::exchange(other.size_, 0)) {}
ZipBytes& ZipBytes::operator=(ZipBytes&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    buffer_ = std::move(other.buffer_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}
ZipBytes::~ZipBytes() {
  if (fd_ >= 0) ::close(fd_);
}

void ZipBytes::read(uint64_t offset, char* out, size_t n, const std::string& what) const {
  if (!within(offset, n, size_))
    fail(what, ": read of ", n, " bytes at offset ", offset, " past the end of the archive");
  if (fd_ < 0) {
    if (n > 0) std::memcpy(out, buffer_.data() + offset, n);
    return;
  }
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(what, ": read error: ", std::strerror(errno));
    if (got == 0) fail(what, ": the file ended at offset ", offset + done, " (was it truncated while being read?)");
    done += static_cast<size_t>(got);
  }
}

// ---------------------------------------------------------------------------------------------
// Directory and local headers
// ---------------------------------------------------------------------------------------------

std::vector<ZipEntry> read_zip_directory(const ZipBytes& bytes, const std::string& source,
                                         const std::string& not_a_zip) {
  const std::string corrupt = str_cat("corrupt zip archive ", source);
  const EndRecord end = read_end(bytes, corrupt, not_a_zip);
  const std::string directory_bytes = read_range(bytes, end.directory_offset, end.directory_size, corrupt);
  const Fields directory(directory_bytes, corrupt);
  std::vector<ZipEntry> entries(static_cast<size_t>(end.entries));
  std::set<std::string_view> names;
  size_t at = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    at = read_central_record(directory, at, entries[i], corrupt, i);
  }
  if (at != directory_bytes.size()) {
    fail(corrupt, ": the central directory holds ", directory_bytes.size(), " bytes, but its ", entries.size(),
         " records take ", at);
  }
  for (const ZipEntry& entry : entries) {
    // Readers disagree on which of two same-named entries wins; an archive that has them is refused.
    if (!names.insert(entry.name).second) fail(corrupt, ": two entries are named ", entry.name);
  }
  check_entries_are_disjoint(entries, end.directory_offset, corrupt);
  return entries;
}

uint64_t zip_data_offset(const ZipBytes& bytes, const ZipEntry& entry, const std::string& source) {
  const std::string corrupt = str_cat("corrupt zip archive ", source, ": entry ", entry.name);
  const uint64_t header_bytes = kLocalHeaderBytes + entry.name.size();
  const std::string header_data = read_range(bytes, entry.local_header_offset, header_bytes, corrupt);
  const Fields header(header_data, corrupt);
  if (header.u32(0) != kLocalHeaderSignature) fail(corrupt, ": no local header at offset ", entry.local_header_offset);
  if (header.u16(8) != entry.method) {
    fail(corrupt, ": the local header says method ", header.u16(8), ", the central directory ", entry.method);
  }
  const uint16_t local_flags = header.u16(6);
  if ((local_flags & 0x0041) != (entry.flags & 0x0041)) {
    fail(corrupt, ": the local header and the central directory disagree on encryption");
  }
  if (header.u16(26) != entry.name.size() || header.bytes(kLocalHeaderBytes, entry.name.size()) != entry.name) {
    fail(corrupt, ": the local header names another entry");
  }
  // Without a data descriptor the local header repeats the CRC and sizes (or marks them ZIP64).
  if ((local_flags & kDataDescriptorFlag) == 0) {
    const uint32_t compressed = header.u32(18), size = header.u32(22);
    const bool zip64 = compressed == kSentinel32 && size == kSentinel32;
    if (header.u32(14) != entry.crc32 || (!zip64 && (compressed != entry.compressed_size || size != entry.size))) {
      fail(corrupt, ": the local header's CRC or sizes differ from the central directory's");
    }
  }
  const uint64_t data_offset = entry.local_header_offset + header_bytes + header.u16(28);
  if (!within(data_offset, entry.compressed_size, entry.end_bound)) {
    fail(corrupt, ": its ", entry.compressed_size, " bytes at offset ", data_offset, " run past offset ",
         entry.end_bound, " (the next entry or the central directory)");
  }
  return data_offset;
}

}  // namespace luminal::pt2
