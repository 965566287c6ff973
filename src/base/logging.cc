#include "base/logging.h"

#include <spdlog/fmt/ostr.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <utility>

#include "base/log_writer.h"

namespace migd {
namespace {

// spdlog creates its default logger lazily, on first use. Create it before
// main() instead, so that it exists before any thread does: otherwise the
// first log call may come from a thread that never synchronised with its
// creator (seen by ThreadSanitizer when a gRPC thread logs first).
[[maybe_unused]] const bool kDefaultLoggerCreated = spdlog::default_logger_raw() != nullptr;

// exit(3) runs this before spdlog's registry (constructed before main) is
// destroyed, so the logger is still there to flush.
void FlushAtExit() { FlushLogs(); }

}  // namespace

void FlushLogs() {
  if (spdlog::logger* l = spdlog::default_logger_raw(); l != nullptr) l->flush();
}

Status InitLogging(const LogOptions& options) {
  spdlog::level::level_enum level = spdlog::level::from_str(options.level);
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (level == spdlog::level::off && options.level != "off") {
    return InvalidArgumentError("unknown log level '" + options.level +
                                "' (want trace, debug, info, warn, error, critical or off)");
  }
  if (options.flush_interval < std::chrono::milliseconds::zero()) {
    return InvalidArgumentError("log flush interval must not be negative");
  }
  static const bool kAtExit = std::atexit(FlushAtExit) == 0;
  (void)kAtExit;
  spdlog::sink_ptr sink =
      std::make_shared<LogWriter>(options.to_stderr ? STDERR_FILENO : STDOUT_FILENO,
                                  LogWriter::Options{.interval = options.flush_interval});
  // Built directly rather than with spdlog::stderr_logger_mt("migd"): that one
  // registers the name and throws if it exists, so a second InitLogging (a
  // reload, another test) would throw. set_default_logger replaces the entry.
  auto logger = std::make_shared<spdlog::logger>("migd", std::move(sink));
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
  logger->set_level(level);
  spdlog::set_default_logger(logger);
  return OkStatus();
}

void Fields::AddRaw(std::string_view key, std::string_view value) {
  text_ += ' ';
  text_ += key;
  text_ += '=';
  // Values may come from clients and file names: control characters (a
  // forged line, a terminal escape) never reach the log raw.
  bool quote = value.empty();
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    quote = quote || u < 0x20 || u == 0x7f || c == ' ' || c == '"' || c == '=' || c == '\\';
  }
  if (!quote) {
    text_ += value;
    return;
  }
  text_ += '"';
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      text_ += '\\';
      text_ += c;
    } else if (c == '\n') {
      text_ += "\\n";
    } else if (c == '\t') {
      text_ += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      text_ += "\\x";
      text_ += kHex[u >> 4];
      text_ += kHex[u & 0xf];
    } else {
      text_ += c;
    }
  }
  text_ += '"';
}

std::ostream& operator<<(std::ostream& os, const Fields& f) { return os << f.str(); }

}  // namespace migd
