#include "base/clock.h"

#include <gtest/gtest.h>

#include <chrono>

namespace migd {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

Clock::TimePoint At(int64_t unix_seconds) { return Clock::TimePoint(seconds(unix_seconds)); }

TEST(FakeClockTest, StartsAtTheDocumentedInstants) {
  FakeClock clock;
  EXPECT_EQ(FormatRfc3339(clock.Now()), "2026-01-01T00:00:00Z");
  EXPECT_EQ(ToUnixSeconds(clock.Now()), 1767225600);
  EXPECT_EQ(clock.MonotonicNow().time_since_epoch(), seconds(1000));
}

TEST(FakeClockTest, StartsWhereTold) {
  FakeClock clock(At(86400));
  EXPECT_EQ(FormatRfc3339(clock.Now()), "1970-01-02T00:00:00Z");
  EXPECT_EQ(clock.MonotonicNow().time_since_epoch(), seconds(1000));
}

TEST(FakeClockTest, StandsStillUntilAdvanced) {
  FakeClock clock;
  const Clock::TimePoint wall = clock.Now();
  const Clock::MonoPoint mono = clock.MonotonicNow();
  EXPECT_EQ(clock.Now(), wall);
  EXPECT_EQ(clock.MonotonicNow(), mono);
}

TEST(FakeClockTest, AdvanceMovesBothClocks) {
  FakeClock clock;
  const Clock::TimePoint wall = clock.Now();
  const Clock::MonoPoint mono = clock.MonotonicNow();
  clock.Advance(milliseconds(1500));
  EXPECT_EQ(clock.Now() - wall, milliseconds(1500));
  EXPECT_EQ(clock.MonotonicNow() - mono, milliseconds(1500));
  clock.Advance(hours(24));
  EXPECT_EQ(FormatRfc3339(clock.Now()), "2026-01-02T00:00:01Z");
  clock.Advance(Clock::Duration::zero());
  EXPECT_EQ(clock.MonotonicNow() - mono, hours(24) + milliseconds(1500));
}

TEST(FakeClockTest, SetWallLeavesMonotonicAlone) {
  FakeClock clock;
  const Clock::MonoPoint mono = clock.MonotonicNow();
  clock.SetWall(At(0));
  EXPECT_EQ(ToUnixSeconds(clock.Now()), 0);
  EXPECT_EQ(clock.MonotonicNow(), mono);
  // A backwards wall step is allowed; monotonic time never goes back.
  clock.Advance(seconds(5));
  EXPECT_EQ(ToUnixSeconds(clock.Now()), 5);
  EXPECT_EQ(clock.MonotonicNow() - mono, seconds(5));
}

TEST(FakeClockTest, UsableThroughTheInterface) {
  FakeClock fake;
  Clock& clock = fake;
  fake.Advance(seconds(2));
  EXPECT_EQ(ToUnixSeconds(clock.Now()), 1767225602);
}

TEST(ClockTest, FormatRfc3339) {
  EXPECT_EQ(FormatRfc3339(At(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(At(1795937530)), "2026-11-29T07:32:10Z");
  // Leap day and end of a year.
  EXPECT_EQ(FormatRfc3339(At(1709208000)), "2024-02-29T12:00:00Z");
  EXPECT_EQ(FormatRfc3339(At(1767225599)), "2025-12-31T23:59:59Z");
  // Sub-second parts are truncated, not rounded.
  EXPECT_EQ(FormatRfc3339(At(1767225600) + milliseconds(999)), "2026-01-01T00:00:00Z");
}

TEST(ClockTest, BeforeTheEpochRoundsDown) {
  // Half a second before the epoch is still in 1969.
  EXPECT_EQ(ToUnixSeconds(At(0) - milliseconds(500)), -1);
  EXPECT_EQ(FormatRfc3339(At(0) - milliseconds(500)), "1969-12-31T23:59:59Z");
  EXPECT_EQ(ToUnixSeconds(At(-2)), -2);
}

TEST(ClockTest, ToUnixSecondsTruncatesSubSeconds) {
  EXPECT_EQ(ToUnixSeconds(At(10) + milliseconds(999)), 10);
}

TEST(RealClockTest, IsOneProcessWideInstance) {
  EXPECT_EQ(&Clock::Real(), &Clock::Real());
  // Sanity, not timing: the real clock reads a plausible date.
  EXPECT_GT(ToUnixSeconds(Clock::Real().Now()), 1577836800);  // 2020-01-01
  const Clock::MonoPoint a = Clock::Real().MonotonicNow();
  const Clock::MonoPoint b = Clock::Real().MonotonicNow();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace migd
