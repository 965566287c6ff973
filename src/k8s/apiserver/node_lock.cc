#include "k8s/apiserver/node_lock.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace migd::k8s {
namespace {

// Consumes `n` digits from `s` at `*pos`.
std::optional<int> Digits(std::string_view s, size_t* pos, size_t n) {
  if (*pos + n > s.size()) return std::nullopt;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[*pos + i];
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  return v;
}

bool Expect(std::string_view s, size_t* pos, char c) {
  if (*pos >= s.size() || s[*pos] != c) return false;
  ++*pos;
  return true;
}

struct Civil {
  int year, month, day, hour, minute, second;
  int64_t nanos = 0;
  int offset_seconds = 0;
};

// Fractional seconds after the seconds field, as Go accepts when parsing.
bool Fraction(std::string_view s, size_t* pos, int64_t* nanos) {
  if (*pos >= s.size() || (s[*pos] != '.' && s[*pos] != ',')) return true;
  ++*pos;
  size_t digits = 0;
  int64_t scale = 100000000;
  while (*pos < s.size() && s[*pos] >= '0' && s[*pos] <= '9') {
    if (scale > 0) *nanos += (s[*pos] - '0') * scale;
    scale /= 10;
    ++*pos;
    ++digits;
  }
  return digits > 0;
}

bool Zone(std::string_view s, size_t* pos, int* offset) {
  if (Expect(s, pos, 'Z')) return true;
  if (*pos >= s.size() || (s[*pos] != '+' && s[*pos] != '-')) return false;
  const int sign = s[(*pos)++] == '-' ? -1 : 1;
  const auto hh = Digits(s, pos, 2);
  if (!hh || !Expect(s, pos, ':')) return false;
  const auto mm = Digits(s, pos, 2);
  if (!mm || *hh > 23 || *mm > 59) return false;
  *offset = sign * (*hh * 3600 + *mm * 60);
  return true;
}

std::optional<Civil> ParseCivil(std::string_view s) {
  size_t pos = 0;
  Civil c{};
  auto take = [&](size_t n, int* out, char after) {
    const auto v = Digits(s, &pos, n);
    if (!v) return false;
    *out = *v;
    return after == '\0' || Expect(s, &pos, after);
  };
  if (!take(4, &c.year, '-') || !take(2, &c.month, '-') || !take(2, &c.day, 'T') ||
      !take(2, &c.hour, ':') || !take(2, &c.minute, ':') || !take(2, &c.second, '\0')) {
    return std::nullopt;
  }
  if (!Fraction(s, &pos, &c.nanos) || !Zone(s, &pos, &c.offset_seconds) || pos != s.size()) {
    return std::nullopt;
  }
  const std::chrono::year_month_day ymd{std::chrono::year(c.year),
                                        std::chrono::month(static_cast<unsigned>(c.month)),
                                        std::chrono::day(static_cast<unsigned>(c.day))};
  if (!ymd.ok() || c.hour > 23 || c.minute > 59 || c.second > 59) return std::nullopt;
  return c;
}

}  // namespace

StatusOr<Clock::TimePoint> ParseRfc3339(std::string_view s) {
  const std::optional<Civil> c = ParseCivil(s);
  if (!c) {
    return InvalidArgumentError(absl::StrCat(
        "\"", std::string(s), "\" is not an RFC 3339 time (2006-01-02T15:04:05Z07:00)"));
  }
  const std::chrono::sys_days day{std::chrono::year_month_day{
      std::chrono::year(c->year), std::chrono::month(static_cast<unsigned>(c->month)),
      std::chrono::day(static_cast<unsigned>(c->day))}};
  const std::chrono::seconds of_day(c->hour * 3600 + c->minute * 60 + c->second -
                                    c->offset_seconds);
  return Clock::TimePoint(day.time_since_epoch() + of_day + std::chrono::nanoseconds(c->nanos));
}

StatusOr<NodeLock> ParseNodeLock(std::string_view text) {
  const std::string value(text);
  const std::vector<std::string> parts = absl::StrSplit(value, ',');
  if (parts.size() != 1 && parts.size() != 3) {
    return InvalidArgumentError(
        absl::StrCat("node lock \"", value, "\": expected 3 parts, got ", parts.size()));
  }
  StatusOr<Clock::TimePoint> taken = ParseRfc3339(parts[0]);
  if (!taken.ok()) return taken.status().WithContext(absl::StrCat("node lock \"", value, "\""));
  NodeLock lock;
  lock.taken = *taken;
  if (parts.size() == 3) {
    lock.ns = parts[1];
    lock.name = parts[2];
  }
  return lock;
}

std::string FormatNodeLock(Clock::TimePoint taken, std::string_view ns, std::string_view name) {
  return absl::StrCat(FormatRfc3339(taken), ",", std::string(ns), ",", std::string(name));
}

bool NodeLockExpired(const NodeLock& lock, Clock::TimePoint now, Clock::Duration expiry) {
  return now - lock.taken > expiry;
}

}  // namespace migd::k8s
