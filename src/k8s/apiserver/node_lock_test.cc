// HAMi's node lock (pkg/util/nodelock/nodelock.go) and Go's RFC 3339.
#include "k8s/apiserver/node_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace migd::k8s {
namespace {

using ::migd::testing::StatusIs;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

Clock::TimePoint At(int64_t unix_seconds) { return Clock::TimePoint(seconds(unix_seconds)); }

TEST(Rfc3339Test, ParsesGoRfc3339WithZonesAndFractions) {
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00Z").value(), At(0));
  EXPECT_EQ(ParseRfc3339("2026-11-29T11:00:00Z").value(), At(1795950000));
  // The same instant in HAMi's local-time form (time.Now().Format(RFC3339)).
  EXPECT_EQ(ParseRfc3339("2026-11-29T19:00:00+08:00").value(), At(1795950000));
  EXPECT_EQ(ParseRfc3339("2026-11-29T06:30:00-04:30").value(), At(1795950000));
  EXPECT_EQ(ParseRfc3339("2024-02-29T00:00:00.5Z").value(),
            At(1709164800) + std::chrono::milliseconds(500));
  EXPECT_EQ(FormatRfc3339(At(1795950000)), "2026-11-29T11:00:00Z");
}

TEST(Rfc3339Test, RefusesWhatGoRefuses) {
  for (const char* bad :
       {"", "2026-11-29", "2026-11-29 11:00:00Z", "2026-11-29T11:00:00", "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z", "2025-02-29T00:00:00Z", "2026-11-29T24:00:00Z",
        "2026-11-29T11:60:00Z", "2026-11-29T11:00:60Z", "2026-11-29T11:00:00+0800",
        "2026-11-29T11:00:00.Z", "1764410000", "2026-11-29T11:00:00Zjunk"}) {
    EXPECT_THAT(ParseRfc3339(bad), StatusIs(StatusCode::kInvalidArgument, HasSubstr("RFC 3339")))
        << bad;
  }
}

TEST(NodeLockTest, ParsesHamisFormatAndTheLegacyBareTime) {
  MIGD_ASSERT_OK_AND_ASSIGN(NodeLock lock, ParseNodeLock("2026-11-29T19:00:00+08:00,ml,train"));
  EXPECT_EQ(lock.taken, At(1795950000));
  EXPECT_EQ(lock.ns, "ml");
  EXPECT_EQ(lock.name, "train");
  MIGD_ASSERT_OK_AND_ASSIGN(NodeLock legacy, ParseNodeLock("2026-11-29T11:00:00Z"));
  EXPECT_TRUE(legacy.ns.empty() && legacy.name.empty());
  EXPECT_THAT(ParseNodeLock("2026-11-29T11:00:00Z,ml"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("expected 3 parts, got 2")));
  EXPECT_THAT(ParseNodeLock("2026-11-29T11:00:00Z,a,b,c"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("expected 3 parts, got 4")));
  EXPECT_THAT(
      ParseNodeLock("yesterday,ml,train"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("\"yesterday\" is not an RFC 3339")));
  EXPECT_EQ(FormatNodeLock(At(1795950000), "ml", "train"), "2026-11-29T11:00:00Z,ml,train");
}

TEST(NodeLockTest, ExpiredOnlyWhenOlderThanTheExpiry) {
  const NodeLock lock{.taken = At(1000), .ns = "a", .name = "b"};
  EXPECT_FALSE(NodeLockExpired(lock, At(1000) + minutes(5), kHamiNodeLockExpiry));
  EXPECT_TRUE(NodeLockExpired(lock, At(1000) + minutes(5) + seconds(1), kHamiNodeLockExpiry));
  EXPECT_FALSE(NodeLockExpired(lock, At(1000) - hours(1), kHamiNodeLockExpiry));  // clock skew
  EXPECT_TRUE(NodeLockExpired(lock, At(1000) + minutes(2), minutes(1)));
}

}  // namespace
}  // namespace migd::k8s
