#include "engine/manager_testing.h"

#include <chrono>
#include <utility>

#include "testing/status_matchers.h"

namespace migd::engine::testing {

InstanceSpec Spec(std::string profile, std::optional<uint32_t> gpu,
                  std::optional<mig::Placement> placement) {
  InstanceSpec s;
  s.profile = std::move(profile);
  if (gpu) s.gpu = GpuIndex(*gpu);
  s.placement = placement;
  return s;
}

AllocateRequest Req(const std::string& id, std::vector<InstanceSpec> specs, bool pod_owner) {
  AllocateRequest r;
  r.request_id = id;
  r.owner = pod_owner ? store::Owner::Pod("default", "pod-" + id, PodUid("uid-" + id), "main")
                      : store::Owner::Opaque("owner-" + id);
  r.instances = std::move(specs);
  return r;
}

Status CountingObserver::OnPublish(const PublishedInstance& i) {
  MutexLock lock(&mu_);
  ++publishes_;
  published_.insert(i.mig_uuid.value());
  return fail_publish_;
}

Status CountingObserver::OnUnpublish(const PublishedInstance& i) {
  MutexLock lock(&mu_);
  ++unpublishes_;
  published_.erase(i.mig_uuid.value());
  return OkStatus();
}

Status CountingObserver::OnReconcile() {
  MutexLock lock(&mu_);
  ++reconciles_;
  cv_.SignalAll();
  return OkStatus();
}

int CountingObserver::publishes() const {
  MutexLock lock(&mu_);
  return publishes_;
}

int CountingObserver::unpublishes() const {
  MutexLock lock(&mu_);
  return unpublishes_;
}

int CountingObserver::reconciles() const {
  MutexLock lock(&mu_);
  return reconciles_;
}

std::set<std::string> CountingObserver::published() const {
  MutexLock lock(&mu_);
  return published_;
}

void CountingObserver::FailPublish(Status s) {
  MutexLock lock(&mu_);
  fail_publish_ = std::move(s);
}

bool CountingObserver::WaitForReconciles(int n, Clock::Duration deadline) const {
  MutexLock lock(&mu_);
  return cv_.WaitFor(&mu_, deadline,
                     [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reconciles_ >= n; });
}

std::vector<std::string> LiveLayout(driver::GpuDriver& d) {
  std::vector<std::string> out;
  auto gpus = d.ListGpus();
  if (!gpus.ok()) return {"error: " + gpus.status().ToString()};
  for (const auto& g : *gpus) {
    auto gis = d.ListGpuInstances(g.index);
    if (!gis.ok()) continue;
    for (const auto& gi : *gis) {
      std::string s = "gpu=" + std::to_string(g.index.value()) +
                      " gi=" + std::to_string(gi.id.value()) +
                      " profile=" + std::to_string(gi.profile_id.value()) +
                      " at=" + gi.placement.ToString() + " ci=";
      for (const auto& ci : gi.compute_instances) {
        s += std::to_string(ci.id.value()) + ":" + ci.mig_uuid.value() + ",";
      }
      out.push_back(s);
    }
  }
  return out;
}

void ExpectMigIdentity(const GpuUuid& gpu_uuid, const MigUuid& mig_uuid) {
  EXPECT_EQ(mig_uuid.value().rfind("MIG-", 0), 0u)
      << "MIG UUID " << mig_uuid.value() << " of an instance of " << gpu_uuid.value()
      << " does not start with MIG-";
  EXPECT_NE(mig_uuid.value(), gpu_uuid.value())
      << "MIG UUID " << mig_uuid.value() << " is its parent GPU's UUID";
}

void ExpectMigIdentities(const std::vector<InstanceView>& views) {
  for (const InstanceView& v : views) {
    if (!v.mig_uuid.value().empty()) ExpectMigIdentity(v.gpu_uuid, v.mig_uuid);
  }
}

namespace {

// Records against the tracked instances: same ids and state, no intent left.
void ExpectRecordsMatch(const ManagerSnapshot& snap, store::RecordStore& store) {
  auto loaded = store.LoadAll();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::map<store::RecordKey, store::Record> records;
  for (const auto& r : loaded->records) {
    EXPECT_EQ(r.phase, store::RecordPhase::kCommitted) << "intent remains: " << r.key;
    records[r.key] = r;
  }
  for (const auto& v : snap.instances) {
    auto it = records.find(v.key());
    if (it == records.end()) {
      ADD_FAILURE() << "tracked instance without record: " << v.key() << " " << v.mig_uuid;
      continue;
    }
    EXPECT_EQ(it->second.state, ToRecordState(v.state)) << v.key();
    EXPECT_EQ(it->second.mig_uuid.value_or(MigUuid("")), v.mig_uuid) << v.key();
    EXPECT_EQ(it->second.gi_id.value_or(NvmlGiId(999)), v.gi_id) << v.key();
    records.erase(it);
  }
  for (const auto& [k, r] : records) ADD_FAILURE() << "record without instance: " << k;
}

}  // namespace

void ExpectConsistent(Manager& mgr, driver::GpuDriver& d, store::RecordStore& store) {
  ManagerSnapshot snap = mgr.List();
  ExpectRecordsMatch(snap, store);
  ExpectMigIdentities(snap.instances);
  std::map<std::string, const InstanceView*> by_gi;  // "gpu:gi"
  for (const auto& v : snap.instances) {
    by_gi[v.gpu_uuid.value() + ":" + std::to_string(v.gi_id.value())] = &v;
  }
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

Status NoSyncFileOps::WriteFileAtomically(const std::string& path, std::string_view data,
                                          const AtomicWriteOptions& options) {
  AtomicWriteOptions o = options;
  o.sync = false;
  return store::FileOps::WriteFileAtomically(path, data, o);
}

StatusOr<std::unique_ptr<store::RecordStore>> OpenStore(const std::string& dir, Clock& clock,
                                                        const std::string& boot_id, bool sync) {
  static NoSyncFileOps no_sync;
  store::RecordStoreOptions so;
  so.boot_id = boot_id;
  if (!sync) so.file_ops = &no_sync;
  return store::RecordStore::Open(dir, clock, so);
}

ManagerHarness::ManagerHarness() : dir_(std::make_unique<migd::testing::TempDir>()) {
  opts_.boot_id = kBootId;
}

ManagerHarness::~ManagerHarness() {
  mgr_.reset();
  store_.reset();
}

void ManagerHarness::UseDrivers(driver::GpuDriver* manager_driver,
                                driver::GpuDriver* inspect_driver) {
  manager_driver_ = manager_driver;
  inspect_driver_ = inspect_driver != nullptr ? inspect_driver : manager_driver;
}

void ManagerHarness::OpenStore() {
  store_.reset();
  auto st = testing::OpenStore(StateDir(), clock_, opts_.boot_id, sync_records_);
  ASSERT_TRUE(st.ok()) << st.status();
  store_ = std::move(*st);
}

StatusOr<std::unique_ptr<Manager>> ManagerHarness::Make() { return Make(owners_); }

StatusOr<std::unique_ptr<Manager>> ManagerHarness::Make(OwnerSource& owners) {
  if (manager_driver_ == nullptr || store_ == nullptr) {
    return FailedPreconditionError("harness: no driver or store (call Machine/Init first)");
  }
  return Manager::Create(opts_, *manager_driver_, *store_, clock_, owners, observer_);
}

void ManagerHarness::Start() {
  auto m = Make();
  ASSERT_TRUE(m.ok()) << m.status();
  mgr_ = std::move(*m);
}

void ManagerHarness::Restart() {
  mgr_.reset();
  OpenStore();
  Start();
}

void ManagerHarness::NewStateDir() {
  mgr_.reset();
  store_.reset();
  dir_ = std::make_unique<migd::testing::TempDir>();
}

InstanceView ManagerHarness::Get(const MigUuid& uuid) {
  for (const auto& v : mgr_->List().instances) {
    if (v.mig_uuid == uuid) return v;
  }
  return InstanceView();
}

size_t ManagerHarness::CountState(InstanceState s) {
  size_t n = 0;
  for (const auto& v : mgr_->List().instances) n += v.state == s;
  return n;
}

void ManagerHarness::Consistent() { ExpectConsistent(*mgr_, *inspect_driver_, *store_); }

FakeHardwareTest::~FakeHardwareTest() { mgr_.reset(); }

void FakeHardwareTest::Machine(const std::string& gpus) {
  auto fake = sim::FakeGpuDriver::Create(gpus, {}, 42);
  ASSERT_TRUE(fake.ok()) << fake.status();
  fake_ = std::move(*fake);
  faults_ = std::make_unique<driver::FaultInjectingDriver>(fake_.get());
  UseDrivers(faults_.get(), fake_.get());
  OpenStore();
}

void SimHardwareTest::Init(const std::string& library, const std::string& gpus,
                           const std::map<std::string, std::string>& env) {
  sim_ = std::make_unique<driver::sim_testing::SimMachine>(gpus, env);
  auto d = driver::NvmlDriver::Open(library);
  ASSERT_TRUE(d.ok()) << d.status();
  driver_ = std::move(*d);
  UseDrivers(driver_.get());
  OpenStore();
}

void SimHardwareTest::TearDown() {
  mgr_.reset();
  store_.reset();
  driver_.reset();
  sim_.reset();
}

uint64_t Total(const driver::sim_testing::CallCounts& c) {
  uint64_t n = 0;
  for (const auto& [k, v] : c) n += v;
  return n;
}

std::string Describe(const driver::sim_testing::CallCounts& c) {
  std::string s;
  for (const auto& [k, v] : c) s += k.first + "/" + k.second + "=" + std::to_string(v) + " ";
  return s;
}

}  // namespace migd::engine::testing
