#include "base/status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include "base/status_macros.h"
#include "testing/status_matchers.h"

namespace migd {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

// The gRPC boundary converts with a cast, so the numbering is part of the API.
static_assert(static_cast<int>(StatusCode::kOk) == 0);
static_assert(static_cast<int>(StatusCode::kCancelled) == 1);
static_assert(static_cast<int>(StatusCode::kInvalidArgument) == 3);
static_assert(static_cast<int>(StatusCode::kNotFound) == 5);
static_assert(static_cast<int>(StatusCode::kPermissionDenied) == 7);
static_assert(static_cast<int>(StatusCode::kResourceExhausted) == 8);
static_assert(static_cast<int>(StatusCode::kFailedPrecondition) == 9);
static_assert(static_cast<int>(StatusCode::kAborted) == 10);
static_assert(static_cast<int>(StatusCode::kOutOfRange) == 11);
static_assert(static_cast<int>(StatusCode::kInternal) == 13);
static_assert(static_cast<int>(StatusCode::kUnavailable) == 14);
static_assert(static_cast<int>(StatusCode::kDataLoss) == 15);
static_assert(static_cast<int>(StatusCode::kUnauthenticated) == 16);

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s, OkStatus());
}

TEST(StatusTest, OkCodeDropsTheMessage) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s(StatusCode::kNotFound, "GI 3 on GPU-1");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "GI 3 on GPU-1");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: GI 3 on GPU-1");
  EXPECT_EQ(Status(StatusCode::kInternal, "").ToString(), "INTERNAL");
  std::ostringstream os;
  os << s;
  EXPECT_EQ(os.str(), "NOT_FOUND: GI 3 on GPU-1");
}

TEST(StatusTest, FactoriesSetTheirCode) {
  struct Case {
    Status status;
    StatusCode code;
    std::string_view name;
  };
  const Case cases[] = {
      {CancelledError("m"), StatusCode::kCancelled, "CANCELLED"},
      {UnknownError("m"), StatusCode::kUnknown, "UNKNOWN"},
      {InvalidArgumentError("m"), StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
      {DeadlineExceededError("m"), StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
      {NotFoundError("m"), StatusCode::kNotFound, "NOT_FOUND"},
      {AlreadyExistsError("m"), StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
      {PermissionDeniedError("m"), StatusCode::kPermissionDenied, "PERMISSION_DENIED"},
      {ResourceExhaustedError("m"), StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
      {FailedPreconditionError("m"), StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
      {AbortedError("m"), StatusCode::kAborted, "ABORTED"},
      {OutOfRangeError("m"), StatusCode::kOutOfRange, "OUT_OF_RANGE"},
      {UnimplementedError("m"), StatusCode::kUnimplemented, "UNIMPLEMENTED"},
      {InternalError("m"), StatusCode::kInternal, "INTERNAL"},
      {UnavailableError("m"), StatusCode::kUnavailable, "UNAVAILABLE"},
      {DataLossError("m"), StatusCode::kDataLoss, "DATA_LOSS"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), c.code) << c.name;
    EXPECT_EQ(c.status.message(), "m") << c.name;
    EXPECT_EQ(StatusCodeName(c.code), c.name);
  }
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnauthenticated), "UNAUTHENTICATED");
}

TEST(StatusTest, Predicates) {
  EXPECT_TRUE(IsNotFound(NotFoundError("x")));
  EXPECT_TRUE(IsInvalidArgument(InvalidArgumentError("x")));
  EXPECT_TRUE(IsUnavailable(UnavailableError("x")));
  EXPECT_TRUE(IsFailedPrecondition(FailedPreconditionError("x")));
  EXPECT_TRUE(IsResourceExhausted(ResourceExhaustedError("x")));
  EXPECT_FALSE(IsNotFound(OkStatus()));
  EXPECT_FALSE(IsNotFound(InternalError("x")));
  EXPECT_FALSE(IsResourceExhausted(AbortedError("x")));
}

TEST(StatusTest, WithContextPrependsAndChains) {
  const Status base = NotFoundError("no GI 3");
  const Status once = base.WithContext("destroying instance");
  EXPECT_EQ(once.code(), StatusCode::kNotFound);
  EXPECT_EQ(once.message(), "destroying instance: no GI 3");
  // The const& overload leaves the original alone.
  EXPECT_EQ(base.message(), "no GI 3");

  Status chained = UnavailableError("socket absent").WithContext("dialing").WithContext("register");
  EXPECT_EQ(chained.code(), StatusCode::kUnavailable);
  EXPECT_EQ(chained.message(), "register: dialing: socket absent");
  EXPECT_EQ(chained.ToString(), "UNAVAILABLE: register: dialing: socket absent");
}

TEST(StatusTest, WithContextEdgeCases) {
  EXPECT_TRUE(OkStatus().WithContext("anything").ok());
  EXPECT_EQ(OkStatus().WithContext("anything").message(), "");
  EXPECT_EQ(InternalError("x").WithContext("").message(), "x");
  EXPECT_EQ(InternalError("").WithContext("ctx").message(), "ctx");
}

TEST(StatusTest, CopyIsDeepAndEqual) {
  Status a = AbortedError("layout changed");
  Status b = a;
  EXPECT_EQ(a, b);
  b = b.WithContext("retry");
  EXPECT_EQ(a.message(), "layout changed");
  EXPECT_EQ(b.message(), "retry: layout changed");
  EXPECT_NE(a, b);

  Status c;
  c = a;
  EXPECT_EQ(c, a);
  c = OkStatus();
  EXPECT_TRUE(c.ok());
  const Status& self = a;
  a = self;
  EXPECT_EQ(a.message(), "layout changed");
}

TEST(StatusTest, Move) {
  Status a = DataLossError("torn record");
  Status b = std::move(a);
  EXPECT_EQ(b.code(), StatusCode::kDataLoss);
  EXPECT_EQ(b.message(), "torn record");
  Status c;
  c = std::move(b);
  EXPECT_EQ(c.code(), StatusCode::kDataLoss);
  static_assert(std::is_nothrow_move_constructible_v<Status>);
  static_assert(std::is_nothrow_move_assignable_v<Status>);
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(NotFoundError("a"), NotFoundError("a"));
  EXPECT_NE(NotFoundError("a"), NotFoundError("b"));
  EXPECT_NE(NotFoundError("a"), InternalError("a"));
  EXPECT_NE(NotFoundError(""), OkStatus());
}

TEST(StatusOrTest, HoldsAValue) {
  StatusOr<int> v = 42;
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(v, IsOk());
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(v.value(), 42);
  EXPECT_EQ(*v, 42);
  *v = 7;
  EXPECT_EQ(v.value(), 7);
  EXPECT_EQ(v.value_or(1), 7);
}

TEST(StatusOrTest, HoldsAnError) {
  StatusOr<int> v = NotFoundError("no such GPU");
  EXPECT_FALSE(v.ok());
  EXPECT_THAT(v, StatusIs(StatusCode::kNotFound, HasSubstr("no such GPU")));
  EXPECT_EQ(v.value_or(-1), -1);
  Status moved_out = std::move(v).status();
  EXPECT_EQ(moved_out.code(), StatusCode::kNotFound);
}

TEST(StatusOrTest, OkStatusWithoutValueBecomesInternal) {
  StatusOr<int> v = OkStatus();
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
}

TEST(StatusOrTest, ArrowAndConversions) {
  StatusOr<std::string> s = "GPU-1";  // const char* converts to std::string.
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size(), 5u);
  s->append("x");
  EXPECT_EQ(*s, "GPU-1x");
  const StatusOr<std::string>& cs = s;
  EXPECT_EQ(cs->front(), 'G');
  EXPECT_EQ(cs.value(), "GPU-1x");
}

TEST(StatusOrTest, MoveOnlyValue) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(5);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> taken = std::move(p).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 5);
  StatusOr<std::unique_ptr<int>> q = std::make_unique<int>(6);
  std::unique_ptr<int> star = *std::move(q);
  EXPECT_EQ(*star, 6);
}

TEST(StatusOrDeathTest, ValueOfAnErrorAborts) {
  StatusOr<int> v = UnavailableError("NVML not loaded");
  EXPECT_DEATH((void)v.value(), "StatusOr::value\\(\\) on error: UNAVAILABLE: NVML not loaded");
}

StatusOr<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgumentError("not positive: " + std::to_string(x));
  return x;
}

Status CheckPositive(int x) { return ParsePositive(x).status(); }

Status ReturnIfError(int x, bool* reached_end) {
  *reached_end = false;
  MIGD_RETURN_IF_ERROR(CheckPositive(x));
  *reached_end = true;
  return OkStatus();
}

StatusOr<int> SumOfTwo(int a, int b) {
  // Two uses in one scope need distinct temporaries.
  MIGD_ASSIGN_OR_RETURN(int x, ParsePositive(a));
  MIGD_ASSIGN_OR_RETURN(int y, ParsePositive(b));
  return x + y;
}

StatusOr<std::unique_ptr<int>> MakeBox(int v) {
  if (v < 0) return OutOfRangeError("negative");
  return std::make_unique<int>(v);
}

Status AssignExisting(int v, std::unique_ptr<int>* out) {
  MIGD_ASSIGN_OR_RETURN(*out, MakeBox(v));
  return OkStatus();
}

TEST(StatusMacrosTest, ReturnIfError) {
  bool reached = false;
  EXPECT_THAT(ReturnIfError(3, &reached), IsOk());
  EXPECT_TRUE(reached);
  EXPECT_THAT(ReturnIfError(-3, &reached),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not positive: -3")));
  EXPECT_FALSE(reached);
}

TEST(StatusMacrosTest, ReturnIfErrorEvaluatesOnce) {
  int calls = 0;
  auto f = [&calls]() -> Status {
    MIGD_RETURN_IF_ERROR(([&calls] {
      ++calls;
      return OkStatus();
    }()));
    return OkStatus();
  };
  EXPECT_THAT(f(), IsOk());
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacrosTest, AssignOrReturn) {
  StatusOr<int> sum = SumOfTwo(2, 3);
  ASSERT_THAT(sum, IsOk());
  EXPECT_EQ(*sum, 5);
  EXPECT_THAT(SumOfTwo(2, 0), StatusIs(StatusCode::kInvalidArgument, HasSubstr("0")));
  EXPECT_THAT(SumOfTwo(-1, 2), StatusIs(StatusCode::kInvalidArgument, HasSubstr("-1")));
}

TEST(StatusMacrosTest, AssignOrReturnMovesIntoAnExistingLvalue) {
  std::unique_ptr<int> box;
  EXPECT_THAT(AssignExisting(9, &box), IsOk());
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(*box, 9);
  EXPECT_THAT(AssignExisting(-1, &box), StatusIs(StatusCode::kOutOfRange, HasSubstr("negative")));
  EXPECT_EQ(*box, 9);  // untouched on error
}

TEST(StatusMacrosDeathTest, CheckAbortsWithTheCondition) {
  const int gis = 3;
  EXPECT_DEATH(MIGD_CHECK(gis == 4), "check failed at .*status_test.cc:[0-9]+: gis == 4");
  MIGD_CHECK(gis == 3);
}

}  // namespace
}  // namespace migd
