#include "base/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace migd {
namespace {

struct Armed {
  uint64_t at = 0;               // die on this arrival
  std::atomic<uint64_t> seen{0};
};

// Parsed once; never freed (points may be reached during static destruction).
std::map<std::string, Armed, std::less<>>* g_points = nullptr;
std::atomic<bool> g_armed{false};
std::once_flag g_once;

void Parse() {
  const char* env = std::getenv("MIGD_CRASH_POINTS");
  if (env == nullptr || *env == '\0') return;
  auto* points = new std::map<std::string, Armed, std::less<>>();
  std::string_view rest(env);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t at = item.find('@');
    const std::string_view name = item.substr(0, at);
    bool known = false;
    for (std::string_view k : kCrashPointNames) known = known || k == name;
    uint64_t n = 0;
    if (at != std::string_view::npos) {
      for (char c : item.substr(at + 1)) {
        if (c < '0' || c > '9' || n > 1000000) {
          n = 0;
          break;
        }
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
    }
    if (!known || n == 0) {
      std::fprintf(stderr, "MIGD_CRASH_POINTS: ignoring \"%.*s\" (want <point>@<N>, N >= 1)\n",
                   static_cast<int>(item.size()), item.data());
      continue;
    }
    (*points)[std::string(name)].at = n;
  }
  if (points->empty()) {
    delete points;
    return;
  }
  g_points = points;
  g_armed.store(true, std::memory_order_release);
}

}  // namespace

void CrashPoint(std::string_view name) {
  std::call_once(g_once, Parse);
  if (!g_armed.load(std::memory_order_acquire)) return;
  auto it = g_points->find(name);
  if (it == g_points->end()) return;
  if (it->second.seen.fetch_add(1) + 1 == it->second.at) {
    ::kill(::getpid(), SIGKILL);
    ::_exit(137);  // not reached
  }
}

}  // namespace migd
