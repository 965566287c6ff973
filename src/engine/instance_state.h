// File: engine/instance_state.h
//
// The lifecycle states of a migd-managed MIG instance and their transition
// table (docs/engine.md, "Instance lifecycle"). The engine changes an
// instance's state only through CanTransition() (Registry::Transition); every
// transition not listed here is refused.
//
//   (none) -> Creating            plan: create
//   Creating -> Active            create succeeded and the allocation completed
//   Creating -> (none)            rollback destroyed what the request created
//   Creating -> Error             rollback could not destroy it
//   Active -> Idle                release (or rollback of a reuse)
//   Idle -> Active                a matching request reuses it
//   Idle -> Reclaiming            placement pressure, operator reclaim, TTL, idle cap
//   Reclaiming -> Deleting        destroy started (record says Deleting)
//   Deleting -> (none)            destroyed, record removed
//   Deleting -> Error             NVML destroy failed
//   Error -> (none)               the reconciler's retry destroyed it
//
// Recovery restores instances in the state it verified (Active, Idle, Error);
// that is a load, not a transition.
//
// Thread-safety: pure functions and value types.
#ifndef MIGD_ENGINE_INSTANCE_STATE_H_
#define MIGD_ENGINE_INSTANCE_STATE_H_

#include <string_view>

#include "store/record.h"

namespace migd::engine {

enum class InstanceState {
  kNone,  // not an instance: before creation / after destruction
  kCreating,
  kActive,
  kIdle,
  kReclaiming,
  kDeleting,
  kError,
};

inline constexpr InstanceState kAllInstanceStates[] = {
    InstanceState::kNone, InstanceState::kCreating,   InstanceState::kActive,
    InstanceState::kIdle, InstanceState::kReclaiming, InstanceState::kDeleting,
    InstanceState::kError};

// "None", "Creating", "Active", "Idle", "Reclaiming", "Deleting", "Error".
std::string_view InstanceStateName(InstanceState state);

// True exactly for the transitions listed in the file comment.
bool CanTransition(InstanceState from, InstanceState to);

// The record state of an instance state. REQUIRES: state != kNone.
store::RecordState ToRecordState(InstanceState state);
InstanceState FromRecordState(store::RecordState state);

}  // namespace migd::engine

#endif  // MIGD_ENGINE_INSTANCE_STATE_H_
