// File: daemon/config_parse.h
//
// migd.yaml text -> Config, over the schema (config_schema.h).
//
// Parsing is strict, because a typo in a daemon's config must not silently
// fall back to a default: unknown keys (with the nearest known key as a
// suggestion), duplicate keys, wrong types, bad durations/modes/addresses,
// out-of-range numbers, YAML syntax errors, and text that is not UTF-8 (a NUL
// byte or an invalid sequence, reported with its line and column) are all
// kInvalidArgument with a message naming the file and the key's path, e.g.
//   config migd.yaml: lifecycle.idleTTL: "5x" is not a duration (use e.g. 30s, 10m, 2h)
//   config migd.yaml: unknown key api.sokcet (did you mean api.socket?)
// An empty file (or one with only comments) gives the defaults; so does a key
// written with no value.
//
// What is checked is what can be checked without the host (ValidateConfig):
// profile names in lifecycle.warmPool and migProfileAllowlist must exist in
// the catalogue (some GPU model); whether a GPU of *this* node offers them is
// checked by the daemon at start and at reload (engine::Manager::SetPolicy).
// api.socketGroup is resolved by the daemon at start.
//
// Thread-safety: reentrant (reads the NODE_NAME environment variable).
#ifndef MIGD_DAEMON_CONFIG_PARSE_H_
#define MIGD_DAEMON_CONFIG_PARSE_H_

#include <string_view>

#include "base/status.h"
#include "daemon/config.h"

namespace migd::daemon {

// Parses `yaml` (the content of the file called `source` in messages) over
// the defaults, then runs ValidateConfig. kubernetes.nodeName left empty
// takes the NODE_NAME environment variable (the downward API in a
// DaemonSet), read here.
StatusOr<Config> ParseConfig(std::string_view yaml, std::string_view source);

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_CONFIG_PARSE_H_
