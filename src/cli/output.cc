#include "cli/output.h"

#include <algorithm>
#include <sstream>

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

namespace migd::cli {
namespace {

void Emit(const nlohmann::ordered_json& v, YAML::Emitter& out) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, value] : v.items()) {
        out << YAML::Key << key << YAML::Value;
        Emit(value, out);
      }
      out << YAML::EndMap;
      return;
    case nlohmann::ordered_json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& item : v) Emit(item, out);
      out << YAML::EndSeq;
      return;
    case nlohmann::ordered_json::value_t::string:
      // Double quotes keep "123", "true" or "" strings as strings for any
      // YAML reader (protobuf writes 64-bit integers as JSON strings).
      out << YAML::DoubleQuoted << v.get<std::string>();
      return;
    case nlohmann::ordered_json::value_t::boolean:
      out << YAML::TrueFalseBool << v.get<bool>();
      return;
    case nlohmann::ordered_json::value_t::number_integer:
      out << v.get<int64_t>();
      return;
    case nlohmann::ordered_json::value_t::number_unsigned:
      out << v.get<uint64_t>();
      return;
    case nlohmann::ordered_json::value_t::number_float:
      out << v.get<double>();
      return;
    default:
      out << YAML::Null;
      return;
  }
}

}  // namespace

StatusOr<OutputFormat> ParseOutputFormat(std::string_view name) {
  if (name == "table") return OutputFormat::kTable;
  if (name == "json") return OutputFormat::kJson;
  if (name == "yaml") return OutputFormat::kYaml;
  return InvalidArgumentError("-o/--output: want table, json or yaml, got '" +
                              std::string(name) + "'");
}

StatusOr<nlohmann::ordered_json> ProtoToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string text;
  const auto status = google::protobuf::util::MessageToJsonString(message, &text, options);
  if (!status.ok()) {
    return InternalError("cannot convert " + message.GetTypeName() +
                         " to JSON: " + std::string(status.message()));
  }
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InternalError("protobuf wrote JSON that does not parse: " + std::string(e.what()));
  }
}

std::string JsonToYaml(const nlohmann::ordered_json& doc) {
  YAML::Emitter out;
  Emit(doc, out);
  return std::string(out.c_str()) + "\n";
}

std::string FormatDocument(const nlohmann::ordered_json& doc, OutputFormat format) {
  if (format == OutputFormat::kYaml) return JsonToYaml(doc);
  return doc.dump(2) + "\n";
}

std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return "";
  size_t columns = 0;
  for (const auto& row : rows) columns = std::max(columns, row.size());
  std::vector<size_t> width(columns, 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      line += cell;
      if (c + 1 < columns) line += std::string(width[c] - cell.size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace migd::cli
