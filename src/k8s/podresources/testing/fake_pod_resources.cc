#include "k8s/podresources/testing/fake_pod_resources.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "base/mutex.h"
#include "k8s.io/kubelet/pkg/apis/podresources/v1/api.grpc.pb.h"

namespace migd::k8s {
namespace {

void ToProto(const PodResourcesEntry& in, ::v1::PodResources* out) {
  out->set_namespace_(in.pod_namespace);
  out->set_name(in.pod_name);
  for (const ContainerEntry& c : in.containers) {
    ::v1::ContainerResources* pc = out->add_containers();
    pc->set_name(c.name);
    for (const ContainerDevicesEntry& d : c.devices) {
      ::v1::ContainerDevices* pd = pc->add_devices();
      pd->set_resource_name(d.resource_name);
      for (const std::string& id : d.device_ids) pd->add_device_ids(id);
    }
  }
}

class Service final : public ::v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext* /*context*/, const ::v1::ListPodResourcesRequest*,
                    ::v1::ListPodResourcesResponse* response) override {
    MutexLock lock(&mu);
    ++calls;
    if (fail_count > 0) {
      --fail_count;
      return grpc::Status(static_cast<grpc::StatusCode>(fail_code), "injected failure");
    }
    const std::vector<PodResourcesEntry>& src =
        (calls > 1 && pods_after_first) ? *pods_after_first : pods;
    for (const PodResourcesEntry& p : src) ToProto(p, response->add_pod_resources());
    return grpc::Status::OK;
  }

  Mutex mu;
  std::vector<PodResourcesEntry> pods ABSL_GUARDED_BY(mu);
  std::optional<std::vector<PodResourcesEntry>> pods_after_first ABSL_GUARDED_BY(mu);
  int fail_count ABSL_GUARDED_BY(mu) = 0;
  int fail_code ABSL_GUARDED_BY(mu) = 0;
  int calls ABSL_GUARDED_BY(mu) = 0;
};

}  // namespace

struct FakePodResources::Impl {
  std::string socket_path;
  Service service;
  Mutex server_mu;
  std::unique_ptr<grpc::Server> server ABSL_GUARDED_BY(server_mu);

  Status Serve() {
    MutexLock lock(&server_mu);
    ::unlink(socket_path.c_str());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_path, grpc::InsecureServerCredentials());
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    if (!server) return UnavailableError("FakePodResources: cannot serve on " + socket_path);
    return OkStatus();
  }
  void Shutdown() {
    MutexLock lock(&server_mu);
    if (server) {
      server->Shutdown(std::chrono::system_clock::now());
      server->Wait();
      server.reset();
    }
    ::unlink(socket_path.c_str());
  }
};

StatusOr<std::unique_ptr<FakePodResources>> FakePodResources::Start(
    const std::string& kubelet_dir) {
  const std::string dir = kubelet_dir + "/pod-resources";
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return UnavailableError("FakePodResources: mkdir " + dir + ": " + std::strerror(errno));
  }
  auto impl = std::make_unique<Impl>();
  impl->socket_path = PodResourcesSocketPath(dir);
  Status s = impl->Serve();
  if (!s.ok()) return s;
  return std::unique_ptr<FakePodResources>(new FakePodResources(std::move(impl)));
}

FakePodResources::FakePodResources(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakePodResources::~FakePodResources() { impl_->Shutdown(); }

const std::string& FakePodResources::socket_path() const { return impl_->socket_path; }

void FakePodResources::SetPods(std::vector<PodResourcesEntry> pods) {
  MutexLock lock(&impl_->service.mu);
  impl_->service.pods = std::move(pods);
  impl_->service.pods_after_first.reset();
}

void FakePodResources::SetPodsAfterFirstCall(std::vector<PodResourcesEntry> pods) {
  MutexLock lock(&impl_->service.mu);
  impl_->service.pods_after_first = std::move(pods);
}

void FakePodResources::FailNext(int count, int code) {
  MutexLock lock(&impl_->service.mu);
  impl_->service.fail_count = count;
  impl_->service.fail_code = code;
}

int FakePodResources::list_calls() const {
  MutexLock lock(&impl_->service.mu);
  return impl_->service.calls;
}

void FakePodResources::Stop() { impl_->Shutdown(); }
Status FakePodResources::Restart() { return impl_->Serve(); }

}  // namespace migd::k8s
