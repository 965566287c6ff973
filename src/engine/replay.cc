#include "engine/replay.h"

namespace migd::engine {
namespace {

constexpr size_t kUnmatched = static_cast<size_t>(-1);

class Matcher {
 public:
  Matcher(size_t n, const std::function<bool(size_t, size_t)>& fits)
      : n_(n), fits_(fits), spec_of_instance_(n, kUnmatched) {}

  bool MatchAll() {
    for (size_t spec = 0; spec < n_; ++spec) {
      seen_.assign(n_, false);
      if (!Augment(spec)) return false;
    }
    return true;
  }
  std::vector<size_t> result() const { return spec_of_instance_; }

 private:
  // Finds an instance for `spec`, re-seating earlier specs along an
  // augmenting path. Prefers the instance at the same position.
  bool Augment(size_t spec) {
    for (size_t step = 0; step < n_; ++step) {
      const size_t inst = (spec + step) % n_;
      if (seen_[inst] || !fits_(spec, inst)) continue;
      seen_[inst] = true;
      if (spec_of_instance_[inst] == kUnmatched || Augment(spec_of_instance_[inst])) {
        spec_of_instance_[inst] = spec;
        return true;
      }
    }
    return false;
  }

  const size_t n_;
  const std::function<bool(size_t, size_t)>& fits_;
  std::vector<size_t> spec_of_instance_;
  std::vector<bool> seen_;
};

}  // namespace

std::optional<std::vector<size_t>> MatchReplay(size_t specs, size_t instances,
                                               const std::function<bool(size_t, size_t)>& fits) {
  if (specs != instances) return std::nullopt;
  Matcher m(specs, fits);
  if (!m.MatchAll()) return std::nullopt;
  return m.result();
}

}  // namespace migd::engine
