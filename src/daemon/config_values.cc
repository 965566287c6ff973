#include "daemon/config_values.h"

#include <absl/strings/ascii.h>
#include <absl/strings/numbers.h>
#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "cdi/names.h"
#include "k8s/resource_name.h"

namespace migd::daemon {
namespace {

// The longest path a unix socket address holds (sun_path, NUL included).
constexpr size_t kSunPathSize = sizeof(sockaddr_un{}.sun_path);

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

StatusOr<Duration> ParseDuration(std::string_view text) {
  if (text == "0") return Duration(0);
  if (text.empty()) return InvalidArgumentError("empty duration");
  Duration total(0);
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j == i || j - i > 9) return InvalidArgumentError("bad duration");
    const int64_t n = std::stoll(std::string(text.substr(i, j - i)));
    size_t k = j;
    while (k < text.size() && std::isalpha(static_cast<unsigned char>(text[k]))) ++k;
    const std::string_view unit = text.substr(j, k - j);
    if (unit == "ms") {
      total += Duration(n);
    } else if (unit == "s") {
      total += std::chrono::seconds(n);
    } else if (unit == "m") {
      total += std::chrono::minutes(n);
    } else if (unit == "h") {
      total += std::chrono::hours(n);
    } else if (unit == "d") {
      total += std::chrono::hours(24 * n);
    } else {
      return InvalidArgumentError("bad duration unit");
    }
    i = k;
  }
  return total;
}

std::string FormatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0";
  std::string out;
  const std::pair<int64_t, const char*> units[] = {
      {86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}};
  for (const auto& [size, name] : units) {
    if (ms >= size) {
      out += std::to_string(ms / size) + name;
      ms %= size;
    }
  }
  return out;
}

Status ValidateListenAddress(std::string_view listen) {
  if (listen.empty()) return OkStatus();
  const std::string hint =
      " (use host:port, e.g. 127.0.0.1:9400, [::1]:9400 or 0.0.0.0:9400 for every "
      "interface; \"\" disables metrics)";
  const Status not_an_address =
      InvalidArgumentError(Quote(listen) + " is not a listen address" + hint);
  std::string_view host, port;
  if (listen.front() == '[') {
    const size_t close = listen.find(']');
    if (close == std::string_view::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      return not_an_address;
    }
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
    if (host.empty() || host.find_first_not_of("0123456789abcdefABCDEF:.") != host.npos) {
      return not_an_address;
    }
  } else {
    const size_t colon = listen.rfind(':');
    if (colon == std::string_view::npos) {
      return InvalidArgumentError(Quote(listen) + " has no port" + hint);
    }
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
    if (host.empty() || host.find(':') != host.npos ||
        host.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != host.npos) {
      return not_an_address;
    }
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos) {
    return InvalidArgumentError(Quote(listen) + " has no valid port" + hint);
  }
  const int p = std::stoi(std::string(port));
  if (p > 65535) {
    return InvalidArgumentError(Quote(listen) + ": port " + std::to_string(p) +
                                " is out of range (0..65535; 0 picks a free port)");
  }
  return OkStatus();
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::optional<std::string> Nearest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  const std::string w = absl::AsciiStrToLower(std::string(word));
  std::optional<std::string> best;
  size_t best_d = 0;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(w, absl::AsciiStrToLower(c));
    if (!best || d < best_d) {
      best = c;
      best_d = d;
    }
  }
  const size_t limit = std::max<size_t>(2, w.size() / 3);
  if (best && best_d <= limit) return best;
  return std::nullopt;
}

Status CheckAbsolutePath(std::string_view value) {
  if (!value.empty() && value.front() == '/') return OkStatus();
  return InvalidArgumentError(Quote(value) + " must be an absolute path");
}

Status CheckAbsolutePathOrEmpty(std::string_view value) {
  return value.empty() ? OkStatus() : CheckAbsolutePath(value);
}

Status CheckSocketPath(std::string_view value) {
  if (Status s = CheckAbsolutePath(value); !s.ok()) return s;
  if (value.size() < kSunPathSize) return OkStatus();
  return InvalidArgumentError(Quote(value) + " is longer than a unix socket path may be (" +
                              std::to_string(kSunPathSize - 1) + " bytes)");
}

Status CheckNotEmptyLibrary(std::string_view value) {
  if (!value.empty()) return OkStatus();
  return InvalidArgumentError("must name the NVML library (e.g. libnvidia-ml.so.1)");
}

Status CheckGroupName(std::string_view value) {
  if (value.find_first_of(" \t:/") == std::string_view::npos) return OkStatus();
  return InvalidArgumentError(Quote(value) + " is not a group name or id");
}

Status CheckCdiVendor(std::string_view value) { return cdi::ValidateVendor(value); }

Status CheckCdiClass(std::string_view value) { return cdi::ValidateClass(value); }

Status CheckKubeletDir(std::string_view value) {
  if (Status s = CheckAbsolutePath(value); !s.ok()) return s;
  // <kubeletDir>/pod-resources/kubelet.sock and device-plugins/kubelet.sock
  // must fit in sun_path.
  constexpr std::string_view kLongestSocket = "/device-plugins/kubelet.sock";
  if (value.size() + kLongestSocket.size() < kSunPathSize) return OkStatus();
  return InvalidArgumentError(Quote(value) +
                              " is too long: kubelet's sockets below it would not fit in a unix "
                              "socket path");
}

Status CheckKubeletSocketDirOrEmpty(std::string_view value) {
  if (value.empty()) return OkStatus();
  if (Status s = CheckAbsolutePath(value); !s.ok()) return s;
  // <dir>/migd-mig.sock and <dir>/kubelet.sock must fit in sun_path.
  constexpr std::string_view kLongestSocket = "/migd-mig.sock";
  if (value.size() + kLongestSocket.size() < kSunPathSize) return OkStatus();
  return InvalidArgumentError(Quote(value) +
                              " is too long: the sockets in it would not fit in a unix socket "
                              "path");
}

Status CheckResourceName(std::string_view value) {
  // kubelet's own rule, so that a name kubelet would refuse fails here and
  // not in an endless Register retry.
  return k8s::CheckExtendedResourceName(value);
}

Status CheckNodeNameIfSet(std::string_view value) {
  if (value.empty() || k8s::IsDns1123Subdomain(value)) return OkStatus();
  return InvalidArgumentError(Quote(value) + " is not a Kubernetes node name");
}

Status CheckDraDriverName(std::string_view value) {
  // ResourceSlice spec.driver: a DNS subdomain of at most 63 characters
  // (k8s.io/api resource/v1 DriverNameMaxLength), ideally in a domain of
  // the driver's vendor.
  if (value.size() <= 63 && k8s::IsDns1123Subdomain(value)) return OkStatus();
  return InvalidArgumentError(Quote(value) +
                              " is not a DRA driver name (a lower-case DNS subdomain of at most "
                              "63 characters, e.g. mig.migd.io)");
}

namespace {

// A finite number in [lo, hi]; otherwise "<value> is not <what>".
StatusOr<double> ParseNumberIn(std::string_view value, double lo, double hi,
                               std::string_view what) {
  double v = 0;
  if (absl::SimpleAtod(absl::string_view(value.data(), value.size()), &v) && std::isfinite(v) &&
      v >= lo && v <= hi) {
    return v;
  }
  return InvalidArgumentError(Quote(value) + " is not " + std::string(what));
}

}  // namespace

StatusOr<double> ParseDriftThreshold(std::string_view value) {
  return ParseNumberIn(value, 0.01, 1,
                       "a drift threshold (use a number from 0.01 to 1, e.g. 0.05)");
}

StatusOr<double> ParseHalfLifeArrivals(std::string_view value) {
  return ParseNumberIn(value, 1, 1e9,
                       "a half-life in requests (use a number from 1 to 1000000000, e.g. 2000)");
}

StatusOr<int64_t> ParseMinArrivals(std::string_view value) {
  const absl::string_view text(value.data(), value.size());
  int64_t v = 0;
  if (absl::SimpleAtoi(text, &v) && v >= 1 && v <= 1000000) return v;
  return InvalidArgumentError(Quote(value) +
                              " is not a number of requests (use a whole number from 1 to "
                              "1000000, e.g. 50)");
}

StatusOr<ReuseMarginSetting> ParseReuseMargin(std::string_view value) {
  if (value == "auto") return ReuseMarginSetting{.automatic = true, .margin = std::nullopt};
  if (value == "off") return ReuseMarginSetting{};
  // planner::kMaxReuseMargin (planner_wiring.cc asserts they agree).
  StatusOr<double> v =
      ParseNumberIn(value, 0, 1000, "a reuse margin (use auto, off or a number from 0 to 1000)");
  if (!v.ok()) return v.status();
  return ReuseMarginSetting{.automatic = false, .margin = *v};
}

Status CheckDriftThreshold(std::string_view value) { return ParseDriftThreshold(value).status(); }

Status CheckReuseMargin(std::string_view value) { return ParseReuseMargin(value).status(); }

Status CheckHalfLifeArrivals(std::string_view value) {
  return ParseHalfLifeArrivals(value).status();
}

Status CheckMinArrivals(std::string_view value) { return ParseMinArrivals(value).status(); }

Status CheckSocketMode(uint32_t mode) {
  const std::string hint = " (use \"0600\", or \"0660\" with api.socketGroup)";
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", mode);
  if ((mode & ~0660u) != 0) {
    return InvalidArgumentError(Quote(text) +
                                " gives other users or execute rights to the API socket" + hint);
  }
  if ((mode & 0600u) != 0600u) {
    return InvalidArgumentError(Quote(text) + " must give the owner read and write access" + hint);
  }
  return OkStatus();
}

}  // namespace migd::daemon
