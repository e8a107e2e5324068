#include "common/choice_cache.h"

#include <filesystem>

#include "common/cache_files.h"
#include "common/error.h"
#include "common/notices.h"

namespace luminal {

namespace {

// Bumped when a payload changes meaning; part of the hashed name, so other luminal versions
// sharing the directory never read each other's entries.
constexpr const char* kFormat = "choice-cache v1";
// A choice entry is a key of a few lines and a payload of a few fields: anything larger is bad.
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 20;

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

std::string encode_choice(const ChoiceFields& fields) {
  std::string text;
  for (const auto& [name, value] : fields) text += str_cat(one_line(name), "=", one_line(value), "\n");
  return text;
}

std::optional<ChoiceFields> decode_choice(const std::string& payload) {
  ChoiceFields fields;
  size_t start = 0;
  while (start < payload.size()) {
    const size_t end = payload.find('\n', start);
    if (end == std::string::npos) return std::nullopt;  // every line ends with a line break
    const std::string line = payload.substr(start, end - start);
    const size_t equals = line.find('=');
    if (equals == 0 || equals == std::string::npos) return std::nullopt;
    if (!fields.emplace(line.substr(0, equals), line.substr(equals + 1)).second) return std::nullopt;
    start = end + 1;
  }
  if (fields.empty()) return std::nullopt;
  return fields;
}

std::string choice_file(const std::string& key) {
  const std::string root = cache_root();
  if (root.empty()) return "";
  const std::string name = str_cat(std::hex, fnv1a64(str_cat(kFormat, "|", key)), ".choice");
  return (std::filesystem::path(root) / "choices" / name).string();
}

namespace {

void evict(const std::string& file, const std::string& reason) {
  const std::string left = evict_cache_entry(file);
  notify_once("cache", "choice-entry:" + file,
              str_cat("luminal: the choice cache entry ", file, " ", reason, "; ",
                      left.empty() ? "removed it and measured again" : str_cat("measured again: ", left)));
}

}  // namespace

std::optional<ChoiceFields> load_choice(const std::string& key) {
  const std::string file = choice_file(key);
  if (file.empty()) return std::nullopt;
  const CacheEntryRead read = read_cache_entry(file, key, kMaxEntryBytes);
  if (read.status == CacheEntryRead::Status::Missing) return std::nullopt;
  if (read.status == CacheEntryRead::Status::Hit) {
    if (std::optional<ChoiceFields> fields = decode_choice(read.payload)) return fields;
  }
  evict(file, read.status == CacheEntryRead::Status::Bad ? read.reason : "holds no choice (malformed fields)");
  return std::nullopt;
}

void forget_choice(const std::string& key, const std::string& why) {
  const std::string file = choice_file(key);
  if (!file.empty()) evict(file, why);
}

void store_choice(const std::string& key, const ChoiceFields& fields) {
  const std::string file = choice_file(key);
  if (file.empty()) return;
  const std::string error = write_cache_entry(file, key, encode_choice(fields));
  if (error.empty()) return;
  notify_once("cache", "choice-write:" + std::filesystem::path(file).parent_path().string(),
              str_cat("luminal: measured choices are not cached on disk: ", error));
}

}  // namespace luminal
