// File: planner/solve_executor.h
//
// Where the value policy's solves run. The planner never waits for one: it
// hands the solve to a SolveExecutor and keeps deciding with the values it
// has. BackgroundExecutor runs tasks on one worker thread in submission
// order (the product); ManualExecutor keeps them until RunPending() (tests,
// and the benchmark, which runs them between decisions so that every run is
// reproducible).
//
// Lifecycle: Start() begins running tasks (tasks submitted before it wait in
// the queue); Stop() waits for the running task, drops the queued ones and,
// from then on, drops every task submitted. Both are idempotent; Stop() after
// Stop() or without Start() is a no-op beyond dropping the queue.
//
// Thread-safety: every method may be called from any thread, except that
// Start/Stop of a BackgroundExecutor must not be called from its own tasks.
// BackgroundExecutor's destructor calls Stop(). ManualExecutor::RunPending
// runs on the calling thread.
#ifndef MIGD_PLANNER_SOLVE_EXECUTOR_H_
#define MIGD_PLANNER_SOLVE_EXECUTOR_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>

#include "base/mutex.h"

namespace migd::planner {

class SolveExecutor {
 public:
  virtual ~SolveExecutor() = default;
  virtual void Submit(std::function<void()> task) = 0;
  virtual void Start() {}
  virtual void Stop() {}
};

class BackgroundExecutor : public SolveExecutor {
 public:
  // `start`: start the worker now (else at Start()).
  explicit BackgroundExecutor(bool start = true);
  ~BackgroundExecutor() override;
  BackgroundExecutor(const BackgroundExecutor&) = delete;
  BackgroundExecutor& operator=(const BackgroundExecutor&) = delete;

  void Submit(std::function<void()> task) override;
  void Start() override;
  void Stop() override;
  // Whether the worker thread runs (Start() called, Stop() not yet).
  bool running();

 private:
  void Loop();

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  // Written by Start/Stop only (under `lifecycle_`); joined outside `mu_`.
  Mutex lifecycle_;
  std::thread worker_ ABSL_GUARDED_BY(lifecycle_);
};

class ManualExecutor : public SolveExecutor {
 public:
  void Submit(std::function<void()> task) override;
  // Stop() drops the queue and every later task.
  void Stop() override;
  // Runs every task submitted so far (and those they submit); returns how many.
  size_t RunPending();
  size_t pending();

 private:
  Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace migd::planner

#endif  // MIGD_PLANNER_SOLVE_EXECUTOR_H_
