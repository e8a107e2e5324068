#include "pt2/archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <utility>

#include "common/checked.h"
#include "common/config.h"
#include "common/dtype.h"
#include "pt2/dtype_codes.h"
#include "common/error.h"
#include "pt2/parse.h"
#include "pt2/zip_reader.h"

namespace luminal::pt2 {
namespace {

constexpr const char* kBufferSource = "<in-memory archive>";

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string trim(std::string text) {
  constexpr const char* kSpace = " \t\r\n";
  const size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(kSpace);
  return text.substr(begin, end - begin + 1);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Archive
// ---------------------------------------------------------------------------------------------

namespace {

// A limit from the configuration, else `fallback`; raises for a value that is no byte count.
uint64_t configured_byte_limit(const ByteLimitSetting& setting, uint64_t fallback) {
  LUMINAL_CHECK(setting.problem.empty(), setting.problem);
  return setting.bytes.value_or(fallback);
}

// Entries are read (and their CRC computed) in chunks of this size.
constexpr size_t kReadChunk = size_t{4} << 20;

const char* method_name(uint16_t method) {
  switch (method) {
    case 8: return " (deflate)";
    case 9: return " (deflate64)";
    case 12: return " (bzip2)";
    case 14: return " (LZMA)";
    case 93: return " (zstd)";
    case 95: return " (xz)";
    default: return "";
  }
}

}  // namespace

struct Archive::Impl {
  std::string source;
  ZipBytes bytes{std::string()};
  ReadLimits limits;
  std::vector<ZipEntry> directory;  // every entry of the zip, in directory order
  std::string root;
  std::vector<std::string> names;          // relative names, archive order
  std::map<std::string, size_t> index_of;  // relative name -> position in `directory`
  std::mutex mutex;                        // guards bytes_read
  uint64_t bytes_read = 0;                 // charged against limits.archive_bytes

  // Label of an entry in messages: "models/model.json", prefixed by the file path if any.
  std::string label(const std::string& relative_name) const {
    return source == kBufferSource ? relative_name : str_cat(source, ": ", relative_name);
  }

  void index_entries() {
    for (size_t i = 0; i < directory.size(); ++i) {
      const std::string& name = directory[i].name;
      if (i == 0) {
        const size_t slash = name.find('/');
        root = slash == std::string::npos ? "" : name.substr(0, slash);
      }
      // Entries outside the root folder are ignored; a zip without one is indexed as is (so that
      // the legacy layout of torch < 2.7 is recognised and named in the error).
      if (!root.empty() && !starts_with(name, root + "/")) continue;
      std::string relative = root.empty() ? name : name.substr(root.size() + 1);
      if (relative.empty() || relative.back() == '/') continue;  // directory entry
      // Names are unique in the zip (read_zip_directory refuses duplicates), so are these.
      index_of.emplace(relative, i);
      names.push_back(std::move(relative));
    }
  }

  const ZipEntry& entry(const std::string& relative_name) const {
    const auto it = index_of.find(relative_name);
    if (it == index_of.end()) {
      fail(label(relative_name), ": no such entry in the archive (root folder \"", root, "\")");
    }
    return directory[it->second];
  }

  // The entry's method and declared size, checked against the limit and against what the entry
  // can hold, before anything is allocated.
  void check_declared_size(const std::string& relative_name, const ZipEntry& zip_entry, uint64_t max_bytes,
                           std::string_view kind) const {
    if (zip_entry.method != 0) {
      // torch.export.save (PyTorchFileWriter) stores every entry; inflating is not worth a
      // decompressor's attack surface and dependencies here.
      fail("compressed zip entries are not supported: ", label(relative_name), " uses method ", zip_entry.method,
           method_name(zip_entry.method), " (torch.export.save stores entries uncompressed)");
    }
    if (zip_entry.encrypted()) fail("encrypted zip entries are not supported: ", label(relative_name));
    if (zip_entry.size > max_bytes) {
      fail(label(relative_name), ": the zip directory declares ", zip_entry.size, " bytes for this ", kind,
           ", over its limit of ", max_bytes, " bytes", limit_hint(max_bytes));
    }
    if (zip_entry.size != zip_entry.compressed_size) {
      fail("corrupt zip archive ", source, ": entry ", relative_name, " is stored uncompressed with ",
           zip_entry.compressed_size, " bytes, but the zip directory declares ", zip_entry.size);
    }
  }

  // Which setting raises a limit, for messages.
  std::string limit_hint(uint64_t max_bytes) const {
    if (max_bytes == limits.archive_bytes) return " (LUMINAL_MAX_ARCHIVE_BYTES or the max_archive_bytes option raise it)";
    if (max_bytes == limits.json_entry_bytes) return " (LUMINAL_MAX_ARCHIVE_JSON_BYTES raises it)";
    return " (a fixed limit for this entry)";
  }

  // Charges `size` bytes to the archive's budget, or raises.
  void charge(const std::string& relative_name, uint64_t size, std::string_view kind) {
    std::lock_guard<std::mutex> lock(mutex);
    if (size > limits.archive_bytes - bytes_read) {
      fail(label(relative_name), ": reading this ", kind, " (", size, " bytes) would take the bytes read from ",
           "the archive past its limit of ", limits.archive_bytes, limit_hint(limits.archive_bytes));
    }
    bytes_read += size;
  }

  std::string read(const std::string& relative_name, uint64_t max_bytes, std::string_view kind) {
    const ZipEntry& zip_entry = entry(relative_name);
    max_bytes = std::min(max_bytes, limits.archive_bytes);
    check_declared_size(relative_name, zip_entry, max_bytes, kind);
    // The data offset is checked to lie, with all its declared bytes, before the next entry (or
    // the central directory) of a file whose size is known: the allocation below is no larger
    // than the file, besides being under the limit.
    const uint64_t data_offset = zip_data_offset(bytes, zip_entry, source);
    charge(relative_name, zip_entry.size, kind);
    std::string out(static_cast<size_t>(zip_entry.size), '\0');
    uint32_t crc = 0;
    for (size_t done = 0; done < out.size();) {
      const size_t chunk = std::min(kReadChunk, out.size() - done);
      bytes.read(data_offset + done, out.data() + done, chunk, label(relative_name));
      crc = crc32_update(crc, out.data() + done, chunk);
      done += chunk;
    }
    if (crc != zip_entry.crc32) {
      fail(label(relative_name), ": corrupt entry: CRC-32 mismatch (the zip directory records ", zip_entry.crc32,
           ", the data has ", crc, ")");
    }
    return out;
  }
};

namespace {

// Opens without blocking (a FIFO would block a plain open until a writer appears) and refuses
// what is not a regular file.
int open_regular_file(const std::string& path, uint64_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) fail("cannot open PT2 archive ", path, ": no such file");
    fail("cannot open PT2 archive ", path, ": ", std::strerror(error));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool directory = S_ISDIR(st.st_mode);
    ::close(fd);
    fail("cannot open PT2 archive ", path, ": ",
         directory ? "it is a directory" : "not a regular file (a FIFO, device or socket)");
  }
  // Back to blocking reads for the regular file.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

Archive::Archive(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Archive::Archive(Archive&&) noexcept = default;
Archive& Archive::operator=(Archive&&) noexcept = default;
Archive::~Archive() = default;

ReadLimits ReadLimits::from_environment() {
  ReadLimits limits;
  const std::shared_ptr<const Config> settings = config();
  limits.archive_bytes = configured_byte_limit(settings->max_archive_bytes, limits.archive_bytes);
  limits.json_entry_bytes = configured_byte_limit(settings->max_archive_json_bytes, limits.json_entry_bytes);
  return limits;
}

ReadLimits ReadLimits::with_max_archive_bytes(std::optional<uint64_t> max_archive_bytes) {
  ReadLimits limits = from_environment();
  if (max_archive_bytes) {
    LUMINAL_CHECK(*max_archive_bytes > 0, "max_archive_bytes must be a positive number of bytes");
    limits.archive_bytes = *max_archive_bytes;
  }
  return limits;
}

Archive Archive::from_buffer(std::string bytes, const ReadLimits& limits) {
  if (bytes.empty()) fail("not a zip archive: the buffer is empty");
  auto impl = std::make_unique<Impl>();
  impl->source = kBufferSource;
  const std::string not_a_zip = str_cat("not a zip archive (", bytes.size(), " bytes)");
  impl->bytes = ZipBytes(std::move(bytes));
  impl->limits = limits;
  impl->directory = read_zip_directory(impl->bytes, impl->source, not_a_zip);
  impl->index_entries();
  return Archive(std::move(impl));
}

Archive Archive::from_file(const std::string& path, const ReadLimits& limits) {
  auto impl = std::make_unique<Impl>();
  uint64_t size = 0;
  const int fd = open_regular_file(path, size);
  impl->bytes = ZipBytes(fd, size);  // owns fd from here on
  impl->source = path;
  impl->limits = limits;
  impl->directory = read_zip_directory(impl->bytes, path, str_cat("corrupt zip archive ", path, " (not a zip archive?)"));
  impl->index_entries();
  return Archive(std::move(impl));
}

const std::string& Archive::root() const { return impl_->root; }
const std::string& Archive::source() const { return impl_->source; }
const ReadLimits& Archive::limits() const { return impl_->limits; }
std::vector<std::string> Archive::entries() const { return impl_->names; }
bool Archive::contains(const std::string& relative_name) const {
  return impl_->index_of.count(relative_name) != 0;
}
std::string Archive::read(const std::string& relative_name, uint64_t max_bytes, std::string_view kind) const {
  return impl_->read(relative_name, max_bytes, kind);
}
std::string Archive::read(const std::string& relative_name) const {
  return impl_->read(relative_name, impl_->limits.archive_bytes, "entry");
}
uint64_t Archive::declared_size(const std::string& relative_name) const { return impl_->entry(relative_name).size; }


// ---------------------------------------------------------------------------------------------
// Package
// ---------------------------------------------------------------------------------------------

namespace {

std::string entry_label(const Archive& archive, const std::string& relative_name) {
  return archive.source() == kBufferSource ? relative_name
                                           : str_cat(archive.source(), ": ", relative_name);
}

std::string read_json(const Archive& archive, const std::string& relative_name) {
  const ReadLimits& limits = archive.limits();
  return archive.read(relative_name, std::min(limits.json_entry_bytes, limits.archive_bytes), "JSON entry");
}

void check_pt2_format(const Archive& archive) {
  if (!archive.contains("archive_format")) {
    if (archive.contains("serialized_exported_program.json")) {
      fail("not a PT2 archive: ", archive.source(), " was written by torch.export.save of torch < 2.7 (the legacy "
           "layout, with pickled weights); luminal reads the PT2 archive layout of torch >= 2.7: save it again with "
           "a newer torch, or compile the model with torch.compile(backend=\"luminal\")");
    }
    fail("not a PT2 archive: ", archive.source(), " has no ",
         archive.root().empty() ? std::string("<root>") : archive.root(),
         "/archive_format entry (expected the layout written by torch.export.save)");
  }
  const std::string format = trim(archive.read("archive_format", archive.limits().small_entry_bytes, "small fixed entry"));
  if (format != "pt2") {
    fail("not a PT2 archive: ", archive.source(), ": archive_format is \"", format.substr(0, 32),
         "\", expected \"pt2\"");
  }
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string choose_model(const Archive& archive, const std::string& requested) {
  constexpr std::string_view kPrefix = "models/";
  constexpr std::string_view kSuffix = ".json";
  std::vector<std::string> models;
  for (const std::string& entry : archive.entries()) {
    if (starts_with(entry, kPrefix) && ends_with(entry, kSuffix) &&
        entry.find('/', kPrefix.size()) == std::string::npos) {
      models.push_back(
          entry.substr(kPrefix.size(), entry.size() - kPrefix.size() - kSuffix.size()));
    }
  }
  if (!requested.empty()) {
    for (const std::string& model : models) {
      if (model == requested) return model;
    }
    fail(archive.source(), ": no model \"", requested,
         "\" in the PT2 archive (models: ", models.empty() ? std::string("none") : join(models),
         ")");
  }
  if (models.empty()) fail(archive.source(), ": the PT2 archive has no models/<name>.json");
  if (models.size() > 1) {
    fail(archive.source(), ": the PT2 archive holds several models (", join(models),
         "); choose one with LoadOptions::model_name");
  }
  return models.front();
}

// Bytes per element of a serde ScalarType code; nullopt for codes this reader does not know.
std::optional<size_t> serde_element_size(int code) {
  switch (code) {
    case 1:
    case 2:
    case 12:
    case 29:
    case 30:
    case 31:
    case 32:
    case 33: return 1;
    case 3:
    case 6:
    case 13:
    case 28: return 2;
    case 4:
    case 7:
    case 9:
    case 34: return 4;
    case 5:
    case 8:
    case 10:
    case 35: return 8;
    case 11: return 16;
    default: return std::nullopt;
  }
}

struct PayloadKind {
  const char* what;           // "weight" / "constant"
  const char* dir;            // directory inside the root
  const char* config_suffix;  // <model><suffix> is the config file
};
constexpr PayloadKind kWeights{"weight", "data/weights/", "_weights_config.json"};
constexpr PayloadKind kConstants{"constant", "data/constants/", "_constants_config.json"};

std::string describe_sizes(const std::vector<SymInt>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += values[i].is_int() ? std::to_string(values[i].as_int()) : values[i].as_expr().expr_str;
  }
  return out + "]";
}

// Smallest storage, in bytes, that holds the strided view; nullopt when a size, stride or the
// offset is symbolic. Throws on negative or overflowing values (common/checked.h).
std::optional<uint64_t> required_storage_bytes(const TensorMeta& meta, size_t element_size,
                                               const std::string& who) {
  std::vector<int64_t> sizes, strides;
  for (const SymInt& size : meta.sizes) {
    if (!size.is_int()) return std::nullopt;
    sizes.push_back(size.as_int());
  }
  for (const SymInt& stride : meta.strides) {
    if (!stride.is_int()) return std::nullopt;
    strides.push_back(stride.as_int());
  }
  if (!meta.storage_offset.is_int()) return std::nullopt;
  element_count(sizes, who);  // the view's own size must be describable too
  const int64_t elements = strided_storage_elements(sizes, strides, meta.storage_offset.as_int(), who);
  return byte_count(elements, element_size, who);
}

void check_payload_size(const PayloadKind& kind, const std::string& fqn, const PayloadMeta& meta,
                        const std::string& bytes, const std::string& payload_label) {
  const std::string who = str_cat(kind.what, " '", fqn, "'");
  const TensorMeta& tensor = *meta.tensor_meta;
  const std::optional<size_t> element_size = serde_element_size(tensor.dtype);
  if (!element_size) return;  // an unknown dtype is the consumer's to reject
  if (tensor.layout != kLayoutStrided) {
    fail(who, ": layout code ", tensor.layout,
         " is not strided; only strided tensors can be read from raw payloads");
  }
  if (tensor.sizes.size() != tensor.strides.size()) {
    fail(who, ": tensor_meta has ", tensor.sizes.size(), " sizes but ", tensor.strides.size(),
         " strides");
  }
  if (bytes.size() % *element_size != 0) {
    fail(who, ": payload ", payload_label, " holds ", bytes.size(),
         " bytes, not a multiple of the element size ", *element_size, " of ",
         serde_code_name(tensor.dtype));
  }
  const std::optional<uint64_t> needed = required_storage_bytes(tensor, *element_size, who);
  if (needed && bytes.size() < *needed) {
    fail(who, ": payload ", payload_label, " holds ", bytes.size(), " bytes, but its tensor_meta (",
         serde_code_name(tensor.dtype), ", sizes ", describe_sizes(tensor.sizes), ", strides ",
         describe_sizes(tensor.strides), ", storage_offset ",
         describe_sizes({tensor.storage_offset}), ") needs at least ", *needed, " bytes",
         bytes.empty() ? " (an empty payload is what a fake tensor saves)" : "");
  }
}

void check_readable(const PayloadKind& kind, const std::string& fqn, const PayloadMeta& meta) {
  if (meta.use_pickle) {
    fail(kind.what, " '", fqn, "': pickled payloads (tensor subclasses / custom objects) are ",
         "unsupported; only plain tensors stored as raw bytes can be read");
  }
  if (!meta.tensor_meta) fail(kind.what, " '", fqn, "': the payload config has no tensor_meta");
}

std::map<std::string, TensorPayload> load_payloads(const Archive& archive, const PayloadKind& kind,
                                                   const std::string& model_name) {
  const std::string config_name = str_cat(kind.dir, model_name, kind.config_suffix);
  if (!archive.contains(config_name)) {
    const std::string legacy_name = str_cat(kind.dir, model_name, ".pt");
    if (archive.contains(legacy_name)) {
      fail(entry_label(archive, legacy_name), ": the legacy pickled ", kind.what,
           " format is unsupported; re-save the program with torch.export.save from a newer torch"
           " (>= 2.9), which stores raw per-tensor payloads");
    }
    return {};  // the config is optional: a program without any
  }
  const std::map<std::string, PayloadMeta> config =
      parse_payload_config(read_json(archive, config_name), entry_label(archive, config_name),
                           archive.limits().json_values());

  std::map<std::string, std::shared_ptr<const std::string>> storages;  // path_name -> bytes; aliases share a storage
  std::map<std::string, TensorPayload> payloads;
  for (const auto& [fqn, meta] : config) {
    check_readable(kind, fqn, meta);
    const std::string payload_name = kind.dir + meta.path_name;
    auto storage = storages.find(meta.path_name);
    if (storage == storages.end()) {
      if (!archive.contains(payload_name)) {
        fail(kind.what, " '", fqn, "': payload ", entry_label(archive, payload_name),
             " is missing from the archive");
      }
      storage = storages.emplace(meta.path_name, std::make_shared<const std::string>(archive.read(
                                   payload_name, archive.limits().archive_bytes, str_cat(kind.what, " payload"))))
                    .first;
    }
    check_payload_size(kind, fqn, meta, *storage->second, entry_label(archive, payload_name));
    payloads.emplace(fqn, TensorPayload{fqn, meta, storage->second});
  }
  return payloads;
}

}  // namespace

Package load_package(const Archive& archive, const LoadOptions& options) {
  check_pt2_format(archive);
  Package package;
  if (archive.contains("archive_version")) {
    package.archive_version = trim(archive.read("archive_version", archive.limits().small_entry_bytes, "small fixed entry"));
  }
  package.model_name = choose_model(archive, options.model_name);
  const std::string model_entry = str_cat("models/", package.model_name, ".json");
  package.program =
      parse_exported_program(read_json(archive, model_entry), entry_label(archive, model_entry),
                             archive.limits().json_values());
  if (options.load_weights) package.weights = load_payloads(archive, kWeights, package.model_name);
  if (options.load_constants) {
    package.constants = load_payloads(archive, kConstants, package.model_name);
  }
  return package;
}

}  // namespace luminal::pt2
