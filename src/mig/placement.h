// File: mig/placement.h
//
// A GPU-instance placement: [start, start+size) on the memory-slice axis,
// exactly nvmlGpuInstancePlacement_t {start, size} of nvml.h. GPUs have 4, 8 or 12
// memory units, so a placement is also a bit mask in a uint32_t.
//
// Thread-safety: value type.
#ifndef MIGD_MIG_PLACEMENT_H_
#define MIGD_MIG_PLACEMENT_H_

#include <compare>
#include <cstdint>
#include <ostream>
#include <string>

#include "base/status.h"

namespace migd::mig {

// The largest memory-unit count any placement table may use.
inline constexpr uint32_t kMaxMemorySlices = 32;

struct Placement {
  uint32_t start = 0;
  uint32_t size = 0;

  // Bits [start, start+size). REQUIRES: start + size <= kMaxMemorySlices.
  constexpr uint32_t Mask() const {
    return size >= 32 ? ~0u << start : ((1u << size) - 1u) << start;
  }
  constexpr uint32_t end() const { return start + size; }
  constexpr bool Overlaps(const Placement& o) const { return start < o.end() && o.start < end(); }
  constexpr bool Contains(const Placement& o) const { return start <= o.start && o.end() <= end(); }
  // "start:size", the notation of `nvidia-smi mig -lgipp`.
  std::string ToString() const;

  friend constexpr auto operator<=>(const Placement&, const Placement&) = default;
  friend constexpr bool operator==(const Placement&, const Placement&) = default;
};

std::ostream& operator<<(std::ostream& os, const Placement& p);

// Parses "start:size". kInvalidArgument names the text on failure.
StatusOr<Placement> ParsePlacement(std::string_view text);

}  // namespace migd::mig

#endif  // MIGD_MIG_PLACEMENT_H_
