#include "base/mutex.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace migd {
namespace {

class Counter {
 public:
  void Add(int n) {
    MutexLock l(&mu_);
    total_ += n;
    cv_.SignalAll();
  }
  void WaitFor(int n) {
    MutexLock l(&mu_);
    cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return total_ >= n; });
  }
  bool WaitBriefly(int n) {
    MutexLock l(&mu_);
    return cv_.WaitFor(&mu_, std::chrono::milliseconds(1),
                       [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return total_ >= n; });
  }
  int total() {
    MutexLock l(&mu_);
    return total_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int total_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(MutexTest, ExcludesConcurrentWriters) {
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) c.Add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.total(), 40000);
}

TEST(MutexTest, WaitReturnsOnceThePredicateHolds) {
  Counter c;
  std::thread adder([&] {
    for (int i = 0; i < 5; ++i) c.Add(1);
  });
  c.WaitFor(5);
  EXPECT_EQ(c.total(), 5);
  adder.join();
}

TEST(MutexTest, WaitForGivesUpAndReportsThePredicate) {
  Counter c;
  EXPECT_FALSE(c.WaitBriefly(1));
  c.Add(1);
  EXPECT_TRUE(c.WaitBriefly(1));
}

TEST(MutexTest, TryLockFailsWhileHeldAndSucceedsWhenFree) {
  Mutex mu;
  {
    MutexLock l(&mu);
    std::thread([&] { EXPECT_FALSE(mu.TryLock()); }).join();
  }
  bool locked = false;
  std::thread([&] {
    if (mu.TryLock()) {
      locked = true;
      mu.Unlock();
    }
  }).join();
  EXPECT_TRUE(locked);
}

}  // namespace
}  // namespace migd
