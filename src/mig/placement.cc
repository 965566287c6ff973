#include "mig/placement.h"

#include <charconv>
#include <system_error>

namespace migd::mig {
namespace {

// Strict decimal: digits only, no sign, no whitespace, no overflow.
bool ParseUint32(std::string_view text, uint32_t* out) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

std::string Placement::ToString() const {
  return std::to_string(start) + ":" + std::to_string(size);
}

std::ostream& operator<<(std::ostream& os, const Placement& p) { return os << p.ToString(); }

StatusOr<Placement> ParsePlacement(std::string_view text) {
  const size_t colon = text.find(':');
  Placement p;
  if (colon == std::string_view::npos || !ParseUint32(text.substr(0, colon), &p.start) ||
      !ParseUint32(text.substr(colon + 1), &p.size)) {
    return InvalidArgumentError("placement '" + std::string(text) +
                                "' is not of the form start:size");
  }
  if (p.size == 0) {
    return InvalidArgumentError("placement '" + std::string(text) + "' has size 0");
  }
  if (p.start >= kMaxMemorySlices || p.size > kMaxMemorySlices - p.start) {
    return InvalidArgumentError("placement '" + std::string(text) + "' extends past slice " +
                                std::to_string(kMaxMemorySlices));
  }
  return p;
}

}  // namespace migd::mig
