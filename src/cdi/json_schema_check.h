// File: cdi/json_schema_check.h
//
// Test-only: a validator for the subset of JSON Schema (draft-07) that the CDI
// schema files use (data/cdi-schema/schema.json + defs.json, verbatim copies
// of cncf-tags/container-device-interface schema/; provenance in data/README.md):
//
//   type (string or list), properties, required, items (one schema),
//   patternProperties, additionalProperties (bool or schema), minimum,
//   maximum, $ref ("file.json#/json/pointer" or "#/json/pointer"),
//   definitions (a container), and the annotations $schema, description.
//
// Any other keyword is an error of the *validator* (kUnimplemented), so a
// change of the schema files cannot pass unnoticed. The exception is the
// schema's own quirk `"ref"` in containerEdits.env.items (a typo of "$ref"):
// draft-07 ignores unknown keywords, so it is accepted and ignored, as every
// conforming validator does.
//
// Thread-safety: Validate is const; distinct objects are independent.
#ifndef MIGD_CDI_JSON_SCHEMA_CHECK_H_
#define MIGD_CDI_JSON_SCHEMA_CHECK_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace migd::cdi::testing {

class JsonSchemaChecker {
 public:
  // Loads `main_file` and the other files of `dir` it references (by
  // `$ref`): "schema.json" and "defs.json". kNotFound / kInvalidArgument.
  static StatusOr<JsonSchemaChecker> Load(const std::string& dir,
                                          const std::vector<std::string>& files,
                                          const std::string& main_file);

  // Validates `instance` against the main schema. kInvalidArgument listing
  // every violation with its JSON pointer; kUnimplemented for a schema
  // keyword outside the supported subset.
  Status Validate(const nlohmann::json& instance) const;

 private:
  struct Ctx {
    std::vector<std::string>* errors;
    Status* unsupported;
  };
  // `doc` is the schema file `schema` lives in (for "#/..." references);
  // `where` is the JSON pointer of `value` in the instance.
  void Check(const nlohmann::json& schema, const std::string& doc, const nlohmann::json& value,
             const std::string& where, const Ctx& ctx, int depth) const;
  void CheckRef(const std::string& ref, const std::string& doc, const nlohmann::json& value,
                const std::string& where, const Ctx& ctx, int depth) const;
  // False (with an error) if `value` has none of the schema's types.
  bool CheckType(const nlohmann::json& schema, const nlohmann::json& value,
                 const std::string& at, const Ctx& ctx) const;
  void CheckBounds(const nlohmann::json& schema, const nlohmann::json& value,
                   const std::string& at, const Ctx& ctx) const;
  void CheckObject(const nlohmann::json& schema, const std::string& doc,
                   const nlohmann::json& value, const std::string& where, const Ctx& ctx,
                   int depth) const;

  std::map<std::string, nlohmann::json> docs_;
  std::string main_;
};

}  // namespace migd::cdi::testing

#endif  // MIGD_CDI_JSON_SCHEMA_CHECK_H_
