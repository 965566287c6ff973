#include "cdi/names.h"

#include <array>

#include "base/status_macros.h"

namespace migd::cdi {
namespace {

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsLetter(c) || IsDigit(c); }

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Checks `name` against first/last/inner character rules.
Status CheckName(std::string_view what, std::string_view name, bool digit_first_ok,
                 std::string_view inner_extra) {
  if (name.empty()) return InvalidArgumentError("invalid CDI " + std::string(what) + ": empty");
  const char first = name.front();
  if (!(IsLetter(first) || (digit_first_ok && IsDigit(first)))) {
    return InvalidArgumentError("invalid CDI " + std::string(what) + " " + Quote(name) +
                                ": must start with a letter" + (digit_first_ok ? " or digit" : ""));
  }
  if (name.size() > 1 && !IsAlnum(name.back())) {
    return InvalidArgumentError("invalid CDI " + std::string(what) + " " + Quote(name) +
                                ": must end with a letter or digit");
  }
  for (size_t i = 1; i + 1 < name.size(); ++i) {
    const char c = name[i];
    if (!IsAlnum(c) && inner_extra.find(c) == std::string_view::npos) {
      return InvalidArgumentError("invalid CDI " + std::string(what) + " " + Quote(name) +
                                  ": invalid character '" + std::string(1, c) + "' at " +
                                  std::to_string(i));
    }
  }
  return OkStatus();
}

constexpr std::array<Version, 8> kKnownVersions = {
    {{0, 3, 0}, {0, 4, 0}, {0, 5, 0}, {0, 6, 0}, {0, 7, 0}, {0, 8, 0}, {1, 0, 0}, {1, 1, 0}}};

}  // namespace

Status ValidateVendor(std::string_view vendor) { return CheckName("vendor", vendor, false, "_.-"); }

Status ValidateClass(std::string_view device_class, bool allow_dots) {
  return CheckName("class", device_class, false, allow_dots ? "_.-" : "_-");
}

Status ValidateKind(const Kind& kind, bool allow_dots_in_class) {
  MIGD_RETURN_IF_ERROR(ValidateVendor(kind.vendor));
  return ValidateClass(kind.device_class, allow_dots_in_class);
}

Status ValidateDeviceName(std::string_view name) {
  return CheckName("device name", name, true, "_.:-");
}

StatusOr<QualifiedDevice> ParseQualifiedName(std::string_view qualified) {
  if (qualified.starts_with('/')) {
    return InvalidArgumentError(Quote(qualified) + " is a path, not a CDI device name");
  }
  const size_t eq = qualified.find('=');
  if (eq == std::string_view::npos) {
    return InvalidArgumentError(Quote(qualified) + ": missing '=' in CDI device name");
  }
  const std::string_view kind = qualified.substr(0, eq);
  const size_t slash = kind.find('/');
  if (slash == std::string_view::npos) {
    return InvalidArgumentError(Quote(qualified) + ": missing '/' in CDI kind");
  }
  QualifiedDevice out;
  out.kind.vendor = std::string(kind.substr(0, slash));
  out.kind.device_class = std::string(kind.substr(slash + 1));
  out.name = std::string(qualified.substr(eq + 1));
  MIGD_RETURN_IF_ERROR(ValidateKind(out.kind, /*allow_dots_in_class=*/true));
  MIGD_RETURN_IF_ERROR(ValidateDeviceName(out.name));
  return out;
}

StatusOr<std::string> DeviceNameForMigUuid(std::string_view mig_uuid) {
  Status s = ValidateDeviceName(mig_uuid);
  if (!s.ok()) return std::move(s).WithContext("MIG UUID cannot be a CDI device name");
  return std::string(mig_uuid);
}

std::string SpecFilePrefix(const Kind& kind) { return kind.vendor + "-" + kind.device_class + "_"; }

std::string SpecFileName(const Kind& kind, std::string_view device) {
  return SpecFilePrefix(kind) + std::string(device) + ".json";
}

std::optional<std::string> DeviceFromSpecFileName(const Kind& kind, std::string_view file_name) {
  const std::string prefix = SpecFilePrefix(kind);
  constexpr std::string_view kSuffix = ".json";
  if (!file_name.starts_with(prefix) || !file_name.ends_with(kSuffix)) return std::nullopt;
  if (file_name.size() <= prefix.size() + kSuffix.size()) return std::nullopt;
  std::string device(
      file_name.substr(prefix.size(), file_name.size() - prefix.size() - kSuffix.size()));
  if (!ValidateDeviceName(device).ok()) return std::nullopt;
  return device;
}

std::string Version::ToString() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

StatusOr<Version> ParseVersion(std::string_view text) {
  std::string_view t = text;
  if (t.starts_with('v')) t.remove_prefix(1);
  for (const Version& v : kKnownVersions) {
    if (t == v.ToString()) return v;
  }
  return InvalidArgumentError("invalid CDI version " + Quote(text) + " (known: 0.3.0 … 1.1.0)");
}

}  // namespace migd::cdi
