// File: daemon/config_values.h
//
// The textual value forms of migd.yaml and the checks the schema
// (config_schema.cc) names for single keys: durations, listen addresses,
// absolute and socket paths, Kubernetes names, the API socket mode. A check
// returns kInvalidArgument whose message says what is wrong with the value
// ("\"x\" must be an absolute path"); ValidateConfig prefixes it with
// "config <source>: <key path>: ".
//
// Thread-safety: pure functions.
#ifndef MIGD_DAEMON_CONFIG_VALUES_H_
#define MIGD_DAEMON_CONFIG_VALUES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "daemon/config.h"

namespace migd::daemon {

// "30s", "10m", "2h", "500ms", "1h30m", "2d"; "0" is zero. Other bare
// numbers are rejected (a unit is required).
StatusOr<Duration> ParseDuration(std::string_view text);
// The shortest such form: 90 minutes -> "1h30m", 0 -> "0".
std::string FormatDuration(Duration d);

// "host:port" (IPv4 literal, hostname, or [IPv6]; 0.0.0.0 for every
// interface); port 0..65535, 0 = a free port chosen at start (tests). OK for
// "" (disabled).
Status ValidateListenAddress(std::string_view listen);

// `s` in double quotes, with '"' and '\' escaped: how messages show values.
std::string Quote(std::string_view s);

// The nearest of `candidates` to `word` (case-insensitive), if close enough
// to be a likely typo.
std::optional<std::string> Nearest(std::string_view word,
                                   const std::vector<std::string>& candidates);

// The planner's numbers (daemon/planner_wiring.h). kInvalidArgument naming
// the value and the range allowed.
StatusOr<double> ParseDriftThreshold(std::string_view value);    // finite, 0.01..1
StatusOr<double> ParseHalfLifeArrivals(std::string_view value);  // finite, 1..1e9
StatusOr<int64_t> ParseMinArrivals(std::string_view value);      // whole, 1..1000000
// planner.reuseMargin: "auto" (planner::kAutoReuseMargins, resolved by
// planner_wiring.h), "off" (no margin) or a number, 0..1000.
struct ReuseMarginSetting {
  bool automatic = false;
  std::optional<double> margin;  // unless automatic; none: off
};
StatusOr<ReuseMarginSetting> ParseReuseMargin(std::string_view value);

// Checks of single values, named by the schema.
Status CheckAbsolutePath(std::string_view value);             // starts with '/'
Status CheckAbsolutePathOrEmpty(std::string_view value);      // "" or absolute
Status CheckSocketPath(std::string_view value);               // absolute, fits sun_path
Status CheckNotEmptyLibrary(std::string_view value);          // nvml.library
Status CheckGroupName(std::string_view value);                // no blanks, ':' or '/'
Status CheckCdiVendor(std::string_view value);                // cdi::ValidateVendor
Status CheckCdiClass(std::string_view value);                 // cdi::ValidateClass
Status CheckKubeletDir(std::string_view value);               // absolute, its sockets fit
Status CheckKubeletSocketDirOrEmpty(std::string_view value);  // "" or absolute, sockets fit
Status CheckResourceName(std::string_view value);             // kubelet's IsExtendedResourceName
Status CheckNodeNameIfSet(std::string_view value);            // "" or a DNS subdomain
Status CheckDraDriverName(std::string_view value);            // DNS subdomain, <= 63
Status CheckDriftThreshold(std::string_view value);           // ParseDriftThreshold
Status CheckHalfLifeArrivals(std::string_view value);         // ParseHalfLifeArrivals
Status CheckMinArrivals(std::string_view value);              // ParseMinArrivals
Status CheckReuseMargin(std::string_view value);              // ParseReuseMargin
Status CheckSocketMode(uint32_t mode);                        // owner rw, group rw at most

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_CONFIG_VALUES_H_
