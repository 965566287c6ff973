#include "daemon/config_parse.h"

#include <absl/strings/ascii.h>
#include <absl/strings/str_join.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "base/status_macros.h"
#include "daemon/config_schema.h"
#include "daemon/config_validate.h"
#include "daemon/config_values.h"

namespace migd::daemon {
namespace {

constexpr char kDurationHint[] = "(use e.g. 30s, 10m, 2h)";

std::string Join(std::string_view parent, std::string_view key) {
  return parent.empty() ? std::string(key) : std::string(parent) + "." + std::string(key);
}

std::string KindOf(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Scalar:
      return Quote(n.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// Stores `value` in a field of type T; false if the field has another type
// (a schema row whose type does not match its field).
template <typename T>
bool Store(const FieldRef& field, T value) {
  T* const* target = std::get_if<T*>(&field);
  if (target == nullptr) return false;
  **target = std::move(value);
  return true;
}

using Entry = std::pair<std::string, YAML::Node>;

// Walks a YAML tree over the schema and fills a Config. Errors carry
// "config <source>: ".
class Parser {
 public:
  explicit Parser(std::string source) : source_(std::move(source)) {}

  // The keys of section `path` ("" = the top level) from `node`.
  Status ParseSection(std::string_view path, const YAML::Node& node, Config* c) const {
    const std::vector<std::string> children = ChildrenOf(path);
    std::vector<Entry> entries;
    MIGD_RETURN_IF_ERROR(Entries(node, std::string(path), &children, &entries));
    for (const auto& [name, value] : entries) {
      if (value.IsNull()) continue;  // "key:" with no value keeps the default
      const KeySpec* key = FindKey(Join(path, name));
      if (key == nullptr) return InternalError("config key " + Join(path, name) + " not found");
      if (key->type == KeyType::kSection) {
        MIGD_RETURN_IF_ERROR(ParseSection(key->path, value, c));
      } else {
        MIGD_RETURN_IF_ERROR(ParseValue(*key, value, c));
      }
    }
    return OkStatus();
  }

  // One key's value (not null, not a section) into its field.
  Status ParseValue(const KeySpec& key, const YAML::Node& n, Config* c) const {
    const std::string path(key.path);
    const FieldRef field = FieldOf(key, *c);
    bool stored = false;
    switch (key.type) {
      case KeyType::kString: {
        MIGD_ASSIGN_OR_RETURN(std::string v, String(n, path));
        stored = Store<std::string>(field, std::move(v));
        break;
      }
      case KeyType::kBool: {
        MIGD_ASSIGN_OR_RETURN(bool v, Bool(n, path));
        stored = Store<bool>(field, v);
        break;
      }
      case KeyType::kCount: {
        MIGD_ASSIGN_OR_RETURN(uint64_t v, Uint(n, path, key.max_count));
        const auto count = static_cast<uint32_t>(v);
        stored = Store<uint32_t>(field, count) || Store<std::optional<uint32_t>>(field, count);
        break;
      }
      case KeyType::kDuration: {
        MIGD_ASSIGN_OR_RETURN(Duration d, DurationOf(n, path));
        // An optional duration is unset by 0 ("off").
        const std::optional<Duration> opt = d.count() == 0 ? std::nullopt : std::optional(d);
        stored = Store<Duration>(field, d) || Store<std::optional<Duration>>(field, opt);
        break;
      }
      case KeyType::kFileMode: {
        MIGD_ASSIGN_OR_RETURN(uint32_t v, Mode(n, path));
        stored = Store<uint32_t>(field, v);
        break;
      }
      case KeyType::kProfileList: {
        MIGD_ASSIGN_OR_RETURN(std::vector<std::string> v, ProfileList(n, path));
        stored = Store<std::vector<std::string>>(field, std::move(v));
        break;
      }
      case KeyType::kProfileCounts: {
        using Counts = std::map<std::string, uint32_t>;
        MIGD_ASSIGN_OR_RETURN(Counts v, ProfileCounts(n, path, key.max_count));
        stored = Store<Counts>(field, std::move(v));
        break;
      }
      case KeyType::kXidList: {
        MIGD_ASSIGN_OR_RETURN(std::vector<uint32_t> v, XidList(n, path, key.max_count));
        stored = Store<std::vector<uint32_t>>(field, std::move(v));
        break;
      }
      case KeyType::kSection:
        break;
    }
    if (!stored) return InternalError("config key " + path + ": its field has another type");
    return OkStatus();
  }

 private:
  Status Error(const std::string& path, const std::string& what) const {
    return InvalidArgumentError("config " + source_ + ": " + path + ": " + what);
  }

  // The entries of a mapping node, checked for duplicate and unknown keys.
  // `allowed` = nullptr accepts any key (warmPool). A null node is an empty
  // mapping (the key written with no value).
  Status Entries(const YAML::Node& node, const std::string& path,
                 const std::vector<std::string>* allowed, std::vector<Entry>* out) const {
    if (node.IsNull()) return OkStatus();
    if (!node.IsMap()) {
      return path.empty() ? InvalidArgumentError("config " + source_ +
                                                 ": the top level must be a mapping of keys (e.g. "
                                                 "\"stateDir: /run/migd/state\"), got " +
                                                 KindOf(node))
                          : Error(path, "expected a mapping of keys, got " + KindOf(node));
    }
    std::map<std::string, int> seen;  // key -> line
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        return Error(path.empty() ? "(top level)" : path, "keys must be plain strings");
      }
      const std::string key = kv.first.Scalar();
      const int line = kv.first.Mark().line + 1;
      if (auto it = seen.find(key); it != seen.end()) {
        return InvalidArgumentError("config " + source_ + ": duplicate key " + Join(path, key) +
                                    " (lines " + std::to_string(it->second) + " and " +
                                    std::to_string(line) + ")");
      }
      seen.emplace(key, line);
      if (allowed != nullptr &&
          std::find(allowed->begin(), allowed->end(), key) == allowed->end()) {
        return UnknownKey(path, key, *allowed);
      }
      out->emplace_back(key, kv.second);
    }
    return OkStatus();
  }

  Status UnknownKey(const std::string& path, const std::string& key,
                    const std::vector<std::string>& siblings) const {
    std::string msg = "config " + source_ + ": unknown key " + Join(path, key);
    if (auto near = Nearest(key, siblings)) {
      return InvalidArgumentError(msg + " (did you mean " + Join(path, *near) + "?)");
    }
    // The right key in the wrong section, e.g. "socket" at the top level.
    std::vector<std::string> leaves;
    for (const std::string& k : KnownKeys()) {
      const size_t dot = k.rfind('.');
      if (dot != std::string::npos &&
          absl::AsciiStrToLower(k.substr(dot + 1)) == absl::AsciiStrToLower(key)) {
        leaves.push_back(k);
      }
    }
    if (leaves.size() == 1) return InvalidArgumentError(msg + " (did you mean " + leaves[0] + "?)");
    return InvalidArgumentError(msg + " (known keys here: " + absl::StrJoin(siblings, ", ") + ")");
  }

  StatusOr<std::string> String(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) return Error(path, "expected a string, got " + KindOf(n));
    return n.Scalar();
  }

  StatusOr<bool> Bool(const YAML::Node& n, const std::string& path) const {
    if (n.IsScalar()) {
      const std::string v = absl::AsciiStrToLower(n.Scalar());
      if (v == "true") return true;
      if (v == "false") return false;
    }
    return Error(path, "expected true or false, got " + KindOf(n));
  }

  StatusOr<uint64_t> Uint(const YAML::Node& n, const std::string& path, uint64_t max) const {
    if (!n.IsScalar() || n.Scalar().empty() ||
        !std::all_of(n.Scalar().begin(), n.Scalar().end(),
                     [](unsigned char c) { return std::isdigit(c); })) {
      return Error(path, "expected a whole number, got " + KindOf(n));
    }
    if (n.Scalar().size() > 9 || std::stoull(n.Scalar()) > max) {
      return Error(path, n.Scalar() + " is out of range (0.." + std::to_string(max) + ")");
    }
    return std::stoull(n.Scalar());
  }

  StatusOr<Duration> DurationOf(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) {
      return Error(path,
                   "expected a duration " + std::string(kDurationHint) + ", got " + KindOf(n));
    }
    StatusOr<Duration> d = ParseDuration(n.Scalar());
    if (!d.ok()) return Error(path, Quote(n.Scalar()) + " is not a duration " + kDurationHint);
    return d;
  }

  StatusOr<uint32_t> Mode(const YAML::Node& n, const std::string& path) const {
    const std::string hint = " (use e.g. \"0600\", or \"0660\" with api.socketGroup)";
    if (!n.IsScalar()) return Error(path, "expected an octal mode" + hint + ", got " + KindOf(n));
    const std::string& s = n.Scalar();
    const bool octal = (s.size() == 3 || (s.size() == 4 && s[0] == '0')) &&
                       std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '7'; });
    if (!octal) return Error(path, Quote(s) + " is not an octal file mode" + hint);
    return static_cast<uint32_t>(std::stoul(s, nullptr, 8));
  }

  StatusOr<std::vector<std::string>> ProfileList(const YAML::Node& n,
                                                 const std::string& path) const {
    if (!n.IsSequence()) {
      return Error(path,
                   "expected a list of profile names (e.g. [1g.10gb, 3g.40gb]), got " + KindOf(n));
    }
    std::vector<std::string> names;
    for (size_t i = 0; i < n.size(); ++i) {
      MIGD_ASSIGN_OR_RETURN(std::string name, String(n[i], path + "[" + std::to_string(i) + "]"));
      names.push_back(std::move(name));
    }
    return names;
  }

  // Distinct Xid numbers 1..max, kept in file order.
  StatusOr<std::vector<uint32_t>> XidList(const YAML::Node& n, const std::string& path,
                                          uint64_t max) const {
    if (!n.IsSequence()) {
      return Error(path, "expected a list of Xid numbers (e.g. [13, 31]), got " + KindOf(n));
    }
    std::vector<uint32_t> xids;
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string item = path + "[" + std::to_string(i) + "]";
      MIGD_ASSIGN_OR_RETURN(uint64_t xid, Uint(n[i], item, max));
      if (xid == 0) return Error(item, "0 is not an Xid (Xids start at 1)");
      if (std::find(xids.begin(), xids.end(), xid) != xids.end()) {
        return Error(item, "Xid " + std::to_string(xid) + " is listed twice");
      }
      xids.push_back(static_cast<uint32_t>(xid));
    }
    return xids;
  }

  StatusOr<std::map<std::string, uint32_t>> ProfileCounts(const YAML::Node& n,
                                                          const std::string& path,
                                                          uint64_t max) const {
    if (!n.IsMap()) {
      return Error(
          path, "expected a mapping of profile to count (e.g. {\"1g.10gb\": 2}), got " + KindOf(n));
    }
    std::vector<Entry> entries;
    MIGD_RETURN_IF_ERROR(Entries(n, path, nullptr, &entries));
    std::map<std::string, uint32_t> counts;
    for (const auto& [profile, v] : entries) {
      MIGD_ASSIGN_OR_RETURN(uint64_t count, Uint(v, path + "." + profile, max));
      counts[profile] = static_cast<uint32_t>(count);
    }
    return counts;
  }

  const std::string source_;
};

// Length of the UTF-8 sequence at s[i] (1..4), or 0 if it is not a valid one
// (truncated, overlong, a surrogate, above U+10FFFF, a stray continuation).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  }
  return n;
}

// A config is UTF-8 text (YAML 1.2 §5.2). yaml-cpp would take invalid bytes
// into values (paths, group names) as they are, and reports a NUL as an
// "unknown escape character"; both are refused here with their position.
Status CheckConfigText(std::string_view text, const std::string& source) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < text.size();) {
    const auto at = [&] {
      return "config " + source + ": line " + std::to_string(line) + ", column " +
             std::to_string(column) + ": ";
    };
    if (text[i] == '\0') {
      return InvalidArgumentError(at() +
                                  "a NUL byte; a config file is UTF-8 text (is this the right "
                                  "file?)");
    }
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      return InvalidArgumentError(at() +
                                  "invalid UTF-8; a config file is UTF-8 text (is this "
                                  "the right file?)");
    }
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += n;
  }
  return OkStatus();
}

// The schema's defaults, parsed once by the same code as the file: a default
// is always a value the file could hold. A row whose default does not parse
// is a bug in the schema (config_schema_test catches it first).
const Config& Defaults() {
  static const Config* const kDefaults = [] {
    auto* config = new Config(Config::Zero{});
    const Parser parser("(built-in defaults)");
    for (const KeySpec& key : ConfigSchema()) {
      if (key.type == KeyType::kSection || key.default_value.empty()) continue;
      const Status s = parser.ParseValue(key, YAML::Load(std::string(key.default_value)), config);
      if (!s.ok()) {
        std::fprintf(stderr, "migd: the config schema is broken: %s\n", s.ToString().c_str());
        std::abort();
      }
    }
    return config;
  }();
  return *kDefaults;
}

}  // namespace

Config::Config() : Config(Defaults()) {}

StatusOr<Config> ParseConfig(std::string_view yaml, std::string_view source_view) {
  const std::string source(source_view);
  MIGD_RETURN_IF_ERROR(CheckConfigText(yaml, source));
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("config " + source + ": line " + std::to_string(e.mark.line + 1) +
                                ", column " + std::to_string(e.mark.column + 1) +
                                ": YAML syntax error: " + e.msg);
  }
  Config config;
  try {
    MIGD_RETURN_IF_ERROR(Parser(source).ParseSection("", root, &config));
    if (config.kubernetes.node_name.empty()) {
      if (const char* node = std::getenv("NODE_NAME"); node != nullptr) {
        config.kubernetes.node_name = node;
      }
    }
  } catch (const std::exception& e) {
    // yaml-cpp throws on malformed trees it accepted lazily; never let it out.
    return InvalidArgumentError("config " + source + ": " + e.what());
  }
  MIGD_RETURN_IF_ERROR(ValidateConfig(config, source));
  return config;
}

}  // namespace migd::daemon
