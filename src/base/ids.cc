#include "base/ids.h"

#include <cctype>
#include <string_view>

namespace migd {
namespace {

bool IsUuidBody(std::string_view s) {
  static constexpr int kGroups[] = {8, 4, 4, 4, 12};
  size_t pos = 0;
  for (int g = 0; g < 5; ++g) {
    if (g > 0) {
      if (pos >= s.size() || s[pos] != '-') return false;
      ++pos;
    }
    for (int i = 0; i < kGroups[g]; ++i, ++pos) {
      if (pos >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[pos]))) return false;
    }
  }
  return pos == s.size();
}

bool HasPrefixedUuid(const std::string& s, std::string_view prefix) {
  return s.size() > prefix.size() && std::string_view(s).substr(0, prefix.size()) == prefix &&
         IsUuidBody(std::string_view(s).substr(prefix.size()));
}

}  // namespace

bool IsValidGpuUuid(const std::string& s) { return HasPrefixedUuid(s, "GPU-"); }
bool IsValidMigUuid(const std::string& s) { return HasPrefixedUuid(s, "MIG-"); }

}  // namespace migd
