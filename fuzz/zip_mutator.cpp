// libFuzzer custom mutator for zip archives, linked into both PT2 fuzz targets.
//
// Most bytes of a PT2 archive sit inside stored zip entries protected by a CRC-32: a plain byte
// mutation of the model JSON is rejected by the CRC check and never reaches the JSON parser or the
// translators. So half of the mutations unpack the archive, mutate one entry (its bytes with
// libFuzzer's own mutators and dictionary, or its name) and pack the archive again with correct
// CRCs and sizes; the other half mutate the raw bytes, which covers the zip reader itself
// (headers, sizes, offsets, compression).
#include <zip.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

struct Entry {
  std::string name;
  std::string data;
  int32_t compression = ZIP_CM_STORE;
};

struct ZipDiscard {
  void operator()(zip_t* zip) const { zip_discard(zip); }
};
struct ZipFileClose {
  void operator()(zip_file_t* file) const { zip_fclose(file); }
};
struct ZipSourceFree {
  void operator()(zip_source_t* source) const { zip_source_free(source); }
};

// Every entry of a well-formed archive; nullopt when libzip cannot read one (then only raw
// mutations apply).
std::optional<std::vector<Entry>> unpack(const uint8_t* data, size_t size) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(data, size, 0, &error);
  zip_error_fini(&error);
  if (source == nullptr) return std::nullopt;
  std::unique_ptr<zip_t, ZipDiscard> zip(zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, nullptr));
  if (!zip) {
    zip_source_free(source);
    return std::nullopt;
  }
  std::vector<Entry> entries;
  const zip_int64_t count = zip_get_num_entries(zip.get(), 0);
  for (zip_int64_t i = 0; i < count && i < 64; ++i) {
    zip_stat_t stat;
    if (zip_stat_index(zip.get(), i, 0, &stat) != 0 || !(stat.valid & ZIP_STAT_SIZE) ||
        !(stat.valid & ZIP_STAT_NAME) || stat.size > (1u << 20)) {
      return std::nullopt;
    }
    std::unique_ptr<zip_file_t, ZipFileClose> file(zip_fopen_index(zip.get(), i, 0));
    if (!file) return std::nullopt;
    Entry entry{stat.name, std::string(stat.size, '\0'),
                (stat.valid & ZIP_STAT_COMP_METHOD) ? static_cast<int32_t>(stat.comp_method) : ZIP_CM_STORE};
    if (stat.size > 0 && zip_fread(file.get(), entry.data.data(), stat.size) != static_cast<zip_int64_t>(stat.size)) {
      return std::nullopt;
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::optional<std::string> pack(const std::vector<Entry>& entries) {
  zip_error_t error;
  zip_error_init(&error);
  std::unique_ptr<zip_source_t, ZipSourceFree> buffer(zip_source_buffer_create(nullptr, 0, 0, &error));
  zip_error_fini(&error);
  if (!buffer) return std::nullopt;
  zip_source_keep(buffer.get());  // read the finished archive back after zip_close
  zip_t* zip = zip_open_from_source(buffer.get(), ZIP_TRUNCATE, nullptr);
  if (zip == nullptr) return std::nullopt;
  for (const Entry& entry : entries) {
    zip_source_t* source = zip_source_buffer(zip, entry.data.data(), entry.data.size(), 0);
    const zip_int64_t index =
        source == nullptr ? -1 : zip_file_add(zip, entry.name.c_str(), source, ZIP_FL_ENC_RAW);
    if (index < 0) {
      zip_source_free(source);
      zip_discard(zip);
      return std::nullopt;
    }
    const int32_t method = entry.compression == ZIP_CM_DEFLATE ? ZIP_CM_DEFLATE : ZIP_CM_STORE;
    zip_set_file_compression(zip, static_cast<zip_uint64_t>(index), method, 0);
  }
  if (zip_close(zip) != 0) {
    zip_discard(zip);
    return std::nullopt;
  }
  std::string bytes;
  if (zip_source_open(buffer.get()) != 0) return std::nullopt;
  zip_source_seek(buffer.get(), 0, SEEK_END);
  bytes.resize(static_cast<size_t>(zip_source_tell(buffer.get())));
  zip_source_seek(buffer.get(), 0, SEEK_SET);
  const zip_int64_t read = zip_source_read(buffer.get(), bytes.data(), bytes.size());
  zip_source_close(buffer.get());
  if (read != static_cast<zip_int64_t>(bytes.size())) return std::nullopt;
  return bytes;
}

// Mutates one entry: its data (JSON entries are picked more often: they hold the program), or
// rarely its name.
void mutate_entry(std::vector<Entry>& entries, std::minstd_rand& rng, size_t budget) {
  std::vector<size_t> json_entries;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].name.size() >= 5 && entries[i].name.compare(entries[i].name.size() - 5, 5, ".json") == 0) {
      json_entries.push_back(i);
    }
  }
  const bool prefer_json = !json_entries.empty() && rng() % 4 != 0;
  Entry& entry = prefer_json ? entries[json_entries[rng() % json_entries.size()]] : entries[rng() % entries.size()];
  std::string& target = rng() % 16 == 0 ? entry.name : entry.data;
  const size_t capacity = target.size() + std::min<size_t>(budget, 4096) + 1;
  std::string scratch = target;
  scratch.resize(capacity);
  const size_t size = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(scratch.data()), target.size(), capacity);
  scratch.resize(size);
  target = std::move(scratch);
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  if (rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  std::optional<std::vector<Entry>> entries = unpack(data, size);
  if (!entries || entries->empty()) return LLVMFuzzerMutate(data, size, max_size);
  mutate_entry(*entries, rng, max_size > size ? max_size - size : 0);
  const std::optional<std::string> packed = pack(*entries);
  if (!packed || packed->size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, packed->data(), packed->size());
  return packed->size();
}
