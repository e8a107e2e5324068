// Measured choices remembered across processes: which cuBLASLt algorithm, which cuDNN engine, cuDNN
// or the generated kernel won when they were timed on the device, so that a warm compile does no
// search. The CUDA engine writes the problem in words (every shape, stride, alignment and setting
// the answer depends on, plus device, driver and library versions) as the key and asks here.
//
// An entry is one cache file (common/cache_files.h) in <cache root>/choices, named by a hash of the
// key and holding the whole key, so a file-name collision can never hand back another problem's
// answer. The payload is a few named text fields. A stored answer only ever picks among candidates
// the caller offers and validates again, so a stale entry costs speed, never correctness. Caching
// off (LUMINAL_CACHE_DIR="") reads and writes nothing; nothing here raises: a bad entry is
// evicted with one "cache" notice (common/notices.h) and reads as a miss.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace luminal {

// What a choice entry holds: named values ("engine" -> "12"). Names are non-empty and have no '='
// or line break; values have no line break (store_choice replaces them with spaces).
using ChoiceFields = std::map<std::string, std::string>;

// "name=value" lines, sorted by name; decode_choice refuses anything else (nullopt).
std::string encode_choice(const ChoiceFields& fields);
std::optional<ChoiceFields> decode_choice(const std::string& payload);

// The entry's path for `key`, or "" when caching is off.
std::string choice_file(const std::string& key);

// The fields stored under `key`: nullopt when there are none, caching is off, or the entry is bad
// (then it is evicted, with one notice per path and process).
std::optional<ChoiceFields> load_choice(const std::string& key);

// Stores `fields` under `key`, replacing what was there; a failure to write is one notice.
void store_choice(const std::string& key, const ChoiceFields& fields);

// Removes the entry under `key` (its answer turned out unusable: measured again next time), with
// one notice saying `why`.
void forget_choice(const std::string& key, const std::string& why);

}  // namespace luminal
