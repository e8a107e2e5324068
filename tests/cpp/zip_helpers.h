// Test helper: zip archives built in memory with libzip (entries stored or deflated).
#pragma once

#include <zip.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace luminal::testing {

// A zip of (name, data, deflated?) entries.
inline std::string make_zip(const std::vector<std::tuple<std::string, std::string, bool>>& files) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &error);
  if (buffer == nullptr) throw std::runtime_error("zip_source_buffer_create failed");
  zip_source_keep(buffer);  // read the finished archive back from it after zip_close
  zip_t* zip = zip_open_from_source(buffer, ZIP_TRUNCATE, &error);
  if (zip == nullptr) throw std::runtime_error("zip_open_from_source failed");
  for (const auto& [name, data, deflated] : files) {
    zip_source_t* source = zip_source_buffer(zip, data.data(), data.size(), 0);
    const zip_int64_t index = source == nullptr ? -1 : zip_file_add(zip, name.c_str(), source, ZIP_FL_OVERWRITE);
    if (index < 0) throw std::runtime_error("zip_file_add failed for " + name);
    zip_set_file_compression(zip, static_cast<zip_uint64_t>(index), deflated ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 9);
  }
  if (zip_close(zip) != 0) throw std::runtime_error("zip_close failed");
  std::string bytes;
  if (zip_source_open(buffer) == 0) {
    zip_source_seek(buffer, 0, SEEK_END);
    bytes.resize(static_cast<size_t>(zip_source_tell(buffer)));
    zip_source_seek(buffer, 0, SEEK_SET);
    zip_source_read(buffer, bytes.data(), bytes.size());
    zip_source_close(buffer);
  }
  zip_source_free(buffer);
  zip_error_fini(&error);
  return bytes;
}

}  // namespace luminal::testing
