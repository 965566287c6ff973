// File: base/strong_id.h
//
// StrongId<Tag, Rep>: a distinct type per kind of identifier, so that a GI id
// cannot be passed where a CI id or a profile index is expected. Explicit
// construction, comparisons, std::hash and operator<<.
//
// Example:
//   struct GiIdTag {};
//   using NvmlGiId = StrongId<GiIdTag, uint32_t>;
//   NvmlGiId gi(3);  // NvmlGiId gi = 3; does not compile.
//
// Thread-safety: value type.
#ifndef MIGD_BASE_STRONG_ID_H_
#define MIGD_BASE_STRONG_ID_H_

#include <compare>
#include <functional>
#include <ostream>
#include <utility>

namespace migd {

template <typename Tag, typename Rep>
class StrongId {
 public:
  using RepType = Rep;
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(std::move(value)) {}

  constexpr const Rep& value() const { return value_; }

  friend constexpr auto operator<=>(const StrongId&, const StrongId&) = default;
  friend constexpr bool operator==(const StrongId&, const StrongId&) = default;

  friend std::ostream& operator<<(std::ostream& os, const StrongId& id) {
    return os << id.value_;
  }

 private:
  Rep value_{};
};

}  // namespace migd

template <typename Tag, typename Rep>
struct std::hash<migd::StrongId<Tag, Rep>> {
  size_t operator()(const migd::StrongId<Tag, Rep>& id) const noexcept {
    return std::hash<Rep>()(id.value());
  }
};

#endif  // MIGD_BASE_STRONG_ID_H_
