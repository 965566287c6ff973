// Test helpers shared by engine_test and engine_sim_test.
#ifndef MIGD_ENGINE_ENGINE_TEST_UTIL_H_
#define MIGD_ENGINE_ENGINE_TEST_UTIL_H_

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "driver/gpu_driver.h"
#include "engine/instance_observer.h"
#include "engine/manager.h"
#include "store/record_store.h"

// Like MIGD_ASSERT_OK, but copies the status first: MIGD_ASSERT_OK binds a
// reference to a temporary's status, which GCC 12 -O2 reports as dangling
// (-Wdangling-pointer) when `expr` returns by value.
#define ENGINE_ASSERT_OK(expr)                                              \
  do {                                                                      \
    const ::migd::Status engine_s_ = ::migd::engine::testing::ToStatus(expr); \
    ASSERT_TRUE(engine_s_.ok()) << engine_s_.ToString();                    \
  } while (0)

namespace migd::engine::testing {

// One requested instance: a profile name, optionally pinned to a GPU and an
// exact placement.
inline InstanceSpec Spec(std::string profile, std::optional<uint32_t> gpu = std::nullopt,
                         std::optional<mig::Placement> placement = std::nullopt) {
  InstanceSpec s;
  s.profile = std::move(profile);
  if (gpu) s.gpu = GpuIndex(*gpu);
  s.placement = placement;
  return s;
}

// Request `id` owned by pod default/pod-<id> (uid-<id>, container main), or
// with `pod_owner` false by the opaque owner "owner-<id>".
inline AllocateRequest Req(const std::string& id, std::vector<InstanceSpec> specs,
                           bool pod_owner = true) {
  AllocateRequest r;
  r.request_id = id;
  r.owner = pod_owner ? store::Owner::Pod("default", "pod-" + id, PodUid("uid-" + id), "main")
                      : store::Owner::Opaque("owner-" + id);
  r.instances = std::move(specs);
  return r;
}

inline Status ToStatus(const Status& s) { return s; }
template <typename T>
Status ToStatus(const StatusOr<T>& s) {
  return s.status();
}

// Counts publish/unpublish calls and tracks what is published.
class CountingObserver final : public InstanceObserver {
 public:
  Status OnPublish(const PublishedInstance& i) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++publishes_;
    published_.insert(i.mig_uuid.value());
    return fail_publish_;
  }
  Status OnUnpublish(const PublishedInstance& i) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++unpublishes_;
    published_.erase(i.mig_uuid.value());
    return OkStatus();
  }
  int publishes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return publishes_;
  }
  int unpublishes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return unpublishes_;
  }
  std::set<std::string> published() const {
    std::lock_guard<std::mutex> lock(mu_);
    return published_;
  }
  void FailPublish(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_publish_ = std::move(s);
  }

 private:
  mutable std::mutex mu_;
  int publishes_ = 0;
  int unpublishes_ = 0;
  std::set<std::string> published_;
  Status fail_publish_;
};

// "gpu=<i> gi=<id> profile=<p> at=<s:n> ci=<id>:<uuid>,..." per live GI.
inline std::vector<std::string> LiveLayout(driver::GpuDriver& d) {
  std::vector<std::string> out;
  auto gpus = d.ListGpus();
  if (!gpus.ok()) return {"error: " + gpus.status().ToString()};
  for (const auto& g : *gpus) {
    auto gis = d.ListGpuInstances(g.index);
    if (!gis.ok()) continue;
    for (const auto& gi : *gis) {
      std::string s = "gpu=" + std::to_string(g.index.value()) + " gi=" +
                      std::to_string(gi.id.value()) + " profile=" +
                      std::to_string(gi.profile_id.value()) + " at=" + gi.placement.ToString() +
                      " ci=";
      for (const auto& ci : gi.compute_instances) {
        s += std::to_string(ci.id.value()) + ":" + ci.mig_uuid.value() + ",";
      }
      out.push_back(s);
    }
  }
  return out;
}

// Checks the quiescent invariants: every live GI is tracked by the manager
// (with a committed record of the same ids and state) or preserved as
// foreign; every record is an instance the manager tracks; no intent record
// remains; no two instances overlap.
inline void ExpectConsistent(Manager& mgr, driver::GpuDriver& d, store::RecordStore& store) {
  ManagerSnapshot snap = mgr.List();
  auto loaded = store.LoadAll();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::map<store::RecordKey, store::Record> records;
  for (const auto& r : loaded->records) {
    EXPECT_EQ(r.phase, store::RecordPhase::kCommitted) << "intent remains: " << r.key;
    records[r.key] = r;
  }
  std::map<std::string, const InstanceView*> by_gi;  // "gpu:gi"
  for (const auto& v : snap.instances) {
    by_gi[v.gpu_uuid.value() + ":" + std::to_string(v.gi_id.value())] = &v;
    store::RecordKey k{v.gpu_uuid, v.profile_id, v.placement};
    auto it = records.find(k);
    if (it == records.end()) {
      ADD_FAILURE() << "tracked instance without record: " << k << " " << v.mig_uuid;
      continue;
    }
    EXPECT_EQ(it->second.state, ToRecordState(v.state)) << k;
    EXPECT_EQ(it->second.mig_uuid.value_or(MigUuid("")), v.mig_uuid) << k;
    EXPECT_EQ(it->second.gi_id.value_or(NvmlGiId(999)), v.gi_id) << k;
    records.erase(it);
  }
  for (const auto& [k, r] : records) ADD_FAILURE() << "record without instance: " << k;
  std::set<std::string> foreign;
  for (const auto& f : snap.foreign) {
    foreign.insert(f.gpu_uuid.value() + ":" + std::to_string(f.gi_id.value()));
  }
  auto gpus = d.ListGpus();
  ASSERT_TRUE(gpus.ok());
  size_t live_count = 0;
  for (const auto& g : *gpus) {
    auto gis = d.ListGpuInstances(g.index);
    ASSERT_TRUE(gis.ok());
    for (const auto& gi : *gis) {
      ++live_count;
      const std::string key = g.uuid.value() + ":" + std::to_string(gi.id.value());
      auto it = by_gi.find(key);
      if (it == by_gi.end()) {
        EXPECT_TRUE(foreign.count(key)) << "live GI neither tracked nor foreign: " << key;
        continue;
      }
      const InstanceView& v = *it->second;
      EXPECT_EQ(gi.placement, v.placement) << key;
      EXPECT_EQ(gi.profile_id, v.profile_id) << key;
      if (v.state == InstanceState::kActive || v.state == InstanceState::kIdle) {
        ASSERT_EQ(gi.compute_instances.size(), 1u) << key;
        EXPECT_EQ(gi.compute_instances[0].mig_uuid, v.mig_uuid) << key;
      }
    }
  }
  EXPECT_EQ(live_count, snap.instances.size() + snap.foreign.size());
}

}  // namespace migd::engine::testing

#endif  // MIGD_ENGINE_ENGINE_TEST_UTIL_H_
