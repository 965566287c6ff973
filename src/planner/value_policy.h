// File: planner/value_policy.h
//
// Internal to the planner. The value policy's part of one call: attaching
// to every canonical GPU its model's ValueTable and the state of its pinned
// view (Active, Error and Foreign instances; Idle ones count as free), and
// the value a plan gives up on a GPU, h(before) − h(after), in kValueScale
// units. The policy applies to a call only when every GPU has a table that
// holds every profile present or requested there; otherwise the call uses
// the cost order (the safety rules and searches are the same either way).
//
// Thread-safety: pure functions over the call's data; the tables are
// immutable.
#ifndef MIGD_PLANNER_VALUE_POLICY_H_
#define MIGD_PLANNER_VALUE_POLICY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "planner/gpu_context.h"
#include "planner/plan_input.h"
#include "planner/value_service.h"

namespace migd::planner::internal_planner {

// Sets Gpu::values, value_state, occ_slots and every Action::slot when the
// policy applies (returns true); `keep` holds the tables for the call.
// Leaves `canon` unchanged and returns false otherwise.
bool AttachValues(ValueService& service, Canonical& canon,
                  std::vector<std::shared_ptr<const ValueTable>>& keep);

// The pinned view's state after `ov`, or -1 (never for a legal overlay).
int ValueStateAfter(const Gpu& g, const Overlay& ov);

// Q(h(before)) − Q(h(after)), Q(x) = round(x · kValueScale).
int64_t ValueLoss(const Gpu& g, const Overlay& ov);

}  // namespace migd::planner::internal_planner

#endif  // MIGD_PLANNER_VALUE_POLICY_H_
