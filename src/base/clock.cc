#include "base/clock.h"

#include <ctime>

namespace migd {

Clock& Clock::Real() {
  static RealClock* clock = new RealClock();
  return *clock;
}

Clock::TimePoint RealClock::Now() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
}

Clock::MonoPoint RealClock::MonotonicNow() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
}

namespace {
// 2026-01-01T00:00:00Z.
constexpr int64_t kFakeEpochSeconds = 1767225600;
}  // namespace

FakeClock::FakeClock() : FakeClock(TimePoint(std::chrono::seconds(kFakeEpochSeconds))) {}

FakeClock::FakeClock(TimePoint wall_start)
    : wall_(wall_start), mono_(MonoPoint(std::chrono::seconds(1000))) {}

Clock::TimePoint FakeClock::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wall_;
}

Clock::MonoPoint FakeClock::MonotonicNow() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mono_;
}

void FakeClock::Advance(Duration d) {
  std::lock_guard<std::mutex> lock(mu_);
  wall_ += d;
  mono_ += d;
}

void FakeClock::SetWall(TimePoint t) {
  std::lock_guard<std::mutex> lock(mu_);
  wall_ = t;
}

int64_t ToUnixSeconds(Clock::TimePoint t) {
  // floor, not duration_cast: the latter truncates towards zero, which puts
  // instants just before the epoch one second late.
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}

std::string FormatRfc3339(Clock::TimePoint t) {
  std::time_t secs = static_cast<std::time_t>(ToUnixSeconds(t));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf, n);
}

}  // namespace migd
