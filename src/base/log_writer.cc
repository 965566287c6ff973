#include "base/log_writer.h"

#include <pthread.h>
#include <spdlog/pattern_formatter.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <utility>

namespace migd {

LogWriter::LogWriter(int fd, Options options)
    : fd_(fd), options_(options), formatter_(std::make_unique<spdlog::pattern_formatter>()) {
  // The writer thread takes no signal: a process that blocks SIGTERM to read
  // it from a signalfd (migd) must not have it delivered here instead. A new
  // thread inherits the creator's mask, so block everything around the spawn.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  thread_ = std::thread([this] { Run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

LogWriter::~LogWriter() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
  MutexLock w(&write_mu_);
  WriteBuffered();
}

void LogWriter::log(const spdlog::details::log_msg& msg) {
  const bool urgent = msg.level >= spdlog::level::warn;
  bool overflow = false;
  bool wake = false;
  {
    spdlog::memory_buf_t formatted;
    MutexLock l(&mu_);
    formatter_->format(msg, formatted);
    buffer_.append(formatted.data(), formatted.size());
    overflow = buffer_.size() > options_.max_buffered;
    if (!urgent && !overflow && writer_idle_) {
      writer_idle_ = false;
      wake = true;
    }
  }
  if (urgent || overflow) {
    // Everything buffered before this line goes first, then the line.
    MutexLock w(&write_mu_);
    WriteBuffered();
    return;
  }
  if (wake) cv_.Signal();
}

void LogWriter::flush() {
  MutexLock w(&write_mu_);
  WriteBuffered();
}

void LogWriter::set_pattern(const std::string& pattern) {
  set_formatter(std::make_unique<spdlog::pattern_formatter>(pattern));
}

void LogWriter::set_formatter(std::unique_ptr<spdlog::formatter> formatter) {
  MutexLock l(&mu_);
  formatter_ = std::move(formatter);
}

void LogWriter::WriteBuffered() {
  std::string data;
  {
    MutexLock l(&mu_);
    data.swap(buffer_);
  }
  if (!data.empty()) WriteAll(data);
}

void LogWriter::WriteAll(const std::string& data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      dropped_.fetch_add(left, std::memory_order_relaxed);
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  writes_.fetch_add(1, std::memory_order_relaxed);
}

void LogWriter::Run() {
  for (;;) {
    {
      MutexLock l(&mu_);
      while (buffer_.empty() && !stop_) {
        writer_idle_ = true;  // log() wakes us for the next first line
        cv_.Wait(&mu_);
      }
      writer_idle_ = false;
      if (stop_) return;  // the destructor writes the rest
      // Gather the lines of one interval into one write (a stop cuts it short).
      const auto deadline = std::chrono::steady_clock::now() + options_.interval;
      while (!stop_ && cv_.WaitUntil(&mu_, deadline)) {
      }
    }
    MutexLock w(&write_mu_);
    WriteBuffered();
  }
}

}  // namespace migd
