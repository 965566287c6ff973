// File: cli/output.h
//
// Output formats shared by migctl's subcommands (`-o table|json|yaml`):
// JSON from protobuf messages through protobuf's own JSON mapping
// (google::protobuf::util::MessageToJsonString: lowerCamelCase field names,
// enums by name, 64-bit integers as strings, default values printed), and
// YAML emitted with yaml-cpp from the same JSON tree, so the two machine
// formats always carry the same fields. Plus a small column formatter for the
// human tables.
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(nlohmann::ordered_json doc, ProtoToJson(response));
//   out << FormatDocument(doc, OutputFormat::kYaml);
//
// Thread-safety: pure functions; safe to call concurrently.
#ifndef MIGD_CLI_OUTPUT_H_
#define MIGD_CLI_OUTPUT_H_

#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "base/status.h"

namespace migd::cli {

enum class OutputFormat { kTable, kJson, kYaml };

// "table", "json" or "yaml"; kInvalidArgument otherwise.
StatusOr<OutputFormat> ParseOutputFormat(std::string_view name);

// The message as a JSON tree in protobuf's JSON mapping, fields in
// declaration order. kInternal if protobuf refuses (it should not for our
// messages).
StatusOr<nlohmann::ordered_json> ProtoToJson(const google::protobuf::Message& message);

// `doc` as YAML (block style, keys in the tree's order, strings quoted when
// they would otherwise read as another type), ending in a newline.
std::string JsonToYaml(const nlohmann::ordered_json& doc);

// kJson: 2-space indented JSON; kYaml: JsonToYaml. Ends in a newline.
// REQUIRES: format != kTable.
std::string FormatDocument(const nlohmann::ordered_json& doc, OutputFormat format);

// Left-aligned columns separated by two spaces; the first row is the header.
// Trailing spaces are trimmed. Rows shorter than the header are padded.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace migd::cli

#endif  // MIGD_CLI_OUTPUT_H_
