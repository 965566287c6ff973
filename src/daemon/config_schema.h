// File: daemon/config_schema.h
//
// The schema of migd.yaml: one KeySpec per key (config_schema.cc), in file
// order. It is the only place a key is described. From it derive:
//   - the defaults of a default-constructed Config (config_parse.cc parses
//     each row's default_value, so a default is always a value the file could
//     hold),
//   - parsing: which keys exist where, each key's type, unknown-key
//     suggestions (config_parse.cc),
//   - validation: ranges, choices and per-value checks (config_validate.cc;
//     rules that span keys are listed there),
//   - the SIGHUP diff and merge (config_reload.cc),
//   - the key table of docs/config.md (config_doc.cc; a test fails when the
//     doc and the schema differ),
// and tests check deploy/migd.yaml and the Helm chart against it.
//
// Thread-safety: immutable data.
#ifndef MIGD_DAEMON_CONFIG_SCHEMA_H_
#define MIGD_DAEMON_CONFIG_SCHEMA_H_

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "daemon/config.h"

namespace migd::daemon {

// What a key holds: how it is parsed, which Config field type it fills, how
// it is documented.
enum class KeyType {
  kSection,        // a mapping of the keys below it; no field
  kString,         // std::string
  kBool,           // bool: true or false
  kCount,          // whole number 0..max_count: uint32_t, or std::optional<uint32_t>
  kDuration,       // "30s", "1h30m": Duration, or std::optional<Duration> (0 = unset)
  kFileMode,       // octal file mode such as "0600": uint32_t
  kProfileList,    // list of MIG profile names: std::vector<std::string>
  kProfileCounts,  // mapping MIG profile name -> count 0..max_count
  kXidList,        // list of distinct Xid numbers 1..max_count: std::vector<uint32_t>
};

enum class Reload {
  kRestart,   // keeps its running value until migd restarts
  kOnSighup,  // SIGHUP applies it (config_reload.h)
};

// The Config field a key fills, by type.
using FieldRef = std::variant<std::string*, bool*, uint32_t*, std::optional<uint32_t>*, Duration*,
                              std::optional<Duration>*, std::vector<std::string>*,
                              std::map<std::string, uint32_t>*, std::vector<uint32_t>*>;

struct DurationRange {
  Duration min{};
  Duration max{};
  bool zero_ok = false;  // 0 is accepted besides min..max (it means "off")
};

struct KeySpec {
  std::string_view path{};  // "api.socket"; a section's children are "<path>.<key>"
  KeyType type = KeyType::kSection;
  // The default as the file writes it ("30s", "/var/lib/migd", "{}", "true");
  // "" for an empty string or an unset optional value.
  std::string_view default_value{};
  Reload reload = Reload::kRestart;
  FieldRef (*field)(Config&) = nullptr;  // nullptr for sections

  // Validation (config_validate.cc). Checks return kInvalidArgument saying
  // what is wrong with the value; the caller prefixes the key's path.
  Status (*check)(std::string_view value) = nullptr;  // kString
  Status (*check_mode)(uint32_t mode) = nullptr;      // kFileMode
  std::span<const std::string_view> choices{};        // kString: the only values allowed
  std::string_view choice_noun{};                     // "a log level": in the error
  uint32_t max_count = 0;                             // kCount, kProfileCounts, kXidList
  DurationRange range{};                              // kDuration

  // Documentation (docs/config.md's key table).
  std::string_view type_doc{};      // the Type column; derived from type/choices/ranges if ""
  std::string_view default_note{};  // after the default, e.g. "(off)"
  std::string_view doc{};           // the Meaning column (markdown)
};

// Every key, sections included, in file order.
std::span<const KeySpec> ConfigSchema();

// The key at `path`, or nullptr.
const KeySpec* FindKey(std::string_view path);

// The direct children of section `path` ("" = the top level), by name
// ("socket" for "api.socket"), in file order.
std::vector<std::string> ChildrenOf(std::string_view path);

// Every key path the file accepts, sections included, e.g. "cdi.specDir".
const std::vector<std::string>& KnownKeys();

// The field of `key` (not a section) in `config`.
FieldRef FieldOf(const KeySpec& key, Config& config);
// The value of `key` in `config` if its field is a T, else nullptr.
template <typename T>
const T* ValueOf(const KeySpec& key, const Config& config) {
  const FieldRef field = key.field(const_cast<Config&>(config));  // only read
  T* const* value = std::get_if<T*>(&field);
  return value == nullptr ? nullptr : *value;
}
// Whether `key` has the same value in `a` and `b`.
bool SameValue(const KeySpec& key, const Config& a, const Config& b);
// Copies the value of `key` from `from` into `to`.
void CopyValue(const KeySpec& key, const Config& from, Config* to);

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_CONFIG_SCHEMA_H_
