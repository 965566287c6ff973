// File: base/defer.h
//
// Defer runs a callback when it goes out of scope unless Disarm() was called:
// the way to undo step 1 of a multi-step hardware change when step 2 fails.
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(auto gi, driver.CreateGi(gpu, profile, placement));
//   Defer undo([&] { driver.DestroyGi(gpu, gi.id).IgnoreError(); });
//   MIGD_ASSIGN_OR_RETURN(auto ci, driver.CreateCi(gpu, gi.id));
//   undo.Disarm();
//
// Thread-safety: not thread-safe; owned by one scope.
#ifndef MIGD_BASE_DEFER_H_
#define MIGD_BASE_DEFER_H_

#include <utility>

namespace migd {

template <typename F>
class [[nodiscard]] Defer {
 public:
  explicit Defer(F fn) : fn_(std::move(fn)) {}
  Defer(const Defer&) = delete;
  Defer& operator=(const Defer&) = delete;
  ~Defer() {
    if (armed_) fn_();
  }
  void Disarm() { armed_ = false; }
  bool armed() const { return armed_; }

 private:
  F fn_;
  bool armed_ = true;
};

}  // namespace migd

#endif  // MIGD_BASE_DEFER_H_
