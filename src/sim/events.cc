#include "sim/events.h"

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>

#include "base/status_macros.h"
#include "driver/nvml/nvml_abi.h"

namespace migd::sim {
namespace {

namespace abi = ::migd::nvml_abi;

// Debian's abseil has its own string_view type: adapters at the boundary.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }
std::string Str(absl::string_view s) { return std::string(s.data(), s.size()); }

std::optional<uint64_t> Number(absl::string_view s) {
  uint64_t v = 0;
  if (s.empty() || !absl::ascii_isdigit(s.front()) || !absl::SimpleAtoi(s, &v)) {
    return std::nullopt;
  }
  return v;
}

std::optional<uint32_t> Number32(absl::string_view s) {
  std::optional<uint64_t> v = Number(s);
  if (!v || *v > 0xFFFFFFFEu) return std::nullopt;  // 0xFFFFFFFF means "none"
  return static_cast<uint32_t>(*v);
}

// "<gpu>[/<gi>[/<ci>]]" into `spec`; `instances` false allows "<gpu>" only.
bool ParseTarget(absl::string_view target, bool instances, EventSpec& spec) {
  std::vector<absl::string_view> parts = absl::StrSplit(target, '/');
  if (parts.size() > (instances ? 3u : 1u)) return false;
  std::optional<uint32_t> gpu = Number32(parts[0]);
  if (!gpu) return false;
  spec.gpu = *gpu;
  if (parts.size() > 1) {
    spec.gi = Number32(parts[1]);
    if (!spec.gi) return false;
  }
  if (parts.size() > 2) {
    spec.ci = Number32(parts[2]);
    if (!spec.ci) return false;
  }
  return true;
}

// The kinds named by a bare word before "@<gpu>".
std::optional<EventSpecKind> GpuEventKindNamed(absl::string_view what) {
  if (what == "mig-config") return EventSpecKind::kMigConfigChange;
  if (what == "gpu-lost") return EventSpecKind::kGpuLost;
  if (what == "gpu-back") return EventSpecKind::kGpuBack;
  if (what == "gpu-reset") return EventSpecKind::kGpuReset;
  return std::nullopt;
}

StatusOr<EventSpec> ParseEntry(absl::string_view entry, bool allow_delay) {
  const std::string text = Str(entry);
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("event '" + text + "': " + why +
                                " (expected xid=<N>@<gpu>[/<gi>[/<ci>]][+<ms>], "
                                "mig-config@<gpu>[+<ms>], gpu-lost@<gpu>[+<ms>], gpu-back@<gpu>[+<ms>] or "
                                "gpu-reset@<gpu>[+<ms>])");
  };
  EventSpec spec;
  absl::string_view rest = entry;
  if (const size_t plus = rest.rfind('+'); plus != absl::string_view::npos) {
    if (!allow_delay) return bad("a delay is only accepted in MIGD_SIM_EVENTS");
    std::optional<uint64_t> ms = Number(rest.substr(plus + 1));
    if (!ms || *ms > 24u * 3600u * 1000u) return bad("the delay must be 0..86400000 ms");
    spec.delay_ms = static_cast<uint32_t>(*ms);
    rest = rest.substr(0, plus);
  }
  const size_t at = rest.find('@');
  if (at == absl::string_view::npos) return bad("no @<gpu>");
  absl::string_view what = rest.substr(0, at);
  absl::string_view target = rest.substr(at + 1);
  if (absl::ConsumePrefix(&what, "xid=")) {
    spec.kind = EventSpecKind::kXid;
    std::optional<uint64_t> xid = Number(what);
    if (!xid) return bad("the Xid must be a decimal number");
    spec.xid = *xid;
    if (!ParseTarget(target, true, spec)) return bad("bad <gpu>[/<gi>[/<ci>]]");
  } else if (std::optional<EventSpecKind> kind = GpuEventKindNamed(what)) {
    spec.kind = *kind;
    if (!ParseTarget(target, false, spec)) return bad("bad <gpu>");
  } else {
    return bad("unknown event kind");
  }
  return spec;
}

}  // namespace

StatusOr<std::vector<EventSpec>> ParseEventSpecs(std::string_view text, bool allow_delay) {
  std::vector<EventSpec> out;
  for (absl::string_view entry : absl::StrSplit(Av(text), ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) continue;
    MIGD_ASSIGN_OR_RETURN(EventSpec spec, ParseEntry(entry, allow_delay));
    out.push_back(spec);
  }
  if (out.empty()) return InvalidArgumentError("no event in '" + std::string(text) + "'");
  return out;
}

uint64_t DefaultSupportedEventTypes(bool mig_capable, bool legacy) {
  uint64_t types = abi::kEventTypeSingleBitEccError | abi::kEventTypeDoubleBitEccError |
                   abi::kEventTypePState | abi::kEventTypeXidCriticalError |
                   abi::kEventTypeClock;
  if (mig_capable) types |= abi::kEventMigConfigChange;
  if (!legacy) types |= abi::kEventTypeGpuUnavailableError;
  return types;
}

uint64_t KnownEventTypes(bool legacy) {
  return legacy ? abi::kEventTypeAllR470 : abi::kEventTypeAll;
}

}  // namespace migd::sim
