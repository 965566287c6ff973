#include "mig/placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "testing/status_matchers.h"

namespace migd::mig {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(PlacementTest, MaskCoversStartToEnd) {
  EXPECT_EQ((Placement{0, 1}.Mask()), 0x1u);
  EXPECT_EQ((Placement{4, 4}.Mask()), 0xF0u);
  EXPECT_EQ((Placement{0, 8}.Mask()), 0xFFu);
  EXPECT_EQ((Placement{9, 3}.Mask()), 0xE00u);
  EXPECT_EQ((Placement{0, 32}.Mask()), 0xFFFFFFFFu);
  EXPECT_EQ((Placement{31, 1}.Mask()), 0x80000000u);
  static_assert(Placement{6, 2}.Mask() == 0xC0u);
  static_assert(Placement{6, 2}.end() == 8);
}

TEST(PlacementTest, OverlapsIsSymmetricAndExcludesTouching) {
  const Placement a{0, 4};
  const Placement b{4, 4};
  const Placement c{2, 2};
  EXPECT_FALSE(a.Overlaps(b));
  EXPECT_FALSE(b.Overlaps(a));
  EXPECT_TRUE(a.Overlaps(c));
  EXPECT_TRUE(c.Overlaps(a));
  EXPECT_TRUE(a.Overlaps(a));
  EXPECT_TRUE((Placement{0, 8}.Overlaps(Placement{6, 1})));
}

TEST(PlacementTest, Contains) {
  EXPECT_TRUE((Placement{0, 8}.Contains(Placement{4, 4})));
  EXPECT_TRUE((Placement{4, 4}.Contains(Placement{4, 4})));
  EXPECT_FALSE((Placement{4, 4}.Contains(Placement{0, 8})));
  EXPECT_FALSE((Placement{0, 4}.Contains(Placement{2, 4})));
}

TEST(PlacementTest, OrderingIsByStartThenSize) {
  EXPECT_LT((Placement{0, 8}), (Placement{1, 1}));
  EXPECT_LT((Placement{2, 1}), (Placement{2, 2}));
  EXPECT_EQ((Placement{3, 1}), (Placement{3, 1}));
  EXPECT_NE((Placement{3, 1}), (Placement{3, 2}));
}

TEST(PlacementTest, ToStringUsesNvidiaSmiNotation) {
  EXPECT_EQ((Placement{4, 4}.ToString()), "4:4");
  std::ostringstream os;
  os << Placement{9, 3};
  EXPECT_EQ(os.str(), "9:3");
}

TEST(PlacementTest, ParseRoundTrips) {
  for (const Placement& p :
       {Placement{0, 1}, Placement{6, 2}, Placement{0, 12}, Placement{31, 1}}) {
    StatusOr<Placement> parsed = ParsePlacement(p.ToString());
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, p);
  }
}

TEST(PlacementTest, ParseRejectsMalformedText) {
  for (const char* text : {"", ":", "4", "4:", ":4", "a:4", "4:b", "-1:2", "4:+2", " 4:4", "4:4 ",
                           "4:4:4", "4;4", "99999999999:1"}) {
    EXPECT_THAT(ParsePlacement(text),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("'" + std::string(text) + "'")))
        << text;
  }
}

TEST(PlacementTest, ParseRejectsEmptyAndOversizedRanges) {
  EXPECT_THAT(ParsePlacement("3:0"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("size 0")));
  EXPECT_THAT(ParsePlacement("31:2"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("31:2")));
  EXPECT_THAT(ParsePlacement("32:1"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("32:1")));
  EXPECT_THAT(ParsePlacement("0:4294967295"), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

}  // namespace
}  // namespace migd::mig
