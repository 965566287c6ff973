#include "base/json_reader.h"

#include <cmath>
#include <exception>
#include <utility>

#include "base/status_macros.h"

namespace migd {
namespace {

using Json = nlohmann::json;

// RFC 6901: "~" is written "~0" and "/" is written "~1".
std::string EscapePointerToken(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Quoted(std::string_view s) { return Json(std::string(s)).dump(); }

}  // namespace

StatusOr<Json> ParseJson(std::string_view text, std::string_view source, StatusCode code) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    std::string msg = source.empty() ? std::string() : std::string(source) + ": ";
    return Status(code, msg + "not valid JSON: " + e.what());
  }
}

std::string DescribeJson(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      return s.size() <= 64 ? Quoted(s) : "a string of " + std::to_string(s.size()) + " bytes";
    }
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return value.dump();
    case Json::value_t::binary:
    case Json::value_t::discarded:
      break;
  }
  return "an unreadable value";
}

JsonReader::JsonReader(const Json& value, std::string source, StatusCode code)
    : JsonReader(&value, std::move(source), std::string(), code) {}

JsonReader::JsonReader(const Json* value, std::string source, std::string pointer, StatusCode code)
    : value_(value), source_(std::move(source)), pointer_(std::move(pointer)), code_(code) {}

std::string JsonReader::Where() const {
  std::string out = source_.empty() ? std::string() : source_ + ": ";
  out += pointer_.empty() ? "the document" : pointer_;
  return out;
}

Status JsonReader::Expected(std::string_view expectation) const {
  return Status(
      code_, Where() + ": expected " + std::string(expectation) + ", got " + DescribeJson(*value_));
}

Status JsonReader::Error(std::string_view message) const {
  return Status(code_, Where() + ": " + std::string(message));
}

Status JsonReader::ExpectedAt(std::string_view key, std::string_view expectation) const {
  if (value_->is_object()) {
    const auto it = value_->find(key);
    if (it != value_->end()) return Child(key).Expected(expectation);
  }
  JsonReader missing(value_, source_, pointer_ + "/" + EscapePointerToken(key), code_);
  return Status(code_, missing.Where() + ": expected " + std::string(expectation) +
                           ", got nothing (the member is missing)");
}

Status JsonReader::ErrorAt(std::string_view key, std::string_view message) const {
  JsonReader at(value_, source_, pointer_ + "/" + EscapePointerToken(key), code_);
  return at.Error(message);
}

Status JsonReader::ExpectObject() const {
  return value_->is_object() ? OkStatus() : Expected("an object");
}

Status JsonReader::ExpectArray() const {
  return value_->is_array() ? OkStatus() : Expected("an array");
}

bool JsonReader::Has(std::string_view key) const {
  if (!value_->is_object()) return false;
  const auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

JsonReader JsonReader::Child(std::string_view key) const {
  return JsonReader(&value_->at(std::string(key)), source_,
                    pointer_ + "/" + EscapePointerToken(key), code_);
}

JsonReader JsonReader::Child(size_t index) const {
  return JsonReader(&value_->at(index), source_, pointer_ + "/" + std::to_string(index), code_);
}

StatusOr<JsonReader> JsonReader::Member(std::string_view key, std::string_view expectation) const {
  MIGD_RETURN_IF_ERROR(ExpectObject());
  if (!Has(key)) return ExpectedAt(key, expectation);
  return Child(key);
}

StatusOr<std::vector<JsonReader>> JsonReader::Elements() const {
  MIGD_RETURN_IF_ERROR(ExpectArray());
  std::vector<JsonReader> out;
  out.reserve(value_->size());
  for (size_t i = 0; i < value_->size(); ++i) out.push_back(Child(i));
  return out;
}

StatusOr<std::string> JsonReader::AsString() const {
  if (!value_->is_string()) return Expected("a string");
  return value_->get<std::string>();
}

StatusOr<bool> JsonReader::AsBool() const {
  if (!value_->is_boolean()) return Expected("a boolean");
  return value_->get<bool>();
}

StatusOr<int64_t> JsonReader::AsInt(int64_t min, int64_t max) const {
  const std::string range =
      "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (value_->is_number_unsigned()) {
    const uint64_t u = value_->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        static_cast<int64_t>(u) > max || static_cast<int64_t>(u) < min) {
      return Expected(range);
    }
    return static_cast<int64_t>(u);
  }
  if (value_->is_number_integer()) {
    const int64_t v = value_->get<int64_t>();
    if (v < min || v > max) return Expected(range);
    return v;
  }
  return Expected(range);
}

StatusOr<uint64_t> JsonReader::AsUint(uint64_t max) const {
  const std::string what = max == std::numeric_limits<uint64_t>::max()
                               ? std::string("a non-negative integer")
                               : "a non-negative integer of at most " + std::to_string(max);
  if (!value_->is_number_unsigned()) return Expected(what);
  const uint64_t u = value_->get<uint64_t>();
  if (u > max) return Expected(what);
  return u;
}

StatusOr<double> JsonReader::AsDouble() const {
  if (!value_->is_number()) return Expected("a number");
  const double d = value_->get<double>();
  if (!std::isfinite(d)) return Expected("a finite number");
  return d;
}

StatusOr<JsonReader> JsonReader::Object(std::string_view key) const {
  MIGD_ASSIGN_OR_RETURN(JsonReader m, Member(key, "an object"));
  MIGD_RETURN_IF_ERROR(m.ExpectObject());
  return m;
}

StatusOr<std::vector<JsonReader>> JsonReader::Array(std::string_view key) const {
  MIGD_ASSIGN_OR_RETURN(JsonReader m, Member(key, "an array"));
  return m.Elements();
}

StatusOr<std::string> JsonReader::String(std::string_view key) const {
  MIGD_ASSIGN_OR_RETURN(JsonReader m, Member(key, "a string"));
  return m.AsString();
}

StatusOr<bool> JsonReader::Bool(std::string_view key) const {
  MIGD_ASSIGN_OR_RETURN(JsonReader m, Member(key, "a boolean"));
  return m.AsBool();
}

StatusOr<int64_t> JsonReader::Int(std::string_view key, int64_t min, int64_t max) const {
  MIGD_ASSIGN_OR_RETURN(JsonReader m, Member(key, "an integer"));
  return m.AsInt(min, max);
}

StatusOr<uint64_t> JsonReader::Uint(std::string_view key, uint64_t max) const {
  MIGD_ASSIGN_OR_RETURN(JsonReader m, Member(key, "a non-negative integer"));
  return m.AsUint(max);
}

StatusOr<uint32_t> JsonReader::Uint32(std::string_view key) const {
  MIGD_ASSIGN_OR_RETURN(uint64_t u, Uint(key, std::numeric_limits<uint32_t>::max()));
  return static_cast<uint32_t>(u);
}

StatusOr<double> JsonReader::Double(std::string_view key) const {
  MIGD_ASSIGN_OR_RETURN(JsonReader m, Member(key, "a number"));
  return m.AsDouble();
}

StatusOr<std::optional<JsonReader>> JsonReader::OptionalObject(std::string_view key) const {
  MIGD_RETURN_IF_ERROR(ExpectObject());
  if (!Has(key)) return std::optional<JsonReader>();
  MIGD_ASSIGN_OR_RETURN(JsonReader m, Object(key));
  return std::optional<JsonReader>(std::move(m));
}

StatusOr<std::vector<JsonReader>> JsonReader::OptionalArray(std::string_view key) const {
  MIGD_RETURN_IF_ERROR(ExpectObject());
  if (!Has(key)) return std::vector<JsonReader>();
  return Array(key);
}

StatusOr<std::string> JsonReader::OptionalString(std::string_view key, std::string absent) const {
  MIGD_RETURN_IF_ERROR(ExpectObject());
  if (!Has(key)) return absent;
  return String(key);
}

StatusOr<bool> JsonReader::OptionalBool(std::string_view key, bool absent) const {
  MIGD_RETURN_IF_ERROR(ExpectObject());
  if (!Has(key)) return absent;
  return Bool(key);
}

StatusOr<int64_t> JsonReader::OptionalInt(std::string_view key, int64_t absent, int64_t min,
                                          int64_t max) const {
  MIGD_RETURN_IF_ERROR(ExpectObject());
  if (!Has(key)) return absent;
  return Int(key, min, max);
}

StatusOr<uint64_t> JsonReader::OptionalUint(std::string_view key, uint64_t absent,
                                            uint64_t max) const {
  MIGD_RETURN_IF_ERROR(ExpectObject());
  if (!Has(key)) return absent;
  return Uint(key, max);
}

StatusOr<double> JsonReader::OptionalDouble(std::string_view key, double absent) const {
  MIGD_RETURN_IF_ERROR(ExpectObject());
  if (!Has(key)) return absent;
  return Double(key);
}

StatusOr<size_t> JsonReader::Enum(std::string_view key,
                                  std::initializer_list<std::string_view> names) const {
  std::string expectation = "one of ";
  bool first = true;
  for (std::string_view n : names) {
    if (!first) expectation += ", ";
    expectation += n;
    first = false;
  }
  MIGD_ASSIGN_OR_RETURN(JsonReader m, Member(key, expectation));
  if (!m.value().is_string()) return m.Expected(expectation);
  const auto& s = m.value().get_ref<const std::string&>();
  size_t i = 0;
  for (std::string_view n : names) {
    if (s == n) return i;
    ++i;
  }
  return m.Expected(expectation);
}

Status JsonReader::NoUnknownKeys(std::initializer_list<std::string_view> known) const {
  MIGD_RETURN_IF_ERROR(ExpectObject());
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    bool found = false;
    for (std::string_view k : known) found = found || it.key() == k;
    if (!found) return ErrorAt(it.key(), "unknown member (a typo, or a newer format?)");
  }
  return OkStatus();
}

}  // namespace migd
