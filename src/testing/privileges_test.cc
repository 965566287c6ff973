#include "testing/privileges.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "testing/status_matchers.h"

namespace migd::testing {
namespace {

TEST(RunUnprivilegedTest, RootRunsAsNobodyOthersAsThemselves) {
  const uid_t expected = ::geteuid() == 0 ? kNobodyUid : ::geteuid();
  const Status s = RunUnprivileged([expected] {
    if (::geteuid() != expected || ::getuid() != expected) {
      return InternalError("running as uid " + std::to_string(::geteuid()));
    }
    if (expected == kNobodyUid && (::getegid() != kNobodyGid || ::getgroups(0, nullptr) != 0)) {
      return InternalError("kept root's groups");
    }
    return OkStatus();
  });
  EXPECT_THAT(s, IsOk());
}

TEST(RunUnprivilegedTest, TheChildsStatusComesBack) {
  EXPECT_THAT(RunUnprivileged([] { return NotFoundError("no such thing: x"); }),
              StatusIs(StatusCode::kNotFound, "no such thing: x"));
  EXPECT_THAT(RunUnprivileged([] { return OkStatus(); }), IsOk());
}

TEST(RunUnprivilegedTest, AChildThatDiesIsAnError) {
  EXPECT_THAT(RunUnprivileged([]() -> Status { ::_exit(3); }),
              StatusIs(StatusCode::kInternal, ::testing::HasSubstr("died")));
}

// Root holds every capability here unless a container took some away; a
// user holds none. Either way the answer agrees with what the kernel allows.
TEST(HasCapabilityTest, AgreesWithTheKernel) {
  if (::geteuid() != 0) {
    EXPECT_FALSE(HasCapability(kCapMknod));
  }
  const bool setuid = HasCapability(7);  // CAP_SETUID
  const Status s = RunUnprivileged([] { return OkStatus(); });
  EXPECT_EQ(s.ok(), ::geteuid() != 0 || setuid) << s;
}

}  // namespace
}  // namespace migd::testing
