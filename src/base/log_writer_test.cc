#include "base/log_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/file_util.h"
#include "testing/eventually.h"

namespace migd {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

// A log file and a logger that writes to it through a LogWriter.
class LogFile {
 public:
  explicit LogFile(LogWriter::Options o, const std::string& name = "log") {
    path_ = ::testing::TempDir() + "/log_writer_" + name + "_" + std::to_string(::getpid());
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    writer_ = std::make_shared<LogWriter>(fd_, o);
    logger_ = std::make_shared<spdlog::logger>("test", writer_);
    logger_->set_pattern("%l %v");
    logger_->set_level(spdlog::level::trace);
  }
  ~LogFile() {
    logger_.reset();
    writer_.reset();
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  std::string Text() const {
    auto s = ReadFileToString(path_);
    return s.ok() ? *s : "<unreadable>";
  }
  spdlog::logger& log() { return *logger_; }
  LogWriter& writer() { return *writer_; }
  // Destroys the logger and the writer (what spdlog::shutdown does).
  void Drop() {
    logger_.reset();
    writer_.reset();
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::shared_ptr<LogWriter> writer_;
  std::shared_ptr<spdlog::logger> logger_;
};

// An interval longer than any test: only warn, flush, overflow or the
// destructor can write.
constexpr LogWriter::Options kNoTimer{.interval = hours(1)};

TEST(LogWriterTest, InfoLinesAreNotWrittenByTheCaller) {
  LogFile f(kNoTimer, "info");
  f.log().info("first");
  f.log().debug("second");
  EXPECT_EQ(f.Text(), "");
  EXPECT_EQ(f.writer().writes(), 0u);
  f.log().flush();
  EXPECT_EQ(f.Text(), "info first\ndebug second\n");
  EXPECT_EQ(f.writer().writes(), 1u);  // one write(2) for both lines
}

TEST(LogWriterTest, WarnAndErrorAreWrittenAtOnceAfterEarlierLines) {
  LogFile f(kNoTimer, "warn");
  f.log().info("a");
  f.log().info("b");
  f.log().warn("c");
  EXPECT_EQ(f.Text(), "info a\ninfo b\nwarning c\n");
  f.log().info("d");
  f.log().error("e");
  EXPECT_EQ(f.Text(), "info a\ninfo b\nwarning c\ninfo d\nerror e\n");
  f.log().critical("f");
  EXPECT_EQ(f.Text(), "info a\ninfo b\nwarning c\ninfo d\nerror e\ncritical f\n");
}

TEST(LogWriterTest, DestroyingTheWriterWritesWhatItHolds) {
  LogFile f(kNoTimer, "drop");
  for (int i = 0; i < 100; ++i) f.log().info("line {}", i);
  EXPECT_EQ(f.Text(), "");
  f.Drop();
  const std::string text = f.Text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 100);
  EXPECT_NE(text.find("info line 99\n"), std::string::npos);
}

TEST(LogWriterTest, TheWriterThreadWritesWithinTheInterval) {
  LogFile f({.interval = milliseconds(1)}, "timer");
  f.log().info("by the thread");
  // Nobody flushes: the writer thread must.
  EXPECT_TRUE(testing::Eventually([&] { return f.Text() == "info by the thread\n"; }));
  // Idle again, then a second batch.
  f.log().info("again");
  EXPECT_TRUE(testing::Eventually([&] { return f.Text() == "info by the thread\ninfo again\n"; }));
}

TEST(LogWriterTest, AFullBufferIsWrittenByTheCallerThatOverflowsIt) {
  LogFile f({.interval = hours(1), .max_buffered = 64}, "overflow");
  f.log().info("0123456789012345678901234567");  // 34 bytes with "info " and '\n'
  EXPECT_EQ(f.Text(), "");
  f.log().info("0123456789012345678901234567");  // 68 > 64: written now
  EXPECT_EQ(f.Text().size(), 68u);
  EXPECT_EQ(f.writer().dropped_bytes(), 0u);
}

TEST(LogWriterTest, ConcurrentLinesStayWholeAndInOrderPerThread) {
  LogFile f({.interval = milliseconds(1)}, "threads");
  constexpr int kThreads = 8, kLines = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&f, t] {
      for (int i = 0; i < kLines; ++i) {
        if (i % 50 == 0) {
          f.log().warn("t{} n{}", t, i);
        } else {
          f.log().info("t{} n{}", t, i);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  f.log().flush();
  std::istringstream in(f.Text());
  std::map<int, int> next;
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    int t = -1, n = -1;
    char level[16];
    ASSERT_EQ(std::sscanf(line.c_str(), "%15s t%d n%d", level, &t, &n), 3) << line;
    EXPECT_EQ(n, next[t]) << line;
    next[t] = n + 1;
  }
  EXPECT_EQ(lines, kThreads * kLines);
}

TEST(LogWriterTest, WriteErrorsDropTheBatchAndAreCounted) {
  const std::string path = ::testing::TempDir() + "/log_writer_readonly";
  std::ofstream(path) << "";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // write(2): EBADF
  ASSERT_GE(fd, 0);
  {
    auto w = std::make_shared<LogWriter>(fd, kNoTimer);
    spdlog::logger l("ro", w);
    l.set_pattern("%v");
    l.warn("lost");  // must not crash or block
    EXPECT_EQ(w->dropped_bytes(), 5u);
    l.info("also lost");
  }
  ::close(fd);
}

// migd blocks SIGTERM after logging is set up and reads it from a signalfd:
// the writer thread, created earlier, must not take the signal instead (its
// default action would kill the process: exit code 143 instead of a clean
// stop).
TEST(LogWriterDeathTest, TheWriterThreadTakesNoSignal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        LogWriter w(STDERR_FILENO, kNoTimer);
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &term, nullptr);
        ::kill(::getpid(), SIGTERM);
        int sig = 0;
        sigwait(&term, &sig);
        std::_Exit(sig == SIGTERM ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace migd
