#include "base/logging.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

#include "base/ids.h"
#include "testing/status_matchers.h"

namespace migd {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(InitLoggingTest, RejectsAnUnknownLevel) {
  EXPECT_THAT(InitLogging({.level = "verbose"}),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'verbose'"), HasSubstr("trace, debug, info"))));
  EXPECT_THAT(InitLogging({.level = ""}), StatusIs(StatusCode::kInvalidArgument, HasSubstr("''")));
}

TEST(InitLoggingTest, SetsTheLevelAndMayBeCalledAgain) {
  ASSERT_THAT(InitLogging({.level = "debug"}), IsOk());
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
  EXPECT_EQ(spdlog::default_logger()->name(), "migd");
  // A second call (e.g. a config reload, or a later test) reconfigures.
  ASSERT_THAT(InitLogging({.level = "warn", .to_stderr = false}), IsOk());
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::warn);
  ASSERT_THAT(InitLogging({.level = "off"}), IsOk());
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::off);
}

// Lines still buffered are written at exit(3) and by spdlog::shutdown(), not
// only by the writer's timer (an hour here) or a warn.
TEST(InitLoggingDeathTest, ExitWritesBufferedInfoLines) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (!InitLogging({.level = "info", .flush_interval = std::chrono::hours(1)}).ok()) {
          std::_Exit(3);
        }
        spdlog::info("buffered until exit");
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "buffered until exit");
}

TEST(InitLoggingDeathTest, ShutdownWritesBufferedInfoLines) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (!InitLogging({.level = "info", .flush_interval = std::chrono::hours(1)}).ok()) {
          std::_Exit(3);
        }
        spdlog::info("buffered until shutdown");
        spdlog::shutdown();
        std::_Exit(0);  // no exit handlers: only shutdown can have written it
      },
      ::testing::ExitedWithCode(0), "buffered until shutdown");
}

TEST(InitLoggingTest, FlushLogsWritesAndANegativeIntervalIsRefused) {
  EXPECT_THAT(InitLogging({.flush_interval = std::chrono::milliseconds(-1)}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("interval")));
  ASSERT_THAT(InitLogging({.level = "info"}), IsOk());
  FlushLogs();  // nothing buffered: a no-op
}

TEST(FieldsTest, PlainValues) {
  Fields f;
  f.Add("gpu", "GPU-1").Add("gi", 3).Add("placement", "4:4");
  EXPECT_EQ(f.str(), " gpu=GPU-1 gi=3 placement=4:4");
  EXPECT_EQ(Fields().str(), "");
}

TEST(FieldsTest, StreamsStrongIds) {
  EXPECT_EQ(Fields().Add("gi", NvmlGiId(7)).Add("uuid", GpuUuid("GPU-a")).str(),
            " gi=7 uuid=GPU-a");
}

// Strings, integers and StrongIds skip the stream; what they write must be
// what operator<< writes, for every kind of value a log line carries.
template <typename T>
std::string Streamed(const T& v) {
  std::ostringstream os;
  os << v;
  return " v=" + os.str();
}

TEST(FieldsTest, WritesEveryValueAsOperatorShiftWould) {
  EXPECT_EQ(Fields().Add("v", std::numeric_limits<int64_t>::min()).str(),
            Streamed(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(Fields().Add("v", std::numeric_limits<uint64_t>::max()).str(),
            Streamed(std::numeric_limits<uint64_t>::max()));
  EXPECT_EQ(Fields().Add("v", -7).str(), " v=-7");
  EXPECT_EQ(Fields().Add("v", size_t{0}).str(), " v=0");
  EXPECT_EQ(Fields().Add("v", static_cast<uint16_t>(65535)).str(), " v=65535");
  // bool and the char types keep the stream's spelling: 1/0 and characters.
  EXPECT_EQ(Fields().Add("v", true).str(), Streamed(true));
  EXPECT_EQ(Fields().Add("v", true).str(), " v=1");
  EXPECT_EQ(Fields().Add("v", 'x').str(), " v=x");
  EXPECT_EQ(Fields().Add("v", static_cast<unsigned char>('y')).str(), " v=y");
  EXPECT_EQ(Fields().Add("v", 0.25).str(), Streamed(0.25));
  EXPECT_EQ(Fields().Add("v", 1e-7).str(), Streamed(1e-7));
  EXPECT_EQ(Fields().Add("v", std::string("s")).str(), " v=s");
  EXPECT_EQ(Fields().Add("v", std::string_view("sv")).str(), " v=sv");
  const char* c_string = "cs";
  EXPECT_EQ(Fields().Add("v", c_string).str(), " v=cs");
  EXPECT_EQ(Fields().Add("v", NvmlGiId(4294967295u)).str(), " v=4294967295");
  EXPECT_EQ(Fields().Add("v", GpuUuid("GPU-x y")).str(), " v=\"GPU-x y\"");
  EXPECT_EQ(Fields().Add("v", InvalidArgumentError("bad")).str(), " v=\"INVALID_ARGUMENT: bad\"");
}

TEST(FieldsTest, QuotesValuesThatWouldBreakParsing) {
  EXPECT_EQ(Fields().Add("pod", "ns/name with space").str(), " pod=\"ns/name with space\"");
  EXPECT_EQ(Fields().Add("msg", "a=b").str(), " msg=\"a=b\"");
  EXPECT_EQ(Fields().Add("msg", "say \"hi\"").str(), " msg=\"say \\\"hi\\\"\"");
  EXPECT_EQ(Fields().Add("path", "C:\\x").str(), " path=\"C:\\\\x\"");
  EXPECT_EQ(Fields().Add("err", "line1\nline2").str(), " err=\"line1\\nline2\"");
  EXPECT_EQ(Fields().Add("tab", "a\tb").str(), " tab=\"a\\tb\"");
  EXPECT_EQ(Fields().Add("empty", "").str(), " empty=\"\"");
}

// A file name or client string cannot forge a log line or send a terminal
// escape: control characters are written as \xNN, inside quotes.
TEST(FieldsTest, EscapesControlCharacters) {
  EXPECT_EQ(Fields().Add("file", "a\rb").str(), " file=\"a\\x0db\"");
  EXPECT_EQ(Fields().Add("file", "\x1b[31mred").str(), " file=\"\\x1b[31mred\"");
  EXPECT_EQ(Fields().Add("file", std::string("nul\0byte", 8)).str(), " file=\"nul\\x00byte\"");
  EXPECT_EQ(Fields().Add("file", "del\x7f").str(), " file=\"del\\x7f\"");
  // UTF-8 passes through unquoted.
  EXPECT_EQ(Fields()
                .Add("owner",
                     "gr\xc3\xbc\xc3\x9f"
                     "e")
                .str(),
            " owner=gr\xc3\xbc\xc3\x9f"
            "e");
}

TEST(FieldsTest, FormatsWithFmtAndStreams) {
  const Fields f = Fields().Add("gpu", "GPU-1").Add("ci", 0);
  EXPECT_EQ(fmt::format("instance created{}", f), "instance created gpu=GPU-1 ci=0");
  std::ostringstream os;
  os << "x" << f;
  EXPECT_EQ(os.str(), "x gpu=GPU-1 ci=0");
}

}  // namespace
}  // namespace migd
