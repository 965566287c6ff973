// File: base/clock.h
//
// Clock: the seam for time. Production code takes a Clock& and never calls
// std::chrono::*::now() itself, so tests drive time with FakeClock.
//
// Thread-safety: all implementations are safe for concurrent use.
#ifndef MIGD_BASE_CLOCK_H_
#define MIGD_BASE_CLOCK_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace migd {

class Clock {
 public:
  using Duration = std::chrono::nanoseconds;
  using TimePoint = std::chrono::time_point<std::chrono::system_clock, Duration>;
  using MonoPoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;

  virtual ~Clock() = default;
  // Wall-clock time, for timestamps in records and logs.
  virtual TimePoint Now() const = 0;
  // Monotonic time, for durations and deadlines.
  virtual MonoPoint MonotonicNow() const = 0;

  // The process-wide real clock. Never destroyed.
  static Clock& Real();
};

class RealClock final : public Clock {
 public:
  TimePoint Now() const override;
  MonoPoint MonotonicNow() const override;
};

// A clock that moves only when told to. Starts at 2026-01-01T00:00:00Z wall
// time and monotonic time 1000 s unless given other values.
class FakeClock final : public Clock {
 public:
  FakeClock();
  explicit FakeClock(TimePoint wall_start);
  TimePoint Now() const override;
  MonoPoint MonotonicNow() const override;
  // Moves both clocks forward by `d`. REQUIRES: d >= 0.
  void Advance(Duration d);
  // Sets the wall clock only (a wall-clock step, as after an NTP correction).
  void SetWall(TimePoint t);

 private:
  mutable std::mutex mu_;
  TimePoint wall_;
  MonoPoint mono_;
};

// Seconds since the Unix epoch, as a signed 64-bit integer (for records).
int64_t ToUnixSeconds(Clock::TimePoint t);
// RFC 3339 UTC, e.g. "2026-11-29T07:32:10Z".
std::string FormatRfc3339(Clock::TimePoint t);

}  // namespace migd

#endif  // MIGD_BASE_CLOCK_H_
