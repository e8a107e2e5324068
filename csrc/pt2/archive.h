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
#include <memory>
#include <string>
#include <vector>

#include "pt2/schema.h"

namespace luminal::pt2 {

// Read-only view of a zip archive. Entries are addressed relative to the root folder. Reads are
// serialized internally, so one Archive may be shared between threads.
class Archive {
 public:
  static Archive from_buffer(std::string bytes);  // takes ownership of the bytes
  static Archive from_file(const std::string& path);

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
  // The whole entry; throws luminal::Error naming the entry if it is missing or corrupt.
  std::string read(const std::string& relative_name) const;

 private:
  struct Impl;
  explicit Archive(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct TensorPayload {
  std::string fqn;
  PayloadMeta meta;   // meta.tensor_meta is always set
  std::string bytes;  // the raw untyped-storage bytes as stored (view them through tensor_meta)
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
