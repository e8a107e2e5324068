// Reading PT2 archives (torch.export.save): the zip container and the package inside it.
//
// Layout (torch/csrc/export/pt2_archive_constants.h), all under one root folder whose name varies
// ("archive", or the file's stem such as "model"):
//   archive_format                                  "pt2"
//   archive_version                                 "0"
//   models/<name>.json                              ExportedProgram JSON
//   data/weights/<name>_weights_config.json         {"config": {fqn: PayloadMeta}}
//   data/weights/weight_<i>                         raw untyped-storage bytes
//   data/constants/<name>_constants_config.json     same, for lifted tensor constants
//   data/constants/tensor_<i>
#pragma once

#include <map>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pt2/schema.h"

namespace luminal::pt2 {

// How much an archive may make the reader allocate. An archive is data that users download and
// share: the sizes its zip directory declares are checked against these limits and against the
// bytes the entry really has in the file (stored entries only) before anything is allocated.
struct ReadLimits {
  static constexpr uint64_t kKiB = uint64_t{1} << 10, kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;
  // Small fixed entries: archive_format, archive_version, byteorder, ...
  uint64_t small_entry_bytes = 4 * kKiB;
  // One JSON entry (models/<name>.json, the payload configs): the text. Its parsed DOM is bounded
  // by json_values() below.
  uint64_t json_entry_bytes = 64 * kMiB;
  // ...and the values it may hold: one per 32 bytes of json_entry_bytes (2 Mi by default), since
  // the DOM's size follows the number of values, not the text's length (pt2/parse.h).
  size_t json_values() const { return static_cast<size_t>(std::max<uint64_t>(json_entry_bytes / 32, 1024)); }
  // Everything read from one archive together: weights and constants above all.
  uint64_t archive_bytes = 64 * kGiB;

  // The defaults, overridden (through config(), common/config.h) by LUMINAL_MAX_ARCHIVE_BYTES (archive_bytes; it also caps
  // json_entry_bytes) and LUMINAL_MAX_ARCHIVE_JSON_BYTES (json_entry_bytes), each a positive
  // integer number of bytes; anything else raises luminal::Error naming the variable.
  static ReadLimits from_environment();
  // from_environment() with archive_bytes set to `max_archive_bytes` (> 0) when given.
  static ReadLimits with_max_archive_bytes(std::optional<uint64_t> max_archive_bytes);
};

// Read-only view of a zip archive (csrc/pt2/zip_reader.h: stored entries only, as torch writes
// them). Entries are addressed relative to the root folder. One Archive may be shared between
// threads: reads use pread or the buffer, and the budget they are charged to is locked.
class Archive {
 public:
  // Takes ownership of the bytes.
  static Archive from_buffer(std::string bytes, const ReadLimits& limits = ReadLimits::from_environment());
  // Refuses what is not a regular file (a directory, a FIFO, /dev/zero) without blocking on it;
  // a missing file and a file that is not a readable zip archive are reported as such.
  static Archive from_file(const std::string& path, const ReadLimits& limits = ReadLimits::from_environment());

  Archive(Archive&&) noexcept;
  Archive& operator=(Archive&&) noexcept;
  Archive(const Archive&) = delete;
  Archive& operator=(const Archive&) = delete;
  ~Archive();

  // First path component of the first entry, e.g. "archive" or "model"; empty for an empty zip
  // or when the first entry is not inside a folder.
  const std::string& root() const;
  // What the archive was opened from, for messages: the file path, or "<in-memory archive>".
  const std::string& source() const;
  std::vector<std::string> entries() const;  // file names relative to root, in archive order
  bool contains(const std::string& relative_name) const;
  const ReadLimits& limits() const;
  // The whole entry, at most `max_bytes` long (and within the archive's total budget, which the
  // read is charged to); throws luminal::Error naming the entry if it is missing, corrupt or
  // over the limit. `kind` names the limit in that message ("JSON entry", "weight payload").
  std::string read(const std::string& relative_name, uint64_t max_bytes, std::string_view kind) const;
  std::string read(const std::string& relative_name) const;  // limited by the archive's budget alone
  // The size the zip directory declares for the entry (not yet checked against its data).
  uint64_t declared_size(const std::string& relative_name) const;

 private:
  struct Impl;
  explicit Archive(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct TensorPayload {
  std::string fqn;
  PayloadMeta meta;   // meta.tensor_meta is always set
  // The raw untyped-storage bytes as stored (view them through tensor_meta), shared by the FQNs
  // that alias one storage: a config naming one payload many times costs no copies.
  std::shared_ptr<const std::string> bytes;
};

struct Package {
  std::string model_name;       // "model" by default
  std::string archive_version;  // content of archive_version; empty when absent
  ExportedProgram program;
  std::map<std::string, TensorPayload> weights;    // by FQN (parameters and buffers)
  std::map<std::string, TensorPayload> constants;  // by FQN (lifted tensor constants)
};

struct LoadOptions {
  bool load_weights = true;
  bool load_constants = true;
  std::string model_name;  // empty: the only models/*.json; an error if there are several
};

// Reads the exported program and, as requested, its weights and constants. Throws luminal::Error
// for anything that is not a readable PT2 archive, including payloads this reader cannot
// interpret (pickled tensor subclasses / custom objects, the legacy pickled weight layout) — but
// only for the payload kinds that were requested.
Package load_package(const Archive& archive, const LoadOptions& options = {});

}  // namespace luminal::pt2
