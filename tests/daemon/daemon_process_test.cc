// DaemonProcess (src/testing/daemon_process.h) with stand-in binaries: its
// failure reports are what every e2e test relies on when migd misbehaves.
#include "testing/daemon_process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::testing {
namespace {

using ::testing::HasSubstr;

TEST(DaemonProcessTest, EarlyExitEndsTheWaitWithCodeAndStderr) {
  TempDir dir;
  DaemonOptions o;
  o.binary = "/bin/sh";
  o.args = {"-c", "echo 'cannot start: reason' >&2; exit 3"};
  o.socket_path = dir.Join("never.socket");
  EXPECT_THAT(DaemonProcess::Start(o, dir.path()),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("exited with code 3 before " + dir.Join("never.socket") +
                                 " accepted; stderr:\ncannot start: reason")));
}

TEST(DaemonProcessTest, ReadyDeadlineKillsTheChildAndReportsStderr) {
  TempDir dir;
  DaemonOptions o;
  o.binary = "/bin/sh";
  o.args = {"-c", "echo started >&2; exec sleep 600"};
  o.socket_path = dir.Join("never.socket");
  o.ready_timeout = std::chrono::milliseconds(200);
  EXPECT_THAT(DaemonProcess::Start(o, dir.path()),
              StatusIs(StatusCode::kDeadlineExceeded, HasSubstr("stderr:\nstarted")));
}

TEST(DaemonProcessTest, ExitCodesSignalsEnvAndOutput) {
  TempDir dir;
  DaemonOptions o;
  o.binary = "/bin/sh";
  o.args = {"-c", "echo \"$MIGD_TEST_VAR in $(pwd)\"; exec sleep 600"};
  o.env = {{"MIGD_TEST_VAR", "value"}};
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<DaemonProcess> p, DaemonProcess::Start(o, dir.path()));
  // Wait (bounded) for the child's output before signalling it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (p->Stdout().find('\n') == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(p->Running());
  p->Signal(SIGTERM);
  const DaemonExit exit = p->WaitForExit();
  EXPECT_EQ(exit.exit_code, 128 + SIGTERM);
  EXPECT_THAT(exit.out, HasSubstr("value in " + dir.path()));
  EXPECT_FALSE(p->Running());
  EXPECT_EQ(p->WaitForExit().exit_code, 128 + SIGTERM) << "the result is kept";
}

TEST(DaemonProcessTest, MissingBinaryExits127) {
  TempDir dir;
  DaemonOptions o;
  o.binary = dir.Join("no-such-binary");
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<DaemonProcess> p, DaemonProcess::Start(o, dir.path()));
  EXPECT_EQ(p->WaitForExit().exit_code, 127);
}

TEST(DaemonProcessTest, PathsOfThisBuild) {
  EXPECT_THAT(MigdBinaryPath(), HasSubstr("/bin/migd"));
  EXPECT_THAT(SimLibraryPath(), HasSubstr("/lib/libnvidia-ml-sim.so.1"));
}

}  // namespace
}  // namespace migd::testing
