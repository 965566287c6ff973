// Test helpers of api_test: a real engine::Manager (engine/manager_testing.h)
// over sim::FakeGpuDriver (behind a driver that can hold CreateGi), the
// EventHub as its listener, the service and a real ApiServer on a unix socket
// in a temp dir, and a stub.
#ifndef MIGD_API_API_TEST_UTIL_H_
#define MIGD_API_API_TEST_UTIL_H_

#include <absl/base/thread_annotations.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/event_hub.h"
#include "api/server.h"
#include "api/service.h"
#include "base/mutex.h"
#include "cdi/fake_host_reader.h"
#include "cdi/publisher.h"
#include "driver/gpu_driver_wrapper.h"
#include "engine/cdi_observer.h"
#include "engine/instance_observer.h"
#include "engine/manager.h"
#include "engine/manager_testing.h"
#include "engine/owner_source.h"
#include "mig/catalog.h"
#include "migd/v1/migd.grpc.pb.h"
#include "sim/fake_gpu_driver.h"
#include "sim/proc_files.h"
#include "store/record_store.h"
#include "testing/temp_dir.h"

namespace migd::api::testing {

inline constexpr char kBoot[] = "boot-api";

// Forwards every call; while closed, CreateGi waits until Open() (and says
// it is waiting), so a test can hold an Allocate in flight.
class GatedDriver final : public driver::GpuDriverWrapper {
 public:
  explicit GatedDriver(driver::GpuDriver* target) : GpuDriverWrapper(target) {}
  void Close() {
    MutexLock lock(&mu_);
    open_ = false;
  }
  void Open() {
    MutexLock lock(&mu_);
    open_ = true;
    cv_.SignalAll();
  }
  // Waits until a CreateGi is held at the gate (generous deadline).
  bool WaitHeld() {
    MutexLock lock(&mu_);
    return cv_.WaitFor(&mu_, std::chrono::seconds(30),
                       [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_ > 0; });
  }
  // ListGpus reports GPUs with index >= `first` as not MIG-capable (as NVML
  // does for a T4: NOT_SUPPORTED).
  void NoMigFrom(uint32_t first) { no_mig_from_ = first; }
  StatusOr<std::vector<driver::GpuInfo>> ListGpus() override {
    StatusOr<std::vector<driver::GpuInfo>> gpus = GpuDriverWrapper::ListGpus();
    if (!gpus.ok()) return gpus;
    for (driver::GpuInfo& g : *gpus) {
      if (g.index.value() >= no_mig_from_) g.mig = driver::MigModeInfo{};
    }
    return gpus;
  }
  // The next CreateGi returns `s` instead of creating.
  void FailNextCreateGi(Status s) {
    MutexLock lock(&mu_);
    fail_ = std::move(s);
  }
  StatusOr<driver::GpuInstanceInfo> CreateGi(GpuIndex gpu, GiProfileId profile,
                                             const mig::Placement& placement) override {
    {
      MutexLock lock(&mu_);
      if (!fail_.ok()) {
        Status s = std::move(fail_);
        fail_ = OkStatus();
        return s;
      }
      ++held_;
      cv_.SignalAll();
      cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_; });
      --held_;
    }
    return GpuDriverWrapper::CreateGi(gpu, profile, placement);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  Status fail_ ABSL_GUARDED_BY(mu_);
  uint32_t no_mig_from_ = UINT32_MAX;  // set before the Manager starts
};

// Keeps the simulator's fake /proc tree in step with its GIs/CIs (what
// libnvidia-ml-sim does by itself; FakeGpuDriver has no tree) and forwards to
// the CdiObserver, whose spec builder reads that tree.
class ProcSyncingObserver final : public engine::InstanceObserver {
 public:
  ProcSyncingObserver(sim::FakeGpuDriver* fake, std::string proc_root, engine::CdiObserver* cdi)
      : fake_(fake), proc_root_(std::move(proc_root)), cdi_(cdi) {}
  Status Sync() {
    sim::SimState st = fake_->Snapshot();
    st.proc_root = proc_root_;
    Status s = sim::WriteStaticProcFiles(st, mig::Catalog::Default());
    if (!s.ok()) return s;
    return sim::SyncInstanceProcFiles(st);
  }
  Status OnPublish(const engine::PublishedInstance& i) override {
    Status s = Sync();
    if (!s.ok()) return s;
    return cdi_->OnPublish(i);
  }
  Status OnUnpublish(const engine::PublishedInstance& i) override { return cdi_->OnUnpublish(i); }
  Status OnRecovered(const std::vector<MigUuid>& tracked) override {
    return cdi_->OnRecovered(tracked);
  }
  Status OnReconcile() override { return cdi_->OnReconcile(); }

 private:
  sim::FakeGpuDriver* fake_;
  std::string proc_root_;
  engine::CdiObserver* cdi_;
};

// A real Manager (the shared engine harness) over FakeGpuDriver behind the
// GatedDriver, the EventHub as its listener, the service and the server.
class ApiTest : public engine::testing::ManagerHarness {
 protected:
  // TearDown has shut the server down. Destroying it joins its threads, an
  // ordering TSan sees (gRPC's own shutdown wait is invisible to it against
  // Debian's uninstrumented gRPC), so it goes first, then the service, then
  // the Manager, before what that points to (hub, drivers, observers).
  ~ApiTest() override {
    server_.reset();
    service_.reset();
    mgr_.reset();
  }

  // Boots the machine, the Manager, the service and the server.
  // `before` runs on the fresh machine before the Manager recovers (e.g. to
  // create a foreign instance).
  void Boot(const std::string& gpus = "a100-40gb:2", ServiceOptions sopts = {},
            const std::function<void(sim::FakeGpuDriver&)>& before = nullptr) {
    auto fake = sim::FakeGpuDriver::Create(gpus, {}, 42);
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = std::move(*fake);
    if (before) before(*fake_);
    gated_ = std::make_unique<GatedDriver>(fake_.get());
    if (no_mig_from_) gated_->NoMigFrom(*no_mig_from_);
    UseDrivers(gated_.get(), fake_.get());
    opts_.boot_id = kBoot;
    opts_.listener = &hub_;
    OpenStore();
    if (with_cdi_) {
      const std::string dev = "/fake-dev";
      for (const char* n :
           {"/nvidia0", "/nvidia1", "/nvidiactl", "/nvidia-uvm", "/nvidia-uvm-tools"}) {
        reader_.AddNode(dev + n, {'c', 195, 0, 0666});
      }
      cdi::Options co;
      co.enabled = cdi_enabled_;
      co.spec_dir = dir_->Join("cdi");
      co.proc_root = dir_->Join("proc");
      co.dev_root = dev;
      co.sync = false;
      publisher_ = std::make_unique<cdi::Publisher>(co, &reader_);
      cdi_ = std::make_unique<engine::CdiObserver>(publisher_.get());
      syncing_ = std::make_unique<ProcSyncingObserver>(fake_.get(), dir_->Join("proc"), cdi_.get());
      ASSERT_TRUE(syncing_->Sync().ok());
      sopts.cdi = cdi_.get();
      sopts.cdi_enabled = cdi_enabled_;
    }
    observer_ = syncing_.get();  // none without CDI
    Start();
    ASSERT_NE(mgr_, nullptr);
    ServerInfo info;
    info.version = "1.2.3-test";
    info.driver_version = "550.54.15";
    info.nvml_library = "/usr/lib/libnvidia-ml-sim.so";
    info.simulated = true;
    info.started = Clock::TimePoint(std::chrono::milliseconds(1767225600123));
    info.boot_id = kBoot;
    sopts.watch_poll = std::chrono::milliseconds(20);
    service_ = std::make_unique<MigManagerService>(*mgr_, hub_, info, sopts);
    StartServer();
  }
  void StartServer() {
    ApiServerOptions o;
    o.socket_path = socket_path();
    auto s = ApiServer::Start(o, service_.get());
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    stub_ = NewStub();
  }
  std::unique_ptr<v1::MigManager::Stub> NewStub() {
    return v1::MigManager::NewStub(
        grpc::CreateChannel("unix:" + socket_path(), grpc::InsecureChannelCredentials()));
  }
  std::string socket_path() const { return dir_->Join("run/api.socket"); }
  void TearDown() override {
    // A call held at the gate must be able to finish, or Shutdown would wait
    // for it forever.
    if (gated_) gated_->Open();
    if (server_) server_->Shutdown(std::chrono::milliseconds(0));
  }

  // One-line request builders.
  static v1::AllocateRequest AllocReq(const std::string& id, const std::string& profile,
                                      std::optional<uint32_t> gpu = std::nullopt) {
    v1::AllocateRequest r;
    r.set_request_id(id);
    r.mutable_owner()->set_opaque_id("job-" + id);
    v1::InstanceSpec* s = r.add_instances();
    s->set_profile(profile);
    if (gpu) s->set_gpu(*gpu);
    return r;
  }
  grpc::Status Allocate(const v1::AllocateRequest& req, v1::AllocateResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->Allocate(&ctx, req, resp);
  }
  grpc::Status Release(const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->Release(&ctx, req, resp);
  }
  grpc::Status ListAll(v1::ListResponse* resp, const v1::ListRequest& req = {}) {
    grpc::ClientContext ctx;
    return stub_->List(&ctx, req, resp);
  }

  // The harness's Manager outlives none of these (~ApiTest); the server goes
  // first (TearDown).
  EventHub hub_;
  std::unique_ptr<sim::FakeGpuDriver> fake_;
  std::unique_ptr<GatedDriver> gated_;
  // CDI (Boot with with_cdi_ set).
  bool with_cdi_ = false;
  std::optional<uint32_t> no_mig_from_;  // see GatedDriver::NoMigFrom
  bool cdi_enabled_ = true;
  cdi::testing::FakeHostReader reader_;
  std::unique_ptr<cdi::Publisher> publisher_;
  std::unique_ptr<engine::CdiObserver> cdi_;
  std::unique_ptr<ProcSyncingObserver> syncing_;
  std::unique_ptr<MigManagerService> service_;
  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<v1::MigManager::Stub> stub_;
};

}  // namespace migd::api::testing

#endif  // MIGD_API_API_TEST_UTIL_H_
