#include "cdi/json_schema_check.h"

#include <algorithm>
#include <cstdint>
#include <regex>
#include <set>

#include "base/file_util.h"
#include "base/json_reader.h"
#include "base/status_macros.h"

namespace migd::cdi::testing {
namespace {

using Json = nlohmann::json;

// An integer as sign and magnitude, so that int64 and uint64 compare exactly.
struct BigInt {
  bool negative = false;
  uint64_t magnitude = 0;
};

bool ToBigInt(const Json& j, BigInt* out) {
  if (j.is_number_unsigned()) {
    *out = {false, j.get<uint64_t>()};
    return true;
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    *out = {v < 0, v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v)};
    return true;
  }
  return false;
}

// -1, 0, 1.
int Compare(const BigInt& a, const BigInt& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  if (a.magnitude == b.magnitude) return 0;
  const bool less = a.magnitude < b.magnitude;
  return (less != a.negative) ? -1 : 1;
}

bool HasType(const Json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_number_integer();
  return false;
}

const std::set<std::string> kKeywords = {"$schema",
                                         "description",
                                         "type",
                                         "properties",
                                         "required",
                                         "items",
                                         "patternProperties",
                                         "additionalProperties",
                                         "minimum",
                                         "maximum",
                                         "$ref",
                                         "definitions",
                                         "ref"};

}  // namespace

StatusOr<JsonSchemaChecker> JsonSchemaChecker::Load(const std::string& dir,
                                                    const std::vector<std::string>& files,
                                                    const std::string& main_file) {
  JsonSchemaChecker checker;
  for (const std::string& f : files) {
    const std::string path = dir + "/" + f;
    MIGD_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    MIGD_ASSIGN_OR_RETURN(checker.docs_[f], ParseJson(text, path));
  }
  if (!checker.docs_.contains(main_file)) return NotFoundError("main schema not loaded");
  checker.main_ = main_file;
  return checker;
}

Status JsonSchemaChecker::Validate(const Json& instance) const {
  std::vector<std::string> errors;
  Status unsupported;
  Check(docs_.at(main_), main_, instance, "", Ctx{&errors, &unsupported}, 0);
  if (!unsupported.ok()) return unsupported;
  if (errors.empty()) return OkStatus();
  std::string msg = "schema violations:";
  for (const std::string& e : errors) msg += "\n  " + e;
  return InvalidArgumentError(msg);
}

void JsonSchemaChecker::Check(const Json& schema, const std::string& doc, const Json& value,
                              const std::string& where, const Ctx& ctx, int depth) const {
  const std::string at = where.empty() ? "/" : where;
  if (depth > 64) {
    *ctx.unsupported = UnimplementedError("schema recursion too deep at " + at);
    return;
  }
  if (!schema.is_object()) {
    *ctx.unsupported = UnimplementedError("schema at " + at + " is not an object");
    return;
  }
  for (const auto& [key, unused] : schema.items()) {
    if (!kKeywords.contains(key)) {
      *ctx.unsupported = UnimplementedError("unsupported schema keyword \"" + key + "\"");
      return;
    }
  }
  if (schema.contains("$ref")) {
    CheckRef(schema["$ref"].get<std::string>(), doc, value, where, ctx, depth);
    return;  // draft-07: siblings of $ref are ignored
  }
  if (!CheckType(schema, value, at, ctx)) return;
  CheckBounds(schema, value, at, ctx);
  if (value.is_object()) CheckObject(schema, doc, value, where, ctx, depth);
  if (value.is_array()) {
    if (auto it = schema.find("items"); it != schema.end()) {
      for (size_t i = 0; i < value.size(); ++i) {
        Check(*it, doc, value[i], where + "/" + std::to_string(i), ctx, depth + 1);
      }
    }
  }
}

void JsonSchemaChecker::CheckRef(const std::string& ref, const std::string& doc,
                                 const Json& value, const std::string& where, const Ctx& ctx,
                                 int depth) const {
  const size_t hash = ref.find('#');
  const std::string file = hash == 0 ? doc : ref.substr(0, hash);
  const std::string pointer = hash == std::string::npos ? "" : ref.substr(hash + 1);
  auto d = docs_.find(file);
  if (d == docs_.end()) {
    *ctx.unsupported = UnimplementedError("$ref to unloaded document " + file);
    return;
  }
  try {
    const Json& target = d->second.at(Json::json_pointer(pointer));
    Check(target, file, value, where, ctx, depth + 1);
  } catch (const std::exception& e) {
    *ctx.unsupported = UnimplementedError("unresolvable $ref " + ref + ": " + e.what());
  }
}

bool JsonSchemaChecker::CheckType(const Json& schema, const Json& value, const std::string& at,
                                  const Ctx& ctx) const {
  auto it = schema.find("type");
  if (it == schema.end()) return true;
  std::vector<std::string> types;
  if (it->is_string()) {
    types.push_back(it->get<std::string>());
  } else {
    for (const Json& t : *it) types.push_back(t.get<std::string>());
  }
  if (std::any_of(types.begin(), types.end(),
                  [&](const std::string& t) { return HasType(value, t); })) {
    return true;
  }
  ctx.errors->push_back(at + ": expected type " + it->dump() + ", got " + value.type_name());
  return false;
}

void JsonSchemaChecker::CheckBounds(const Json& schema, const Json& value, const std::string& at,
                                    const Ctx& ctx) const {
  BigInt v;
  if (!ToBigInt(value, &v)) return;
  BigInt bound;
  if (auto it = schema.find("minimum");
      it != schema.end() && ToBigInt(*it, &bound) && Compare(v, bound) < 0) {
    ctx.errors->push_back(at + ": " + value.dump() + " < minimum " + it->dump());
  }
  if (auto it = schema.find("maximum");
      it != schema.end() && ToBigInt(*it, &bound) && Compare(v, bound) > 0) {
    ctx.errors->push_back(at + ": " + value.dump() + " > maximum " + it->dump());
  }
}

void JsonSchemaChecker::CheckObject(const Json& schema, const std::string& doc, const Json& value,
                                    const std::string& where, const Ctx& ctx, int depth) const {
  const std::string at = where.empty() ? "/" : where;
  if (auto it = schema.find("required"); it != schema.end()) {
    for (const Json& name : *it) {
      if (!value.contains(name.get<std::string>())) {
        ctx.errors->push_back(at + ": missing required property \"" + name.get<std::string>() +
                              "\"");
      }
    }
  }
  const auto props = schema.find("properties");
  const auto patterns = schema.find("patternProperties");
  const auto additional = schema.find("additionalProperties");
  for (const auto& [key, child] : value.items()) {
    const std::string child_where = where + "/" + key;
    bool matched = false;
    if (props != schema.end() && props->contains(key)) {
      matched = true;
      Check((*props)[key], doc, child, child_where, ctx, depth + 1);
    }
    if (patterns != schema.end()) {
      for (const auto& [pattern, sub] : patterns->items()) {
        if (std::regex_search(key, std::regex(pattern, std::regex::ECMAScript))) {
          matched = true;
          Check(sub, doc, child, child_where, ctx, depth + 1);
        }
      }
    }
    if (matched || additional == schema.end()) continue;
    if (!additional->is_boolean()) {
      Check(*additional, doc, child, child_where, ctx, depth + 1);
    } else if (!additional->get<bool>()) {
      ctx.errors->push_back(child_where + ": additional property not allowed");
    }
  }
}

}  // namespace migd::cdi::testing
