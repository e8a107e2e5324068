#include "runner/package.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <algorithm>
#include <cctype>

#include "common/cache_files.h"
#include "common/checked.h"
#include "common/error.h"
#include "pt2/parse.h"

namespace luminal::runner {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "luminal-module 2";
constexpr const char* kTorchStateFormat = "luminal-module 1";
constexpr const char* kStateFormat = "luminal-state 1";

// Reads a JSON entry of the package within the archive's JSON limits.
json read_json(const pt2::Archive& archive, const std::string& entry) {
  const std::string where = str_cat(archive.source(), ": ", entry);
  const std::string text = archive.read(entry, archive.limits().json_entry_bytes, "JSON entry");
  return pt2::parse_json_document(text, where, archive.limits().json_values());
}

// The field of a JSON object, of the expected kind, or an error naming the package and the field.
const json& field(const json& object, const char* key, json::value_t kind, const std::string& where) {
  LUMINAL_CHECK(object.is_object(), where, ": expected an object");
  const auto found = object.find(key);
  LUMINAL_CHECK(found != object.end(), where, ": the field '", key, "' is missing");
  const bool matches = found->type() == kind || (kind == json::value_t::number_integer && found->is_number_integer());
  LUMINAL_CHECK(matches, where, ": the field '", key, "' is a ", found->type_name());
  return *found;
}

const json& array_field(const json& object, const char* key, const std::string& where) {
  return field(object, key, json::value_t::array, where);
}

std::string string_of(const json& value, const std::string& where) {
  LUMINAL_CHECK(value.is_string(), where, ": expected a string, got ", value.type_name());
  return value.get<std::string>();
}

std::vector<int64_t> dims_of(const json& value, const std::string& where) {
  LUMINAL_CHECK(value.is_array(), where, ": expected a list of sizes, got ", value.type_name());
  std::vector<int64_t> dims;
  for (const json& d : value) {
    LUMINAL_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, where, ": expected non-negative integers, got ",
                  d.dump());
    dims.push_back(d.get<int64_t>());
  }
  return dims;
}

std::optional<DType> dtype_named(const std::string& name) {
  for (const DType dtype : kAllDTypes) {
    if (name == dtype_name(dtype)) return dtype;
  }
  return std::nullopt;
}

// The pair dtype of a complex state tensor's torch name (bound as pairs, like Python's bindings).
std::optional<DType> complex_pairs_named(const std::string& name) {
  if (name == "complex64") return DType::F32;
  if (name == "complex128") return DType::F64;
  return std::nullopt;
}

// A complex tensor's view as its real pairs: strides in real elements, a last dimension of 2.
void as_pairs(StateTensor& tensor, const std::string& at) {
  complex_layout_as_pairs(tensor.sizes, tensor.strides, at);
  tensor.complex_pairs = true;
}

ir::InputRole role_named(const std::string& role, const std::string& where) {
  if (role == "parameter") return ir::InputRole::Parameter;
  if (role == "buffer") return ir::InputRole::Buffer;
  fail(where, ": unknown state role '", role, "' (expected parameter or buffer)");
}

// A relative cache path that stays inside the cache: components of the characters luminal's writer
// uses, none empty, "." or ".." (python/luminal/aot.py checks the same). Checked by hand, not with
// std::regex, whose matcher recurses per character of a hostile string.
bool safe_cache_path(const std::string& relative) {
  if (relative.empty() || relative.size() > 4096) return false;
  size_t start = 0;
  while (start <= relative.size()) {
    const size_t slash = std::min(relative.find('/', start), relative.size());
    const std::string part = relative.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (const char c : part) {
      const bool allowed = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
      if (!allowed) return false;
    }
    start = slash + 1;
  }
  return true;
}

// "state/<digits>.bin", as the writer names a state tensor's entry.
bool state_entry_name(const std::string& entry) {
  const std::string prefix = "state/", suffix = ".bin";
  if (entry.size() <= prefix.size() + suffix.size() || entry.size() > 64) return false;
  if (entry.compare(0, prefix.size(), prefix) != 0) return false;
  if (entry.compare(entry.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  const std::string digits = entry.substr(prefix.size(), entry.size() - prefix.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string::npos;
}

// Copies the package's cache entries into the cache root, never over an existing file; a file that
// cannot be written is left to be built again (as luminal.load does).
void install_cache_entries(const pt2::Archive& archive, const json& meta, const std::string& where) {
  const auto listed = meta.find("cache_entries");
  if (listed == meta.end()) return;
  LUMINAL_CHECK(listed->is_array(), where, ": cache_entries is a ", listed->type_name());
  std::vector<std::string> relatives;
  for (const json& entry : *listed) {
    const std::string relative = string_of(entry, where + " cache_entries");
    LUMINAL_CHECK(safe_cache_path(relative), where, ": the package names a cache entry '", relative.substr(0, 200),
                  "' outside the cache");
    relatives.push_back(relative);
  }
  const std::string root = cache_root();
  if (root.empty()) return;
  for (const std::string& relative : relatives) {
    const std::filesystem::path target = std::filesystem::path(root) / relative;
    std::error_code error;
    if (std::filesystem::symlink_status(target, error).type() != std::filesystem::file_type::not_found) continue;
    const std::string data = archive.read("cache/" + relative);
    std::filesystem::create_directories(target.parent_path(), error);
    if (error) continue;
    const std::filesystem::path temporary =
        target.parent_path() / str_cat(".", target.filename().string(), ".", getpid(), ".runner.tmp");
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out.write(data.data(), static_cast<std::streamsize>(data.size()));
      if (!out) {
        std::filesystem::remove(temporary, error);
        continue;
      }
    }
    std::filesystem::rename(temporary, target, error);
    if (error) std::filesystem::remove(temporary, error);
  }
}

// One state.json record, checked against the package's own spec of that tensor.
StateTensor read_state_tensor(const pt2::Archive& archive, const json& record, const json& spec,
                              const std::string& expected_name, const std::string& where) {
  const std::string name = string_of(field(record, "name", json::value_t::string, where), where);
  LUMINAL_CHECK(name == expected_name, where, ": holds '", name, "' where meta.json names '", expected_name, "'");
  const std::string at = str_cat(where, " '", name, "'");
  const std::string dtype_text = string_of(field(record, "dtype", json::value_t::string, at), at);
  const std::optional<DType> pairs = complex_pairs_named(dtype_text);
  const std::optional<DType> dtype = pairs ? pairs : dtype_named(dtype_text);
  LUMINAL_CHECK(dtype.has_value(), at, ": unsupported dtype '", dtype_text, "'");
  StateTensor tensor;
  tensor.name = name;
  tensor.sizes = dims_of(array_field(record, "sizes", at), at + " sizes");
  tensor.strides = dims_of(array_field(record, "strides", at), at + " strides");
  LUMINAL_CHECK(tensor.sizes.size() == tensor.strides.size(), at, ": ", tensor.sizes.size(), " sizes but ",
                tensor.strides.size(), " strides");
  const std::string spec_dtype = string_of(field(spec, "dtype", json::value_t::string, at), at);
  const std::vector<int64_t> spec_shape = dims_of(array_field(spec, "shape", at), at + " spec shape");
  LUMINAL_CHECK(spec_dtype == str_cat("torch.", dtype_text) && spec_shape == tensor.sizes, at, ": ", dtype_text,
                int_list(tensor.sizes), " does not match its spec ", spec_dtype, int_list(spec_shape));
  if (pairs) as_pairs(tensor, at);
  const std::string entry = string_of(field(record, "entry", json::value_t::string, at), at);
  LUMINAL_CHECK(state_entry_name(entry), at, ": names the entry '", entry.substr(0, 200), "'");
  const int64_t extent = strided_storage_elements(tensor.sizes, tensor.strides, 0, at);
  const size_t expected = byte_count(extent, *dtype, at);
  const uint64_t declared = archive.declared_size(entry);
  LUMINAL_CHECK(declared == expected, at, " (", dtype_text, int_list(tensor.sizes), ", strides ",
                int_list(tensor.strides), ") needs ", expected, " bytes, its entry holds ", declared);
  const std::string bytes = archive.read(entry);
  LUMINAL_CHECK(bytes.size() == expected, at, ": its entry holds ", bytes.size(), " bytes, expected ", expected);
  tensor.storage = HostTensor(*dtype, {extent}, at);
  if (!bytes.empty()) std::memcpy(tensor.storage.data(), bytes.data(), bytes.size());
  return tensor;
}

}  // namespace

bool is_luminal_package(const pt2::Archive& archive) { return archive.root() == "luminal_module" && archive.contains("format"); }

Package read_package(const pt2::Archive& archive, bool install_entries) {
  const std::string where = str_cat(archive.source(), ": meta.json");
  const json meta = read_json(archive, "meta.json");
  const std::string format = string_of(field(meta, "format", json::value_t::string, where), where);
  LUMINAL_CHECK(format != kTorchStateFormat, archive.source(), ": a package of format '", kTorchStateFormat,
                "' holds its parameters as a torch.save pickle, which luminal-run does not read: load it with "
                "luminal.load and save it again (format '", kFormat, "')");
  LUMINAL_CHECK(format == kFormat, archive.source(), ": package format '", format, "', luminal-run reads '", kFormat,
                "'");
  Package package;
  const json& names = array_field(meta, "state_names", where);
  const json& roles = array_field(meta, "state_roles", where);
  const json& specs = array_field(meta, "state_specs", where);
  LUMINAL_CHECK(roles.size() == names.size() && specs.size() == names.size(), where, ": ", names.size(),
                " state names, ", roles.size(), " roles and ", specs.size(), " specs");
  for (const json& role : roles) package.roles.push_back(role_named(string_of(role, where), where));
  for (const json& spec : array_field(meta, "input_specs", where)) {
    package.input_names.push_back(string_of(field(spec, "name", json::value_t::string, where), where));
    package.roles.push_back(ir::InputRole::User);
  }
  const json& options = field(meta, "options", json::value_t::object, where);
  if (const auto megakernel = options.find("megakernel"); megakernel != options.end()) {
    LUMINAL_CHECK(megakernel->is_boolean(), where, ": options.megakernel is a ", megakernel->type_name());
    package.megakernel = megakernel->get<bool>();
  }

  const std::string state_where = str_cat(archive.source(), ": state.json");
  const json index = read_json(archive, "state.json");
  const std::string state_format = string_of(field(index, "format", json::value_t::string, state_where), state_where);
  LUMINAL_CHECK(state_format == kStateFormat, state_where, ": format '", state_format, "', expected '", kStateFormat,
                "'");
  const json& records = array_field(index, "tensors", state_where);
  LUMINAL_CHECK(records.size() == names.size(), state_where, ": ", records.size(), " tensors, meta.json names ",
                names.size());
  for (size_t k = 0; k < records.size(); ++k) {
    package.state.push_back(
        read_state_tensor(archive, records[k], specs[k], string_of(names[k], where), str_cat(state_where, " #", k)));
  }
  package.program = archive.read("program.pt2");
  if (install_entries) install_cache_entries(archive, meta, where);
  return package;
}

}  // namespace luminal::runner
