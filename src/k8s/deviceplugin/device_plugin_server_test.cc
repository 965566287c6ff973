#include "k8s/deviceplugin/device_plugin_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "k8s/testing/fake_kubelet.h"
#include "testing/eventually.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::k8s {
namespace {

using ::migd::k8s::testing::FakeKubelet;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::migd::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr auto kWait = std::chrono::seconds(30);

// A small thread-safe backend: a settable device list, a canned allocation
// or error, and an optional gate that holds AllocateContainer until opened.
class TestBackend : public AllocationBackend {
 public:
  std::vector<AdvertisedDevice> Devices() override {
    MutexLock lock(&mu_);
    return devices_;
  }
  StatusOr<ContainerAllocation> AllocateContainer(
      const std::vector<std::string>& device_ids) override {
    MutexLock lock(&mu_);
    calls_.push_back(device_ids);
    cv_.SignalAll();
    cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !gated_; });
    ++finished_;
    cv_.SignalAll();
    if (!error_.ok()) return error_;
    return allocation_;
  }

  void SetDevices(std::vector<AdvertisedDevice> devices, bool notify = true) {
    {
      MutexLock lock(&mu_);
      devices_ = std::move(devices);
    }
    if (notify) NotifyDevicesChanged();
  }
  void SetAllocation(ContainerAllocation a) {
    MutexLock lock(&mu_);
    allocation_ = std::move(a);
  }
  void SetError(Status s) {
    MutexLock lock(&mu_);
    error_ = std::move(s);
  }
  void SetGated(bool gated) {
    MutexLock lock(&mu_);
    gated_ = gated;
    cv_.SignalAll();
  }
  std::vector<std::vector<std::string>> calls() {
    MutexLock lock(&mu_);
    return calls_;
  }
  bool WaitForFinished(int n) {
    MutexLock lock(&mu_);
    return cv_.WaitFor(&mu_, kWait,
                       [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= n; });
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<AdvertisedDevice> devices_ ABSL_GUARDED_BY(mu_);
  ContainerAllocation allocation_ ABSL_GUARDED_BY(mu_);
  Status error_ ABSL_GUARDED_BY(mu_);
  bool gated_ ABSL_GUARDED_BY(mu_) = false;
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<std::string>> calls_ ABSL_GUARDED_BY(mu_);
};

AdvertisedDevice Dev(std::string id, bool healthy = true,
                     std::optional<int64_t> numa = std::nullopt) {
  AdvertisedDevice d;
  d.id = std::move(id);
  d.healthy = healthy;
  d.numa_node = numa;
  return d;
}

bool Eventually(const std::function<bool()>& condition) {
  return ::migd::testing::Eventually(condition, kWait);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> Ids(const std::vector<v1beta1::Device>& devices) {
  std::vector<std::string> ids;
  for (const auto& d : devices) ids.push_back(d.id());
  return ids;
}

class DevicePluginServerTest : public ::testing::Test {
 protected:
  void SetUp() override { backend_.SetDevices({Dev("GPU-a-0"), Dev("GPU-a-1")}); }

  DevicePluginOptions Options() const {
    DevicePluginOptions o;
    o.plugin_dir = dir_.path();
    o.register_retry_initial = std::chrono::milliseconds(20);
    o.register_retry_max = std::chrono::milliseconds(200);
    o.watch_period = std::chrono::milliseconds(50);
    return o;
  }

  void StartKubelet() { MIGD_ASSERT_OK_AND_ASSIGN(kubelet_, FakeKubelet::Start(dir_.path())); }
  void StartPlugin(const DevicePluginOptions& o) {
    MIGD_ASSERT_OK_AND_ASSIGN(plugin_, DevicePluginServer::Start(o, &backend_));
  }
  // Kubelet first, then the plugin; waits for registration and the list.
  void StartBoth(const DevicePluginOptions& o) {
    StartKubelet();
    StartPlugin(o);
    ASSERT_TRUE(kubelet_->WaitForRegistration(1));
    ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 2; }));
  }

  TempDir dir_;
  TestBackend backend_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<DevicePluginServer> plugin_;
};

TEST_F(DevicePluginServerTest, RegistersWithOptionsMatchingGetDevicePluginOptions) {
  StartBoth(Options());
  auto regs = kubelet_->registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].version(), "v1beta1");
  EXPECT_EQ(regs[0].endpoint(), "migd-mig.sock");
  EXPECT_EQ(regs[0].resource_name(), "nvidia.com/gpu");
  EXPECT_FALSE(regs[0].options().pre_start_required());
  EXPECT_TRUE(regs[0].options().get_preferred_allocation_available());
  // The fake dials back inside Register: a registration only succeeds when
  // our socket is already served.
  auto dialed = kubelet_->dialed_options();
  ASSERT_TRUE(dialed.has_value());
  EXPECT_EQ(dialed->pre_start_required(), regs[0].options().pre_start_required());
  EXPECT_EQ(dialed->get_preferred_allocation_available(),
            regs[0].options().get_preferred_allocation_available());
  // The fake records the request before the plugin's Register returns.
  EXPECT_TRUE(Eventually([&] { return plugin_->registrations() == 1; }));
  EXPECT_THAT(plugin_->last_register_status(), IsOk());
  EXPECT_TRUE(Exists(dir_.Join("migd-mig.sock")));
}

TEST_F(DevicePluginServerTest, InvertedOptionsAreSentIdenticallyInBothPlaces) {
  DevicePluginOptions o = Options();
  o.pre_start_required = true;
  o.get_preferred_allocation_available = false;
  o.socket_name = "other.sock";
  o.resource_name = "example.com/mig";
  StartBoth(o);
  auto regs = kubelet_->registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].endpoint(), "other.sock");
  EXPECT_EQ(regs[0].resource_name(), "example.com/mig");
  EXPECT_TRUE(regs[0].options().pre_start_required());
  EXPECT_FALSE(regs[0].options().get_preferred_allocation_available());
  auto dialed = kubelet_->dialed_options();
  ASSERT_TRUE(dialed.has_value());
  EXPECT_TRUE(dialed->pre_start_required());
  EXPECT_FALSE(dialed->get_preferred_allocation_available());
}

TEST_F(DevicePluginServerTest, ListAndWatchSendsFullListAndUpdatesOnBackendChange) {
  StartBoth(Options());
  EXPECT_THAT(Ids(kubelet_->devices()), ElementsAre("GPU-a-0", "GPU-a-1"));
  for (const auto& d : kubelet_->devices()) {
    EXPECT_EQ(d.health(), "Healthy");
    EXPECT_FALSE(d.has_topology());
  }
  backend_.SetDevices({Dev("GPU-a-0", false), Dev("GPU-a-1"), Dev("GPU-b-0", true, 1)});
  ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 3; }));
  const auto devices = kubelet_->devices();
  EXPECT_THAT(Ids(devices), ElementsAre("GPU-a-0", "GPU-a-1", "GPU-b-0"));
  EXPECT_EQ(devices[0].health(), "Unhealthy");
  EXPECT_EQ(devices[1].health(), "Healthy");
  ASSERT_EQ(devices[2].topology().nodes_size(), 1);
  EXPECT_EQ(devices[2].topology().nodes(0).id(), 1);
  // A notification always yields a full list, even when nothing changed.
  const int updates = kubelet_->list_updates();
  backend_.SetDevices(backend_.Devices());
  EXPECT_TRUE(kubelet_->WaitForListUpdates(updates + 1));
}

TEST_F(DevicePluginServerTest, ListAndWatchPicksUpUnannouncedHealthChange) {
  DevicePluginOptions o = Options();
  o.list_refresh_period = std::chrono::milliseconds(20);
  StartBoth(o);
  backend_.SetDevices({Dev("GPU-a-0"), Dev("GPU-a-1", false)}, /*notify=*/false);
  EXPECT_TRUE(kubelet_->WaitForDevices(
      [](const auto& d) { return d.size() == 2 && d[1].health() == "Unhealthy"; }));
}

TEST_F(DevicePluginServerTest, AllocateFillsTheContainerResponse) {
  StartBoth(Options());
  backend_.SetAllocation({.mig_uuids = {},
                          .cdi_devices = {"nvidia.com/mig=MIG-1"},
                          .envs = {{"NVIDIA_VISIBLE_DEVICES", "MIG-1"}},
                          .device_nodes = {{.container_path = "/dev/nvidia0",
                                            .host_path = "/dev/nvidia0",
                                            .permissions = "rw"}},
                          .annotations = {{"cdi.k8s.io/migd_x", "nvidia.com/mig=MIG-1"}}});
  v1beta1::ContainerAllocateResponse response;
  grpc::Status s = kubelet_->Allocate({"GPU-a-1"}, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.cdi_devices_size(), 1);
  EXPECT_EQ(response.cdi_devices(0).name(), "nvidia.com/mig=MIG-1");
  EXPECT_THAT(response.envs(), UnorderedElementsAre(Pair("NVIDIA_VISIBLE_DEVICES", "MIG-1")));
  ASSERT_EQ(response.devices_size(), 1);
  EXPECT_EQ(response.devices(0).container_path(), "/dev/nvidia0");
  EXPECT_EQ(response.devices(0).host_path(), "/dev/nvidia0");
  EXPECT_EQ(response.devices(0).permissions(), "rw");
  EXPECT_THAT(response.annotations(),
              UnorderedElementsAre(Pair("cdi.k8s.io/migd_x", "nvidia.com/mig=MIG-1")));
  EXPECT_EQ(response.mounts_size(), 0);
  EXPECT_THAT(backend_.calls(), ElementsAre(ElementsAre("GPU-a-1")));
}

TEST_F(DevicePluginServerTest, AllocateAnswersEachContainerRequest) {
  StartBoth(Options());
  ContainerAllocation allocation;
  allocation.cdi_devices = {"nvidia.com/mig=MIG-1"};
  backend_.SetAllocation(allocation);
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids("GPU-a-0");
  request.add_container_requests()->add_devices_ids("GPU-a-1");
  v1beta1::AllocateResponse response;
  ASSERT_TRUE(kubelet_->AllocateRaw(request, &response).ok());
  EXPECT_EQ(response.container_responses_size(), 2);
  EXPECT_THAT(backend_.calls(), ElementsAre(ElementsAre("GPU-a-0"), ElementsAre("GPU-a-1")));
}

TEST_F(DevicePluginServerTest, AllocateBackendErrorBecomesGrpcErrorWithTheMessage) {
  StartBoth(Options());
  backend_.SetError(FailedPreconditionError(
      "pod default/p has no hami.io/vgpu-mig-allocations; schedule it with HAMi's scheduler"));
  v1beta1::ContainerAllocateResponse response;
  grpc::Status s = kubelet_->Allocate({"GPU-a-0"}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("pod default/p has no hami.io/vgpu-mig-allocations"));
}

TEST_F(DevicePluginServerTest, AllocateRejectsEmptyRequests) {
  StartBoth(Options());
  v1beta1::AllocateResponse response;
  grpc::Status s = kubelet_->AllocateRaw(v1beta1::AllocateRequest(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1beta1::AllocateRequest no_ids;
  no_ids.add_container_requests();
  s = kubelet_->AllocateRaw(no_ids, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("names no devices"));
  EXPECT_TRUE(backend_.calls().empty());
}

TEST_F(DevicePluginServerTest, AllocatePastItsDeadlineFailsAndTheBackendCallCompletes) {
  DevicePluginOptions o = Options();
  o.allocate_timeout = std::chrono::milliseconds(200);
  StartBoth(o);
  backend_.SetGated(true);  // the backend never answers in time
  v1beta1::ContainerAllocateResponse response;
  grpc::Status s = kubelet_->Allocate({"GPU-a-0"}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(s.error_message(), HasSubstr("continues in the background"));
  // The abandoned call runs to completion; Stop waits for it.
  backend_.SetGated(false);
  EXPECT_TRUE(backend_.WaitForFinished(1));
  plugin_->Stop();
}

TEST_F(DevicePluginServerTest, StopWaitsForAnAbandonedBackendCall) {
  DevicePluginOptions o = Options();
  o.allocate_timeout = std::chrono::milliseconds(100);
  StartBoth(o);
  backend_.SetGated(true);
  v1beta1::ContainerAllocateResponse response;
  EXPECT_EQ(kubelet_->Allocate({"GPU-a-0"}, &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  std::thread opener([&] {
    Eventually([&] { return !Exists(dir_.Join("migd-mig.sock")); });
    backend_.SetGated(false);
  });
  plugin_->Stop();  // returns only once the backend call is done
  EXPECT_TRUE(backend_.WaitForFinished(1));
  opener.join();
}

TEST_F(DevicePluginServerTest, AllocateCancelledByKubeletLetsTheBackendFinish) {
  StartBoth(Options());
  backend_.SetGated(true);
  // A caller that gives up early (the server sees the cancellation).
  auto stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
      "unix://" + dir_.Join("migd-mig.sock"), grpc::InsecureChannelCredentials()));
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids("GPU-a-0");
  v1beta1::AllocateResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  EXPECT_EQ(stub->Allocate(&context, request, &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  backend_.SetGated(false);
  EXPECT_TRUE(backend_.WaitForFinished(1));
  // The server is unaffected: the next Allocate goes through.
  v1beta1::ContainerAllocateResponse next;
  EXPECT_TRUE(kubelet_->Allocate({"GPU-a-0"}, &next).ok());
  EXPECT_EQ(backend_.calls().size(), 2u);
}

TEST_F(DevicePluginServerTest, GetPreferredAllocationUsesTheBackend) {
  StartBoth(Options());
  std::vector<std::string> ids;
  grpc::Status s =
      kubelet_->GetPreferredAllocation({"GPU-a-0", "GPU-a-1", "GPU-b-0"}, {"GPU-b-0"}, 2, &ids);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(ids, ElementsAre("GPU-b-0", "GPU-a-0"));
  s = kubelet_->GetPreferredAllocation({"GPU-a-0"}, {"GPU-a-0", "GPU-a-1"}, 1, &ids);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("must-include"));
}

TEST_F(DevicePluginServerTest, DisabledOptionalRpcsAreUnimplemented) {
  DevicePluginOptions o = Options();
  o.get_preferred_allocation_available = false;
  StartBoth(o);
  std::vector<std::string> ids;
  EXPECT_EQ(kubelet_->GetPreferredAllocation({"GPU-a-0"}, {}, 1, &ids).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(kubelet_->PreStartContainer({"GPU-a-0"}).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(DevicePluginServerTest, PreStartContainerSucceedsWhenEnabled) {
  DevicePluginOptions o = Options();
  o.pre_start_required = true;
  StartBoth(o);
  EXPECT_TRUE(kubelet_->PreStartContainer({"GPU-a-0"}).ok());
}

TEST_F(DevicePluginServerTest, KubeletRestartLeadsToReRegistration) {
  StartBoth(Options());
  ASSERT_TRUE(kubelet_->Restart(/*cleanup_plugin_sockets=*/true).ok());
  ASSERT_TRUE(kubelet_->WaitForRegistration(2));
  EXPECT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 2; }));
  EXPECT_TRUE(Eventually([&] { return plugin_->registrations() == 2; }));
  EXPECT_GE(plugin_->serves(), 2);
  EXPECT_TRUE(Exists(dir_.Join("migd-mig.sock")));
  // The new kubelet reaches the plugin through the new registration.
  v1beta1::ContainerAllocateResponse response;
  EXPECT_TRUE(kubelet_->Allocate({"GPU-a-0"}, &response).ok());
}

TEST_F(DevicePluginServerTest, RecreatedKubeletSocketAloneLeadsToReRegistration) {
  StartBoth(Options());
  ASSERT_TRUE(kubelet_->Restart(/*cleanup_plugin_sockets=*/false).ok());
  ASSERT_TRUE(kubelet_->WaitForRegistration(2));
  EXPECT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 2; }));
  EXPECT_TRUE(Eventually([&] { return plugin_->serves() == 2; }));
}

TEST_F(DevicePluginServerTest, DirectoryEventsAloneTriggerReRegistration) {
  // With the stat() fallback effectively off, only inotify can notice.
  DevicePluginOptions o = Options();
  o.watch_period = std::chrono::hours(1);
  StartBoth(o);
  ASSERT_TRUE(kubelet_->Restart(/*cleanup_plugin_sockets=*/true).ok());
  ASSERT_TRUE(kubelet_->WaitForRegistration(2));
  EXPECT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 2; }));
}

TEST_F(DevicePluginServerTest, RemovedPluginSocketLeadsToReRegistration) {
  StartBoth(Options());
  ASSERT_EQ(::unlink(dir_.Join("migd-mig.sock").c_str()), 0);
  ASSERT_TRUE(kubelet_->WaitForRegistration(2));
  EXPECT_TRUE(Exists(dir_.Join("migd-mig.sock")));
  EXPECT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 2; }));
  EXPECT_EQ(plugin_->serves(), 2);
}

TEST_F(DevicePluginServerTest, ServeFailureAfterSocketLossIsRetried) {
  StartBoth(Options());
  const std::string path = dir_.Join("migd-mig.sock");
  // Something else takes our socket's name (atomically, so the watcher never
  // sees a gap): serving fails until it goes.
  ::migd::testing::WriteFileOrDie(dir_.Join("squatter"), "squatter");
  ASSERT_EQ(::rename(dir_.Join("squatter").c_str(), path.c_str()), 0);
  ASSERT_TRUE(Eventually([&] { return !kubelet_->stream_open(); }));
  EXPECT_EQ(kubelet_->registrations().size(), 1u);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_TRUE(kubelet_->WaitForRegistration(2));
  EXPECT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 2; }));
  EXPECT_EQ(plugin_->serves(), 2);
}

TEST_F(DevicePluginServerTest, StopRemovesTheSocketAndEndsTheStream) {
  StartBoth(Options());
  plugin_->Stop();
  EXPECT_FALSE(Exists(dir_.Join("migd-mig.sock")));
  EXPECT_TRUE(kubelet_->WaitForStreamClosed());
  plugin_->Stop();  // idempotent
  // A late backend notification after Stop and destruction is harmless.
  plugin_.reset();
  backend_.SetDevices({Dev("GPU-z")});
  EXPECT_TRUE(Exists(kubelet_->kubelet_socket()));
}

TEST_F(DevicePluginServerTest, RegistersOnceKubeletAppears) {
  StartPlugin(Options());  // no kubelet yet: Start still succeeds
  EXPECT_TRUE(Eventually([&] { return !plugin_->last_register_status().ok(); }));
  EXPECT_THAT(plugin_->last_register_status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("kubelet.sock")));
  EXPECT_EQ(plugin_->registrations(), 0);
  StartKubelet();
  ASSERT_TRUE(kubelet_->WaitForRegistration(1));
  EXPECT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 2; }));
}

TEST_F(DevicePluginServerTest, RejectedRegistrationIsRetried) {
  StartKubelet();
  kubelet_->SetRegisterFailure(grpc::Status(grpc::StatusCode::INTERNAL, "kubelet busy"));
  StartPlugin(Options());
  ASSERT_TRUE(Eventually([&] { return kubelet_->register_calls() >= 3; }));
  EXPECT_THAT(plugin_->last_register_status(),
              StatusIs(StatusCode::kInternal, HasSubstr("kubelet busy")));
  kubelet_->SetRegisterFailure(std::nullopt);
  ASSERT_TRUE(kubelet_->WaitForRegistration(1));
  EXPECT_TRUE(Eventually([&] { return plugin_->last_register_status().ok(); }));
}

TEST_F(DevicePluginServerTest, ReplacesAStaleSocketFile) {
  // A leftover socket of an earlier run: bound, then its owner went away.
  const std::string path = dir_.Join("migd-mig.sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  ASSERT_TRUE(Exists(path));
  StartBoth(Options());
  EXPECT_EQ(kubelet_->registrations().size(), 1u);
}

TEST_F(DevicePluginServerTest, RefusesANonSocketAtTheSocketPath) {
  ::migd::testing::WriteFileOrDie(dir_.Join("migd-mig.sock"), "not a socket");
  EXPECT_THAT(DevicePluginServer::Start(Options(), &backend_).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is not a socket")));
}

TEST_F(DevicePluginServerTest, RejectsBadOptions) {
  auto start = [&](const std::function<void(DevicePluginOptions&)>& edit) {
    DevicePluginOptions o = Options();
    edit(o);
    return DevicePluginServer::Start(o, &backend_).status();
  };
  const auto invalid = [](const std::string& what) {
    return StatusIs(StatusCode::kInvalidArgument, HasSubstr(what));
  };
  EXPECT_THAT(start([](auto& o) { o.plugin_dir = "relative"; }), invalid("absolute"));
  EXPECT_THAT(start([](auto& o) { o.socket_name = "a/b.sock"; }), invalid("plain file name"));
  EXPECT_THAT(start([](auto& o) { o.socket_name = ""; }), invalid("plain file name"));
  EXPECT_THAT(start([](auto& o) { o.socket_name = "kubelet.sock"; }), invalid("kubelet"));
  EXPECT_THAT(start([](auto& o) { o.socket_name = std::string(120, 's'); }),
              invalid("unix socket limit"));
  // kubelet's own rule (k8s/resource_name.h has the cases): a name kubelet
  // would refuse fails here, not in an endless Register retry.
  EXPECT_THAT(start([](auto& o) { o.resource_name = "gpu"; }), invalid("<domain>/<name>"));
  EXPECT_THAT(start([](auto& o) { o.resource_name = "nvidia.com/"; }), invalid("name part"));
  EXPECT_THAT(start([](auto& o) { o.resource_name = "a/b/c"; }), invalid("more than one '/'"));
  EXPECT_THAT(start([](auto& o) { o.resource_name = "kubernetes.io/gpu"; }),
              invalid("kubernetes.io"));
  EXPECT_THAT(start([](auto& o) { o.resource_name = "x.kubernetes.io/gpu"; }),
              invalid("kubernetes.io"));
  EXPECT_THAT(start([](auto& o) { o.resource_name = "requests.nvidia.com/gpu"; }),
              invalid("requests."));
  EXPECT_THAT(start([](auto& o) { o.allocate_timeout = std::chrono::milliseconds(0); }),
              invalid("positive"));
  EXPECT_THAT(start([](auto& o) { o.register_retry_max = std::chrono::milliseconds(1); }),
              invalid("register_retry_max"));
  EXPECT_THAT(DevicePluginServer::Start(Options(), nullptr).status(), invalid("backend"));
  EXPECT_FALSE(Exists(dir_.Join("migd-mig.sock")));
}

TEST_F(DevicePluginServerTest, FakeKubeletRejectsBadRegistrations) {
  // The fake validates like kubelet, so a plugin bug would show up here.
  MIGD_ASSERT_OK_AND_ASSIGN(kubelet_,
                            FakeKubelet::Start(dir_.path(), std::chrono::milliseconds(500)));
  auto channel = grpc::CreateChannel("unix://" + kubelet_->kubelet_socket(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  auto call = [&](const std::string& version, const std::string& endpoint,
                  const std::string& resource) {
    v1beta1::RegisterRequest request;
    request.set_version(version);
    request.set_endpoint(endpoint);
    request.set_resource_name(resource);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kWait);
    v1beta1::Empty response;
    return stub->Register(&context, request, &response);
  };
  // kubelet answers with plain Go errors: gRPC UNKNOWN and its texts
  // (pkg/kubelet/cm/devicemanager/plugin/v1beta1/api.go, client.go).
  auto unknown = [](const grpc::Status& s, const std::string& text) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNKNOWN) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(text));
  };
  unknown(call("v1alpha", "x.sock", "nvidia.com/gpu"),
          "requested API version \"v1alpha\" is not supported by kubelet. Supported version is "
          "[\"v1beta1\"]");
  unknown(call("v1beta1", "x.sock", "gpu"), "the ResourceName \"gpu\" is invalid");
  unknown(call("v1beta1", "x.sock", "requests.nvidia.com/gpu"),
          "the ResourceName \"requests.nvidia.com/gpu\" is invalid");
  unknown(call("v1beta1", "x.sock", "Nvidia.com/gpu"), "the ResourceName \"Nvidia.com/gpu\"");
  // The endpoint is joined to the directory unchecked; nobody serves it, so
  // the dial-back fails and so does Register.
  unknown(call("v1beta1", "/abs/x.sock", "nvidia.com/gpu"), "failed to dial device plugin");
  unknown(call("v1beta1", "x.sock", "nvidia.com/gpu"), "failed to dial device plugin");
  EXPECT_TRUE(kubelet_->registrations().empty());
  EXPECT_EQ(kubelet_->register_calls(), 6);
}

}  // namespace
}  // namespace migd::k8s
