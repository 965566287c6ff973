// File: engine/replay.h
//
// MatchReplay: whether a repeated Allocate asks for the same instances as the
// allocation its request id already names. After a restart an allocation's
// instances come back in record order, not request order, so specs are
// matched to instances regardless of position: a bipartite matching (at most
// 64 each, augmenting paths) that prefers the instance at the spec's own
// position, so the common case costs one probe per spec.
//
// Thread-safety: a pure function.
#ifndef MIGD_ENGINE_REPLAY_H_
#define MIGD_ENGINE_REPLAY_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

namespace migd::engine {

// `fits(spec, instance)` says whether instance `instance` satisfies spec
// `spec`. Returns, for each instance, the index of the spec it answers — a
// perfect matching — or nullopt when the counts differ or none exists.
std::optional<std::vector<size_t>> MatchReplay(size_t specs, size_t instances,
                                               const std::function<bool(size_t, size_t)>& fits);

}  // namespace migd::engine

#endif  // MIGD_ENGINE_REPLAY_H_
