// File: base/json_reader.h
//
// JsonReader: strict, typed reading of a parsed JSON document with one error
// style for every reader in migd (records, simulator state, plan input,
// catalogue, HAMi annotations, CDI specs):
//
//   "<source>: <JSON pointer>: expected <expectation>, got <what was there>"
//   e.g. "/run/migd/state/x.json: /owner/kind: expected one of none, pod,
//         opaque, got \"boss\""
//
// The pointer is RFC 6901 ("/a/0/b"; "~" and "/" escaped); the document root
// is named "the document". Every error carries the reader's StatusCode
// (InvalidArgument for input a caller sent, DataLoss for files migd wrote).
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, path, StatusCode::kDataLoss));
//   JsonReader r(doc, path, StatusCode::kDataLoss);
//   MIGD_RETURN_IF_ERROR(r.ExpectObject());
//   MIGD_ASSIGN_OR_RETURN(std::string uuid, r.String("parentGPUUUID"));
//   MIGD_ASSIGN_OR_RETURN(JsonReader owner, r.Object("owner"));
//
// Thread-safety: a JsonReader is a read-only view of a document that must
// outlive it; distinct readers may be used from different threads.
#ifndef MIGD_BASE_JSON_READER_H_
#define MIGD_BASE_JSON_READER_H_

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace migd {

// Parses `text` (exceptions stay inside). On a syntax error returns `code`
// with "<source>: not valid JSON: <parser's message>".
StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view source,
                                   StatusCode code = StatusCode::kInvalidArgument);

// "a string", "an object", "null", "-3", ...: what a value is, for messages.
std::string DescribeJson(const nlohmann::json& value);

class JsonReader {
 public:
  // Reads `value` (not owned; must outlive the reader and its children).
  JsonReader(const nlohmann::json& value, std::string source,
             StatusCode code = StatusCode::kInvalidArgument);

  const nlohmann::json& value() const { return *value_; }
  const std::string& source() const { return source_; }
  // "" for the document root, "/owner/kind" below it.
  const std::string& pointer() const { return pointer_; }
  StatusCode code() const { return code_; }

  // OK if this value is of the kind; else the standard error.
  Status ExpectObject() const;
  Status ExpectArray() const;

  // True if this value is an object holding `key` with a non-null value.
  bool Has(std::string_view key) const;

  // Required members. Each fails if this value is not an object, `key` is
  // missing or null, or the member is of another type or out of range.
  StatusOr<JsonReader> Object(std::string_view key) const;
  StatusOr<std::vector<JsonReader>> Array(std::string_view key) const;
  StatusOr<std::string> String(std::string_view key) const;
  StatusOr<bool> Bool(std::string_view key) const;
  StatusOr<int64_t> Int(std::string_view key, int64_t min = std::numeric_limits<int64_t>::min(),
                        int64_t max = std::numeric_limits<int64_t>::max()) const;
  StatusOr<uint64_t> Uint(std::string_view key,
                          uint64_t max = std::numeric_limits<uint64_t>::max()) const;
  StatusOr<uint32_t> Uint32(std::string_view key) const;
  StatusOr<double> Double(std::string_view key) const;

  // Optional members: absent or null gives `absent`; present must be valid.
  StatusOr<std::optional<JsonReader>> OptionalObject(std::string_view key) const;
  StatusOr<std::vector<JsonReader>> OptionalArray(std::string_view key) const;
  StatusOr<std::string> OptionalString(std::string_view key, std::string absent = "") const;
  StatusOr<bool> OptionalBool(std::string_view key, bool absent) const;
  StatusOr<int64_t> OptionalInt(std::string_view key, int64_t absent,
                                int64_t min = std::numeric_limits<int64_t>::min(),
                                int64_t max = std::numeric_limits<int64_t>::max()) const;
  StatusOr<uint64_t> OptionalUint(std::string_view key, uint64_t absent,
                                  uint64_t max = std::numeric_limits<uint64_t>::max()) const;
  StatusOr<double> OptionalDouble(std::string_view key, double absent) const;

  // This value itself (for array elements and the root).
  StatusOr<std::vector<JsonReader>> Elements() const;
  StatusOr<std::string> AsString() const;
  StatusOr<bool> AsBool() const;
  StatusOr<int64_t> AsInt(int64_t min = std::numeric_limits<int64_t>::min(),
                          int64_t max = std::numeric_limits<int64_t>::max()) const;
  StatusOr<uint64_t> AsUint(uint64_t max = std::numeric_limits<uint64_t>::max()) const;
  StatusOr<double> AsDouble() const;

  // A member that must be one of `names`; returns its index in `names`.
  StatusOr<size_t> Enum(std::string_view key, std::initializer_list<std::string_view> names) const;

  // Fails naming the first member of this object that is not in `known`.
  Status NoUnknownKeys(std::initializer_list<std::string_view> known) const;

  // The child reader of an existing member or element (no checks).
  JsonReader Child(std::string_view key) const;
  JsonReader Child(size_t index) const;

  // "<source>: <pointer>: expected <expectation>, got <actual>".
  Status Expected(std::string_view expectation) const;
  // "<source>: <pointer>: <message>" for a rule that is not about a type.
  Status Error(std::string_view message) const;
  // The same for a member `key` (present or not) of this object.
  Status ExpectedAt(std::string_view key, std::string_view expectation) const;
  Status ErrorAt(std::string_view key, std::string_view message) const;

 private:
  JsonReader(const nlohmann::json* value, std::string source, std::string pointer, StatusCode code);
  // The member, or a "missing" error naming `expectation`.
  StatusOr<JsonReader> Member(std::string_view key, std::string_view expectation) const;
  std::string Where() const;

  const nlohmann::json* value_;
  std::string source_;
  std::string pointer_;
  StatusCode code_;
};

}  // namespace migd

#endif  // MIGD_BASE_JSON_READER_H_
