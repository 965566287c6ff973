#include "daemon/signals.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <string>

namespace migd::daemon {
namespace {

// The signals are blocked and queued for this thread, so each raise() is
// read back by the next Wait() in order.
TEST(SignalWaiterTest, HangupReloadsTerminateAndInterruptStop) {
  SignalWaiter waiter;
  ASSERT_EQ(waiter.Block(), std::nullopt);
  std::string name;
  ASSERT_EQ(::raise(SIGHUP), 0);
  EXPECT_EQ(waiter.Wait(&name), SignalWaiter::Event::kReload);
  EXPECT_EQ(name, ::strsignal(SIGHUP));
  ASSERT_EQ(::raise(SIGTERM), 0);
  EXPECT_EQ(waiter.Wait(&name), SignalWaiter::Event::kStop);
  EXPECT_EQ(name, ::strsignal(SIGTERM));
  ASSERT_EQ(::raise(SIGINT), 0);
  EXPECT_EQ(waiter.Wait(&name), SignalWaiter::Event::kStop);
  EXPECT_EQ(name, ::strsignal(SIGINT));
}

TEST(SignalWaiterTest, SigpipeIsIgnored) {
  SignalWaiter waiter;
  ASSERT_EQ(waiter.Block(), std::nullopt);
  ASSERT_EQ(::raise(SIGPIPE), 0);  // would kill the process if not ignored
  struct sigaction sa {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &sa), 0);
  EXPECT_EQ(sa.sa_handler, SIG_IGN);
}

}  // namespace
}  // namespace migd::daemon
