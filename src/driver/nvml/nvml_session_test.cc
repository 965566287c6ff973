#include "driver/nvml/nvml_session.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/nvml/nvml_sim_testing.h"
#include "testing/status_matchers.h"

namespace migd::driver {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

// Every session opens the simulator's NVML on a fresh machine of this test;
// init and shutdown are counted both by NvmlLibrary and by the simulator,
// whose counts (in its state file) are the ones checked here.
class NvmlSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim_ = std::make_unique<sim_testing::SimMachine>("a100-40gb:1");
    auto lib = NvmlLibrary::Load(MIGD_SIM_LIBRARY);
    ASSERT_TRUE(lib.ok()) << lib.status();
    lib_ = *lib;
  }
  void TearDown() override { sim_.reset(); }

  uint64_t InitCalls() const { return sim_->Count("nvmlInit_v2", "SUCCESS"); }
  uint64_t ShutdownCalls() const { return sim_->Count("nvmlShutdown", "SUCCESS"); }

  std::unique_ptr<sim_testing::SimMachine> sim_;
  std::shared_ptr<NvmlLibrary> lib_;
};

TEST_F(NvmlSessionTest, CloseHooksRunAfterTheLastTokenAndBeforeShutdown) {
  NvmlSession session(lib_);
  ASSERT_THAT(session.Open(), IsOk());
  std::vector<std::string> ran;
  const uint64_t first = session.AddCloseHook([&] {
    // No token can be admitted any more, and nvmlShutdown has not run.
    ran.push_back("first:" + std::string(session.Acquire().ok() ? "admitted" : "refused") + ":" +
                  std::to_string(lib_->CallCount(NvmlSymbol::kShutdown, NVML_SUCCESS)));
  });
  const uint64_t removed = session.AddCloseHook([&] { ran.push_back("removed"); });
  session.AddCloseHook([&] { ran.push_back("second"); });
  EXPECT_NE(first, removed);
  session.RemoveCloseHook(removed);
  session.RemoveCloseHook(987654);  // unknown: no-op
  ASSERT_THAT(session.Close(), IsOk());
  EXPECT_EQ(ran, (std::vector<std::string>{"first:refused:0", "second"}));
  // A hook stays for the next Close until removed.
  ASSERT_THAT(session.Open(), IsOk());
  session.RemoveCloseHook(first);
  ASSERT_THAT(session.Close(), IsOk());
  EXPECT_EQ(ran.size(), 3u);
  EXPECT_EQ(ran.back(), "second");
}

TEST_F(NvmlSessionTest, OpenInitsOnceAndCloseShutsDownOnce) {
  NvmlSession session(lib_);
  EXPECT_FALSE(session.is_open());
  EXPECT_EQ(session.generation(), 0u);
  ASSERT_THAT(session.Open(), IsOk());
  EXPECT_TRUE(session.is_open());
  EXPECT_EQ(InitCalls(), 1u);
  EXPECT_EQ(ShutdownCalls(), 0u);
  EXPECT_THAT(session.Close(), IsOk());
  EXPECT_FALSE(session.is_open());
  EXPECT_EQ(InitCalls(), 1u);
  EXPECT_EQ(ShutdownCalls(), 1u);
  // A second Close is a no-op.
  EXPECT_THAT(session.Close(), IsOk());
  EXPECT_EQ(ShutdownCalls(), 1u);
  EXPECT_EQ(lib_->CallCount(NvmlSymbol::kInitV2, NVML_SUCCESS), 1u);
  EXPECT_EQ(lib_->CallCount(NvmlSymbol::kShutdown, NVML_SUCCESS), 1u);
}

TEST_F(NvmlSessionTest, SecondOpenOfSameSessionFails) {
  NvmlSession session(lib_);
  ASSERT_THAT(session.Open(), IsOk());
  EXPECT_THAT(session.Open(), StatusIs(StatusCode::kFailedPrecondition, HasSubstr("already open")));
  EXPECT_EQ(InitCalls(), 1u);
}

TEST_F(NvmlSessionTest, OnlyOneSessionPerProcess) {
  NvmlSession first(lib_);
  NvmlSession second(lib_);
  ASSERT_THAT(first.Open(), IsOk());
  EXPECT_THAT(second.Open(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("another NVML session")));
  EXPECT_EQ(InitCalls(), 1u);
  ASSERT_THAT(first.Close(), IsOk());
  EXPECT_THAT(second.Open(), IsOk());
  EXPECT_EQ(InitCalls(), 2u);
}

TEST_F(NvmlSessionTest, GenerationIncreasesWithEveryOpen) {
  NvmlSession a(lib_);
  ASSERT_THAT(a.Open(), IsOk());
  const uint64_t g1 = a.generation();
  EXPECT_GT(g1, 0u);
  ASSERT_THAT(a.Close(), IsOk());
  EXPECT_EQ(a.generation(), g1);  // kept after close
  ASSERT_THAT(a.Open(), IsOk());
  const uint64_t g2 = a.generation();
  EXPECT_GT(g2, g1);
  ASSERT_THAT(a.Close(), IsOk());
  NvmlSession b(lib_);
  ASSERT_THAT(b.Open(), IsOk());
  EXPECT_GT(b.generation(), g2);  // process-wide, not per session object
}

TEST_F(NvmlSessionTest, AcquireOnlyWhileOpen) {
  NvmlSession session(lib_);
  EXPECT_THAT(session.Acquire(), StatusIs(StatusCode::kUnavailable, HasSubstr("not open")));
  ASSERT_THAT(session.Open(), IsOk());
  {
    MIGD_ASSERT_OK_AND_ASSIGN(NvmlSession::Token token, session.Acquire());
    EXPECT_TRUE(token.valid());
    EXPECT_EQ(token.generation(), session.generation());
    EXPECT_EQ(session.in_flight(), 1);
    NvmlSession::Token moved = std::move(token);
    EXPECT_EQ(session.in_flight(), 1);
  }
  EXPECT_EQ(session.in_flight(), 0);
  ASSERT_THAT(session.Close(), IsOk());
  EXPECT_THAT(session.Acquire(), StatusIs(StatusCode::kUnavailable, ::testing::_));
}

TEST_F(NvmlSessionTest, FailedInitLeavesSessionClosedWithoutShutdown) {
  // Without MIGD_SIM_STATE there is no simulated driver: nvmlInit_v2 answers
  // DRIVER_NOT_LOADED, as a real NVML does without the kernel module.
  unsetenv("MIGD_SIM_STATE");
  NvmlSession session(lib_);
  EXPECT_THAT(session.Open(),
              StatusIs(StatusCode::kUnavailable,
                       HasSubstr(std::string("nvmlInit_v2 of ") + MIGD_SIM_LIBRARY +
                                 ": NVML_ERROR_DRIVER_NOT_LOADED")));
  EXPECT_FALSE(session.is_open());
  EXPECT_THAT(session.Close(), IsOk());
  EXPECT_EQ(lib_->CallCount(NvmlSymbol::kInitV2, NVML_ERROR_DRIVER_NOT_LOADED), 1u);
  EXPECT_EQ(lib_->CallCount(NvmlSymbol::kShutdown, NVML_SUCCESS), 0u);
  EXPECT_FALSE(sim_->exists());  // no machine was created, nothing was counted
  // The process-wide slot was released.
  setenv("MIGD_SIM_STATE", sim_->state_path().c_str(), 1);
  NvmlSession other(lib_);
  EXPECT_THAT(other.Open(), IsOk());
  EXPECT_EQ(InitCalls(), 1u);
  EXPECT_THAT(other.Close(), IsOk());
  EXPECT_EQ(ShutdownCalls(), 1u);
}

TEST_F(NvmlSessionTest, DestructorCloses) {
  {
    NvmlSession session(lib_);
    ASSERT_THAT(session.Open(), IsOk());
  }
  EXPECT_EQ(InitCalls(), 1u);
  EXPECT_EQ(ShutdownCalls(), 1u);
}

TEST_F(NvmlSessionTest, CloseWaitsForInFlightOperations) {
  NvmlSession session(lib_);
  ASSERT_THAT(session.Open(), IsOk());
  auto token = session.Acquire();
  ASSERT_TRUE(token.ok());

  std::atomic<bool> closed{false};
  std::thread closer([&] {
    EXPECT_THAT(session.Close(), IsOk());
    closed = true;
  });
  // Wait (without timing assumptions) until Close() has stopped admitting.
  while (session.is_open()) std::this_thread::yield();
  EXPECT_THAT(session.Acquire(), StatusIs(StatusCode::kUnavailable, HasSubstr("closing")));
  EXPECT_FALSE(closed.load());
  EXPECT_EQ(ShutdownCalls(), 0u);  // still waiting for our token

  *token = NvmlSession::Token();  // release
  closer.join();
  EXPECT_TRUE(closed.load());
  EXPECT_EQ(ShutdownCalls(), 1u);
  EXPECT_EQ(InitCalls(), 1u);
}

TEST_F(NvmlSessionTest, ConcurrentAcquireAndCloseNeverShutDownTwice) {
  NvmlSession session(lib_);
  ASSERT_THAT(session.Open(), IsOk());
  std::atomic<int> admitted{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i) {
    workers.emplace_back([&] {
      for (int j = 0; j < 200; ++j) {
        auto t = session.Acquire();
        if (!t.ok()) return;
        ++admitted;
      }
    });
  }
  std::thread c1([&] { session.Close().IgnoreError(); });
  std::thread c2([&] { session.Close().IgnoreError(); });
  for (auto& w : workers) w.join();
  c1.join();
  c2.join();
  EXPECT_EQ(InitCalls(), 1u);
  EXPECT_EQ(ShutdownCalls(), 1u);
  EXPECT_EQ(session.in_flight(), 0);
}

}  // namespace
}  // namespace migd::driver
