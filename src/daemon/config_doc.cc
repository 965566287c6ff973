#include "daemon/config_doc.h"

#include <absl/strings/str_join.h>
#include <absl/strings/str_replace.h>
#include <absl/strings/str_split.h>

#include <vector>

#include "daemon/config_schema.h"
#include "daemon/config_values.h"

namespace migd::daemon {
namespace {

std::string Code(std::string_view s) { return "`" + std::string(s) + "`"; }

std::string TypeColumn(const KeySpec& key) {
  if (!key.type_doc.empty()) return std::string(key.type_doc);
  switch (key.type) {
    case KeyType::kString: {
      std::vector<std::string> choices;
      for (std::string_view c : key.choices) choices.push_back(Code(c));
      return absl::StrJoin(choices, ", ");
    }
    case KeyType::kBool:
      return "bool";
    case KeyType::kCount:
      return "integer 0.." + std::to_string(key.max_count);
    case KeyType::kDuration:
      return std::string("duration, ") + (key.range.zero_ok ? "`0` or " : "") +
             Code(FormatDuration(key.range.min)) + ".." + Code(FormatDuration(key.range.max));
    case KeyType::kFileMode:
      return "octal string";
    case KeyType::kProfileList:
      return "list of profile names";
    case KeyType::kProfileCounts:
      return "map profile → count (0.." + std::to_string(key.max_count) + ")";
    case KeyType::kXidList:
      return "list of Xid numbers (1.." + std::to_string(key.max_count) + ")";
    case KeyType::kSection:
      break;
  }
  return "";
}

// The default as one would write it in the file: strings YAML would read as
// something else (a number, a mapping key) are quoted.
std::string DefaultColumn(const KeySpec& key) {
  std::string value;
  const std::string_view v = key.default_value;
  const bool stringy = key.type == KeyType::kString || key.type == KeyType::kFileMode;
  if (v.empty()) {
    value = stringy ? Code("\"\"") : "unset";
  } else if (stringy && (v.find(':') != v.npos || (v.front() >= '0' && v.front() <= '9'))) {
    value = Code("\"" + std::string(v) + "\"");
  } else {
    value = Code(v);
  }
  if (!key.default_note.empty()) value += " " + std::string(key.default_note);
  return value;
}

std::string Cell(const std::string& text) { return absl::StrReplaceAll(text, {{"|", "\\|"}}); }

// The text between the markers (exclusive), or an error.
StatusOr<std::pair<size_t, size_t>> TableBounds(std::string_view doc) {
  const size_t begin = doc.find(kKeyTableBegin);
  const size_t end = doc.find(kKeyTableEnd);
  if (begin == std::string_view::npos || end == std::string_view::npos || end < begin) {
    return InvalidArgumentError("the document has no key table between \"" +
                                std::string(kKeyTableBegin) + "\" and \"" +
                                std::string(kKeyTableEnd) + "\"");
  }
  const size_t first = doc.find('\n', begin) + 1;
  return std::make_pair(first, end);
}

}  // namespace

std::string RenderKeyTable() {
  std::string out = "| Key | Type | Default | Reload | Meaning |\n|---|---|---|---|---|\n";
  for (const KeySpec& key : ConfigSchema()) {
    if (key.type == KeyType::kSection) continue;
    out += "| " + Code(key.path) + " | " + Cell(TypeColumn(key)) + " | " +
           Cell(DefaultColumn(key)) + " | " +
           (key.reload == Reload::kOnSighup ? "**R**" : "restart") + " | " +
           Cell(std::string(key.doc)) + " |\n";
  }
  return out;
}

StatusOr<std::string> WithRenderedKeyTable(std::string_view doc) {
  StatusOr<std::pair<size_t, size_t>> bounds = TableBounds(doc);
  if (!bounds.ok()) return bounds.status();
  return std::string(doc.substr(0, bounds->first)) + RenderKeyTable() +
         std::string(doc.substr(bounds->second));
}

Status CheckKeyTable(std::string_view doc, std::string_view doc_name) {
  StatusOr<std::pair<size_t, size_t>> bounds = TableBounds(doc);
  if (!bounds.ok()) return bounds.status().WithContext(std::string(doc_name));
  const std::string table(doc.substr(bounds->first, bounds->second - bounds->first));
  const std::string rendered = RenderKeyTable();
  if (table == rendered) return OkStatus();
  const std::vector<std::string> have = absl::StrSplit(table, '\n', absl::SkipEmpty());
  const std::vector<std::string> want = absl::StrSplit(rendered, '\n', absl::SkipEmpty());
  size_t i = 0;
  while (i < have.size() && i < want.size() && have[i] == want[i]) ++i;
  return FailedPreconditionError(
      std::string(doc_name) +
      ": the key table differs from the config schema (src/daemon/config_schema.cc) at table "
      "line " +
      std::to_string(i + 1) + ":\n  document: " + (i < have.size() ? have[i] : "(end)") +
      "\n  schema:   " + (i < want.size() ? want[i] : "(end)") +
      "\nRun `make config-doc` to regenerate the table from the schema.");
}

}  // namespace migd::daemon
