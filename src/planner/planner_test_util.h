// File: planner/planner_test_util.h
//
// Test-only helpers for the planner tests: terse builders for layouts and
// requests, applying a Plan to a layout (the engine's job, simulated), and an
// independent legality check of a Plan against mig::Layout.
//
// Thread-safety: plain functions over values.
#ifndef MIGD_PLANNER_PLANNER_TEST_UTIL_H_
#define MIGD_PLANNER_PLANNER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mig/catalog.h"
#include "mig/layout.h"
#include "planner/planner.h"

namespace migd::planner::test {

inline const mig::GpuModel& Model(std::string_view key) {
  const mig::GpuModel* m = mig::Catalog::Default().FindModel(key);
  if (m == nullptr) {
    ADD_FAILURE() << "model " << key << " not in the catalogue";
    static const mig::GpuModel kEmpty;
    return kEmpty;
  }
  return *m;
}

inline mig::Placement P(std::string_view text) {
  StatusOr<mig::Placement> p = mig::ParsePlacement(text);
  if (!p.ok()) {
    ADD_FAILURE() << p.status();
    return {};
  }
  return *p;
}

inline Occupant Active(std::string profile, std::string_view placement, std::string key) {
  return Occupant{std::move(profile), P(placement), OccupantState::kActive, std::move(key), 0};
}
inline Occupant Idle(std::string profile, std::string_view placement, std::string key,
                     int64_t last_used) {
  return Occupant{std::move(profile), P(placement), OccupantState::kIdle, std::move(key),
                  last_used};
}
inline Occupant Error(std::string profile, std::string_view placement, std::string key = "") {
  return Occupant{std::move(profile), P(placement), OccupantState::kError, std::move(key), 0};
}
inline Occupant Foreign(std::string profile, std::string_view placement, std::string key = "") {
  return Occupant{std::move(profile), P(placement), OccupantState::kForeign, std::move(key), 0};
}

inline GpuLayout Gpu(uint32_t index, std::string_view model, std::vector<Occupant> occupants = {}) {
  return GpuLayout{GpuIndex(index), &Model(model), std::move(occupants)};
}

// "3g.40gb" anywhere.
inline InstanceRequest Any(std::string profile) {
  return InstanceRequest{std::move(profile), std::nullopt, std::nullopt};
}
// "gpuN/3g.40gb".
inline InstanceRequest OnGpu(std::string profile, uint32_t gpu) {
  return InstanceRequest{std::move(profile), GpuIndex(gpu), std::nullopt};
}
// "gpuN/3g.40gb@4:4": an exact, scheduler-selected placement.
inline InstanceRequest At(std::string profile, uint32_t gpu, std::string_view placement) {
  return InstanceRequest{std::move(profile), GpuIndex(gpu), P(placement)};
}
// "3g.40gb@4:4" on any GPU.
inline InstanceRequest AtAnyGpu(std::string profile, std::string_view placement) {
  return InstanceRequest{std::move(profile), std::nullopt, P(placement)};
}

inline PlanInput Input(std::vector<GpuLayout> gpus, std::vector<InstanceRequest> request,
                       DemandWeights demand = {}) {
  return PlanInput{std::move(gpus), std::move(request), std::move(demand)};
}

// "gpu:profile@start:size" of each instance, e.g. "0:3g.40gb@4:4".
inline std::vector<std::string> Where(const Plan& plan) {
  std::vector<std::string> out;
  for (const InstancePlan& ip : plan.instances) {
    out.push_back(std::to_string(ip.gpu.value()) + ":" + ip.profile + "@" +
                  ip.placement.ToString());
  }
  return out;
}

inline std::vector<std::string> Keys(const std::vector<ReclaimedInstance>& rs) {
  std::vector<std::string> out;
  out.reserve(rs.size());
  for (const ReclaimedInstance& r : rs) out.push_back(r.key);
  return out;
}

// Executes `plan` on `in.gpus` as the engine would: reclaimed instances
// disappear, reused ones become Active, created ones appear as Active with
// keys "<prefix><n>".
inline void ApplyPlan(PlanInput& in, const Plan& plan, const std::string& prefix) {
  std::set<std::string> reclaimed;
  std::set<std::string> reused;
  for (const InstancePlan& ip : plan.instances) {
    for (const ReclaimedInstance& r : ip.reclaim) reclaimed.insert(r.key);
    if (ip.stage == Stage::kReuse) reused.insert(ip.reuse_key);
  }
  int n = 0;
  for (GpuLayout& g : in.gpus) {
    std::vector<Occupant> kept;
    for (Occupant& o : g.occupants) {
      if (reclaimed.count(o.key) != 0) continue;
      if (reused.count(o.key) != 0) o.state = OccupantState::kActive;
      kept.push_back(o);
    }
    for (const InstancePlan& ip : plan.instances) {
      if (ip.gpu != g.index || ip.stage == Stage::kReuse) continue;
      kept.push_back(Occupant{ip.profile, ip.placement, OccupantState::kActive,
                              prefix + std::to_string(n++), 0});
    }
    g.occupants = std::move(kept);
  }
}

// Checks `plan` against `in` independently of the planner: every request
// instance is served as asked (profile, GPU, exact placement), reuses name
// distinct Idle instances of that profile and placement, reclaims name
// distinct Idle instances (only overlapping ones for exact placements) and
// are never reused, and the resulting layout of every GPU is legal for
// mig::Layout.
inline ::testing::AssertionResult PlanIsLegal(const PlanInput& in, const Plan& plan) {
  if (plan.instances.size() != in.request.size()) {
    return ::testing::AssertionFailure()
           << "instances " << plan.instances.size() << " != request " << in.request.size();
  }
  std::set<std::string> reclaimed;
  std::set<std::string> reused;
  for (const InstancePlan& ip : plan.instances) {
    for (const ReclaimedInstance& r : ip.reclaim) {
      if (!reclaimed.insert(r.key).second) {
        return ::testing::AssertionFailure() << "reclaimed twice: " << r.key;
      }
    }
    if (ip.stage == Stage::kReuse && !reused.insert(ip.reuse_key).second) {
      return ::testing::AssertionFailure() << "reused twice: " << ip.reuse_key;
    }
  }
  for (const std::string& k : reused) {
    if (reclaimed.count(k) != 0) {
      return ::testing::AssertionFailure() << "reused and reclaimed: " << k;
    }
  }
  for (const GpuLayout& g : in.gpus) {
    mig::Layout layout(*g.model);
    for (const Occupant& o : g.occupants) {
      const bool gone = reclaimed.count(o.key) != 0;
      const bool handed_out = reused.count(o.key) != 0;
      if ((gone || handed_out) && o.state != OccupantState::kIdle) {
        return ::testing::AssertionFailure()
               << "touched a " << OccupantStateName(o.state) << " instance: " << o.key;
      }
      if (gone) continue;
      const Status s = layout.Add(*g.model->FindProfileByName(o.profile), o.placement);
      if (!s.ok()) return ::testing::AssertionFailure() << "input layout illegal: " << s;
    }
    for (size_t i = 0; i < plan.instances.size(); ++i) {
      const InstancePlan& ip = plan.instances[i];
      const InstanceRequest& req = in.request[i];
      const mig::GiProfile* want = g.model->FindProfileByName(req.profile);
      if (ip.gpu != g.index) continue;
      if (want == nullptr || want->name != ip.profile) {
        return ::testing::AssertionFailure() << "instance " << i << " got " << ip.profile;
      }
      if (req.gpu.has_value() && *req.gpu != ip.gpu) {
        return ::testing::AssertionFailure() << "instance " << i << " not on its GPU";
      }
      if (req.placement.has_value() && *req.placement != ip.placement) {
        return ::testing::AssertionFailure() << "instance " << i << " not at its placement";
      }
      if (ip.stage == Stage::kReuse) {
        bool found = false;
        for (const Occupant& o : g.occupants) {
          found = found ||
                  (o.key == ip.reuse_key && o.state == OccupantState::kIdle &&
                   o.placement == ip.placement && g.model->FindProfileByName(o.profile) == want);
        }
        if (!found) return ::testing::AssertionFailure() << "bad reuse " << ip.reuse_key;
        continue;
      }
      if (req.placement.has_value()) {
        for (const ReclaimedInstance& r : ip.reclaim) {
          if (!r.placement.Overlaps(ip.placement)) {
            return ::testing::AssertionFailure()
                   << "exact placement reclaimed a non-overlapping " << r.key;
          }
        }
      }
      const Status s = layout.Add(*want, ip.placement);
      if (!s.ok()) return ::testing::AssertionFailure() << "instance " << i << ": " << s;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace migd::planner::test

#endif  // MIGD_PLANNER_PLANNER_TEST_UTIL_H_
