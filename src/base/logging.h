// File: base/logging.h
//
// One process-wide spdlog logger, configured once in main(). Every message is
// a short human sentence followed by stable key=value fields:
//   2026-11-29T07:32:10.123Z info instance created gpu=GPU-… gi=3 ci=0 mig=MIG-…
//
// Lines go through a LogWriter (base/log_writer.h): info and below are
// written in batches by a writer thread, at most `flush_interval` after they
// were logged; warn and above are written before the call returns. Nothing
// is lost at exit(3), spdlog::shutdown() or FlushLogs(); a SIGKILL loses at
// most the last interval's info lines.
//
// Example:
//   migd::InitLogging({.level = "info"});
//   spdlog::info("instance created {}", migd::Fields().Add("gpu", uuid).Add("gi", 3));
//
// Thread-safety: InitLogging must be called before other threads log;
// FlushLogs is thread-safe; Fields is a value type.
#ifndef MIGD_BASE_LOGGING_H_
#define MIGD_BASE_LOGGING_H_

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/status.h"
#include "base/strong_id.h"

namespace migd {

struct LogOptions {
  // trace, debug, info, warn, error, critical, off.
  std::string level = "info";
  // Log to stderr (true) or stdout.
  bool to_stderr = true;
  // Longest time an info line waits in memory before it is written.
  std::chrono::milliseconds flush_interval{50};
};

// Configures the default spdlog logger (a new LogWriter on fd 2 or 1; the
// previous one writes what it holds). kInvalidArgument for an unknown level.
Status InitLogging(const LogOptions& options);

// Writes every buffered line of the default logger before returning.
void FlushLogs();

namespace logging_internal {
template <typename T>
struct IsStrongId : std::false_type {};
template <typename Tag, typename Rep>
struct IsStrongId<StrongId<Tag, Rep>> : std::true_type {};
// Integers that operator<< prints as decimal digits (not bool, not the char
// types, which it prints as 1/0 and as characters).
template <typename T>
inline constexpr bool kDecimalInteger =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
    !std::is_same_v<T, signed char> && !std::is_same_v<T, unsigned char> &&
    !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> &&
    !std::is_same_v<T, char32_t>;
}  // namespace logging_internal

// Builds " key=value key2=value2"; values with spaces, quotes or '=' are
// double-quoted with escapes, so the line stays machine-parseable. A value is
// written as operator<< writes it; strings, integers and StrongIds of them
// skip the stream (the engine logs every transition on the request path).
class Fields {
 public:
  template <typename T>
  Fields& Add(std::string_view key, const T& value) {
    if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      AddRaw(key, std::string_view(value));
    } else if constexpr (logging_internal::IsStrongId<T>::value) {
      Add(key, value.value());
    } else if constexpr (logging_internal::kDecimalInteger<T>) {
      char digits[24];  // 20 digits and a sign are the most a 64-bit integer needs
      const std::to_chars_result r = std::to_chars(digits, digits + sizeof(digits), value);
      AddRaw(key, std::string_view(digits, static_cast<size_t>(r.ptr - digits)));
    } else {
      std::ostringstream os;
      os << value;
      AddRaw(key, os.str());
    }
    return *this;
  }
  const std::string& str() const { return text_; }

 private:
  void AddRaw(std::string_view key, std::string_view value);
  std::string text_;
};

std::ostream& operator<<(std::ostream& os, const Fields& f);

}  // namespace migd

template <>
struct fmt::formatter<migd::Fields> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const migd::Fields& f, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(f.str(), ctx);
  }
};

#endif  // MIGD_BASE_LOGGING_H_
