#include "cli/connection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

namespace migd::cli {
namespace {

using ::testing::HasSubstr;

TEST(ConnectionTest, EveryGrpcCodeHasAnExitCode) {
  const std::vector<std::pair<grpc::StatusCode, int>> cases = {
      {grpc::StatusCode::OK, 0},
      {grpc::StatusCode::CANCELLED, 6},
      {grpc::StatusCode::UNKNOWN, 6},
      {grpc::StatusCode::INVALID_ARGUMENT, 1},
      {grpc::StatusCode::DEADLINE_EXCEEDED, 2},
      {grpc::StatusCode::NOT_FOUND, 5},
      {grpc::StatusCode::ALREADY_EXISTS, 6},
      {grpc::StatusCode::PERMISSION_DENIED, 6},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, 4},
      {grpc::StatusCode::FAILED_PRECONDITION, 6},
      {grpc::StatusCode::ABORTED, 6},
      {grpc::StatusCode::OUT_OF_RANGE, 1},
      {grpc::StatusCode::UNIMPLEMENTED, 6},
      {grpc::StatusCode::INTERNAL, 6},
      {grpc::StatusCode::UNAVAILABLE, 2},
      {grpc::StatusCode::DATA_LOSS, 6},
      {grpc::StatusCode::UNAUTHENTICATED, 6},
  };
  for (const auto& [code, rc] : cases) EXPECT_EQ(ExitCodeFor(code), rc) << code;
}

TEST(ConnectionTest, UnreachableMessagesSayWhatToDo) {
  EXPECT_EQ(UnreachableMessage("/run/migd/api.socket", EACCES),
            "cannot reach migd at /run/migd/api.socket: permission denied; run migctl as root "
            "(sudo) or as a member of the group set in migd's api.socketGroup");
  EXPECT_THAT(UnreachableMessage("/x", EPERM), HasSubstr("api.socketGroup"));
  EXPECT_THAT(UnreachableMessage(std::string(200, 'a'), ENAMETOOLONG),
              HasSubstr("use a shorter --socket"));
  EXPECT_THAT(UnreachableMessage("/x", ENOTSOCK), HasSubstr("is not a socket"));
  EXPECT_THAT(UnreachableMessage("/x", EIO), HasSubstr("is migd running?"));
  EXPECT_EQ(ProbeSocket(std::string(200, 'a')), ENAMETOOLONG);
  EXPECT_EQ(ProbeSocket(""), ENAMETOOLONG);
}

}  // namespace
}  // namespace migd::cli
