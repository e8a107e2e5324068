#include "common/cache_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>
#include <tuple>

#include "common/config.h"
#include "common/error.h"
#include "common/notices.h"

namespace luminal {

namespace fs = std::filesystem;

namespace {

uint64_t fnv1a64(const char* data, size_t size, uint64_t seed) {
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

uint64_t fnv1a64(const std::string& text, uint64_t seed) { return fnv1a64(text.data(), text.size(), seed); }

// ------------------------------------------------------------------------------------------------
// Directory
// ------------------------------------------------------------------------------------------------
std::string resolve_user_directory(const std::string& value, std::string& problem) {
  std::string path = value;
  if (!value.empty() && value[0] == '~') {
    if (value.size() > 1 && value[1] != '/') {
      problem = "only '~' and '~/...' are expanded, not '~user'";
      return "";
    }
    const std::optional<std::string> home = config()->home;  // a copy: a reload may replace the snapshot
    if (!home || home->empty()) {
      problem = "'~' cannot be expanded: HOME is not set";
      return "";
    }
    path = *home + value.substr(1);
  }
  std::error_code ec;
  const fs::path absolute = fs::absolute(fs::path(path), ec);
  if (ec) {
    problem = str_cat("cannot make it absolute: ", ec.message());
    return "";
  }
  return absolute.lexically_normal().string();
}

namespace {

// Where the configuration points the cache, before checking the directory ("" and no problem: off).
std::string configured_cache_root(const Config& settings, std::string& problem) {
  if (const std::optional<std::string>& configured = settings.cache_dir) {
    if (configured->empty()) return "";
    const std::string path = resolve_user_directory(*configured, problem);
    if (!problem.empty()) problem = str_cat("LUMINAL_CACHE_DIR='", *configured, "': ", problem);
    return path;
  }
  // XDG: a relative XDG_CACHE_HOME is invalid and ignored.
  if (const std::optional<std::string>& xdg = settings.xdg_cache_home; xdg && !xdg->empty() && (*xdg)[0] == '/') {
    return (fs::path(*xdg) / "luminal").lexically_normal().string();
  }
  if (const std::optional<std::string>& home = settings.home; home && !home->empty()) {
    return resolve_user_directory((fs::path(*home) / ".cache" / "luminal").string(), problem);
  }
  problem = "neither LUMINAL_CACHE_DIR, XDG_CACHE_HOME nor HOME is set";
  return "";
}

// Why `path` cannot hold the cache ("" when it can), creating it if needed.
std::string unusable_because(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return str_cat("cannot create it: ", ec.message());
  if (!fs::is_directory(path, ec)) return "it is not a directory";
  if (::access(path.c_str(), W_OK | X_OK) != 0) return str_cat("it is not writable: ", std::strerror(errno));
  return "";
}

}  // namespace

std::string cache_root() {
  // Per distinct configuration (tests change it and reload), resolved once.
  using ConfigKey = std::tuple<std::optional<std::string>, std::optional<std::string>, std::optional<std::string>>;
  static std::mutex mutex;
  static std::map<ConfigKey, std::string> resolved;
  const std::shared_ptr<const Config> settings = config();
  const ConfigKey key{settings->cache_dir, settings->xdg_cache_home, settings->home};
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = resolved.find(key); it != resolved.end()) return it->second;
  std::string problem;
  std::string path = configured_cache_root(*settings, problem);
  if (problem.empty() && !path.empty()) {
    const std::string why = unusable_because(path);
    if (!why.empty()) problem = str_cat("the cache directory ", path, " cannot be used: ", why);
  }
  if (!problem.empty()) {
    notify_once("cache", "cache-root:" + problem,
                str_cat("luminal: caching is off: ", problem, " (set LUMINAL_CACHE_DIR to a writable directory, "
                        "or to an empty value to silence this)"));
    path.clear();
  }
  resolved.emplace(key, path);
  return path;
}

// ------------------------------------------------------------------------------------------------
// Entries
// ------------------------------------------------------------------------------------------------
namespace {

constexpr char kMagic[8] = {'L', 'M', 'K', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kEntryVersion = 1;
// magic, version (u32), reserved (u32), key size (u64), payload size (u64), checksum (u64).
constexpr size_t kChecksumOffset = 32;
constexpr size_t kHeaderBytes = 40;

void put_u64(std::string& out, size_t offset, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}
void put_u32(std::string& out, size_t offset, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}
uint64_t get_u64(const std::string& in, size_t offset) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(in[offset + i]);
  return value;
}
uint32_t get_u32(const std::string& in, size_t offset) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(in[offset + i]);
  return value;
}

// Over the header's first 32 bytes, the key and the payload (spans of `entry`).
uint64_t entry_checksum(const std::string& entry) {
  const uint64_t header = fnv1a64(entry.data(), kChecksumOffset, 1469598103934665603ull);
  return fnv1a64(entry.data() + kHeaderBytes, entry.size() - kHeaderBytes, header);
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now, returning close()'s error (0 when none): a write's error may only show here.
  int close() {
    const int result = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return result == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

CacheEntryRead bad(std::string reason) {
  CacheEntryRead read;
  read.status = CacheEntryRead::Status::Bad;
  read.reason = std::move(reason);
  return read;
}

// Reads exactly `size` bytes into `out`; false when the file ends early or fails.
bool read_exactly(int fd, char* out, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Why an entry of `size` bytes with this header is bad ("" when it may be good): checked before
// the rest of the file is read.
std::string header_problem(const std::string& header, uint64_t size) {
  if (size < kHeaderBytes || header.size() < kHeaderBytes) return "is truncated (shorter than its header)";
  if (std::memcmp(header.data(), kMagic, sizeof(kMagic)) != 0) return "is not a luminal cache entry";
  if (const uint32_t version = get_u32(header, 8); version != kEntryVersion) {
    return str_cat("has format version ", version, ", expected ", kEntryVersion);
  }
  const uint64_t key_size = get_u64(header, 16);
  const uint64_t payload_size = get_u64(header, 24);
  const uint64_t body = size - kHeaderBytes;
  if (key_size > body || payload_size != body - key_size) {
    return str_cat("is ", size, " bytes, but its header declares ", key_size, " + ", payload_size,
                   " after the header (truncated or extended)");
  }
  return "";
}

CacheEntryRead parse_entry(std::string entry, const std::string& key) {
  if (std::string problem = header_problem(entry, entry.size()); !problem.empty()) return bad(std::move(problem));
  const uint64_t key_size = get_u64(entry, 16);
  if (get_u64(entry, kChecksumOffset) != entry_checksum(entry)) return bad("does not match its checksum");
  if (entry.compare(kHeaderBytes, key_size, key) != 0) return bad("was written for another key");
  CacheEntryRead read;
  read.status = CacheEntryRead::Status::Hit;
  read.payload = entry.substr(kHeaderBytes + key_size);
  return read;
}

// The journal of entries used (see cache_journal_since): each path with its latest use (a
// sequence number) and whether that use wrote it. Bounded by the number of distinct entries.
struct CacheJournal {
  std::mutex mutex;
  size_t next = 0;
  std::unordered_map<std::string, std::pair<size_t, bool>> uses;
};

CacheJournal& journal() {
  static CacheJournal instance;
  return instance;
}

void journal_use(const std::string& path, bool written) {
  CacheJournal& j = journal();
  const std::lock_guard<std::mutex> lock(j.mutex);
  j.uses[path] = {j.next++, written};
}

}  // namespace

void journal_cache_entry_read(const std::string& path) { journal_use(path, /*written=*/false); }

size_t cache_journal_size() {
  CacheJournal& j = journal();
  const std::lock_guard<std::mutex> lock(j.mutex);
  return j.next;
}

std::vector<CacheJournalEntry> cache_journal_since(size_t position) {
  CacheJournal& j = journal();
  std::vector<std::pair<size_t, CacheJournalEntry>> found;
  {
    const std::lock_guard<std::mutex> lock(j.mutex);
    for (const auto& [path, use] : j.uses) {
      if (use.first >= position) found.push_back({use.first, CacheJournalEntry{path, use.second}});
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<CacheJournalEntry> entries;
  entries.reserve(found.size());
  for (auto& [sequence, entry] : found) entries.push_back(std::move(entry));
  return entries;
}

CacheEntryRead read_cache_entry(const std::string& path, const std::string& key, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO does not wait for a writer; O_NOFOLLOW: a symbolic link is refused.
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT) return CacheEntryRead{};
    if (error == ELOOP) return bad("is a symbolic link");
    return bad(str_cat("cannot be opened: ", std::strerror(error)));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return bad(str_cat("cannot be examined: ", std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) return bad(str_cat("is ", file_kind(info.st_mode), ", not a regular file"));
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  if (size > max_bytes) return bad(str_cat("is ", size, " bytes, over the limit of ", max_bytes, " bytes"));
  // The header first: a file that is no entry (or not this one's size) is never read whole.
  const size_t prefix = static_cast<size_t>(std::min<uint64_t>(size, kHeaderBytes));
  std::string entry(prefix, '\0');
  if (!read_exactly(fd.get(), entry.data(), prefix)) return bad("could not be read whole (truncated?)");
  if (std::string problem = header_problem(entry, size); !problem.empty()) return bad(std::move(problem));
  entry.resize(static_cast<size_t>(size));
  if (!read_exactly(fd.get(), entry.data() + prefix, entry.size() - prefix)) {
    return bad("could not be read whole (truncated?)");
  }
  CacheEntryRead read = parse_entry(std::move(entry), key);
  // Recently used: the cache's size limit evicts least recently used files first (a failure to
  // mark it, e.g. on a read-only cache, only makes it an earlier candidate for eviction).
  if (read.status == CacheEntryRead::Status::Hit) {
    (void)::futimens(fd.get(), nullptr);
    journal_use(path, /*written=*/false);
  }
  return read;
}

std::string write_cache_entry(const std::string& path, const std::string& key, const std::string& payload) {
  std::string entry(kHeaderBytes, '\0');
  std::memcpy(entry.data(), kMagic, sizeof(kMagic));
  put_u32(entry, 8, kEntryVersion);
  put_u64(entry, 16, key.size());
  put_u64(entry, 24, payload.size());
  entry += key;
  entry += payload;
  put_u64(entry, kChecksumOffset, entry_checksum(entry));

  const fs::path target(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) return str_cat("cannot create ", target.parent_path().string(), ": ", ec.message());
  // Unique per process, thread and write: racing writers never share a temporary file.
  static std::atomic<uint64_t> counter{0};
  const std::string temp =
      (target.parent_path() / str_cat(".", target.filename().string(), ".tmp.", ::getpid(), ".",
                                      std::hash<std::thread::id>{}(std::this_thread::get_id()) % 1000000, ".",
                                      counter.fetch_add(1)))
          .string();
  FileDescriptor fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (fd.get() < 0) return str_cat("cannot create ", temp, ": ", std::strerror(errno));
  size_t done = 0;
  int error = 0;
  while (done < entry.size() && error == 0) {
    const ssize_t n = ::write(fd.get(), entry.data() + done, entry.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) error = n < 0 ? errno : EIO;
    done += n > 0 ? static_cast<size_t>(n) : 0;
  }
  if (error == 0) error = fd.close();
  if (error == 0 && ::rename(temp.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temp.c_str());
    return str_cat("cannot write ", path, ": ", std::strerror(error));
  }
  journal_use(path, /*written=*/true);
  return "";
}

std::string evict_cache_entry(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return errno == ENOENT ? "" : std::strerror(errno);
  if (S_ISDIR(info.st_mode)) {
    if (::rmdir(path.c_str()) == 0) return "";
    return str_cat("a directory that is not empty is left in place (", std::strerror(errno), ")");
  }
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return "";
  return str_cat("it cannot be removed (", std::strerror(errno), ")");
}

}  // namespace luminal
