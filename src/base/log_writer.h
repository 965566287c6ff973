// File: base/log_writer.h
//
// LogWriter: the spdlog sink migd logs through (base/logging.h installs it).
// It keeps write(2) off the caller's path for ordinary lines and flushes the
// important ones at once:
//
//   - trace/debug/info lines are formatted into a memory buffer; a writer
//     thread writes the buffer to the file descriptor at most `interval`
//     after its first line arrived (one write(2) per batch, not per line).
//     An idle writer sleeps without a timer (no wake-ups while nothing is
//     logged);
//   - warn/error/critical lines are written before log() returns, after
//     everything buffered before them (lines keep their order);
//   - a buffer above `max_buffered` bytes is written by the caller that
//     overflows it (back-pressure: a flood of lines never grows memory
//     without bound, and is never dropped);
//   - flush() and the destructor write everything buffered before they
//     return; logging.h flushes at exit(3) and spdlog::shutdown().
// Lines buffered when the process is SIGKILLed (at most `interval` of info
// lines) are lost; warn and error lines never are.
//
// The writer thread blocks every signal (a daemon that reads SIGTERM from a
// signalfd must not have it delivered to this thread).
//
// Write errors (a closed pipe, EIO) drop the batch and count it
// (dropped_bytes); they never fail or block the caller beyond the write.
//
// Thread-safety: all methods are thread-safe (spdlog calls log() from any
// thread). Lock order: write_mu_ before mu_; no lock is held while waiting.
#ifndef MIGD_BASE_LOG_WRITER_H_
#define MIGD_BASE_LOG_WRITER_H_

#include <spdlog/formatter.h>
#include <spdlog/sinks/sink.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "base/mutex.h"

namespace migd {

class LogWriter final : public spdlog::sinks::sink {
 public:
  struct Options {
    std::chrono::milliseconds interval{50};
    size_t max_buffered = size_t{1} << 20;
  };

  // Writes to `fd` (not owned; must stay open while the writer lives, e.g.
  // 2 for stderr).
  LogWriter(int fd, Options options);
  ~LogWriter() override;
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  void log(const spdlog::details::log_msg& msg) override;
  void flush() override;
  void set_pattern(const std::string& pattern) override;
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override;

  // Bytes that could not be written (write errors).
  uint64_t dropped_bytes() const { return dropped_.load(std::memory_order_relaxed); }
  // Completed write(2) batches (for tests: lines per write).
  uint64_t writes() const { return writes_.load(std::memory_order_relaxed); }

 private:
  // Writes what is buffered. REQUIRES: write_mu_ held, mu_ not held.
  void WriteBuffered() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  void WriteAll(const std::string& data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void Run();

  const int fd_;
  const Options options_;
  Mutex write_mu_;  // serialises writes to fd_ (taken before mu_)
  Mutex mu_;        // the buffer and the formatter
  CondVar cv_;
  std::unique_ptr<spdlog::formatter> formatter_ ABSL_GUARDED_BY(mu_);
  std::string buffer_ ABSL_GUARDED_BY(mu_);
  bool writer_idle_ ABSL_GUARDED_BY(mu_) = false;  // waiting without a timer
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> writes_{0};
  std::thread thread_;
};

}  // namespace migd

#endif  // MIGD_BASE_LOG_WRITER_H_
