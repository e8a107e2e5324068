// JSON -> schema structs for the exported-program JSON (models/<name>.json) and the payload
// configs of a PT2 archive. Every malformed input raises luminal::Error whose message starts with
// the source name and the JSON path, e.g.
//   "models/model.json: graph_module.graph.nodes[3].inputs[1].arg: expected an object with one
//    key, got array".
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "pt2/schema.h"

namespace luminal::pt2 {

// The most JSON values (keys, containers and scalars) a document may hold. Its DOM costs up to
// ~120 bytes per value whatever the text (16 MiB of "{}," parse into ~600 MB), so this, not the
// text's length, bounds the parser's memory: 2 Mi values are ~250 MB at worst, while real
// exported programs take 20-35 bytes of text per value (64 MiB of them hold ~2-3 Mi values).
inline constexpr size_t kDefaultMaxJsonValues = size_t{2} << 20;

// Any JSON document, parsed with the same bound on its values (and the same error messages) as the
// archive's own documents: for the other JSON files a package holds (a luminal package's meta.json).
nlohmann::json parse_json_document(std::string_view json_text, std::string_view source,
                                   size_t max_json_values = kDefaultMaxJsonValues);

// Accepts schema major version 8 (torch 2.6 ... 2.15) and 9; any other version is an error naming
// the version found. `source` names the document in error messages.
ExportedProgram parse_exported_program(std::string_view json_text,
                                       std::string_view source = "models/model.json",
                                       size_t max_json_values = kDefaultMaxJsonValues);

// `where` is the location of `j`, continued by the path inside it in error messages, e.g.
// where = "w.json: config[\"w\"].tensor_meta" gives "w.json: config[\"w\"].tensor_meta.sizes[0]:
// ...".
TensorMeta parse_tensor_meta(const nlohmann::json& j, const std::string& where);

// {"config": {fqn: PayloadMeta}}.
std::map<std::string, PayloadMeta> parse_payload_config(std::string_view json_text,
                                                        std::string_view source = "payload config",
                                                        size_t max_json_values = kDefaultMaxJsonValues);

}  // namespace luminal::pt2
