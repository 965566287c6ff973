#include "planner/solve_executor.h"

#include <utility>

namespace migd::planner {

BackgroundExecutor::BackgroundExecutor(bool start) {
  if (start) Start();
}

BackgroundExecutor::~BackgroundExecutor() { Stop(); }

void BackgroundExecutor::Start() {
  MutexLock life(&lifecycle_);
  {
    MutexLock l(&mu_);
    if (started_ || stop_) return;
    started_ = true;
  }
  worker_ = std::thread([this] { Loop(); });
}

void BackgroundExecutor::Stop() {
  MutexLock life(&lifecycle_);
  {
    MutexLock l(&mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.SignalAll();
  if (worker_.joinable()) worker_.join();
}

bool BackgroundExecutor::running() {
  MutexLock l(&mu_);
  return started_ && !stop_;
}

void BackgroundExecutor::Submit(std::function<void()> task) {
  {
    MutexLock l(&mu_);
    if (stop_) return;
    queue_.push_back(std::move(task));
  }
  cv_.Signal();
}

void BackgroundExecutor::Loop() {
  while (true) {
    std::function<void()> task;
    {
      MutexLock l(&mu_);
      cv_.Wait(&mu_,
               [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); });
      if (stop_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void ManualExecutor::Submit(std::function<void()> task) {
  MutexLock l(&mu_);
  if (stopped_) return;
  queue_.push_back(std::move(task));
}

void ManualExecutor::Stop() {
  MutexLock l(&mu_);
  stopped_ = true;
  queue_.clear();
}

size_t ManualExecutor::RunPending() {
  size_t ran = 0;
  while (true) {
    std::function<void()> task;
    {
      MutexLock l(&mu_);
      if (queue_.empty()) return ran;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
    ++ran;
  }
}

size_t ManualExecutor::pending() {
  MutexLock l(&mu_);
  return queue_.size();
}

}  // namespace migd::planner
