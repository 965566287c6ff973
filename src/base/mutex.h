// File: base/mutex.h
//
// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// abseil's thread-safety attributes, so that clang's -Wthread-safety checks
// every ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED in migd's code.
//
// Why not absl::Mutex: Debian's libabsl is built without ThreadSanitizer, so
// its Mutex is invisible to TSan (every guarded access would be reported);
// std::mutex is a pthread mutex, which TSan intercepts. The reasoning is in
// docs/architecture.md ("Threads and locks").
//
// Example:
//   class Counter {
//    public:
//     void Add(int n) { MutexLock l(&mu_); total_ += n; cv_.SignalAll(); }
//     void WaitFor(int n) { MutexLock l(&mu_); cv_.Wait(&mu_, [&] { return total_ >= n; }); }
//    private:
//     Mutex mu_;
//     CondVar cv_;
//     int total_ ABSL_GUARDED_BY(mu_) = 0;
//   };
//
// Thread-safety: Mutex and CondVar are the synchronisation; MutexLock is a
// scoped guard for one thread.
#ifndef MIGD_BASE_MUTEX_H_
#define MIGD_BASE_MUTEX_H_

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace migd {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds the lock (no runtime check).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `*mu` from construction to destruction.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable bound to a Mutex at each wait.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Atomically releases `*mu` and blocks until signalled (or spuriously
  // woken); holds `*mu` again on return. REQUIRES: the caller holds `*mu`.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();
  }

  // Waits until `pred()` holds. `pred` runs with `*mu` held; a lambda that
  // reads guarded members says so with ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_).
  // (The analysis cannot see that `mu` is the lambda's lock, hence the
  // exemption of this body; callers are still checked for holding `mu`.)
  template <typename Pred>
  void Wait(Mutex* mu, Pred pred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    while (!pred()) Wait(mu);
  }

  // Waits until `pred()` holds or `timeout` passed; returns pred()'s last
  // value. REQUIRES: the caller holds `*mu`.
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout, Pred pred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (!WaitUntil(mu, deadline)) return pred();
    }
    return true;
  }

  // Waits until signalled or `deadline`; false if the deadline passed.
  // REQUIRES: the caller holds `*mu`.
  bool WaitUntil(Mutex* mu, std::chrono::steady_clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    const bool signalled = cv_.wait_until(l, deadline) == std::cv_status::no_timeout;
    l.release();
    return signalled;
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace migd

#endif  // MIGD_BASE_MUTEX_H_
