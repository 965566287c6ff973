// File: planner/solve_executor.h
//
// Where the value policy's solves run. The planner never waits for one: it
// hands the solve to a SolveExecutor and keeps deciding with the values it
// has. BackgroundExecutor runs tasks on one worker thread in submission
// order (the product); ManualExecutor keeps them until RunPending() (tests,
// and the benchmark, which runs them between decisions so that every run is
// reproducible).
//
// Thread-safety: Submit may be called from any thread. BackgroundExecutor's
// destructor waits for the running task, drops the queued ones and joins.
// ManualExecutor::RunPending runs on the calling thread.
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
};

class BackgroundExecutor : public SolveExecutor {
 public:
  BackgroundExecutor();
  ~BackgroundExecutor() override;
  BackgroundExecutor(const BackgroundExecutor&) = delete;
  BackgroundExecutor& operator=(const BackgroundExecutor&) = delete;

  void Submit(std::function<void()> task) override;

 private:
  void Loop();

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

class ManualExecutor : public SolveExecutor {
 public:
  void Submit(std::function<void()> task) override;
  // Runs every task submitted so far (and those they submit); returns how many.
  size_t RunPending();
  size_t pending();

 private:
  Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::planner

#endif  // MIGD_PLANNER_SOLVE_EXECUTOR_H_
