#include "engine/instance_state.h"

namespace migd::engine {

std::string_view InstanceStateName(InstanceState state) {
  switch (state) {
    case InstanceState::kNone:
      return "None";
    case InstanceState::kCreating:
      return "Creating";
    case InstanceState::kActive:
      return "Active";
    case InstanceState::kIdle:
      return "Idle";
    case InstanceState::kReclaiming:
      return "Reclaiming";
    case InstanceState::kDeleting:
      return "Deleting";
    case InstanceState::kError:
      return "Error";
  }
  return "Unknown";
}

bool CanTransition(InstanceState from, InstanceState to) {
  using S = InstanceState;
  switch (from) {
    case S::kNone:
      return to == S::kCreating;
    case S::kCreating:
      return to == S::kActive || to == S::kNone || to == S::kError;
    case S::kActive:
      return to == S::kIdle;
    case S::kIdle:
      return to == S::kActive || to == S::kReclaiming;
    case S::kReclaiming:
      return to == S::kDeleting;
    case S::kDeleting:
      return to == S::kNone || to == S::kError;
    case S::kError:
      return to == S::kNone;
  }
  return false;
}

store::RecordState ToRecordState(InstanceState state) {
  switch (state) {
    case InstanceState::kNone:
    case InstanceState::kCreating:
      return store::RecordState::kCreating;
    case InstanceState::kActive:
      return store::RecordState::kActive;
    case InstanceState::kIdle:
      return store::RecordState::kIdle;
    case InstanceState::kReclaiming:
      return store::RecordState::kReclaiming;
    case InstanceState::kDeleting:
      return store::RecordState::kDeleting;
    case InstanceState::kError:
      return store::RecordState::kError;
  }
  return store::RecordState::kError;
}

InstanceState FromRecordState(store::RecordState state) {
  switch (state) {
    case store::RecordState::kCreating:
      return InstanceState::kCreating;
    case store::RecordState::kActive:
      return InstanceState::kActive;
    case store::RecordState::kIdle:
      return InstanceState::kIdle;
    case store::RecordState::kReclaiming:
      return InstanceState::kReclaiming;
    case store::RecordState::kDeleting:
      return InstanceState::kDeleting;
    case store::RecordState::kError:
      return InstanceState::kError;
  }
  return InstanceState::kError;
}

}  // namespace migd::engine
