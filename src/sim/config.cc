#include "sim/config.h"

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>

#include <cstdlib>
#include <optional>
#include <random>
#include <utility>

#include "base/status_macros.h"
#include "driver/nvml/nvml_abi.h"
#include "sim/nvml_names.h"

namespace migd::sim {
namespace {

// Debian's abseil has its own string_view type: adapters at the boundary.
std::string_view Sv(absl::string_view s) { return std::string_view(s.data(), s.size()); }
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (absl::string_view piece : absl::StrSplit(Av(text), sep)) out.push_back(Sv(piece));
  return out;
}

std::string_view Trim(std::string_view s) { return Sv(absl::StripAsciiWhitespace(Av(s))); }

// Unsigned decimal, or hex with a 0x prefix (digits only: no sign, no spaces).
std::optional<uint64_t> ParseU64(std::string_view s) {
  absl::string_view digits = Av(s);
  const bool hex = absl::ConsumePrefix(&digits, "0x") || absl::ConsumePrefix(&digits, "0X");
  if (digits.empty() || !absl::ascii_isxdigit(digits.front()) ||
      !absl::ascii_isxdigit(digits.back())) {
    return std::nullopt;
  }
  uint64_t v = 0;
  if (hex ? !absl::SimpleHexAtoi(digits, &v) : !absl::SimpleAtoi(digits, &v)) return std::nullopt;
  return v;
}

bool IsKnownFunction(std::string_view name) {
  for (std::string_view f : SimulatedNvmlFunctions()) {
    if (f == name) return true;
  }
  return false;
}

Status Prefixed(const char* var, const Status& s) {
  return Status(s.code(), std::string(var) + ": " + std::string(s.message()));
}

}  // namespace

StatusOr<std::vector<GpuSpec>> ParseGpuSpecs(std::string_view text) {
  std::vector<GpuSpec> out;
  if (Trim(text).empty()) return InvalidArgumentError("empty GPU list");
  for (std::string_view entry : Split(text, ',')) {
    entry = Trim(entry);
    std::vector<std::string_view> parts = Split(entry, ':');
    GpuSpec spec;
    spec.model_key = std::string(parts[0]);
    if (spec.model_key.empty()) {
      return InvalidArgumentError("entry '" + std::string(entry) + "' has no model key");
    }
    if (parts.size() > 1) {
      std::optional<uint64_t> n = ParseU64(parts[1]);
      if (!n || *n == 0 || *n > kMaxGpus) {
        return InvalidArgumentError("entry '" + std::string(entry) + "': count must be 1.." +
                                    std::to_string(kMaxGpus));
      }
      spec.count = static_cast<uint32_t>(*n);
    }
    for (size_t i = 2; i < parts.size(); ++i) {
      if (parts[i] == "mig-off") {
        spec.mig_enabled = false;
      } else if (parts[i] == "no-permission") {
        spec.permission = false;
      } else {
        return InvalidArgumentError("entry '" + std::string(entry) + "': unknown option '" +
                                    std::string(parts[i]) + "' (known: mig-off, no-permission)");
      }
    }
    out.push_back(std::move(spec));
  }
  return out;
}

StatusOr<GiIdPolicy> ParseGiIdPolicy(std::string_view text) {
  text = Trim(text);
  if (text == "deterministic") return GiIdPolicy{};
  if (text.starts_with("shuffle:")) {
    std::optional<uint64_t> seed = ParseU64(text.substr(8));
    if (seed) return GiIdPolicy{GiIdMode::kShuffle, *seed};
  }
  return InvalidArgumentError("'" + std::string(text) +
                              "': expected \"deterministic\" or \"shuffle:<seed>\"");
}

StatusOr<FaultPlan> FaultPlan::Parse(std::string_view text) {
  FaultPlan plan;
  if (Trim(text).empty()) return plan;
  for (std::string_view entry : Split(text, ',')) {
    entry = Trim(entry);
    const std::string e(entry);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgumentError("'" + e + "': expected <nvmlFunction>=<ERROR>[@N|@N+]");
    }
    FaultRule rule;
    rule.function = std::string(Trim(entry.substr(0, eq)));
    if (!IsKnownFunction(rule.function)) {
      return InvalidArgumentError("'" + e + "': unknown function '" + rule.function + "'");
    }
    std::string_view rest = Trim(entry.substr(eq + 1));
    size_t at = rest.find('@');
    std::string_view error = rest.substr(0, at);
    if (at != std::string_view::npos) {
      std::string_view n = rest.substr(at + 1);
      if (n.ends_with('+')) {
        rule.and_later = true;
        n.remove_suffix(1);
      }
      std::optional<uint64_t> nth = ParseU64(n);
      if (!nth || *nth == 0) {
        return InvalidArgumentError("'" + e + "': @N needs a call number >= 1");
      }
      rule.nth = *nth;
    }
    if (error == "CRASH") {
      rule.action = FaultAction::kCrash;
    } else if (error == "CRASH_AFTER") {
      rule.action = FaultAction::kCrashAfter;
    } else if (std::optional<nvmlReturn_t> code = ParseNvmlError(error)) {
      rule.code = *code;
    } else {
      return InvalidArgumentError("'" + e + "': unknown error '" + std::string(error) +
                                  "' (an NVML error name without NVML_ERROR_, a number > 0, "
                                  "CRASH or CRASH_AFTER)");
    }
    plan.rules_.push_back(std::move(rule));
  }
  return plan;
}

std::optional<FaultRule> FaultPlan::Match(std::string_view function, uint64_t call_number) const {
  for (const FaultRule& r : rules_) {
    if (r.function != function) continue;
    if (r.nth == 0 || call_number == r.nth || (r.and_later && call_number > r.nth)) return r;
  }
  return std::nullopt;
}

StatusOr<std::map<std::string, uint32_t, std::less<>>> ParseLatencies(std::string_view text) {
  std::map<std::string, uint32_t, std::less<>> out;
  if (Trim(text).empty()) return out;
  for (std::string_view entry : Split(text, ',')) {
    entry = Trim(entry);
    const std::string e(entry);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos)
      return InvalidArgumentError("'" + e + "': expected <fn>=<ms>");
    std::string fn(Trim(entry.substr(0, eq)));
    if (fn != "*" && !IsKnownFunction(fn)) {
      return InvalidArgumentError("'" + e + "': unknown function '" + fn + "'");
    }
    std::optional<uint64_t> ms = ParseU64(Trim(entry.substr(eq + 1)));
    if (!ms || *ms > kMaxLatencyMs) {
      return InvalidArgumentError("'" + e + "': milliseconds must be 0.." +
                                  std::to_string(kMaxLatencyMs));
    }
    out[fn] = static_cast<uint32_t>(*ms);
  }
  return out;
}

uint32_t SimConfig::LatencyFor(std::string_view function) const {
  if (auto it = latency_ms.find(function); it != latency_ms.end()) return it->second;
  if (auto it = latency_ms.find("*"); it != latency_ms.end()) return it->second;
  return 0;
}

namespace {

// One of `names` (a header-open knob's values); `var` names the knob.
template <typename E, size_t N>
StatusOr<E> ParseChoice(const char* var, std::string_view text,
                        const std::pair<std::string_view, E> (&names)[N]) {
  text = Trim(text);
  std::string known;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  return InvalidArgumentError(std::string(var) + ": '" + std::string(text) + "': expected one of " +
                              known);
}

Status ParseHeaderOpenKnobs(const std::function<const char*(const char*)>& get, SimConfig& c) {
  static constexpr std::pair<std::string_view, MigIndexMode> kIndex[] = {
      {"shuffled", MigIndexMode::kShuffled},
      {"dense", MigIndexMode::kDense},
      {"sparse", MigIndexMode::kSparse}};
  static constexpr std::pair<std::string_view, LegacyMigUuidLookup> kLegacy[] = {
      {"accepted", LegacyMigUuidLookup::kAccepted},
      {"not-found", LegacyMigUuidLookup::kNotFound},
      {"invalid-argument", LegacyMigUuidLookup::kInvalidArgument}};
  static constexpr std::pair<std::string_view, ParentInstanceIdAnswer> kParent[] = {
      {"not-supported", ParentInstanceIdAnswer::kNotSupported},
      {"invalid-argument", ParentInstanceIdAnswer::kInvalidArgument}};
  if (const char* v = get(kEnvMigIndex)) {
    MIGD_ASSIGN_OR_RETURN(c.mig_index, ParseChoice(kEnvMigIndex, v, kIndex));
  }
  if (const char* v = get(kEnvLegacyMigUuid)) {
    MIGD_ASSIGN_OR_RETURN(c.legacy_mig_uuid, ParseChoice(kEnvLegacyMigUuid, v, kLegacy));
  }
  if (const char* v = get(kEnvParentInstanceId)) {
    MIGD_ASSIGN_OR_RETURN(c.parent_instance_id, ParseChoice(kEnvParentInstanceId, v, kParent));
  }
  if (const char* v = get(kEnvNewCiVisibility)) {
    const std::string_view s = Trim(v);
    std::optional<uint64_t> n;
    if (s == "immediate") {
      n = 0;
    } else if (s.starts_with("after-walks:")) {
      n = ParseU64(s.substr(12));
      if (n && (*n == 0 || *n > kMaxHiddenWalks)) n.reset();
    }
    if (!n) {
      return InvalidArgumentError(std::string(kEnvNewCiVisibility) + ": '" + std::string(s) +
                                  "': expected immediate or after-walks:<1.." +
                                  std::to_string(kMaxHiddenWalks) + ">");
    }
    c.new_ci_hidden_walks = static_cast<uint32_t>(*n);
  }
  return OkStatus();
}

// The event knobs (docs/simulator.md, "Events").
Status ParseEventKnobs(const std::function<const char*(const char*)>& get, SimConfig& c) {
  static constexpr std::pair<std::string_view, EventWaitZero> kZero[] = {
      {"immediate", EventWaitZero::kImmediate}, {"forever", EventWaitZero::kForever}};
  static constexpr std::pair<std::string_view, EventCoalesce> kCoalesce[] = {
      {"each", EventCoalesce::kEach}, {"last", EventCoalesce::kLast}};
  static constexpr std::pair<std::string_view, GpuLostReport> kLost[] = {
      {"event", GpuLostReport::kEvent}, {"wait-error", GpuLostReport::kWaitError}};
  static constexpr std::pair<std::string_view, uint64_t> kTypes[] = {
      {"xid", nvml_abi::kEventTypeXidCriticalError},
      {"mig-config", nvml_abi::kEventMigConfigChange},
      {"gpu-unavailable", nvml_abi::kEventTypeGpuUnavailableError}};
  if (const char* v = get(kEnvEventWaitZero)) {
    MIGD_ASSIGN_OR_RETURN(c.event_wait_zero, ParseChoice(kEnvEventWaitZero, v, kZero));
  }
  if (const char* v = get(kEnvEventCoalesce)) {
    MIGD_ASSIGN_OR_RETURN(c.event_coalesce, ParseChoice(kEnvEventCoalesce, v, kCoalesce));
  }
  if (const char* v = get(kEnvGpuLost)) {
    MIGD_ASSIGN_OR_RETURN(c.gpu_lost, ParseChoice(kEnvGpuLost, v, kLost));
  }
  static constexpr std::pair<std::string_view, LostCalls> kLostCalls[] = {
      {"gpu-is-lost", LostCalls::kGpuIsLost}, {"documented", LostCalls::kDocumented}};
  if (const char* v = get(kEnvLostCalls)) {
    MIGD_ASSIGN_OR_RETURN(c.lost_calls, ParseChoice(kEnvLostCalls, v, kLostCalls));
  }
  if (const char* v = get(kEnvUnsupportedEvents)) {
    for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
      const absl::string_view t = absl::StripAsciiWhitespace(part);
      MIGD_ASSIGN_OR_RETURN(uint64_t bit, ParseChoice(kEnvUnsupportedEvents,
                                                      std::string_view(t.data(), t.size()), kTypes));
      c.unsupported_event_types |= bit;
    }
  }
  return OkStatus();
}

// MIGD_SIM_GPUS, with its model keys checked against `catalog`.
StatusOr<std::vector<GpuSpec>> ParseGpusKnob(const char* v, const mig::Catalog& catalog) {
  StatusOr<std::vector<GpuSpec>> specs = ParseGpuSpecs(v);
  if (!specs.ok()) return Prefixed(kEnvGpus, specs.status());
  uint32_t total = 0;
  for (const GpuSpec& s : *specs) {
    total += s.count;
    if (catalog.FindModel(s.model_key) != nullptr) continue;
    std::string known;
    for (const mig::GpuModel& m : catalog.models()) known += (known.empty() ? "" : ", ") + m.key;
    return InvalidArgumentError(std::string(kEnvGpus) + ": unknown GPU model '" + s.model_key +
                                "' (known: " + known + ")");
  }
  if (total > kMaxGpus) {
    return InvalidArgumentError(std::string(kEnvGpus) + ": more than " + std::to_string(kMaxGpus) +
                                " GPUs");
  }
  return specs;
}

}  // namespace

StatusOr<SimConfig> SimConfigFromEnv(const mig::Catalog& catalog, const EnvLookup& getenv) {
  auto get = [&](const char* name) -> const char* {
    return getenv ? getenv(name) : std::getenv(name);
  };
  SimConfig c;
  if (const char* v = get(kEnvState)) c.state_path = v;

  if (const char* v = get(kEnvGpus)) {
    MIGD_ASSIGN_OR_RETURN(c.gpus, ParseGpusKnob(v, catalog));
  }
  if (const char* v = get(kEnvGiIds)) {
    StatusOr<GiIdPolicy> p = ParseGiIdPolicy(v);
    if (!p.ok()) return Prefixed(kEnvGiIds, p.status());
    c.gi_id_policy = *p;
  }
  if (const char* v = get(kEnvNonce)) {
    std::optional<uint64_t> n = ParseU64(Trim(v));
    if (!n) {
      return InvalidArgumentError(std::string(kEnvNonce) + ": '" + v +
                                  "' is not an unsigned decimal or 0x hex number");
    }
    c.nonce = *n;
  }
  if (const char* v = get(kEnvProcRoot)) {
    c.proc_root = v;
    if (!c.proc_root.empty() && c.proc_root.front() != '/') {
      return InvalidArgumentError(std::string(kEnvProcRoot) + ": '" + c.proc_root +
                                  "' is not an absolute path");
    }
    while (c.proc_root.size() > 1 && c.proc_root.back() == '/') c.proc_root.pop_back();
  }
  if (const char* v = get(kEnvFaults)) {
    StatusOr<FaultPlan> plan = FaultPlan::Parse(v);
    if (!plan.ok()) return Prefixed(kEnvFaults, plan.status());
    c.faults = std::move(plan).value();
  }
  if (const char* v = get(kEnvLatency)) {
    auto lat = ParseLatencies(v);
    if (!lat.ok()) return Prefixed(kEnvLatency, lat.status());
    c.latency_ms = std::move(lat).value();
  }
  if (const char* v = get(kEnvProfileInfoMaxVersion)) {
    std::string_view s = Trim(v);
    if (s == "2") {
      c.profile_info_max_version = 2;
    } else if (s == "3") {
      c.profile_info_max_version = 3;
    } else {
      return InvalidArgumentError(std::string(kEnvProfileInfoMaxVersion) + ": '" + v +
                                  "': expected 2 or 3");
    }
  }
  if (const char* v = get(kEnvFsync)) {
    std::string_view s = Trim(v);
    if (s == "0") {
      c.fsync = false;
    } else if (s == "1") {
      c.fsync = true;
    } else {
      return InvalidArgumentError(std::string(kEnvFsync) + ": '" + v + "': expected 0 or 1");
    }
  }
  MIGD_RETURN_IF_ERROR(ParseHeaderOpenKnobs(get, c));
  MIGD_RETURN_IF_ERROR(ParseEventKnobs(get, c));
  return c;
}

StatusOr<MachineOptions> MachineOptionsFromConfig(const SimConfig& config) {
  if (!config.gpus) {
    return FailedPreconditionError(std::string(kEnvGpus) +
                                   " is not set, so there is no machine to create");
  }
  MachineOptions o;
  o.gpus = *config.gpus;
  o.gi_id_policy = config.gi_id_policy;
  if (config.nonce) {
    o.nonce = *config.nonce;
  } else {
    std::random_device rd;
    o.nonce = (uint64_t{rd()} << 32) ^ rd();
  }
  o.proc_root = config.proc_root;
  o.driver_version = config.driver_version;
  o.nvml_version = config.nvml_version;
  return o;
}

}  // namespace migd::sim
