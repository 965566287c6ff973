// File: cdi/names.h
//
// The CDI name grammar (cncf-tags/container-device-interface pkg/parser,
// qualified-device.go in 0.5.x), spec versions (pkg/cdi/version.go) and migd's
// spec file naming (GenerateTransientSpecName, pkg/cdi/spec.go). Pure
// functions, no I/O.
//
// Example:
//   cdi::Kind kind{"hami.io", "mig"};
//   MIGD_RETURN_IF_ERROR(cdi::ValidateKind(kind));
//   kind.QualifiedName("MIG-…")        → "hami.io/mig=MIG-…"
//   cdi::SpecFileName(kind, "MIG-…")   → "hami.io-mig_MIG-….json"
//
// Thread-safety: value types and reentrant functions.
#ifndef MIGD_CDI_NAMES_H_
#define MIGD_CDI_NAMES_H_

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace migd::cdi {

// The default kind of migd's devices: HAMi's dynamic-MIG vendor and class.
inline constexpr std::string_view kDefaultVendor = "hami.io";
inline constexpr std::string_view kDefaultClass = "mig";

// <vendor>/<class>.
struct Kind {
  std::string vendor{kDefaultVendor};
  std::string device_class{kDefaultClass};

  // "<vendor>/<class>".
  std::string ToString() const { return vendor + "/" + device_class; }
  // "<vendor>/<class>=<device>".
  std::string QualifiedName(std::string_view device) const {
    return ToString() + "=" + std::string(device);
  }
  friend bool operator==(const Kind&, const Kind&) = default;
};

// Vendor: a letter first, a letter or digit last, [A-Za-z0-9_.-] inside.
// kInvalidArgument naming the offending character otherwise.
Status ValidateVendor(std::string_view vendor);
// Class: a letter first, a letter or digit last, [A-Za-z0-9_-] inside, and
// also '.' when `allow_dots` (spec ≥ 0.6.0; library ≤ 0.5.x rejects dots).
Status ValidateClass(std::string_view device_class, bool allow_dots = false);
// Both of the above.
Status ValidateKind(const Kind& kind, bool allow_dots_in_class = false);
// Device name: a letter or digit first and last, [A-Za-z0-9_.:-] inside
// (a one-character name is valid).
Status ValidateDeviceName(std::string_view name);

// Splits "<vendor>/<class>=<name>" (at the first '=', then the first '/') and
// validates all three parts. kInvalidArgument otherwise.
struct QualifiedDevice {
  Kind kind;
  std::string name;
};
StatusOr<QualifiedDevice> ParseQualifiedName(std::string_view qualified);

// The CDI device name of a MIG instance: the MIG UUID itself.
// kInvalidArgument if it is not a valid device name (e.g. the pre-R470 form
// "MIG-GPU-<uuid>/<gi>/<ci>", which contains '/').
StatusOr<std::string> DeviceNameForMigUuid(std::string_view mig_uuid);

// "<vendor>-<class>_<device>.json": GenerateTransientSpecName with the device
// name as transient id (pkg/cdi/spec.go). REQUIRES: valid kind and name.
std::string SpecFileName(const Kind& kind, std::string_view device);
// "<vendor>-<class>_": the prefix every spec file of `kind` starts with.
std::string SpecFilePrefix(const Kind& kind);
// If `file_name` is "<prefix><device>.json" with a valid device name, returns
// the device name; nullopt otherwise (including temp files and other kinds).
std::optional<std::string> DeviceFromSpecFileName(const Kind& kind, std::string_view file_name);

// A spec version "MAJOR.MINOR.PATCH" among those the CDI library knows.
struct Version {
  int major = 0;
  int minor = 0;
  int patch = 0;
  std::string ToString() const;
  friend auto operator<=>(const Version&, const Version&) = default;
};
// Parses a known version (0.3.0 … 1.1.0, optional leading 'v').
// kInvalidArgument for a malformed or unknown version.
StatusOr<Version> ParseVersion(std::string_view text);
inline constexpr Version kVersion030{0, 3, 0};
inline constexpr Version kVersion040{0, 4, 0};
inline constexpr Version kVersion050{0, 5, 0};
inline constexpr Version kVersion060{0, 6, 0};
inline constexpr Version kVersion070{0, 7, 0};
inline constexpr Version kVersion110{1, 1, 0};

}  // namespace migd::cdi

#endif  // MIGD_CDI_NAMES_H_
