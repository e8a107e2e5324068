// The on-disk cache's directory and entry files (the kernel cache uses them; the export cache in
// Python follows the same rules with the same directory, which it asks for through the bindings).
//
// A cache entry is one file: a fixed header (magic, format version, key and payload lengths, a
// checksum over header, key and payload), the whole key, then the payload. It is written to a
// temporary file and renamed into place, so readers see a whole entry or none; it is read without
// following symbolic links and without blocking (a FIFO or device in its place is refused), only
// when it is a regular file no larger than a bound. Anything else is a bad entry: the caller evicts
// it, rebuilds the value, and says so once (common/notices.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace luminal {

// A directory named by a user (an environment variable): "~" and "~/..." become $HOME and
// $HOME/..., a relative path becomes absolute against the current directory. Returns "" and sets
// `problem` for a value it refuses ("~user/...", "~" without HOME).
std::string resolve_user_directory(const std::string& value, std::string& problem);

// The cache's root directory, or "" when caching is off: LUMINAL_CACHE_DIR ("" disables it),
// else $XDG_CACHE_HOME/luminal (when absolute), else $HOME/.cache/luminal. The directory is
// created; a value that cannot be used (refused, not a directory, not writable) turns caching off
// with one "cache" notice. Read from config() (common/config.h) and resolved once per distinct
// configuration in a process, so a relative LUMINAL_CACHE_DIR stays where it pointed at first use.
// The Python export cache asks for this directory (luminal._C.cache_directory) rather than
// resolving it again.
std::string cache_root();

struct CacheEntryRead {
  enum class Status { Missing, Hit, Bad };
  Status status = Status::Missing;
  std::string payload;  // Hit
  std::string reason;   // Bad: what is wrong, e.g. "is a FIFO, not a regular file"
};

// Reads the entry at `path` stored under `key`; files over `max_bytes` are bad without being read.
// A hit is marked recently used (its modification time set to now) for least-recently-used pruning.
CacheEntryRead read_cache_entry(const std::string& path, const std::string& key, uint64_t max_bytes);

// Writes an entry atomically (a temporary file unique to this process and thread, then rename).
// Returns "" on success, else the reason; never throws.
std::string write_cache_entry(const std::string& path, const std::string& key, const std::string& payload);

// Removes a bad entry: anything but a directory is unlinked (a symbolic link itself, never its
// target); a directory only when empty. Returns "" when the path is free now, else why not.
std::string evict_cache_entry(const std::string& path);

// The entry files this process read as hits or wrote, in order of their latest use (each once): a
// saved compiled module (luminal.compile's save) carries the kernels and choices its graph used,
// which it finds as the entries used after its compile started; a loaded one shows that it built
// nothing (no entry written). Positions count uses: cache_journal_size() is the next use's.
struct CacheJournalEntry {
  std::string path;      // absolute
  bool written = false;  // its latest use wrote it (a miss rebuilt), else read it as a hit
  bool operator==(const CacheJournalEntry& other) const { return path == other.path && written == other.written; }
};
size_t cache_journal_size();
std::vector<CacheJournalEntry> cache_journal_since(size_t position);
// Journals the entry at `path` as read: for a caller that answered from memory what that entry
// holds (the kernel cache's in-memory copy), so that a module compiled after another still lists it.
void journal_cache_entry_read(const std::string& path);

// FNV-1a, 64 bits: stable across builds and processes (std::hash is not), for file names.
uint64_t fnv1a64(const std::string& text, uint64_t seed = 1469598103934665603ull);

}  // namespace luminal
